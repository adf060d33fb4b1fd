"""Tensor layouts of FusedInferAttentionScore and the axes each one names.

Model
-----
op_host reads every tensor through its layout: ``BSH`` is (batch, seq, hidden),
``BNSD`` is (batch, heads, seq, head_dim), a paged KV cache ``BnBsH`` is
(block_num, block_size, hidden), and so on. :class:`LayoutShape` answers "what
is axis X of this tensor" the way op_host's shape helper does:

* an axis the layout does not name has no value (``None`` from ``get``);
* D of a layout with a hidden axis H is ``H / N`` when the number of heads N
  is known and divides H; the NZ cache layout's D is ``D1 * D0``;
* ``require(axis)`` fails (``ParamError``) when the tensor's rank differs
  from the layout's axis count or the axis cannot be derived.

Invariants
----------
* Dimensions past a shape's rank read as ``INVALID_DIM`` (the int64 minimum),
  as a gert shape answers; nothing here raises for that, checks do.
"""

from __future__ import annotations

from .errors import ParamError

__all__ = ["LAYOUT_AXES", "INVALID_DIM", "dim", "numel", "LayoutShape", "INPUT_LAYOUTS", "split_input_layout",
           "TILING_KEY_LAYOUT"]

INVALID_DIM = -(1 << 63)

#: Axes of each layout, in storage order.
LAYOUT_AXES: dict[str, tuple[str, ...]] = {
    "BSH": ("B", "S", "H"),
    "BSND": ("B", "S", "N", "D"),
    "BNSD": ("B", "N", "S", "D"),
    "NZ": ("Bn", "N", "D1", "Bs", "D0"),
    "TND": ("T", "N", "D"),
    "NBSD": ("N", "B", "S", "D"),
    "NTD": ("N", "T", "D"),
    "BnBsH": ("Bn", "Bs", "H"),
    "BnNBsD": ("Bn", "N", "Bs", "D"),
}

#: input_layout attribute -> (query layout, attention_out layout), the layouts the new framework accepts.
INPUT_LAYOUTS: dict[str, tuple[str, str]] = {
    "BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"), "TND": ("TND", "TND"),
    "NTD": ("NTD", "NTD"),
    "BSH_NBSD": ("BSH", "NBSD"), "BSND_NBSD": ("BSND", "NBSD"), "BNSD_NBSD": ("BNSD", "NBSD"),
    "TND_NTD": ("TND", "NTD"), "NTD_TND": ("NTD", "TND"), "BNSD_BSND": ("BNSD", "BSND"),
    "BSND_BNSD": ("BSND", "BNSD"), "BSH_BNSD": ("BSH", "BNSD"),
}

#: The layout code op_host puts into tiling keys (BSH and BSND share one code; paged caches map to their
#: contiguous look-alikes).
TILING_KEY_LAYOUT = {"BSH": 0, "BSND": 0, "BnBsH": 0, "BNSD": 1, "BnNBsD": 1, "NZ": 2, "TND": 3, "NBSD": 4,
                     "NTD": 5}


def split_input_layout(layout: str) -> tuple[str, str] | None:
    """(query layout, output layout) of an ``input_layout`` value, or None when the framework does not know it."""
    return INPUT_LAYOUTS.get(layout)


def dim(shape: tuple[int, ...], i: int) -> int:
    """Axis ``i`` of ``shape``; ``INVALID_DIM`` past the rank (as a gert shape answers)."""
    return shape[i] if 0 <= i < len(shape) else INVALID_DIM


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class LayoutShape:
    """A tensor's shape read through a layout (see the module docstring)."""

    __slots__ = ("shape", "layout", "name", "heads")

    def __init__(self, shape: tuple[int, ...], layout: str, name: str, heads: int | None = None):
        self.shape = tuple(shape)
        self.layout = layout
        self.name = name
        self.heads = heads if "H" in LAYOUT_AXES.get(layout, ()) else None

    @property
    def axes(self) -> tuple[str, ...]:
        return LAYOUT_AXES.get(self.layout, ())

    def has(self, axis: str) -> bool:
        if axis == "D":
            return self.get("D") is not None
        return axis in self.axes

    def get(self, axis: str) -> int | None:
        axes = self.axes
        if axis in axes:
            return dim(self.shape, axes.index(axis))
        if axis == "D":
            if "H" in axes and self.heads:
                h = dim(self.shape, axes.index("H"))
                if h % self.heads == 0:
                    return h // self.heads
                return None
            if "D1" in axes and "D0" in axes:
                return dim(self.shape, axes.index("D1")) * dim(self.shape, axes.index("D0"))
        return None

    def require(self, axis: str, *, checker: str = "parse") -> int:
        """The axis value; ``ParamError`` when the rank does not match the layout or the axis cannot be had."""
        axes = self.axes
        if len(self.shape) == 0:
            raise ParamError(self.name, self.shape, f"the shape of {self.name} must not be empty", checker=checker)
        if len(self.shape) != len(axes):
            raise ParamError(self.name, self.shape,
                             f"{self.name} must have {len(axes)} dims to be read as layout {self.layout}",
                             checker=checker)
        value = self.get(axis)
        if value is None:
            if axis == "D" and "H" in axes:
                raise ParamError(self.name, self.shape,
                                 f"H of {self.name} must be a positive multiple of the head count {self.heads}",
                                 checker=checker)
            raise ParamError(self.name, self.shape, f"layout {self.layout} of {self.name} has no axis {axis}",
                             checker=checker)
        return value
