"""Whether a command's input tensors fit in this machine's memory, asked before they are drawn.

Model
-----
``cvtile run``, ``trace`` and ``emit`` draw real numpy tensors of the shapes their options give (``cost`` and
``tiling`` read no values: their inputs are ``stand_in`` views, ``cli_call.arrays_of_call``). A shape op_host
accepts can still be far larger than the host: ``cvtile run --kv-seqlen 100000000`` asks for a 3 TiB key. Such a command used to die in numpy with a
``MemoryError`` traceback. ``check_fits`` compares what the tensors will take (plus the largest temporary the
draw makes) with the memory the machine has available and raises ``HostMemoryError`` naming the largest tensor,
its shape and size, the total and the limit. The callers ask op_host's checks first, on zero-stride stand-ins
that take no memory, so a call the real operator rejects reports op_host's rule, not this one.

Invariants: the check allocates nothing; ``HostMemoryError`` is a ``ValueError`` (the CLI prints it on one line
and exits 2); the limit is ``MemAvailable`` of ``/proc/meminfo``, else the physical memory, else no limit.
"""

from __future__ import annotations

import math
import os

import numpy as np

__all__ = ["HostMemoryError", "available_bytes", "check_fits", "stand_in"]


class HostMemoryError(ValueError):
    """A command's input tensors need more memory than the machine has available. ``param`` is the largest
    tensor's name, ``value`` its shape and dtype, ``need`` / ``limit`` the bytes."""

    def __init__(self, param: str, value: str, need: int, limit: int, what: str):
        self.param, self.value, self.need, self.limit = param, value, need, limit
        super().__init__(f"{param}: {value}: {what} need {_size(need)}, more than the {_size(limit)} of memory "
                         f"this machine has available (cvtile holds every tensor in host memory; use smaller "
                         f"shapes)")


def available_bytes() -> int | None:
    """The memory available to a new allocation: ``MemAvailable`` (Linux), else the physical memory, else None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(tensors: dict, *, temporary: int = 0, what: str = "the inputs", limit: int | None = None) -> None:
    """Raise ``HostMemoryError`` when the tensors (name -> (shape, numpy dtype)) plus ``temporary`` bytes exceed
    ``limit`` (default: ``available_bytes()``)."""
    limit = available_bytes() if limit is None else limit
    if limit is None or not tensors:
        return
    sizes = {name: _nbytes(shape, dtype) for name, (shape, dtype) in tensors.items()}
    need = sum(sizes.values()) + temporary
    if need > limit:
        name = max(sizes, key=sizes.get)
        shape, dtype = tensors[name]
        raise HostMemoryError(name, f"{tuple(shape)} {np.dtype(dtype).name} ({_size(sizes[name])})", need, limit,
                              what)


def stand_in(shape, dtype) -> np.ndarray:
    """A read-only zero-stride array of ``shape`` and ``dtype`` that takes no memory (what op_host's checks read:
    shapes and dtypes)."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def _nbytes(shape, dtype) -> int:
    return math.prod(int(s) for s in shape) * np.dtype(dtype).itemsize


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} B"
    x = float(nbytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024
        if x < 1024:
            break
    else:
        unit, x = "PiB", x / 1024
    return f"{x:.1f} {unit}"
