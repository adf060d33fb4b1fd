"""Views of GM tensors: how a kernel names the part of a tensor a tile op reads or writes.

Model
-----
A kernel's tensor argument is a flat, contiguous array with a runtime shape.
A ``GMView`` describes a strided N-d view of it without moving data, the way a
DataCopy's stride parameters do on the chip: a base ``offset`` plus, per
dimension, a ``VDim``. A VDim is a (possibly merged) index space: element i is
the merged index ``start + i``, which must be below ``bound``, and whose
address is found by decomposing it mixed-radix over ``radices`` (outer to
inner) and summing ``digit * stride``. A plain dimension has one radix; a
merged one (``merge``) several, which is how G query heads folded into the
rows of an S1-major layout (BSND, TND) become one row dimension although they
are not contiguous in memory.

Operations (all compile to scalar address arithmetic, checked at run time):
* ``v[i, ...]`` drops a dimension at index i; ``v[a:a+E]`` or ``v[ds(a, E)]``
  keeps it with a static extent E; ``ds(a, E, valid=n)`` also sets a runtime
  valid length n <= E (a tail block); ``:`` keeps a dimension whole.
* ``reshape`` (of a whole tensor argument), ``split(d, inner)``,
  ``permute(...)``, ``merge(d)`` (dims d and d+1), ``narrow(d, start, length)``,
  ``broadcast(d, size)`` (a new stride-0 dimension: the same data for every index),
  ``paged(table, length)`` (a paged cache's (blocks, block rows) read through a block table).
* ``v.shape[i]``: the runtime length of dimension i.
A view with every dimension given a static extent and rank <= 2 is a *window*,
the operand of ``load``, ``store`` and ``mma``; a rank-0 index is a scalar read.

Invariants
----------
* Only dimensions with ``start == 0`` and no static extent may be reshaped,
  split, merged or narrowed (a slice comes last).
* Every access checks, at run time, that it stays inside every dimension's
  bound; out-of-bounds accesses raise ``SimulationError`` with the source line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .emitter import Builder, is_const
from .ir import Lookup, Value, WDim, Window

__all__ = ["VDim", "GMView", "DynSlice", "tensor_view"]


@dataclass(frozen=True)
class DynSlice:
    """``ds(start, size, valid=None)``: a slice of static extent ``size`` starting at a runtime ``start``."""

    start: Any
    size: int
    valid: Any = None


@dataclass(frozen=True)
class VDim:
    radices: tuple
    strides: tuple
    start: Any = 0
    bound: Any = None
    extent: int | None = None
    valid: Any = None
    lookups: tuple = ()   # per radix: None or a Lookup (see ``paged``)

    @property
    def fresh(self) -> bool:
        return is_const(self.start) and self.start == 0 and self.extent is None and not self.lookups


class GMView:
    """A strided view of a GM tensor (see the module docstring)."""

    def __init__(self, b: Builder, tensor: Value, offset, dims: list[VDim], whole: bool = False):
        self.b = b
        self.tensor = tensor
        self.offset = offset
        self.dims = list(dims)
        self.whole = whole  # the untouched tensor argument (may be reshaped)

    # ------------------------------------------------------------ inspection
    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def dtype(self):
        return self.tensor.type.dtype

    @property
    def shape(self) -> tuple:
        b = self.b
        out = []
        for d in self.dims:
            if d.extent is not None:
                out.append(d.valid if d.valid is not None else d.extent)
            else:
                out.append(b.sbin("sub", d.bound, d.start))
        return tuple(out)

    def __repr__(self) -> str:
        return f"GMView({self.tensor!r}, ndim={self.ndim})"

    # ---------------------------------------------------------- transforms
    def reshape(self, *sizes) -> "GMView":
        b = self.b
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        if not self.whole:
            b.error("reshape applies to a whole tensor argument; use split/merge/permute on derived views")
        total = _prod(b, [d.bound for d in self.dims])
        sizes = list(sizes)
        unknown = [i for i, s in enumerate(sizes) if is_const(s) and s == -1]
        if len(unknown) > 1:
            b.error("reshape takes at most one -1")
        if unknown:
            known = _prod(b, [s for i, s in enumerate(sizes) if i != unknown[0]])
            sizes[unknown[0]] = b.sbin("floordiv", total, known)
        b.check(b.sbin("eq", _prod(b, sizes), total), "reshape: the new sizes do not multiply to the tensor's size")
        return GMView(b, self.tensor, self.offset, _contiguous_dims(b, sizes))

    def split(self, dim: int, inner) -> "GMView":
        b = self.b
        d = self._fresh(dim, "split")
        if len(d.radices) != 1:
            b.error("split applies to a plain (unmerged) dimension")
        outer = b.sbin("floordiv", d.bound, inner)
        b.check(b.sbin("eq", b.sbin("mod", d.bound, inner), 0), "split: the dimension is not divisible by inner")
        s = d.strides[0]
        new = [VDim((outer,), (b.sbin("mul", s, inner),), 0, outer), VDim((inner,), (s,), 0, inner)]
        return self._with_dims(self.dims[:dim] + new + self.dims[dim + 1:])

    def permute(self, *order) -> "GMView":
        b = self.b
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        if sorted(order) != list(range(self.ndim)) or not all(isinstance(o, int) for o in order):
            b.error(f"permute needs a permutation of 0..{self.ndim - 1}, got {order}")
        return self._with_dims([self.dims[o] for o in order])

    def merge(self, dim: int) -> "GMView":
        b = self.b
        if not 0 <= dim < self.ndim - 1:
            b.error(f"merge({dim}) needs dims {dim} and {dim + 1} of a rank-{self.ndim} view")
        outer, inner = self._fresh(dim, "merge"), self._fresh(dim + 1, "merge")
        bound = b.sbin("mul", outer.bound, inner.bound)
        new = VDim(outer.radices + inner.radices, outer.strides + inner.strides, 0, bound)
        return self._with_dims(self.dims[:dim] + [new] + self.dims[dim + 2:])

    def narrow(self, dim: int, start, length) -> "GMView":
        b = self.b
        d = self._fresh(dim, "narrow")
        if len(d.radices) != 1:
            b.error("narrow applies to a plain (unmerged) dimension")
        end = b.sbin("add", start, length)
        b.check(b.sbin("and", b.sbin("ge", start, 0), b.sbin("le", end, d.bound)),
                "narrow: the range leaves the dimension", start, end, d.bound, labels=("start", "end", "bound"))
        offset = b.sbin("add", self.offset, b.sbin("mul", start, d.strides[0]))
        dims = list(self.dims)
        dims[dim] = VDim((length,), d.strides, 0, length)
        return GMView(b, self.tensor, offset, dims)

    def broadcast(self, dim: int, size) -> "GMView":
        """Insert a dimension of ``size`` at ``dim`` whose stride is 0 (every index reads the same data),
        e.g. one mask row shared by the G query heads folded into a tile's rows."""
        b = self.b
        if not 0 <= dim <= self.ndim:
            b.error(f"broadcast: dim {dim} out of range for a rank-{self.ndim} view")
        new = VDim((size,), (0,), 0, size)
        return self._with_dims(self.dims[:dim] + [new] + self.dims[dim:])

    def paged(self, table: "GMView", length) -> "GMView":
        """Merge dims 0 (blocks) and 1 (rows of a block) of a paged cache into one dim of ``length`` positions
        read through ``table`` (a rank-1 view of one batch's block table): position p is row p % block_size
        of block table[p // block_size]. Every block index read is checked against the number of blocks."""
        b = self.b
        if not isinstance(table, GMView) or table.ndim != 1 or not table.dims[0].fresh:
            b.error("paged(table, length): table must be a whole rank-1 view of a block table row")
        if not table.dtype.is_int:
            b.error(f"paged: the block table must hold integers, got {table.dtype}")
        if self.ndim < 2:
            b.error("paged applies to a view with at least (blocks, block_size) dims")
        blocks, rows = self._fresh(0, "paged"), self._fresh(1, "paged")
        if len(blocks.radices) != 1 or len(rows.radices) != 1:
            b.error("paged applies to plain (unmerged) dims")
        tdim = table.dims[0]
        b.check(b.sbin("le", length, b.sbin("mul", tdim.bound, rows.bound)),
                "paged: the sequence is longer than the block table covers", length, tdim.bound,
                labels=("length", "table_entries"))
        lk = Lookup(table.tensor, table.offset, tdim.strides[0], blocks.bound)
        new = VDim((tdim.bound, rows.bound), (blocks.strides[0], rows.strides[0]), 0, length, None, None, (lk, None))
        return self._with_dims([new] + self.dims[2:])

    def _fresh(self, dim: int, what: str) -> VDim:
        if not 0 <= dim < self.ndim:
            self.b.error(f"{what}: dim {dim} out of range for a rank-{self.ndim} view")
        d = self.dims[dim]
        if not d.fresh:
            self.b.error(f"{what} applies to a dimension before it is sliced; slice last")
        return d

    def _with_dims(self, dims) -> "GMView":
        return GMView(self.b, self.tensor, self.offset, dims)

    # ------------------------------------------------------------ indexing
    def index(self, key) -> "GMView | Value":
        b = self.b
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > self.ndim:
            b.error(f"too many indices ({len(key)}) for a rank-{self.ndim} view")
        key = key + (slice(None),) * (self.ndim - len(key))
        offset = self.offset
        dims = []
        for d, k in zip(self.dims, key):
            if isinstance(k, slice):
                dims.append(self._slice(d, k))
            elif isinstance(k, DynSlice):
                dims.append(self._dslice(d, k))
            elif is_const(k) or (isinstance(k, Value) and k.is_scalar):
                if isinstance(k, bool) or (isinstance(k, Value) and k.type.dtype.is_float):
                    b.error(f"a GM index must be an integer, got {k!r}")
                if d.lookups:
                    b.error("index a paged dim through a window (load/mma), not with a scalar index")
                idx = b.sbin("add", d.start, k)
                b.check(b.sbin("and", b.sbin("ge", idx, 0), b.sbin("lt", idx, d.bound)),
                        "GM index out of bounds", idx, d.bound, labels=("index", "bound"))
                offset = b.sbin("add", offset, _address(b, d, idx))
            else:
                b.error(f"a GM view index must be an int, a slice or ds(...), got {k!r}")
        if not dims:
            return b.sload(self.tensor, offset)
        return GMView(b, self.tensor, offset, dims)

    def _slice(self, d: VDim, k: slice) -> VDim:
        b = self.b
        if k.step is not None:
            b.error("strided slices are not supported on GM views")
        if k.start is None and k.stop is None:
            return d
        start = 0 if k.start is None else k.start
        if k.stop is None:
            b.error("an open-ended slice a: has no static extent; write a:a+E with a constexpr E or ds(a, E)")
        extent = _static_extent(start, k.stop)
        if extent is None:
            b.error("a slice needs a static extent: write a:a+E with a constexpr E, or ds(a, E, valid=n) for a tail")
        if extent <= 0:
            b.error(f"slice extent must be positive, got {extent}")
        if d.extent is not None:
            b.error("this dimension is already sliced")
        return replace(d, start=b.sbin("add", d.start, start), extent=extent, bound=d.bound)

    def _dslice(self, d: VDim, k: DynSlice) -> VDim:
        b = self.b
        if not isinstance(k.size, int) or isinstance(k.size, bool) or k.size <= 0:
            b.error(f"ds(start, size): size must be a positive compile-time int, got {k.size!r}")
        if d.extent is not None:
            b.error("this dimension is already sliced")
        if k.valid is not None and is_const(k.valid) and not 0 <= k.valid <= k.size:
            b.error(f"ds valid={k.valid} is outside [0, {k.size}]")
        return replace(d, start=b.sbin("add", d.start, k.start), extent=k.size, valid=k.valid)

    def window(self, what: str) -> Window:
        """This view as a tile op operand (rank 1 or 2, every dim with a static extent)."""
        b = self.b
        if not 1 <= self.ndim <= 2:
            b.error(f"{what} needs a rank-1 or rank-2 view, got rank {self.ndim} (index the other dims)")
        for i, d in enumerate(self.dims):
            if d.extent is None:
                b.error(f"{what}: dim {i} has no static extent; slice it as a:a+E with a constexpr E or ds(a, E)")
        dims = [WDim(d.start, d.bound, d.extent, d.valid if d.valid is not None else d.extent,
                     list(d.radices), list(d.strides), list(d.lookups) if d.lookups else None) for d in self.dims]
        return Window(self.tensor, self.offset, dims)


def tensor_view(b: Builder, tensor: Value) -> GMView:
    """The whole-tensor view of a kernel argument."""
    sizes = [b.dim(tensor, i) for i in range(tensor.type.rank)]
    return GMView(b, tensor, 0, _contiguous_dims(b, sizes), whole=True)


def _contiguous_dims(b: Builder, sizes) -> list[VDim]:
    dims = []
    stride = 1
    for s in reversed(sizes):
        dims.append(VDim((s,), (stride,), 0, s))
        stride = b.sbin("mul", stride, s)
    return list(reversed(dims))


def _prod(b: Builder, xs):
    out = 1
    for x in xs:
        out = b.sbin("mul", out, x)
    return out


def _address(b: Builder, d: VDim, idx):
    """The element offset of merged index ``idx`` of dimension ``d``."""
    if len(d.radices) == 1:
        return b.sbin("mul", idx, d.strides[0])
    addr = 0
    rest = idx
    for radix, stride in zip(reversed(d.radices[1:]), reversed(d.strides[1:])):
        addr = b.sbin("add", addr, b.sbin("mul", b.sbin("mod", rest, radix), stride))
        rest = b.sbin("floordiv", rest, radix)
    return b.sbin("add", addr, b.sbin("mul", rest, d.strides[0]))


def _static_extent(start, stop):
    """E when stop is syntactically start + E (E a compile-time int), else None."""
    if is_const(start) and is_const(stop):
        return stop - start
    if isinstance(stop, Value) and stop.owner is not None and stop.owner.kind == "sbin" \
            and stop.owner.attrs.get("op") == "add":
        x, y = stop.owner.operands
        for base, other in ((x, y), (y, x)):
            same = base is start or (isinstance(start, Value) and base.id == start.id)
            if same and other.const is not None and isinstance(other.const, int):
                return other.const
    return None
