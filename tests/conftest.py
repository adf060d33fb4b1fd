"""Shared pytest fixtures and hooks: where the external corpora live, how tests are spread, and a timeline.

Each test starts with an empty FIA tiling memo, call memo and launch plans (``kernels/fia/tiling_memo``): a
memo left by an earlier test in the same worker would hand a test that patches a planner or a check the
unpatched plan, and tests must not depend on the order they run in.

The acceptance corpora (the upstream ops-transformer test cases as data) sit in
``../shared/cases`` beside the project checkout, or wherever ``CVTILE_CASES``
points. Tests that need them skip cleanly when they are absent.

Under ``pytest -n auto`` the project's options (``--dist loadfile`` in
``pyproject.toml``) give each xdist worker whole test files: the tests of a file
share kernel specialisations and module-scoped fixtures, so one worker compiles
and computes them once, and no worker waits on the cache lock for a kernel the
other is compiling. xdist hands out the files with the most tests first, so the
run ends on small files and both workers finish together (measured: within 8 s
of each other on a 22-minute run). Two exceptions, both made by ``pytest_xdist_make_scheduler``:
``LONG_FIRST``, a file with few tests that runs many corpus cases for minutes, would be
handed out last and leave the tier a long tail, so it goes to the head of the queue
and the other files fill the second core around it; and each ``SHARDED`` test (a shard
of the FIA st corpus, ``-m corpus``) is a work unit of its own, also at the head of the
queue, so the shards of one file run on every core.

The tier's two xdist workers already keep both cores busy, so a call's later kernels are not compiled in child
processes too (``CVTILE_COMPILE_PROCESSES=1`` unless set; ``sim/precompile.py``'s tests ask for children).

``CVTILE_TEST_TIMELINE=<file>`` appends one tab-separated line per test: the
xdist worker, its start and end (wall-clock seconds), the CPU seconds of the
worker process and of the processes it waited for, and the test id; where a
tier's wall time goes, and where a worker sat idle.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("CVTILE_COMPILE_PROCESSES", "1")


#: test files xdist hands out before the others: few tests, many minutes (the FIA st corpus)
LONG_FIRST = ("tests/kernels/test_st_corpus.py",)
#: tests xdist hands out one by one, before the others: each runs many corpus cases for minutes (a shard of the
#: FIA st corpus)
SHARDED = ("tests/kernels/test_st_corpus.py::test_st_corpus_shard",)


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with the ``LONG_FIRST`` files at the head of the queue and each ``SHARDED`` test a
    work unit of its own there too (None: xdist's own choice)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongWorkFirst(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return nodeid if nodeid.startswith(SHARDED) else super()._split_scope(nodeid)

        def _assign_work_unit(self, node):
            for scope in [s for s in reversed(self.workqueue) if s.startswith(SHARDED) or s in LONG_FIRST]:
                self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return LongWorkFirst(config, log)


@pytest.fixture(autouse=True)
def _fresh_tiling_memo():
    from cvtile.kernels.fia import tiling_memo

    tiling_memo.clear()
    yield
    tiling_memo.clear()


def cases_root() -> Path:
    env = os.environ.get("CVTILE_CASES")
    return Path(env) if env else ROOT.parent / "shared" / "cases"


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    root = cases_root()
    if not root.is_dir():
        pytest.skip(f"external corpus folder {root} is absent (set CVTILE_CASES)")
    return root


@pytest.fixture(scope="session")
def corpus_file():
    """``corpus_file("st/fia_v4.json")``: the path of one corpus file; skips the test when it is absent."""

    def find(relpath: str) -> Path:
        path = cases_root() / relpath
        if not path.is_file():
            pytest.skip(f"corpus file {path} is absent (set CVTILE_CASES)")
        return path

    return find


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``CVTILE_TEST_TIMELINE`` set, one timeline line per test (see the module docstring)."""
    path = os.environ.get("CVTILE_TEST_TIMELINE")
    if not path:
        yield
        return
    t0, c0 = time.time(), time.process_time()
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(path, "a") as f:
        f.write(f"{worker}\t{t0:.3f}\t{time.time():.3f}\t{time.process_time() - c0:.3f}\t{children:.3f}\t"
                f"{item.nodeid}\n")
