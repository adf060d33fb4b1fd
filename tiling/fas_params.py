"""FlashAttentionScore (training forward) call record, its checks, and the shape op_host's tiling sees.

Model
-----
``FasParams`` is one FlashAttentionScore call described by sizes and flags (no tensors). Two steps turn it
into what the arch22 op_host tiling reads:

1. ``check_fas(params)`` rejects what the real operator rejects, with the aclnn status the real call returns
   (``ParamError``: the parameter, the value, the rule, and the source). aclnn-layer rules
   (``op_host/op_api/aclnn_flash_attention_score.cpp``: ``AnalysisInput`` / ``AnalysisAxis`` /
   ``InputDtypeCheck``) give ``161002``; op_host rules (``flash_attention_score_tiling_general.cpp``:
   ``AnalyzeAttrs``, ``AnalyzeLayout``, ``Analyze3DimLayout``, ``AnalyzeOptionalInput``) give ``561002``.
   The sparse-mode / pre / next / prefix rules run in :mod:`.fas_sparse` (they need the op_host view).
2. ``tiling_view(params)`` applies what the aclnn layer does before the op runs (``AnalysisInput``):
   head dims not a multiple of 16 (of 128 from D 196 up, except 448) are zero-padded, V is padded up to D when
   the kernel cannot take D != Dv (``isSupportMLA``: not TND, not SameAB, S2 <= 1024) or for the
   "hardware-affine" D 64/80/88 (the source names 88 ``HEAD_DIM_128``), a few shapes are exempt
   (``IsNeedPad``: D and Dv both 72/88 with N1 == N2 outside BNSD/TND; TND with D < 96, every KV length
   <= 1024 and fewer than 160 Ki query tokens), and BSH/BSND (SBH) are transposed to BNSD when
   N1 * D_padded (B * N1 * D_padded) exceeds the 65535 stride limit. ``aclnn=False`` skips this step,
   as op_host's own unit tests do (they call the tiling with the raw shapes).

Invariants
----------
* For TND, ``actual_seq_qlen`` / ``actual_seq_kvlen`` are per-batch lengths (not cumulative), one per batch
  (``b`` of them), and ``s1`` / ``s2`` are the query / key token counts T1 / T2 of the tensors (at least the
  sums, op_host ``Analyze3DimLayout``). For the other layouts both lists are None.
* ``pse_type`` follows the operator's default 1 (outer pse, add then multiply); op_host refuses another
  value without a pse tensor (``AnalyzeOptionalInput``).
* The mask / pse / drop-mask tensors are assumed to have the shapes their mode needs (compressed 2048x2048
  for sparse modes 2/3/4/7/8, 3072x2048 for mode 6, a full mask otherwise); only their presence is modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import AclnnStatus, ParamError

__all__ = ["FasParams", "FasView", "check_fas", "tiling_view", "INT32_MAX", "FAS_LAYOUTS", "FAS_DTYPES",
           "HEAD_DIM_MAX", "MAX_HEADS", "MAX_VAR_LEN_BATCH"]

INT32_MAX = 2 ** 31 - 1          # pre/next "no limit" (op_host resets to int32 max)
FAS_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
FAS_DTYPES = ("float16", "bfloat16", "float32")
HEAD_DIM_MAX = 768               # aclnn HEAD_DIM_MAX and op_host HEAD_DIM_MAX_VALUE
MAX_HEADS = 256                  # documented N range 1..256 (aclnnFlashAttentionScoreV2.md); not checked in code
MAX_VAR_LEN_BATCH = 20000        # op_host MAX_VAR_LEN_SEQ_LEN: the fixed array the TND lengths are read into
_MAX_STRIDE_S1 = 65535           # aclnn MAX_STRIDE_S1: above it BSH/BSND/SBH are transposed to BNSD

_ACLNN = "aclnn_flash_attention_score.cpp"
_GENERAL = "flash_attention_score_tiling_general.cpp"
_NULL, _INVALID, _TILING = AclnnStatus.PARAM_NULLPTR, AclnnStatus.PARAM_INVALID, AclnnStatus.INNER_TILING_ERROR


@dataclass(frozen=True)
class FasParams:
    """One FlashAttentionScore forward call by sizes (see the module doc for TND's ``s1`` / ``s2``)."""

    b: int
    n1: int
    n2: int
    s1: int
    s2: int
    d: int
    dv: int | None = None              # None: = d
    dtype: str = "float16"
    layout: str = "BSND"
    sparse_mode: int = 0
    pre_tokens: int = INT32_MAX
    next_tokens: int = INT32_MAX
    has_mask: bool = False
    has_pse: bool = False
    pse_type: int = 1
    keep_prob: float = 1.0
    has_drop_mask: bool = False
    actual_seq_qlen: tuple | None = None     # TND: per-batch query lengths (not cumulative)
    actual_seq_kvlen: tuple | None = None    # TND: per-batch key/value lengths (not cumulative)
    prefix: tuple | None = None              # sparse modes 5/6: one N per batch
    has_sink: bool = False
    inner_precise: int = 0

    @property
    def value_dim(self) -> int:
        return self.d if self.dv is None else self.dv

    @property
    def g(self) -> int:
        return self.n1 // self.n2 if self.n2 else 0


@dataclass(frozen=True)
class FasView:
    """The shape and attributes op_host's ``GetShapeAttrsInfo`` reads (after the aclnn layer's pad/transpose)."""

    layout: str                  # BSH / BSND / SBH / BNSD / TND as passed to the op
    dtype: str
    b: int
    n1: int
    n2: int
    g: int
    s1: int                      # TND: the longest query length (op_host s1Size)
    s2: int                      # TND: the longest key length
    d: int                       # head dim op_host sees (padded)
    dv: int
    q_lens: tuple                # per batch
    kv_lens: tuple
    t1: int                      # TND tensor rows (realT1Size); otherwise B*S1
    t2: int
    pad_d: int = 0
    pad_dv: int = 0
    transposed: bool = False
    notes: tuple = field(default=(), compare=False)

    @property
    def tnd(self) -> bool:
        return self.layout == "TND"


def _err(param, value, rule, status=_INVALID, checker="fas"):
    return ParamError(param, value, rule, status=status, checker=checker)


def _int(name: str, v, low: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            import numpy as np

            if isinstance(v, np.integer):
                v = int(v)
            else:
                raise TypeError
        except TypeError:
            raise _err(name, v, "must be an int") from None
    if low is not None and v < low:
        raise _err(name, v, f"must be >= {low}")
    return int(v)


def check_fas(p: FasParams) -> None:
    """Raise ``ParamError`` for a call the aclnn layer or op_host's shape/attribute analysis rejects."""
    if p.dtype not in FAS_DTYPES:
        raise _err("query", p.dtype, f"query/key/value dtype must be one of {FAS_DTYPES} "
                   f"[{_ACLNN} InputDtypeCheck / {_GENERAL} AnalyzeDtype]")
    if p.layout not in FAS_LAYOUTS:
        raise _err("input_layout", p.layout, f"must be one of {FAS_LAYOUTS} [{_ACLNN} AnalysisAxis]")
    n1 = _int("head_num", p.n1)
    if n1 <= 0:
        raise _err("head_num", n1, f"must be > 0 [{_ACLNN} AnalysisInput]")
    for name in ("b", "s1", "s2"):
        _int(name, getattr(p, name), 0)
    n2 = _int("n2", p.n2)
    d = _int("d", p.d)
    dv = _int("dv", p.value_dim)
    if d < 1:
        raise _err("query", f"D={d}", "head dim D must be >= 1 (documented range 1..512; op_host "
                   f"AnalyzeLayout refuses D <= 0)", status=_TILING)
    if dv < 1:
        raise _err("value", f"Dv={dv}", "value head dim must be >= 1 (documented)")
    if dv > d:
        raise _err("value", f"Dv={dv}", f"only kD >= vD is supported (qD = kD = {d}) [{_ACLNN} AnalysisAxis]")
    if d > HEAD_DIM_MAX:
        raise _err("query", f"D={d}", f"head dim must be <= {HEAD_DIM_MAX} [{_ACLNN} AnalysisInput; {_GENERAL} "
                   f"AnalyzeLayout HEAD_DIM_MAX_VALUE]")
    if n2 <= 0:
        raise _err("key", f"N2={n2}", f"the kv head count must be > 0 [{_GENERAL} AnalyzeLayout: n2Size is zero]",
                   status=_TILING)
    if n1 % n2:
        raise _err("head_num", n1, f"N1 must be a multiple of N2={n2} [{_GENERAL} AnalyzeLayout]", status=_TILING)
    if n1 > MAX_HEADS:
        raise _err("head_num", n1, f"N must be in 1..{MAX_HEADS} (documented constraint of "
                   f"aclnnFlashAttentionScore*; neither aclnn nor op_host checks it, cvtile refuses)")
    kp = float(p.keep_prob)
    if not 0.0 < kp <= 1.0:
        raise _err("keep_prob", p.keep_prob, f"must be in (0, 1] [{_GENERAL} AnalyzeAttrs]", status=_TILING)
    pse_type = _int("pse_type", p.pse_type)
    if pse_type in (2, 3) and not p.has_pse:
        raise _err("pse_type", pse_type, f"pse types 2/3 generate the alibi from slopes: the pse (slope) tensor "
                   f"is required [{_ACLNN} InputDtypeCheck]")
    if not 0 <= pse_type <= 3:
        raise _err("pse_type", pse_type, f"must be 0, 1, 2 or 3 [{_GENERAL} AnalyzeAttrs PSE_INVALID_TYPE]",
                   status=_TILING)
    if not p.has_pse and pse_type != 1:
        raise _err("pse_type", pse_type, f"without a pse tensor only the default 1 is accepted "
                   f"[{_GENERAL} AnalyzeOptionalInput]", status=_TILING)
    mode = _int("sparse_mode", p.sparse_mode)
    if not 0 <= mode <= 8:
        raise _err("sparse_mode", mode, "must be in 0..8 (documented sparse modes; op_host only reads it with "
                   "an atten_mask, cvtile refuses it always)")
    _int("pre_tockens", p.pre_tokens)
    _int("next_tockens", p.next_tokens)
    _int("inner_precise", p.inner_precise, 0)
    if p.layout == "TND":
        _check_tnd(p)
    elif p.actual_seq_qlen is not None or p.actual_seq_kvlen is not None:
        raise _err("actual_seq_qlen", p.actual_seq_qlen, f"per-batch lengths are for the TND layout, not "
                   f"{p.layout} (cvtile)")


def _check_tnd(p: FasParams) -> None:
    if p.actual_seq_qlen is None or p.actual_seq_kvlen is None:
        missing = "actual_seq_qlen" if p.actual_seq_qlen is None else "actual_seq_kvlen"
        raise _err(missing, None, "the TND layout needs actual_seq_qlen and actual_seq_kvlen "
                   "(aclnnFlashAttentionVarLenScore*)", status=_NULL)
    q = [_int("actual_seq_qlen", v) for v in p.actual_seq_qlen]
    kv = [_int("actual_seq_kvlen", v) for v in p.actual_seq_kvlen]
    if len(q) != len(kv):
        raise _err("actual_seq_kvlen", len(kv), f"must hold as many batches as actual_seq_qlen ({len(q)}) "
                   f"[{_GENERAL} Analyze3DimLayout: VarLen scene, q is not equal kv]", status=_TILING)
    if not q:
        raise _err("actual_seq_qlen", tuple(q), "must hold at least one batch")
    if len(q) > MAX_VAR_LEN_BATCH:
        raise _err("actual_seq_qlen", len(q), f"at most {MAX_VAR_LEN_BATCH} batches (op_host reads them into a "
                   f"fixed array of that size, {_GENERAL} GetActualSeqLenData)", status=_TILING)
    for name, lens in (("actual_seq_qlen", q), ("actual_seq_kvlen", kv)):
        bad = [i for i, v in enumerate(lens) if v < 0]
        if bad:
            raise _err(name, tuple(lens), f"per-batch lengths must be >= 0 (batch {bad[0]}: {lens[bad[0]]})")
    if len(q) != p.b:
        raise _err("b", p.b, f"TND: b must equal the number of per-batch lengths ({len(q)}) (cvtile)")
    if p.s1 < sum(q) or p.s2 < sum(kv):
        which, t, s = ("s1", p.s1, sum(q)) if p.s1 < sum(q) else ("s2", p.s2, sum(kv))
        raise _err(which, t, f"TND: the tensor's T must be >= the sum of the lengths ({s}) "
                   f"[{_GENERAL} Analyze3DimLayout]", status=_TILING)


def _is_need_pad(layout: str, n1: int, n2: int, d: int, dv: int, transposed: bool, q: tuple, kv: tuple,
                 pads: list) -> bool:
    """aclnn ``IsNeedPad``: False exempts the shape from padding (and may clear the pads in ``pads``)."""
    if layout not in ("BNSD", "TND") and n1 == n2 and not transposed:
        if d in (72, 88):
            pads[0] = 0
        if dv in (72, 88):
            pads[1] = 0
        return not (d in (72, 88) and dv in (72, 88))
    if layout == "TND":
        if d >= 96:
            return True
        kv_max = max(kv) if kv else 0
        q_sum = sum(q)
        if kv_max == 0 or q_sum == 0:
            return True
        if kv_max <= 1024 and q_sum < 160 * 1024:
            pads[0] = pads[1] = 0
            return False
    return True


def tiling_view(p: FasParams, aclnn: bool = True) -> FasView:
    """The shape op_host tiles (``check_fas`` must have passed). ``aclnn=False``: the raw shape, no pad."""
    d, dv, layout = p.d, p.value_dim, p.layout
    if layout == "TND":
        q, kv = tuple(int(v) for v in p.actual_seq_qlen), tuple(int(v) for v in p.actual_seq_kvlen)
        s1, s2, t1, t2 = max(q), max(kv), p.s1, p.s2
    else:
        q, kv = (p.s1,) * p.b, (p.s2,) * p.b
        s1, s2, t1, t2 = p.s1, p.s2, p.b * p.s1, p.b * p.s2
    notes = []
    pad_d = pad_v = 0
    transposed = False
    if aclnn:
        align = 16 if (d < 196 or d == 448) else 128
        need_pad = False
        pads = [0, 0]
        if d % align or dv % align:
            need_pad = True
            pads = [-(-d // align) * align - d, -(-dv // align) * align - dv]
        if d != dv and d in (88, 64, 80):
            need_pad = True
            pads[1] = pads[0] + d - dv
        h1 = p.n1 * (d + pads[0])
        if layout in ("BSH", "BSND") and h1 > _MAX_STRIDE_S1 or layout == "SBH" and p.b * h1 > _MAX_STRIDE_S1:
            transposed = True
            notes.append(f"{layout} -> BNSD: the query row stride {h1 if layout != 'SBH' else p.b * h1} exceeds "
                         f"{_MAX_STRIDE_S1} [{_ACLNN} SetShapeInfoForBshBsnd/SetShapeInfoForSbh]")
        if not _is_need_pad(layout, p.n1, p.n2, d, dv, transposed, q, kv, pads):
            need_pad = False
        if d != dv and not _supports_d_ne_dv(layout, p.dtype, d, pads[0], s2):
            need_pad = True
            pads[1] = pads[0] + d - dv
            notes.append(f"Dv {dv} padded to D {d + pads[0]}: the template this shape takes needs D == Dv "
                         f"[{_ACLNN} isSupportMLA]")
        if need_pad and (pads[0] or pads[1]):
            pad_d, pad_v = pads
            notes.append(f"head dims zero-padded: D {d} -> {d + pad_d}, Dv {dv} -> {dv + pad_v} "
                         f"[{_ACLNN} AnalysisInput/IsNeedPad]")
        if transposed:
            layout = "BNSD"
    return FasView(layout=layout, dtype=p.dtype, b=p.b, n1=p.n1, n2=p.n2, g=p.n1 // p.n2, s1=s1, s2=s2,
                   d=d + pad_d, dv=dv + pad_v, q_lens=q, kv_lens=kv, t1=t1, t2=t2, pad_d=pad_d, pad_dv=pad_v,
                   transposed=transposed, notes=tuple(notes))


def _supports_d_ne_dv(layout: str, dtype: str, d: int, pad_d: int, s2: int) -> bool:
    """aclnn ``isSupportMLA``: the templates that take D != Dv (TND, SameAB, S2 > 1024)."""
    if layout == "TND":
        return True
    if dtype != "float32" and (((d + pad_d) % 16 or d == 96) and s2 >= 512 or s2 > 1024 and 128 < d < 196):
        return True
    return s2 > 1024
