"""The pass pipeline's result for one specialisation of a kernel, kept on disk for later processes.

Model
-----
``jit`` specialises a kernel per (kernel source, constexpr values, runtime argument classes, platform):
it traces the kernel and runs the pass pipeline (``passes.run_pipeline``), about 0.05 to 0.3 s of Python
per kernel. Within a process the result is memoised; this module keeps it across processes. ``load`` and
``store`` read and write the pipeline's IR objects (the frontend's, the sequential and the final IR with
its memory plan) as one pickle in the kernel cache directory (``cvtile.sim.launch.cache_dir``), beside the
simulator's generated modules and machine code. A warm process then goes from the call to the cached
machine code without tracing or running a pass.

The file's name hashes:

* a stamp of every source file of cvtile's packages (``cvtile``, ``dsl``, ``sim``, ``kernels``,
  ``tiling``): any change to the compiler, a kernel, a helper it calls or the tiling retires every entry;
* the kernel's module and qualified name, and the in-process key (the kernel source's digest, every
  constexpr's value and every runtime argument's class, the platform's name);
* the platform's every field (a platform built in a test or a script may share a real one's name);
* Python's version (the pickle's objects).

Invariants
----------
* Only kernels defined in cvtile's own packages are cached, and only when every part of their key is plain
  data (numbers, strings, booleans, None and tuples of these): a user's kernel may call helpers from files
  no stamp covers, and a callable constexpr (a ``score_mod``) has no text that names it across processes.
* A loaded specialisation lowers to the same simulator modules, Ascend C and memory map as a fresh one
  (``tests/dsl/test_specialisation_cache.py``). Its values keep their ids, and the process's id counter is
  moved past them (``ir.reserve_ids``), so values made later never share an id with a loaded one.
* Failed specialisations are not stored. An entry that does not load (truncated, from another cvtile) is
  ignored and overwritten; writes go to a temporary file renamed into place, so a reader never sees half.
* ``CVTILE_SPECIALISATION_CACHE=0`` turns the disk cache off (every process traces and runs the passes).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

from .ir import max_value_id, reserve_ids

__all__ = ["load", "store", "disk_key", "enabled", "STATS"]

#: this process's specialisations loaded from and stored to the disk cache
STATS = {"loaded": 0, "stored": 0}

_PACKAGES = ("cvtile", "cvtile.dsl", "cvtile.sim", "cvtile.kernels", "cvtile.tiling")
_PLAIN = (int, float, str, bool, type(None))


def enabled() -> bool:
    return os.environ.get("CVTILE_SPECIALISATION_CACHE", "1") != "0"


@functools.cache
def sources_stamp() -> str:
    """SHA-1 over the relative path and bytes of every ``.py`` file of cvtile's packages (about 10 ms once)."""
    h = hashlib.sha1()
    for name in _PACKAGES:
        package = sys.modules.get(name) or __import__(name, fromlist=["__path__"])
        for root in package.__path__:
            base = Path(root)
            sub = Path() if name == "cvtile" else Path(name.split(".", 1)[1])
            files = base.glob("*.py") if name == "cvtile" else base.rglob("*.py")
            for path in sorted(files):
                h.update(str(sub / path.relative_to(base)).encode() + b"\x00" + path.read_bytes())
    return h.hexdigest()


def _plain(value) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return isinstance(value, _PLAIN)


def disk_key(fn, key, platform) -> str | None:
    """The cache file's hash for kernel ``fn``, its in-process specialisation ``key`` and the ``platform``
    object it was planned for, or None when the specialisation is not cached (see the invariants)."""
    module = getattr(fn, "__module__", "") or ""
    if not enabled() or not module.startswith("cvtile.") or not _plain(key):
        return None
    parts = (sources_stamp(), module, getattr(fn, "__qualname__", ""), repr(key), repr(platform), sys.version)
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:32]


def _path(digest: str) -> Path:
    from cvtile.sim.launch import cache_dir

    return cache_dir() / f"spec_{digest}.pickle"


def load(digest: str | None):
    """``(frontend, sequential, final)`` IR stored under ``digest``, or None."""
    if digest is None:
        return None
    try:
        with open(_path(digest), "rb") as f:
            top, irs = pickle.load(f)
    except Exception:   # absent, or unreadable (written by another cvtile, cut short): the caller compiles, stores
        return None
    reserve_ids(top)
    STATS["loaded"] += 1
    return irs


def store(digest: str | None, frontend, sequential, final) -> None:
    """Write the IR of a successful specialisation under ``digest`` (no-op for None; a write that fails
    leaves the cache as it was)."""
    if digest is None:
        return
    irs = (frontend, sequential, final)
    try:
        data = pickle.dumps((max_value_id(), irs), protocol=pickle.HIGHEST_PROTOCOL)
        path = _path(digest)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        STATS["stored"] += 1
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return
