"""MLA full quant on Ascend950 (FP8 or int8 query and latent cache with per-token-head query scales), in float64.

Model
-----
The operator's decode MLA with full quant (``query_quant_mode`` 3, key/value quant modes 0) on the arch35
catch-all template: a float8_e4m3fn (or int8) query with ``dequant_scale_query`` dq (one fp32 per query token
and head), a latent cache K of the same dtype (D 512; the int8 one a paged NZ cache, as op_host demands) with
per-tensor fp32 scales dk (``key_antiquant_scale``) and dv (``value_antiquant_scale``), bf16 ``query_rope`` /
``key_rope`` (64), bf16 output. It is the A2/A3 MLA FA quant's formula (:mod:`.mla_quant`) with P's range R
and rounding q(x) the flavour's::

    s   = scale · dq · dk · (q·kᵀ + q_rope·k_ropeᵀ)            masked pairs -> -inf

taken in KV blocks of 128 columns (the template's sInner for MLA D512), P quantised against the block's own
max::

    hm  = max(m, rowmax(s_blk));  e = exp(s_blk - hm);  α = exp(m - hm)
    mp  = exp(rowmax(s_blk) - hm) + ε                          (ε = 2.220446049250313e-16, the kernel's)
    p8  = q(e · R / mp)
    l   = l·α + Σ e;   o = o·α + (p8 · V)·mp;   m = hm
    out = dv · o / l / R,   lse = m + ln(l)

FP8: R = 448, q the RNE onto the e4m3fn grid saturated to ±448 (``USE_MLA_FULLQUANT_V1_P``: ×448, ÷ (exp(rowmax
- max) + floatEps), Cast RINT SAT to e4m3fn); int8: R = 127, q the rounding to nearest even
(``USE_MLA_FULLQUANT_V1_P_INT8``: ×127, ÷ the same, then fp32 -> fp16 -> int8, both CAST_RINT; the fp16 step's
double rounding is the kernel's, not the golden's); ``FlashUpdateLastNew`` / ``LastDivNew``: ÷ l, ×1/R.

V is the key's D 512: the chip's P·V matmul reads its right operand from the key's L1 copy
(``FABlockCubeMlaFullquant::IterateBmm2MLAFullQuant`` takes ``l1KBuffers.GetReused()``), so the value tensor
(in vLLM the same latent cache) is not read. Upstream has no float64 golden of the 950 flavours (its st
executor's ``_t_indequant_ds_act_golden`` is the A2/A3 int8 one, with 512-column blocks and 127); the block
size, ranges and roundings here are the arch35 kernel's. The chip's fp32 steps are the kernel's
(``kernels.fia.kernel_mla_fullquant``), not the golden's.

Invariants
----------
* Inputs hold FP8 or int8 values (float8_e4m3fn / int8 arrays; NZ caches are read as their BnNBsD blocks) and
  bf16 ropes; no input is modified.
* A row that sees no key gives output 0 and lse +inf (:mod:`.attend`'s convention).
"""

from __future__ import annotations

import numpy as np

from .dtypes import canonical_dtype, to_numpy
from .fullquant_gqa import FP8_MAX, fp8_e4m3
from .mla_quant import P_RANGE, mla_quant_golden

__all__ = ["mla_fullquant_golden", "MLA_FQ_BLOCK"]

#: the template's S2 block for MLA D512 (sInner 128): P is quantised against each block's max
MLA_FQ_BLOCK = 128


def mla_fullquant_golden(query, key, value=None, **kwargs):
    """Float64 MLA full quant on Ascend950 (module doc): the keywords are :func:`.mla_quant.mla_quant_golden`'s
    (``dequant_scale_query``, ``key_antiquant_scale``, ``value_antiquant_scale``, the ropes, then
    :func:`.fia.fia_golden`'s); ``value`` is not read (V is the key). An int8 query takes P's int8 range and
    rounding, any other the FP8 ones. Returns ``(out, lse)`` in float64."""
    del value
    int8 = canonical_dtype(np.asarray(to_numpy(query)).dtype) == "int8"
    return mla_quant_golden(query, key, key, kv_block=MLA_FQ_BLOCK, p_range=P_RANGE if int8 else FP8_MAX,
                            quantise=np.round if int8 else fp8_e4m3, **kwargs)
