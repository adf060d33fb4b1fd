"""The tiling mirror of RingAttentionUpdate (aclnnRingAttentionUpdate / torch_npu.npu_ring_attention_update).

Model
-----
RingAttentionUpdate is a vector-only operator: every AIV core merges the
(attention out, softmax max, softmax sum) of two FlashAttention passes for a
share of the rows. This module reproduces what the real operator's host side
decides, read from the public ops-transformer sources
(``attention/ring_attention_update/op_host/op_api/aclnn_ring_attention_update.cpp``,
``op_host/ring_attention_update_tiling.cpp`` and the two kernels under ``op_kernel/``);
the rules are restated here, no code is copied.

Checks, in the order the operator applies them (``check_ring_attention_update``):

* aclnn layer — a missing required tensor is ``161001``; attn dtypes that differ
  between prev/cur/out, an attn dtype outside fp16/bf16/fp32, softmax tensors of
  which none is fp32, a zero dimension, a layout other than "SBH" (softmax 4-D)
  or "TND" (softmax 3-D), or a softmax last dim other than 8 are ``161002``;
  a TND call without ``actual_seq_qlen`` fails making it contiguous (``161001``).
* tiling (``561002``) — TND: D a multiple of 64, D <= 768 (and at least one head
  fits the UB pass), N <= 256, ``actual_seq_qlen`` int64, softmax layout "", "SBH"
  or "TND"; SBH: attn 3-D (S, B, H), softmax 4-D (B, N, S, 8) with the same B and S,
  every other tensor of the shape of its prev twin, no zero dimension; both: each
  softmax tensor fp32 like prev_softmax_max and each attn tensor of prev_attn_out's dtype.
* documented contract that op_host does not check and cvtile does (``161002``, so a
  call never reads past a tensor): TND prev/cur and softmax shapes agree with
  (T, N, D) / (T, N, 8); ``actual_seq_qlen`` starts at 0, never decreases and ends
  at T; SBH H = N·D.

Core split (``RingAttentionUpdateSplitCore``, SBH): with BN = B·N rows of
softmax state and C the AIV count, G = gcd(BN, C) core groups each take BN/G
(batch, head) pairs; the C/G cores of a group cut S into runs of
ceil(S / (C/G)) positions (the core count of a group shrinks to the runs that
exist, the last run takes the tail): ``core_num = groups · cores_per_group``.
Loop split (``RingAttentionUpdateSplitLoop``): a UB pass holds ``seq_loop_each``
positions (a multiple of 8 = 64 fp32 lanes / the softmax tail 8, at most 255) of
``head_dim_loop_each`` head-dim lanes (a multiple of 64), sized so the queues
(2 buffers of 6 softmax and 3 attn queues) and fp32 temporaries fit the UB.

TND (``Tiling4RingAttentionUpdateTND``): the T tokens are cut into runs of
ceil(T / C) tokens, one per core (``core_num = ceil(T / run)``, the last core the
tail); a UB pass is one token's ``head_num_loop_each`` heads (the fixed 192 KiB
UB budget divided by the per-head bytes of the queues, capped at N unless the
softmax layout is "TND" or N = 1). With the default softmax layout "" / "SBH" the
TND softmax tensors, though shaped (T, N, 8), are laid out per batch as
(N, S_b, 8) ("BNS8", the FA training layout); "TND" means (T, N, 8) itself.

Tiling key: 0/1/2 for fp16/bf16/fp32 attn, plus 10 for TND.

Invariants
----------
* Every row (SBH: (b, n, s); TND: (t, n)) belongs to exactly one core; cores
  ``0 .. core_num-1`` all have rows.
* ``decisions`` records every derived value with the rule that made it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import AclnnStatus, ParamError
from .platform import DEFAULT_TARGET, get_platform
from .result import Decision

__all__ = ["RauTiling", "tile_ring_attention_update", "check_ring_attention_update", "SOFTMAX_TAIL",
           "TND_HEAD_DIM_ALIGN", "TND_MAX_HEADS", "TND_MAX_HEAD_DIM"]

SOFTMAX_TAIL = 8          # the FA statistics' trailing dimension (8 equal values)
TND_HEAD_DIM_ALIGN = 64   # TND: D a multiple of 64
TND_MAX_HEADS = 256       # TND: N <= 256
TND_MAX_HEAD_DIM = 768    # TND: D <= 768
_LANES_F32 = 64           # fp32 elements of one 256-byte vector repeat
_SEQ_LOOP_MAX = 255       # SBH: positions per UB pass at most (a repeat count)
_TND_UB = 196608          # TND: the UB budget op_host assumes (192 KiB), whatever the platform reports
_ATTN_DTYPES = ("float16", "bfloat16", "float32")
_KEY_DTYPE = {"float16": 0, "bfloat16": 1, "float32": 2}
_TND_KEY = 10

_SOURCE = "op_host ring_attention_update_tiling.cpp"
_ACLNN = "aclnn_ring_attention_update.cpp"


@dataclass(frozen=True)
class RauTiling:
    """What op_host decides for one RingAttentionUpdate call (see the module doc)."""

    platform: str
    layout: str                  # "SBH" or "TND"
    softmax_layout: str          # TND: "BNS8" (the default "" / "SBH") or "TND"; SBH: "BNS8"
    dtype: str
    batch: int
    heads: int
    seq: int                     # SBH: S; TND: T
    head_dim: int
    core_num: int
    tiling_key: int
    # SBH
    groups: int = 0
    cores_per_group: int = 0
    bn_per_group: int = 0
    seq_core_each: int = 0
    seq_core_tail: int = 0
    seq_loop_each: int = 0
    head_dim_loop_each: int = 0
    # TND
    t_core_each: int = 0
    t_core_tail: int = 0
    head_num_loop_each: int = 0
    decisions: tuple = field(default=(), compare=False)

    def core_rows(self, core: int) -> tuple[int, int]:
        """(first, count) of the S (SBH) or T (TND) positions core ``core`` merges."""
        if self.layout == "TND":
            first = core * self.t_core_each
            return first, (self.t_core_tail if core == self.core_num - 1 else self.t_core_each)
        i = core % self.cores_per_group
        return i * self.seq_core_each, (self.seq_core_tail if i == self.cores_per_group - 1 else self.seq_core_each)

    def core_bn(self, core: int) -> range:
        """SBH: the (batch·N + head) indices core ``core`` merges (its group's share)."""
        g = core // self.cores_per_group
        return range(g * self.bn_per_group, (g + 1) * self.bn_per_group)

    def explain(self) -> str:
        head = (f"RingAttentionUpdate {self.layout} {self.dtype} on {self.platform}: key {self.tiling_key}, "
                f"{self.core_num} vector cores")
        return "\n".join([head] + [f"  {d}" for d in self.decisions])


# ---- checks --------------------------------------------------------------------------------------------------
def _dtype(x) -> str:
    from .params import canonical_dtype

    return canonical_dtype(x.dtype)


def _err(param, value, rule, status):
    return ParamError(param, value, rule, status=status, checker="ring_attention_update")


_NULL, _INVALID, _TILING = AclnnStatus.PARAM_NULLPTR, AclnnStatus.PARAM_INVALID, AclnnStatus.INNER_TILING_ERROR
_ATTN = ("prev_attn_out", "cur_attn_out")
_SOFTMAX = ("prev_softmax_max", "prev_softmax_sum", "cur_softmax_max", "cur_softmax_sum")


def check_ring_attention_update(t: dict, input_layout: str, input_softmax_layout: str = "") -> None:
    """Raise ``ParamError`` for a call the operator rejects. ``t`` maps the torch_npu names of the six inputs and
    ``actual_seq_qlen`` to arrays (or None); shapes and dtypes are all that is read, plus the qlen values."""
    for name in _ATTN + _SOFTMAX:
        if t.get(name) is None:
            raise _err(name, None, "a required input tensor is null", _NULL)
    ad = _dtype(t["prev_attn_out"])
    if _dtype(t["cur_attn_out"]) != ad:
        raise _err("cur_attn_out", _dtype(t["cur_attn_out"]),
                   f"prev_attn_out, cur_attn_out and attn_out must share one dtype (prev_attn_out is {ad}) "
                   f"[{_ACLNN} InputDtypeCheck]", _INVALID)
    if ad not in _ATTN_DTYPES:
        raise _err("prev_attn_out", ad, f"attn dtype must be one of {_ATTN_DTYPES} [{_ACLNN} InputDtypeCheck]",
                   _INVALID)
    if all(_dtype(t[n]) != "float32" for n in _SOFTMAX):
        raise _err("prev_softmax_max", _dtype(t["prev_softmax_max"]),
                   f"the softmax max/sum tensors must be float32 [{_ACLNN} InputDtypeCheck]", _INVALID)
    for name in _ATTN + _SOFTMAX:
        if any(int(d) == 0 for d in t[name].shape):
            raise _err(name, tuple(t[name].shape), f"no dimension may be 0 [{_ACLNN} CheckNullTensor]", _INVALID)
    sm_rank = {"SBH": 4, "TND": 3}.get(input_layout)
    if sm_rank is None or any(t[n].ndim != sm_rank for n in _SOFTMAX):
        bad = next((n for n in _SOFTMAX if sm_rank is not None and t[n].ndim != sm_rank), None)
        if bad is None:
            raise _err("input_layout", input_layout, f"input_layout must be 'SBH' (softmax 4-D) or 'TND' "
                       f"(softmax 3-D) [{_ACLNN} AnalysisAxis]", _INVALID)
        raise _err(bad, tuple(t[bad].shape), f"input_layout {input_layout} needs {sm_rank}-D softmax tensors "
                   f"[{_ACLNN} AnalysisAxis]", _INVALID)
    for name in _SOFTMAX:
        if int(t[name].shape[-1]) != SOFTMAX_TAIL:
            raise _err(name, tuple(t[name].shape), f"the last dimension must be {SOFTMAX_TAIL} "
                       f"[{_ACLNN} AnalysisAxis]", _INVALID)
    if input_layout == "TND":
        if t.get("actual_seq_qlen") is None:
            raise _err("actual_seq_qlen", None, f"required when input_layout is TND (making it contiguous "
                       f"fails) [{_ACLNN} Contiguous]", _NULL)
        _check_tnd(t, ad, input_softmax_layout)
    else:
        _check_sbh(t)
    for name in _SOFTMAX[1:]:
        if _dtype(t[name]) != _dtype(t["prev_softmax_max"]) or _dtype(t["prev_softmax_max"]) != "float32":
            bad = name if _dtype(t["prev_softmax_max"]) == "float32" else "prev_softmax_max"
            raise _err(bad, _dtype(t[bad]), f"every softmax tensor must be float32 [{_SOURCE} "
                       f"RingAttentionUpdateCheckDtype]", _TILING)


def _check_tnd(t: dict, ad: str, softmax_layout: str) -> None:
    a = t["prev_attn_out"]
    if a.ndim != 3:
        raise _err("prev_attn_out", tuple(a.shape), "TND attn tensors are (T, N, D)", _INVALID)
    tt, n, d = (int(v) for v in a.shape)
    if softmax_layout not in ("", "SBH", "TND"):
        raise _err("input_softmax_layout", softmax_layout, f"must be '', 'SBH' or 'TND' [{_SOURCE} "
                   f"Tiling4RingAttentionUpdateTND]", _TILING)
    if d % TND_HEAD_DIM_ALIGN:
        raise _err("prev_attn_out", tuple(a.shape), f"TND: D={d} must be a multiple of {TND_HEAD_DIM_ALIGN} "
                   f"[{_SOURCE} RingAttentionUpdateTNDUbSizeCheck]", _TILING)
    if d > TND_MAX_HEAD_DIM or _tnd_heads_per_pass(d, ad) == 0:
        raise _err("prev_attn_out", tuple(a.shape), f"TND: D={d} must be <= {TND_MAX_HEAD_DIM} "
                   f"[{_SOURCE} RingAttentionUpdateTNDUbSizeCheck]", _TILING)
    if n > TND_MAX_HEADS:
        raise _err("prev_attn_out", tuple(a.shape), f"TND: N={n} must be <= {TND_MAX_HEADS} "
                   f"[{_SOURCE} RingAttentionUpdateTNDUbSizeCheck]", _TILING)
    q = t["actual_seq_qlen"]
    if _dtype(q) != "int64":
        raise _err("actual_seq_qlen", _dtype(q), f"must be int64 [{_SOURCE} RingAttentionUpdateTNDQLenCheck]",
                   _TILING)
    for name in ("cur_attn_out",):
        if tuple(t[name].shape) != tuple(a.shape):
            raise _err(name, tuple(t[name].shape), f"must have prev_attn_out's shape {tuple(a.shape)} "
                       f"(documented; op_host does not check TND shapes)", _INVALID)
    for name in _SOFTMAX:
        if tuple(t[name].shape) != (tt, n, SOFTMAX_TAIL):
            raise _err(name, tuple(t[name].shape), f"TND softmax tensors are (T, N, 8) = {(tt, n, SOFTMAX_TAIL)} "
                       f"(documented; op_host does not check TND shapes)", _INVALID)
    qv = np.asarray(q).reshape(-1)
    if qv.size < 2 or qv[0] != 0 or np.any(np.diff(qv) < 0) or qv[-1] != tt:
        raise _err("actual_seq_qlen", qv.tolist() if qv.size <= 16 else f"{qv.size} values",
                   f"must be the cumulative sequence lengths from 0, non-decreasing, up to T={tt} "
                   f"(documented; op_host does not check the values)", _INVALID)


def _check_sbh(t: dict) -> None:
    a, m = t["prev_attn_out"], t["prev_softmax_max"]
    if a.ndim != 3:
        raise _err("prev_attn_out", tuple(a.shape), f"SBH attn tensors are (S, B, H) "
                   f"[{_SOURCE} CheckAttnAndSoftmaxShapeSBH]", _TILING)
    s, b, h = (int(v) for v in a.shape)
    if int(m.shape[2]) != s or int(m.shape[0]) != b:
        raise _err("prev_softmax_max", tuple(m.shape), f"must be (B, N, S, 8) with prev_attn_out's B={b}, S={s} "
                   f"[{_SOURCE} CheckAttnAndSoftmaxShapeSBH]", _TILING)
    for name, like in (("prev_softmax_sum", m), ("cur_attn_out", a), ("cur_softmax_max", m),
                       ("cur_softmax_sum", m)):
        if tuple(t[name].shape) != tuple(like.shape):
            raise _err(name, tuple(t[name].shape), f"must have the shape {tuple(like.shape)} "
                       f"[{_SOURCE} IfShapeSupport]", _TILING)
    n = int(m.shape[1])
    if h % n:
        raise _err("prev_attn_out", tuple(a.shape), f"H={h} must be N*D with N={n} (op_host takes D = H // N "
                   f"without checking; cvtile refuses)", _INVALID)
    if _dtype(t["cur_attn_out"]) != _dtype(a):
        raise _err("cur_attn_out", _dtype(t["cur_attn_out"]), f"must be {_dtype(a)} like prev_attn_out "
                   f"[{_SOURCE} RingAttentionUpdateCheckDtype]", _TILING)


# ---- tiling --------------------------------------------------------------------------------------------------
def _bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def _tnd_heads_per_pass(d: int, dtype: str) -> int:
    """TND: heads of one token a UB pass holds: the fixed UB budget less one repeat of every queue, over the
    per-head bytes (6 attn-sized buffers and 8 bytes per D element, and 56 bytes per softmax element of 8)."""
    per_elem = _bytes(dtype) * 6 + 8
    room = _TND_UB - _LANES_F32 * per_elem - _LANES_F32 * 56
    return room // (d * per_elem + SOFTMAX_TAIL * 56)


def tile_ring_attention_update(t: dict, input_layout: str = "SBH", input_softmax_layout: str = "",
                               target: str = DEFAULT_TARGET) -> RauTiling:
    """Check the call (``ParamError`` as the operator) and return its tiling."""
    check_ring_attention_update(t, input_layout, input_softmax_layout)
    plat = get_platform(target)
    dtype = _dtype(t["prev_attn_out"])
    dec: list[Decision] = []

    def decide(what, value, rule):
        dec.append(Decision(what, value, rule))
        return value

    aiv = decide("vector cores", plat.aiv, f"the platform's AIV count ({plat.name}) [{_SOURCE} GetCoreNumAiv]")
    if input_layout == "TND":
        tt, n, d = (int(v) for v in t["prev_attn_out"].shape)
        batch = int(np.asarray(t["actual_seq_qlen"]).size) - 1
        sm = "TND" if input_softmax_layout == "TND" else "BNS8"
        decide("softmax layout", sm, "'' / 'SBH' mean the FA training layout (N, S_b, 8) per batch; 'TND' means "
               "(T, N, 8) [tndSoftmaxLayout]")
        each = decide("t_core_each", -(-tt // aiv), "ceil(T / vector cores) tokens per core")
        cores = decide("core_num", -(-tt // each), "ceil(T / t_core_each): the runs that exist")
        tail = decide("t_core_tail", tt - (cores - 1) * each, "the last core takes the rest")
        most = _tnd_heads_per_pass(d, dtype)
        hpp = most if (sm == "TND" or n == 1) else min(most, n)
        decide("head_num_loop_each", hpp, f"(192 KiB - one repeat of each queue) // per-head bytes = {most}"
               f"{'' if (sm == 'TND' or n == 1) else ', capped at N'}")
        key = decide("tiling_key", _TND_KEY + _KEY_DTYPE[dtype], "10 (TND) + 0/1/2 for fp16/bf16/fp32")
        return RauTiling(platform=plat.name, layout="TND", softmax_layout=sm, dtype=dtype, batch=batch, heads=n,
                         seq=tt, head_dim=d, core_num=cores, tiling_key=key, t_core_each=each, t_core_tail=tail,
                         head_num_loop_each=hpp, decisions=tuple(dec))
    s, b, h = (int(v) for v in t["prev_attn_out"].shape)
    n = int(t["prev_softmax_max"].shape[1])
    d = h // n
    bn = b * n
    groups = decide("groups", math.gcd(bn, aiv), f"gcd(B*N={bn}, vector cores)")
    cpg = aiv // groups
    bpg = decide("bn_per_group", bn // groups, "B*N / groups (batch, head) pairs per group")
    seq_each = decide("seq_core_each", -(-s // cpg), f"ceil(S / (vector cores / groups = {cpg})) positions per core")
    cpg = decide("cores_per_group", -(-s // seq_each), "ceil(S / seq_core_each): the runs that exist")
    seq_tail = decide("seq_core_tail", s - (cpg - 1) * seq_each, "the last core of a group takes the rest")
    cores = decide("core_num", cpg * groups, "cores_per_group * groups")
    seq_loop, hd_loop = _sbh_loop(d, dtype, plat.ub, decide)
    key = decide("tiling_key", _KEY_DTYPE[dtype], "0/1/2 for fp16/bf16/fp32 (SBH)")
    return RauTiling(platform=plat.name, layout="SBH", softmax_layout="BNS8", dtype=dtype, batch=b, heads=n, seq=s,
                     head_dim=d, core_num=cores, tiling_key=key, groups=groups, cores_per_group=cpg,
                     bn_per_group=bpg, seq_core_each=seq_each, seq_core_tail=seq_tail, seq_loop_each=seq_loop,
                     head_dim_loop_each=hd_loop, decisions=tuple(dec))


def _sbh_loop(d: int, dtype: str, ub: int, decide) -> tuple[int, int]:
    """SBH UB pass: (positions, head-dim lanes). Per softmax element: 6 double-buffered fp32 queues and 2 fp32
    temporaries; per attn element: 3 double-buffered queues of the attn dtype and 2 fp32 temporaries."""
    sm_bytes = 6 * 2 * 4 + 2 * 4
    attn_bytes = 3 * 2 * _bytes(dtype) + 2 * 4
    seq_min = _LANES_F32 // SOFTMAX_TAIL
    room = ub - seq_min * SOFTMAX_TAIL * sm_bytes
    hd_max = room // (seq_min * attn_bytes) // _LANES_F32 * _LANES_F32
    if d < hd_max:
        hd = -(-d // _LANES_F32) * _LANES_F32
        seq = min(ub // (SOFTMAX_TAIL * sm_bytes + hd * attn_bytes), _SEQ_LOOP_MAX) // seq_min * seq_min
        rule = (f"D < {hd_max} (the widest pass of {seq_min} positions): D rounded up to 64 lanes, then as many "
                f"positions as fit the UB (a multiple of {seq_min}, at most {_SEQ_LOOP_MAX})")
    else:
        hd, seq = hd_max, seq_min
        rule = f"D >= {hd_max}: passes of {seq_min} positions x {hd_max} lanes"
    decide("head_dim_loop_each", hd, rule)
    decide("seq_loop_each", seq, rule)
    return seq, hd
