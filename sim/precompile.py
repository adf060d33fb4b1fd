"""Compile a call's kernels side by side: the later functions in child processes while the caller compiles the
first.

Model
-----
A call that launches several kernels (an FIA decode with flash decode launches the attention kernel, then the
combine), or a kernel in pipelined order (a core group's ``prog_aic`` and ``prog_aiv``, two functions of one
module), compiles them one after the other when it first runs, on one core. ``compile_ahead(call, order)``
records the launches ``call()`` makes without running them (``record_launches(run=False, isolated=True)``:
a recording the caller has open does not see them) and lists the
functions they call whose machine code is in neither this process nor the disk cache (numba's, or the direct
compiler's when ``$CVTILE_COMPILER`` is ``direct``: ``launch.compiled_on_disk``), in launch order.
The caller keeps the first; the others go to child processes (``python -m cvtile.sim.precompile``), as many
as the CPUs this process may use less one (``$CVTILE_COMPILE_PROCESSES`` sets that count, 1 starts no child),
child k taking the jobs k, k + n, ... in order. A child loads the same generated module from the kernel cache
and compiles each of its functions for the launch's argument types (``NumbaRunner.flat_types``,
``launch.signatures``) holding that function's cache lock (``launch._compiling``) with the process's compiler
(``launch.compile_job``), which writes the machine code to its disk cache. The caller then runs the call as it would anyway: it compiles the first function
itself, and when it reaches one a child took, the lock makes it wait for the child, then it loads what the
child wrote.

Invariants
----------
* Nothing numeric changes: a child compiles the module text the caller then loads, for the argument types the
  call then passes; the call runs exactly as it would without the children.
* Compiling ahead only saves time. If recording the call or listing its jobs raises, no child is started and
  the call runs as it would (raising, if it does, its own error). A child that fails, or compiles for other
  types than the call passes, costs only time: the caller compiles
  what it does not find in the cache. A function both reach is compiled by whichever takes its lock first and
  loaded by the other.
* ``wait(children)`` reaps every child; the children never outlive the caller's ``with`` block
  (``compiled_ahead``).

The FIA API (``kernels.fia.api.simulate_fia``) runs a call inside ``compiled_ahead`` when the process tiles it
afresh (a tiling memo miss) or runs its call signature for the first time (``first_time``); a call repeated
after that pays no recording.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import threading
from collections import OrderedDict

from ..dsl.jit import record_launches

__all__ = ["compile_ahead", "compiled_ahead", "first_time", "wait"]

#: keys ``first_time`` has seen, the most recent ``_SEEN_SIZE`` of them
_SEEN: OrderedDict = OrderedDict()
_SEEN_SIZE = 1024
_SEEN_LOCK = threading.Lock()


def first_time(key) -> bool:
    """True the first time ``key`` (hashable) comes in this process (of the last 1024 distinct keys)."""
    with _SEEN_LOCK:
        if key in _SEEN:
            _SEEN.move_to_end(key)
            return False
        _SEEN[key] = None
        while len(_SEEN) > _SEEN_SIZE:
            _SEEN.popitem(last=False)
        return True


def _processes() -> int:
    """``$CVTILE_COMPILE_PROCESSES`` (1: no child processes), or the CPUs this process may use."""
    env = os.environ.get("CVTILE_COMPILE_PROCESSES")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _jobs(records, order: str) -> list:
    """(module text, kernel name, function name, argument types) of each function the recorded launches call
    that is compiled neither in this process nor in the disk cache, once each, in launch order (a core
    group's ``prog_aic`` before its ``prog_aiv``)."""
    import numpy as np

    from .launch import compiled_on_disk, signatures

    jobs, seen = [], set()
    for rec in records:
        runner = rec.kernel.runner("numba", order)
        variant = runner.plain
        if variant.ready or variant.generated.text in seen:
            continue
        seen.add(variant.generated.text)
        module = variant.module
        err = np.zeros((max(rec.grid, 1), 5), np.int64)
        for name, sig in signatures(module, variant.generated.entry == "group", err, runner.flat_types(rec.args)):
            if not compiled_on_disk(module, variant.generated.text, name, sig):
                jobs.append((variant.generated.text, variant.name, name, sig))
    return jobs


def compile_ahead(call, order: str = "program", processes: int | None = None) -> list:
    """Record the launches ``call()`` makes (without running them) and start compiling the kernels of all but
    the first that need compiling, each in a child process; returns the children (``wait`` reaps them). None
    are started with fewer than 2 CPUs (``processes``: the most processes to count on, the caller included;
    default ``$CVTILE_COMPILE_PROCESSES`` or the CPUs this process may use)."""
    processes = _processes() if processes is None else processes
    if processes < 2:
        return []
    try:
        with record_launches(run=False, isolated=True) as rec:   # a caller's own recording does not see it
            call()
        jobs = _jobs(rec.launches, order)[1:]
    except Exception:   # compiling ahead only saves time: the call itself then runs, and raises what it raises
        return []
    if not jobs:
        return []
    from .launch import cache_dir

    env = dict(os.environ, CVTILE_CACHE_DIR=str(cache_dir()))
    children = []
    for k in range(min(processes - 1, len(jobs))):    # child k takes jobs k, k + n, k + 2n, ... in that order
        child = subprocess.Popen([sys.executable, "-m", "cvtile.sim.precompile"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        child.stdin.write(pickle.dumps(jobs[k::processes - 1]))
        child.stdin.close()
        children.append(child)
    return children


def wait(children: list) -> None:
    """Reap the children ``compile_ahead`` started (each has finished or finishes its compile)."""
    for child in children:
        child.wait()


@contextlib.contextmanager
def compiled_ahead(call, order: str = "program", processes: int | None = None):
    """``with compiled_ahead(call, order): call()``: ``compile_ahead`` before the block, ``wait`` after it."""
    children = compile_ahead(call, order, processes)
    try:
        yield children
    finally:
        wait(children)


def _child() -> int:
    """A child's work: compile each function of the jobs on stdin, in order, each holding its lock file."""
    from .launch import _load_module, compile_job

    for text, name, function, sig in pickle.load(sys.stdin.buffer):
        compile_job(_load_module(text, name), text, function, sig)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
