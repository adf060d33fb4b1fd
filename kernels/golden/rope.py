"""The split rope of FusedInferAttentionScore (``query_rope`` / ``key_rope``): its head dims joined to q and k.

Model
-----
With the split rope the operator's scores are ``scale · (q·kᵀ + q_rope·k_ropeᵀ)``: the rope part of each head
(D_rope, 64) is a second slice of the same dot product. Both the golden and the simulated kernel compute it
as one dot product over the joined head dim D + D_rope (:func:`join_rope`: per head, the rope's D_rope values
after the head's D values), which is what the chip's cube does with the two parts side by side in L1; value
and the output keep D.

A tensor is *packed* when its last axis holds heads × D (BSH, and the paged BnBsH cache); otherwise its last
axis is D (BSND, BNSD, TND, NTD, the paged BnNBsD cache).

Invariants
----------
* Only the last axis grows; every other axis of ``x`` and ``x_rope`` must agree.
* The values are copied exactly (no conversion): the result has ``x``'s dtype.
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_numpy

__all__ = ["join_rope"]


def join_rope(x, x_rope, heads: int, packed: bool, name: str = "query") -> np.ndarray:
    """``x`` with each head's rope values appended to its D (see the module doc); ``heads`` splits a packed
    last axis."""
    a, r = to_numpy(x), to_numpy(x_rope)
    if a.shape[:-1] != r.shape[:-1]:
        raise ValueError(f"{name}_rope: shape {tuple(r.shape)} must match {name} {tuple(a.shape)} but for the "
                         f"last axis")
    if r.dtype != a.dtype:
        raise ValueError(f"{name}_rope: dtype {r.dtype} differs from {name}'s {a.dtype}")
    if not packed:
        return np.concatenate([a, r], axis=-1)
    if a.shape[-1] % heads or r.shape[-1] % heads:
        raise ValueError(f"{name}/{name}_rope: last axes {a.shape[-1]} / {r.shape[-1]} are not {heads} heads")
    lead = a.shape[:-1]
    joined = np.concatenate([a.reshape(*lead, heads, -1), r.reshape(*lead, heads, -1)], axis=-1)
    return joined.reshape(*lead, -1)
