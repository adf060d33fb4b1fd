"""Tensor layouts of the attention operators and their canonical forms.

Model
-----
``input_layout`` names how query/key/value are laid out, and, when it holds an
underscore (``"BNSD_BSND"``), the output layout after the underscore. Two
canonical forms cover every layout:

* batch layouts BSH, BSND, BNSD (and the output-only NBSD) ↔ ``[B, N, S, D]``;
  BSH is BSND with the last two axes merged (``H = N * D``);
* token layouts TND, NTD ↔ ``[T, N, D]`` where the batches are consecutive
  token ranges given by cumulative lengths.

``to_bnsd`` / ``to_tnd`` return *views* (no copy), so a golden can slice a
batch or a head range of a multi-GB input before converting it to float64.

Supported ``input_layout`` values: BSH, BSND, BNSD, TND, NTD, BNSD_BSND,
BSH_BNSD, BSND_BNSD, NTD_TND, TND_NTD, BSH_NBSD, BSND_NBSD, BNSD_NBSD. The
input half is also the key/value layout (unless paged attention is used, where
the caches have their own layouts, see :mod:`.kv`).

Invariants
----------
* ``from_bnsd(to_bnsd(x, L, N), L) == x`` for every batch layout L; likewise for
  token layouts.
* A token layout never mixes with a batch layout within one ``input_layout``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BATCH_LAYOUTS", "TOKEN_LAYOUTS", "INPUT_LAYOUTS", "Layouts", "parse_layout", "to_bnsd", "from_bnsd",
           "to_tnd", "from_tnd", "is_token_layout", "bnsd_shape"]

BATCH_LAYOUTS = ("BSH", "BSND", "BNSD", "NBSD")
TOKEN_LAYOUTS = ("TND", "NTD")

#: input_layout → (input layout of q/k/v, output layout)
INPUT_LAYOUTS = {
    "BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"),
    "TND": ("TND", "TND"), "NTD": ("NTD", "NTD"),
    "BNSD_BSND": ("BNSD", "BSND"), "BSH_BNSD": ("BSH", "BNSD"), "BSND_BNSD": ("BSND", "BNSD"),
    "NTD_TND": ("NTD", "TND"), "TND_NTD": ("TND", "NTD"),
    "BSH_NBSD": ("BSH", "NBSD"), "BSND_NBSD": ("BSND", "NBSD"), "BNSD_NBSD": ("BNSD", "NBSD"),
}


@dataclass(frozen=True)
class Layouts:
    """The parsed ``input_layout``: ``name`` as given, ``qkv`` input layout, ``out`` output layout."""

    name: str
    qkv: str
    out: str

    @property
    def token(self) -> bool:
        """True for TND/NTD (variable-length batches given by cumulative lengths)."""
        return self.qkv in TOKEN_LAYOUTS


def parse_layout(input_layout: str) -> Layouts:
    """Parse ``input_layout``; raises ``ValueError`` naming the supported values."""
    key = str(input_layout).upper()
    if key not in INPUT_LAYOUTS:
        raise ValueError(f"input_layout={input_layout!r}: not a supported layout "
                         f"(supported: {', '.join(INPUT_LAYOUTS)})")
    qkv, out = INPUT_LAYOUTS[key]
    return Layouts(key, qkv, out)


def is_token_layout(layout: str) -> bool:
    return layout.upper() in TOKEN_LAYOUTS


def _heads_dim(h: int, num_heads: int, what: str) -> int:
    if num_heads <= 0 or h % num_heads:
        raise ValueError(f"{what}: hidden size H={h} is not a multiple of the head count {num_heads}")
    return h // num_heads


def to_bnsd(x: np.ndarray, layout: str, num_heads: int | None = None, what: str = "tensor") -> np.ndarray:
    """A ``[B, N, S, D]`` view of ``x`` in batch layout ``layout`` (BSH needs ``num_heads``)."""
    layout = layout.upper()
    if layout == "BSH":
        if x.ndim != 3:
            raise ValueError(f"{what}: layout BSH needs a 3-D tensor, got shape {tuple(x.shape)}")
        b, s, h = x.shape
        d = _heads_dim(h, num_heads or 0, what)
        return x.reshape(b, s, num_heads, d).transpose(0, 2, 1, 3)
    if x.ndim != 4:
        raise ValueError(f"{what}: layout {layout} needs a 4-D tensor, got shape {tuple(x.shape)}")
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    if layout == "BNSD":
        return x
    if layout == "NBSD":
        return x.transpose(1, 0, 2, 3)
    raise ValueError(f"{what}: {layout!r} is not a batch layout ({', '.join(BATCH_LAYOUTS)})")


def from_bnsd(x: np.ndarray, layout: str) -> np.ndarray:
    """``x`` given as ``[B, N, S, D]`` rearranged into batch layout ``layout`` (a contiguous array)."""
    layout = layout.upper()
    b, n, s, d = x.shape
    if layout == "BSH":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, n * d)
    if layout == "BSND":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    if layout == "BNSD":
        return np.ascontiguousarray(x)
    if layout == "NBSD":
        return np.ascontiguousarray(x.transpose(1, 0, 2, 3))
    raise ValueError(f"{layout!r} is not a batch layout ({', '.join(BATCH_LAYOUTS)})")


def to_tnd(x: np.ndarray, layout: str, what: str = "tensor") -> np.ndarray:
    """A ``[T, N, D]`` view of ``x`` in token layout ``layout``."""
    layout = layout.upper()
    if x.ndim != 3:
        raise ValueError(f"{what}: layout {layout} needs a 3-D tensor, got shape {tuple(x.shape)}")
    if layout == "TND":
        return x
    if layout == "NTD":
        return x.transpose(1, 0, 2)
    raise ValueError(f"{what}: {layout!r} is not a token layout ({', '.join(TOKEN_LAYOUTS)})")


def from_tnd(x: np.ndarray, layout: str) -> np.ndarray:
    """``x`` given as ``[T, N, D]`` rearranged into token layout ``layout`` (a contiguous array)."""
    layout = layout.upper()
    if layout == "TND":
        return np.ascontiguousarray(x)
    if layout == "NTD":
        return np.ascontiguousarray(x.transpose(1, 0, 2))
    raise ValueError(f"{layout!r} is not a token layout ({', '.join(TOKEN_LAYOUTS)})")


def bnsd_shape(shape: tuple, layout: str, num_heads: int | None = None) -> tuple:
    """``(B, N, S, D)`` of a tensor of ``shape`` in batch layout ``layout`` (no data needed)."""
    layout = layout.upper()
    shape = tuple(int(v) for v in shape)
    if layout == "BSH":
        if len(shape) != 3:
            raise ValueError(f"layout BSH needs a 3-D shape, got {shape}")
        b, s, h = shape
        return (b, num_heads, s, _heads_dim(h, num_heads or 0, "shape"))
    if len(shape) != 4:
        raise ValueError(f"layout {layout} needs a 4-D shape, got {shape}")
    order = {"BSND": (0, 2, 1, 3), "BNSD": (0, 1, 2, 3), "NBSD": (1, 0, 2, 3)}.get(layout)
    if order is None:
        raise ValueError(f"{layout!r} is not a batch layout ({', '.join(BATCH_LAYOUTS)})")
    return tuple(shape[i] for i in order)
