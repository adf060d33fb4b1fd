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
written back after the run), runs every core with numba's ``prange`` over the
machine's threads with BLAS held at one thread (nested BLAS threads halve the
speed), and raises ``SimulationError`` for the first core that recorded an
error, naming the kernel source line.

The cache directory is ``$CVTILE_CACHE_DIR`` or ``~/.cache/cvtile``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from ..dsl.errors import SimulationError
from .codegen import generate
from .storage import to_storage

__all__ = ["NumbaRunner", "cache_dir"]

_MODULES: dict[str, object] = {}
_LOCK = threading.Lock()


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
        self.compiled = compiled
        self.generated = generate(compiled.ir)
        self.source = self.generated.text
        self._module = None

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
        fn = self.module.launch_serial if (serial or dry) else self.module.launch
        with threadpool_limits(limits=1, user_api="blas"):
            fn(0 if dry else grid, err, *flat_args)
        if dry:
            return None
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
