"""The split rope of FusedInferAttentionScore (``query_rope`` / ``key_rope``): its head dims joined to q and k.

Model
-----
With the split rope the operator's scores are ``scale · (q·kᵀ + q_rope·k_ropeᵀ)``: the rope part of each head
(D_rope, 64) is a second slice of the same dot product. Both the golden and the simulated kernel compute it
as one dot product over the joined head dim D + D_rope (:func:`join_rope`: per head, the rope's D_rope values
after the head's D values), which is what the chip's cube does with the two parts side by side in L1; value
and the output keep D.

A tensor is *packed* when its last axis holds heads × D (BSH, and the paged BnBsH cache); otherwise its last
axis is D (BSND, BNSD, TND, NTD, the paged BnNBsD cache). A 5-D key is an NZ paged cache (``golden.nz``,
(blocks, N, D/d0, block_size, d0)): its D/d0 fractals and the rope's are joined along axis 2, which is the NZ
cache of the joined key.

Invariants
----------
* Only the last axis grows (axis 2, the fractals, of an NZ cache); every other axis of ``x`` and ``x_rope``
  must agree.
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
    if r.dtype != a.dtype:
        raise ValueError(f"{name}_rope: dtype {r.dtype} differs from {name}'s {a.dtype}")
    if a.ndim == 5:   # NZ caches: join the fractals
        if a.shape[:2] + a.shape[3:] != r.shape[:2] + r.shape[3:] or r.ndim != 5:
            raise ValueError(f"{name}_rope: NZ shape {tuple(r.shape)} must match {name} {tuple(a.shape)} but for "
                             f"axis 2 (the D/d0 fractals)")
        return np.concatenate([a, r], axis=2)
    if a.shape[:-1] != r.shape[:-1]:
        raise ValueError(f"{name}_rope: shape {tuple(r.shape)} must match {name} {tuple(a.shape)} but for the "
                         f"last axis")
    if not packed:
        return np.concatenate([a, r], axis=-1)
    if a.shape[-1] % heads or r.shape[-1] % heads:
        raise ValueError(f"{name}/{name}_rope: last axes {a.shape[-1]} / {r.shape[-1]} are not {heads} heads")
    lead = a.shape[:-1]
    joined = np.concatenate([a.reshape(*lead, heads, -1), r.reshape(*lead, heads, -1)], axis=-1)
    return joined.reshape(*lead, -1)
