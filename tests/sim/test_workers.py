"""sim.workers: the launcher's reused worker threads (issue 12: the API's fixed cost per call)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.sim import workers


def test_each_call_runs_on_a_worker_thread_and_all_finish_before_the_return():
    seen, lock = [], threading.Lock()

    def fn():
        time.sleep(0.01)
        with lock:
            seen.append(threading.get_ident())

    workers.run_all(fn, 3)
    assert len(seen) == 3 and threading.get_ident() not in seen


def test_the_threads_are_reused_from_launch_to_launch():
    names = set()
    for _ in range(5):
        workers.run_all(lambda: names.add(threading.current_thread().name), 2)
    before = threading.active_count()
    workers.run_all(lambda: None, 2)
    assert threading.active_count() == before
    assert names and all(n.startswith("cvtile-sim-") for n in names)


def test_the_first_exception_reaches_the_caller_after_every_call_finished():
    calls, done, lock = [], [], threading.Lock()

    def fn():
        with lock:
            calls.append(1)
            first = len(calls) == 1
        if first:
            raise ValueError("boom")
        time.sleep(0.02)
        done.append(1)

    with pytest.raises(ValueError, match="boom"):
        workers.run_all(fn, 3)
    assert len(calls) == 3 and len(done) == 2
    workers.run_all(lambda: None, 3)   # the pool survives a failed task


def test_concurrent_launches_from_several_threads_each_wait_for_their_own_calls():
    counts = [0] * 4
    lock = threading.Lock()

    def launch(i):
        def fn():
            time.sleep(0.005)
            with lock:
                counts[i] += 1
        workers.run_all(fn, 2)
        assert counts[i] == 2

    callers = [threading.Thread(target=launch, args=(i,)) for i in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert counts == [2, 2, 2, 2]


def _child(out):
    got = []
    workers.run_all(lambda: got.append(os.getpid()), 2)
    out.put(got)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork")
def test_a_forked_child_starts_its_own_pool():
    workers.run_all(lambda: None, 2)   # the parent's pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    p = ctx.Process(target=_child, args=(out,))
    p.start()
    got = out.get(timeout=60)
    p.join(60)
    assert p.exitcode == 0 and len(got) == 2 and set(got) == {p.pid}


@ct.jit
def rows_scale(x, o, alpha, C: ct.constexpr):
    blk = ct.block_idx()
    with ct.vector():
        ct.store(o[blk, 0:C], ct.load(x[blk, 0:C]) * alpha)


def test_a_multi_core_launch_on_the_pool_computes_what_one_thread_does():
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float16)
    pooled, serial = np.zeros_like(x), np.zeros_like(x)
    rows_scale[8](x, pooled, 0.5, C=64)
    rows_scale[8](x, serial, 0.5, C=64, serial=True)
    assert np.array_equal(pooled.view(np.uint16), serial.view(np.uint16))
    assert np.array_equal(pooled, (x * np.float16(0.5)))
