"""Running a compiled kernel on the simulator: module loading, caching, threads, errors.

Model
-----
``NumbaRunner`` is the "numba" backend of ``cvtile.dsl``. For one compiled
kernel it generates the numba module text (``codegen.generate``), writes it
into the cache directory under a name derived from a hash of the text, and
imports it; numba's own ``cache=True`` then keeps the machine code beside it,
so a second process with the same kernel loads instead of compiling.

``launch(grid, args)`` converts the arguments (arrays to flat storage views,
16-bit floats as uint16 bits, zero-copy when contiguous; a copied array is
written back after the run), runs the cores on Python threads (the generated
``core`` releases the GIL; each thread takes the next core when it is free, so
uneven cores balance) with BLAS held at one thread (nested BLAS threads halve
the speed), and raises ``SimulationError`` for the first core that recorded an
error, naming the kernel source line. ``CVTILE_THREADS`` sets the thread count
(default: the CPUs this process may use).

The cache directory is ``$CVTILE_CACHE_DIR`` or ``~/.cache/cvtile``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from ..dsl.errors import SimulationError
from .codegen import generate
from .storage import to_storage

__all__ = ["NumbaRunner", "cache_dir", "COMPILE_STATS"]

_MODULES: dict[str, object] = {}
_LOCK = threading.Lock()
#: seconds this process has spent generating, loading and compiling kernels (for reports that separate
#: compile time from run time)
COMPILE_STATS = {"seconds": 0.0, "kernels": 0}


def cache_dir() -> Path:
    env = os.environ.get("CVTILE_CACHE_DIR")
    path = Path(env) if env else Path.home() / ".cache" / "cvtile"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _load_module(text: str, name: str):
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    modname = f"cvtile_k_{_safe(name)}_{digest}"
    with _LOCK:
        if modname in _MODULES:
            return _MODULES[modname]
        path = cache_dir() / f"{modname}.py"
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        _MODULES[modname] = module
        return module


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:40]


class NumbaRunner:
    def __init__(self, compiled):
        t0 = time.perf_counter()
        self.compiled = compiled
        self.generated = generate(compiled.ir)
        self.source = self.generated.text
        self._module = None
        self._ready: set = set()
        COMPILE_STATS["seconds"] += time.perf_counter() - t0

    @property
    def module(self):
        if self._module is None:
            self._module = _load_module(self.source, self.compiled.name)
        return self._module

    def warm(self, args) -> None:
        """Compile the machine code now (for timing compile separately from running)."""
        self.launch(1, args, dry=True)

    def launch(self, grid: int, args: list, *, serial: bool = False, dry: bool = False):
        flat_args = []
        writeback = []
        names = self.generated.arg_names
        if len(names) != len(args):
            raise TypeError(f"{self.compiled.name}: expected {len(names)} runtime arguments, got {len(args)}")
        for (pname, kind), value in zip(names, args):
            if kind == "tensor":
                storage, _ = to_storage(value, pname)
                flat = storage.reshape(-1)
                if not _shares(flat, value):
                    writeback.append((value, storage))
                flat_args += [flat, np.asarray(storage.shape, dtype=np.int64).reshape(-1)
                              if storage.ndim else np.zeros(0, np.int64)]
            elif kind == "scalar":
                flat_args.append(_scalar(value))
        err = np.zeros((max(grid, 1), 4), dtype=np.int64)
        sig = tuple(getattr(a, "dtype", type(a)).__str__() + str(getattr(a, "ndim", "")) for a in flat_args)
        if sig not in self._ready:  # compile (or load from numba's cache) before the timed run
            t0 = time.perf_counter()
            _compile_only(self.module, err, flat_args)
            COMPILE_STATS["seconds"] += time.perf_counter() - t0
            COMPILE_STATS["kernels"] += 1
            self._ready.add(sig)
        if dry:
            return None
        with threadpool_limits(limits=1, user_api="blas"):
            _run_cores(self.module, grid, err, flat_args, 1 if serial else _threads())
        bad = np.nonzero(err[:, 0])[0]
        if bad.size:
            core = int(bad[0])
            site = int(err[core, 0])
            message, loc, labels = self.generated.sites[site - 1]
            vals = [int(x) for x in err[core, 1:1 + len(labels)]]
            detail = ", ".join(f"{lab}={val}" for lab, val in zip(labels, vals))
            raise SimulationError(f"{message}{' (' + detail + ')' if detail else ''}", core, loc, vals)
        for original, storage in writeback:
            _write_back(original, storage)
        return None


def _threads() -> int:
    env = os.environ.get("CVTILE_THREADS")
    if env:
        return max(1, int(env))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _run_cores(module, grid: int, err: np.ndarray, args: list, threads: int) -> None:
    """Run core(blk) for blk in 0..grid-1 on ``threads`` threads, each taking the next core when free
    and reusing one set of tile buffers for all the cores it runs."""
    core = module.core
    if threads <= 1 or grid <= 1:
        bufs = module.alloc()
        for blk in range(grid):
            if core(blk, grid, 0, err, bufs, *args):
                return
        return
    counter = iter(range(grid))
    lock = threading.Lock()
    failures = []

    def worker():
        bufs = module.alloc()
        while True:
            with lock:
                blk = next(counter, None)
            if blk is None:
                return
            try:
                core(blk, grid, 0, err, bufs, *args)
            except BaseException as e:  # a numba-level error: report it from the launching thread
                failures.append(e)
                return

    pool = [threading.Thread(target=worker, daemon=True) for _ in range(min(threads, grid))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if failures:
        raise failures[0]


def _compile_only(module, err, args) -> None:
    """Compile the core for these argument types without running a core."""
    bufs = module.alloc()
    module.core.compile(tuple(_numba_type(a) for a in [np.int64(0), np.int64(1), np.int64(0), err, bufs, *args]))


def _numba_type(x):
    from numba import typeof

    return typeof(x)


def _shares(flat: np.ndarray, value) -> bool:
    try:
        arr = np.asarray(value) if not hasattr(value, "numpy") else None
    except Exception:
        arr = None
    if arr is None:
        return False
    try:
        return np.shares_memory(flat, arr)
    except Exception:
        return False


def _write_back(original, storage: np.ndarray) -> None:
    from .storage import from_storage, dtype_name

    data = from_storage(storage, dtype_name(original.dtype))
    if hasattr(original, "copy_") and hasattr(original, "numpy"):  # torch tensor
        import torch

        original.copy_(torch.from_numpy(np.ascontiguousarray(data).view(storage.dtype).copy())
                       .view(original.dtype) if data.dtype != storage.dtype else torch.from_numpy(data))
        return
    np.copyto(original, data)


def _scalar(value):
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    return np.float32(value)
