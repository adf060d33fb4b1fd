"""Float64 goldens of the attention operators, written from the documented semantics.

Modules by concern:

* :mod:`.dtypes`  — exact float64 conversion, chip-style rounding (``round_to``);
* :mod:`.layouts` — BSH/BSND/BNSD/NBSD ↔ ``[B, N, S, D]``, TND/NTD ↔ ``[T, N, D]``;
* :mod:`.batches` — per-batch row/kv ranges from actual lengths, left padding, prefix;
* :mod:`.kv`      — dense, tensor-list, token-layout and paged kv sources, shared prefix;
* :mod:`.masks`   — the sparse-mode mask engine (modes 0-4 and the tree mask 9, compressed template);
* :mod:`.rope`    — the split rope joined to q and k (one dot product over D + D_rope);
* :mod:`.pse`     — ``pse_shift`` and the learnable sink;
* :mod:`.attend`  — one attention block (softmax, lse, invalid rows; float64, or fp32 as the st golden);
* :mod:`.online`  — online softmax over KV blocks (the st double benchmark's benchmark);
* :mod:`.fia`     — ``fia_golden`` / ``fia_golden_lowp`` / ``fia_golden_st`` (FusedInferAttentionScore).
"""

from .fia import (LSE_EMPTY, LSE_EMPTY_LEGACY_DECODE, empty_row_lse, fia_golden, fia_golden_lowp, fia_golden_st,
                  is_legacy_decode)
from .masks import mask_template

__all__ = ["fia_golden", "fia_golden_lowp", "fia_golden_st", "mask_template", "is_legacy_decode", "LSE_EMPTY",
           "LSE_EMPTY_LEGACY_DECODE", "empty_row_lse"]
