"""Stamps of the simulator runtime's sources, for the machine code numba caches.

Model
-----
numba invalidates a cached function when the file that defines it changes, not when a function it calls
from another file does. Two kinds of cached code call across files: generated kernels (their own source
lives in the kernel cache; they call into ``rt``, ``rounding`` and ``sync``, as ``codegen`` wrote them) and
``rt``'s per-dtype variants (whose converters are ``rounding``'s). Each carries a stamp of those sources in
its name, so changed runtime code is compiled afresh under a new name instead of running stale machine code.

Invariants
----------
* A stamp hashes the named files' bytes, in the order given, and which fp16 conversions the runtime
  inlines (``rounding.HARDWARE_F16``); it is computed once per process and tuple of names.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__all__ = ["source_stamp"]

_HERE = Path(__file__).parent


@functools.cache
def source_stamp(names: tuple[str, ...]) -> str:
    """12 hex digits of a SHA-1 over the simulator modules ``names`` (file names in this package) and the fp16
    conversion kind."""
    from .rounding import HARDWARE_F16

    h = hashlib.sha1()
    for name in names:
        h.update((_HERE / name).read_bytes())
    h.update(b"hardware fp16" if HARDWARE_F16 else b"integer fp16")   # which conversions kernels inline
    return h.hexdigest()[:12]
