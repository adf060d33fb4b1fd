"""Compile a call's kernels side by side: the later launches' kernels in child processes while the caller
compiles the first.

Model
-----
A call that launches several kernels (an FIA decode with flash decode launches the attention kernel, then the
combine) compiles them one after the other when it first runs, on one core. ``compile_ahead(call, order)``
records the launches ``call()`` makes without running them (``record_launches(run=False)``), finds the
kernels whose machine code is in neither this process nor numba's disk cache, and compiles every one but the
first in a child process of its own (``python -m cvtile.sim.precompile``, at most one per CPU the process may
use, less one for the caller; ``$CVTILE_COMPILE_PROCESSES`` sets that count, 1 starts no child). Each child loads the same generated module from the kernel cache, holds the
module's cache lock (``launch._compiling``) while it compiles the functions a launch calls for that launch's
argument types (``NumbaRunner.flat_types``, ``launch.signatures``), and numba writes the machine code to its
disk cache. The caller then runs the call as it would anyway: it compiles the first kernel itself, and when it
reaches a later one, the lock makes it wait for that kernel's child, then it loads what the child wrote.

Invariants
----------
* Nothing numeric changes: a child compiles the module text the caller then loads, for the argument types the
  call then passes; the call runs exactly as it would without the children.
* A child that fails, or compiles for other types than the call passes, costs only time: the caller compiles
  what it does not find in the cache. A kernel both compile (the caller reached its lock first) is compiled
  by the caller and loaded by the child.
* ``wait(children)`` reaps every child; the children never outlive the caller's ``with`` block
  (``compiled_ahead``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys

from ..dsl.jit import record_launches

__all__ = ["compile_ahead", "compiled_ahead", "wait"]


def _processes() -> int:
    """``$CVTILE_COMPILE_PROCESSES`` (1: no child processes), or the CPUs this process may use."""
    env = os.environ.get("CVTILE_COMPILE_PROCESSES")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _jobs(records, order: str) -> list:
    """(module text, kernel name, signatures) of each recorded launch's kernel that is compiled neither in this
    process nor in numba's disk cache, once per module, in launch order."""
    import numpy as np

    from .launch import cache_dir, signatures

    jobs, seen = [], set()
    for rec in records:
        runner = rec.kernel.runner("numba", order)
        variant = runner.plain
        if variant.ready or variant.generated.text in seen:
            continue
        seen.add(variant.generated.text)
        module = variant.module
        group = variant.generated.entry == "group"
        err = np.zeros((max(rec.grid, 1), 5), np.int64)
        sigs = signatures(module, group, err, runner.flat_types(rec.args))
        cached = all(any((cache_dir() / "__pycache__").glob(f"{module.__name__}.{name}-*.nbi")) for name, _ in sigs)
        if not cached:
            jobs.append((variant.generated.text, variant.name, sigs))
    return jobs


def compile_ahead(call, order: str = "program", processes: int | None = None) -> list:
    """Record the launches ``call()`` makes (without running them) and start compiling the kernels of all but
    the first that need compiling, each in a child process; returns the children (``wait`` reaps them). None
    are started with fewer than 2 CPUs (``processes``: the most processes to count on, the caller included;
    default ``$CVTILE_COMPILE_PROCESSES`` or the CPUs this process may use)."""
    processes = _processes() if processes is None else processes
    if processes < 2:
        return []
    with record_launches(run=False) as rec:
        call()
    jobs = _jobs(rec.launches, order)[1:processes]
    if not jobs:
        return []
    from .launch import cache_dir

    env = dict(os.environ, CVTILE_CACHE_DIR=str(cache_dir()))
    children = []
    for job in jobs:
        child = subprocess.Popen([sys.executable, "-m", "cvtile.sim.precompile"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        child.stdin.write(pickle.dumps(job))
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
    """A child's work: compile the module of the job on stdin for its signatures, holding the module's lock."""
    from .launch import _compiling, _load_module, compile_signatures

    text, name, sigs = pickle.load(sys.stdin.buffer)
    module = _load_module(text, name)
    with _compiling(module):
        compile_signatures(module, sigs)
    return 0


if __name__ == "__main__":
    sys.exit(_child())
