"""FlashAttentionScore arch22 template route: which op_host template tiles the call, its block sizes and flags.

Model
-----
``flash_attention_score_tiling.cpp`` (``TilingFlashAttentionScore``) first takes the empty-tensor path (query
or key empty while an output is not: keys 90/92/94), then runs the registry (``TilingRegistryNew::
DoTilingImpl``): templates in priority order, each doing ``GetShapeAttrsInfo`` -> ``IsCapable`` ->
``DoOpTiling``; a template answering ``GRAPH_PARAM_INVALID`` passes to the next, any other failure ends the
tiling. The templates of ``flash_attention_score_tiling_general.cpp`` (registered for ASCEND910B and
ASCEND910_93):

==== ============================ =====================================================================
prio template (cvtile name)       taken when
==== ============================ =====================================================================
90   DropMask                     never final: fills the drop-mask conversion pass when a drop mask is
                                  given and S2 % 8 != 0 (TND: or B > 1), then passes on
94   VarLen                       TND; SameAB flavour (split per AIC, key UB1 NONE) when B >= 4 with both
                                  token sums >= 8192 and max S1, S2 >= 512, or max S1, S2 > 5120 (not
                                  fp32, not N1 = N2 = 1, not inner_precise 2)
95   S1s2Bn2gs1SameAB             not fp32 and (D % 16 != 0 or D == 96, S2 >= 512) or (S2 > 1024,
                                  128 < D < 196) or (D == 64, S2 % 64 != 0, 2048 < S2 < 18432)
96   S1s2Bn2gs1                   S2 > 1024
97   S1Bn2gs1                     S2 <= 1024 and (S2 > 128 or the operands do not fit L1 or the
                                  N2*G*S1*S2 score block exceeds 128 KiB)
98   Bn2gs1s2_B                   aligned S2 <= 128 and N2*G*S1*S2 (aligned) <= 128 KiB
==== ============================ =====================================================================

Block sizes (``CalcS1S2BasicBlock`` / ``CalcNRatio`` / ``SetCoreParams`` of each class): S1s2 s1 64, or 128
when B*N1*G*ceil(S1/64) exceeds the AIV count (op_host multiplies by N1 *and* G), s2 128, nRatio 8 (5 when
S2 is 8 blocks plus at most 16, 6 for BNSD D 64 with S2 in [2049, 2304]) capped at the S2 block count;
SameAB s1 256 (384 with the "best block" on a > 96 MiB L2, S1 > 2048, not BSH/BSND), s2 128; VarLen s1 128
(256/512 for > 10000 query tokens with max S2 < 1024, 256 with a mask or SameAB), s2 128, nRatio 8 (4 on a
<= 96 MiB L2 SameAB D 128 with >= 48000 tokens); S1Bn2gs1 s1 128 times the N:1 ratio (grown while the
cores stay busy, never for a sparse call), s2 128, the whole S2 range per S1 block; B: s2 = aligned S2, s1 =
8 KiB / s2 (<= 256), whole batches per core.

Tiling key (:mod:`.fas_key`): UB0/UB1/Block = (S1, S2, NONE) S1s2 and non-SameAB VarLen, (S1, NONE, NONE)
SameAB, (S1, D, NONE) S1Bn2gs1, (NONE, NONE, B) B; ImplMode 2 for inner_precise 2 or the invalid-line cases
of :mod:`.fas_sparse`; DataType fp16 3 (FLOAT16_PRECISION, op_host's default), fp32 1, bf16 2; Layout
BSH/BSND 1, SBH 2, BNSD 3, TND 4; Bmm1Format NZ for S1s2 (S2 % 64 != 0, D != 64), SameAB (S2 % 64 != 0)
and dense S1Bn2gs1 (S2 % 64 != 0 or S2 == 64 or a large 64-but-not-128-aligned S2); Bmm2Source L1 for dense
S1Bn2gs1 with aligned S2 in [512, 1024], S1 <= 3840, aligned D 64; Sparse ANY (B: NONE); the drop / mask /
pse presence flags; EnableL1Reuse (``SetEnableL1Reuse`` of S1s2 and S1Bn2gs1); MatmulPolicy UNSPLITK for
SameAB BNSD D 192 with S1, S2 multiples of 128; S1/S2/D template types (``SetScalarConst``) for bf16 B /
S1Bn2gs1 without mask, pse and dropout. The last need the matmul API's base M/N/K, which cvtile cannot run:
cvtile assumes bmm1 = (s1 basic, s2 basic, aligned D) and bmm2 K = s2 basic (every K fits L0), which
reproduces the six scalar-constant cases of the op_host unit tests.

Invariants
----------
* ``route`` either returns a plan or raises ``ParamError`` (561002 where op_host fails: a refused sparse
  setting, an inner pse with S1 != S2, no template).
* A plan's ``decisions`` name every choice with the op_host function that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .errors import AclnnStatus, ParamError
from .fas_key import AXIS, EMPTY_TENSOR_KEYS, encode_fas_key
from .fas_params import FasParams, FasView
from .fas_sparse import ALL, ANY, BAND, CAUSAL, NONE, PREFIX, RIGHT_DOWN_CAUSAL_BAND, SparseInfo, cdiv, \
    fixed_loads, normalise_sparse, prefix_loads, varlen_loads
from .platform import Platform
from .result import Decision

__all__ = ["FasPlan", "route", "TEMPLATE_PRIORITY"]

TEMPLATE_PRIORITY = {"DropMask": 90, "VarLen": 94, "S1s2Bn2gs1SameAB": 95, "S1s2Bn2gs1": 96, "S1Bn2gs1": 97,
                     "Bn2gs1s2_B": 98, "EmptyTensor": None, "Empty": None}
_SRC = "flash_attention_score_tiling_general.cpp"
_ROUTER = "flash_attention_score_tiling.cpp"
_DTYPE_KEY = {"float16": 3, "float32": 1, "bfloat16": 2}
_LAYOUT_KEY = {"BSH": 1, "BSND": 1, "SBH": 2, "BNSD": 3, "TND": 4}
_MAX_AIC, _MAX_AIV = 24, 48           # MAX_AIC_NUM / MAX_AIV_NUM: the split arrays' sizes
_B96MB = 96 * 1024 * 1024             # B4_L2_CACHESIZE
_WORKSPACE_LIMIT = 131072             # S1Bn2gs1 workspaceLimit (8*128*128)


def _a16(x: int) -> int:
    return -(-x // 16) * 16


@dataclass
class FasPlan:
    """What op_host decided for one call, before the core split (see :mod:`.fas_split`)."""

    template: str
    priority: int | None
    view: FasView
    sparse: SparseInfo
    impl_mode: int = 0
    same_ab: bool = False
    s1_basic: int = 0
    s2_basic: int = 0
    s1_base: int = 0                  # coreParams.s1BaseSize: rows of one S1 block (cube rows for SameAB)
    s2_base: int = 0                  # coreParams.s2BaseSize
    n_ratio: int = 1                  # S2 blocks per loop step (s1s2 families) / S1 ratio (S1Bn2gs1)
    s1_outer: int = 0                 # S1 blocks per (b, n1) (fixed lengths)
    total: int = 0                    # multiCoreParams.totalSize
    core_num: int = 0                 # multiCoreParams.coreNum (AIV units; SameAB: 2 x AIC)
    split_factor: int = 0
    split_unit: str = "aiv"           # what the split balances over: "aiv" or "aic"
    balanced: bool = False            # the kernel reads sparseStartIdx (else contiguous split_factor runs)
    l1_reuse: bool = False
    l1_pairs: str = ""                # "row" (S1s2: alternate within each (b, n1) row), "flat" (S1Bn2gs1)
    bmm1_nz: bool = False
    bmm2_l1: bool = False
    matmul_policy: int = 0
    scalar_types: tuple = (0, 0, 0)
    loads: list | None = None         # per S1 block (fixed non-prefix), per batch (prefix), flat (varlen)
    max_valid_s2_len: int = 0
    drop_mask_pass: bool = False
    has_drop: bool = False
    block_dim: int = 0
    tiling_key: int | None = None
    key_fields: dict = field(default_factory=dict)
    decisions: list = field(default_factory=list)

    def decide(self, what, value, rule):
        self.decisions.append(Decision(what, value, rule))
        return value


def _fail(param, value, rule):
    return ParamError(param, value, rule, status=AclnnStatus.INNER_TILING_ERROR, checker="fas")


def route(p: FasParams, v: FasView, plat: Platform) -> FasPlan:
    """Run the router and the template registry (see the module doc)."""
    q_size = (v.t1 if v.tnd else v.b * v.s1) * v.n1 * v.d
    k_size = (v.t2 if v.tnd else v.b * v.s2) * v.n2 * v.d
    out_size = (v.t1 if v.tnd else v.b * v.s1) * v.n1
    dummy = SparseInfo(ALL, int(p.pre_tokens), int(p.next_tokens), 0, 0)
    if out_size == 0:
        plan = FasPlan("Empty", None, v, dummy)
        plan.decide("template", "Empty", "B, N1 or S1 is 0: every output is empty and the aclnn layer returns "
                    "before launching anything (aclnnFlashAttentionScoreGetWorkspaceSize)")
        return plan
    if q_size == 0 or k_size == 0:
        plan = FasPlan("EmptyTensor", None, v, dummy)
        plan.decide("template", "EmptyTensor", f"query or key is empty while the outputs are not: the zero-fill "
                    f"kernel [{_ROUTER} IsEmptyInput]")
        plan.tiling_key = plan.decide("tiling_key", EMPTY_TENSOR_KEYS[v.dtype], "90 fp16 / 92 fp32 / 94 bf16 "
                                      f"[{_ROUTER} GetTilingKeyAttentionScore4EmptyInput]")
        return plan
    if v.s1 == 0:
        raise _fail("actual_seq_qlen", v.q_lens, f"every query length is 0 while the query tensor has rows: "
                    f"aligned S1 is 0 [{_SRC} GetShapeAttrsInfo: invalid alignedS1]")
    sp = normalise_sparse(p, v)
    drop = bool(p.has_drop_mask)
    need_drop_op = drop and (v.s2 % 8 != 0 or (v.tnd and v.b > 1))
    impl = 2 if int(p.inner_precise) == 2 else 0
    dec = [Decision("sparse", sp.name, sp.rule)]
    if drop:
        dec.append(Decision("drop mask pass (prio 90)", need_drop_op,
                            "DropMask template: the bit mask is converted to bytes first when S2 % 8 != 0 (TND: "
                            "or B > 1); the template always passes on to the next [" + _SRC +
                            " FlashAttentionScoreTilingDropMask::DoOpTiling]"))
    if p.has_sink:
        dec.append(Decision("sink", "ignored", "the arch22 op_host has no sink input "
                            "(flash_attention_score_def.cpp); the tiling is that of the call without it"))
    if float(p.keep_prob) < 1.0 and not drop:
        dec.append(Decision("dropout", "not in the tiling", "keep_prob < 1 without a drop mask tensor: op_host "
                            "keys dropout on the mask's presence (AnalyzeOptionalInput dropMaskExistFlag)"))
    for note in v.notes:
        dec.append(Decision("aclnn", "preprocess", note))
    _check_pse(p, v, sp)
    if v.tnd:
        plan = _varlen(p, v, sp, plat, impl)
    else:
        plan = None
        for fn in (_same_ab, _s1s2, _s1, _b):
            plan = fn(p, v, sp, plat, impl)
            if plan is not None:
                break
        if plan is None:
            raise _fail("s2", v.s2, "no template matches [registry DoTilingImpl: no valid template is found]")
    plan.decisions[:0] = dec
    plan.drop_mask_pass = need_drop_op
    plan.has_drop = drop
    if sp.invalid_line:
        plan.impl_mode = 2
    plan.decide("impl_mode", plan.impl_mode, "2 (invalid-line high precision) for inner_precise 2 or a sparse "
                "setting with rows that see no key (EnableBandInvalidLineImplMode / GetPrefixNList); else 0")
    _key(p, v, plan)
    groups = plat.aic if need_drop_op else -(-plan.core_num // (plat.aiv // plat.aic))
    plan.block_dim = plan.decide("block_dim", groups, "CalcTschBlockDim(coreNum): AIC groups launched (all of "
                                 "them when the drop-mask pass runs) [PostTiling]")
    return plan


def _check_pse(p: FasParams, v: FasView, sp: SparseInfo) -> None:
    if not p.has_pse or p.pse_type not in (2, 3):
        return
    if not v.tnd:
        if v.s1 != v.s2:
            raise _fail("pse_type", p.pse_type, f"an inner (generated alibi) pse needs S1 == S2 (S1 {v.s1}, S2 "
                        f"{v.s2}) [{_SRC} SetPseAlibiParams]")
        return
    if sp.sparse_type == RIGHT_DOWN_CAUSAL_BAND:
        raise _fail("pse_type", p.pse_type, f"an inner pse is not supported with sparse_mode 7 [{_SRC} "
                    f"FlashAttentionVarLenScoreTiling::SetPseAlibiParams]")
    if p.sparse_mode == 8 and p.has_mask:
        if any(q != k for q, k in zip(v.q_lens, v.kv_lens)):
            raise _fail("actual_seq_kvlen", v.kv_lens, f"an inner pse with sparse_mode 8 needs equal query and "
                        f"key lengths per batch [{_SRC} FlashAttentionVarLenScoreTiling::SetPseAlibiParams]")


# ---- the templates ------------------------------------------------------------------------------------------
def _core_params(plan: FasPlan, v: FasView, n_ratio: int) -> None:
    """Base ``SetCoreParams`` of the S2-splitting templates (S1 outer size, nRatio capped at the S2 blocks)."""
    plan.s1_base, plan.s2_base = plan.s1_basic, plan.s2_basic
    plan.s1_outer = cdiv(v.s1, plan.s1_basic)
    plan.n_ratio = min(n_ratio, cdiv(v.s2, plan.s2_basic))


def _fixed_sparse_split(plan: FasPlan, v: FasView, sp: SparseInfo, valid_cores: int) -> None:
    """Base ``SetSparseParams``: the loads and whether the kernel reads sparseStartIdx."""
    if sp.sparse_type == ALL:
        return
    plan.balanced = True
    if sp.sparse_type == PREFIX:
        plan.loads = [prefix_loads(sp, b, plan.s1_outer, plan.s1_base, plan.s2_basic, v.s1, v.s2) for b in range(v.b)]
        rule = "SetPrefixSparseStartIdx: greedy runs of about total/cores, per-batch prefix loads"
    else:
        plan.loads, plan.max_valid_s2_len = fixed_loads(sp, plan.s1_outer, plan.s1_basic, plan.s2_basic, v.s2)
        rule = "SetSparseStartIdx: binary search on the largest per-core load, greedy contiguous partition"
    plan.decide("core split", f"balanced over {valid_cores} {plan.split_unit.upper()}", rule)


def _s1s2_bases(plan: FasPlan, v: FasView, five: bool, s1_rule: str) -> None:
    """``CalcNRatio`` of the S1s2 families (8; 5 for S2 = 8 blocks plus at most 16 when ``five``; 6 for BNSD D 64
    with S2 in [2049, 2304]) and the base ``SetCoreParams``, with their decisions."""
    n_ratio = 8
    if five and v.s2 // plan.s2_basic == 8 and 0 < v.s2 % plan.s2_basic <= 16:
        n_ratio = 5
    if 2049 <= v.s2 <= 2304 and v.d == 64 and v.layout == "BNSD":
        n_ratio = 6
    _core_params(plan, v, n_ratio)
    plan.decide("s1_base", plan.s1_basic, s1_rule)
    plan.decide("s2_base", plan.s2_basic, "min(128, aligned S2)")
    plan.decide("n_ratio", plan.n_ratio, f"S2 blocks per loop step: {n_ratio} capped at the S2 block count "
                "(CalcNRatio, SetCoreParams)")


def _same_ab(p, v: FasView, sp: SparseInfo, plat: Platform, impl: int) -> FasPlan | None:
    if v.dtype == "float32":
        return None
    best = policy = False
    why = None
    if (v.d % 16 or v.d == 96) and v.s2 >= 512:
        why = f"D {v.d} (not a multiple of 16, or 96) with S2 {v.s2} >= 512"
        best = v.s1 > 2048 and _LAYOUT_KEY[v.layout] != 1 and plat.l2 > _B96MB
    elif v.s2 > 1024 and 128 < v.d < 196:
        why = f"S2 {v.s2} > 1024 with 128 < D {v.d} < 196"
        policy = v.d == 192 and v.s1 % 128 == 0 and v.s2 % 128 == 0 and v.layout == "BNSD"
    elif v.d == 64 and v.s2 % 64 and 2048 < v.s2 < 18432:
        why = f"D 64 with S2 {v.s2} not a multiple of 64 in (2048, 18432)"
    if why is None:
        return None
    plan = FasPlan("S1s2Bn2gs1SameAB", 95, v, sp, impl_mode=impl, same_ab=True, split_unit="aic")
    plan.decide("template", plan.template, f"prio 95: {why} [{_SRC} FlashAttentionScoreTilingS1s2Bn2gs1SameAB::"
                "IsCapable]")
    a1, a2 = _a16(v.s1), _a16(v.s2)
    s1_best = 384 if best and cdiv(a1, 384) < cdiv(a1, 256) else 256
    plan.s1_basic, plan.s2_basic = min(s1_best, a1), min(128, a2)
    plan.bmm1_nz = v.s2 % 64 != 0
    plan.matmul_policy = 1 if policy else 0
    _s1s2_bases(plan, v, best, f"min({s1_best}, aligned S1) cube rows; each AIV takes half "
                f"({'best block: ' if best else ''}CalcS1S2BasicBlock)")
    plan.total = v.b * v.n2 * v.g * plan.s1_outer
    used = min(plan.total, plat.aic)
    plan.split_factor = cdiv(plan.total, used)
    used = cdiv(plan.total, plan.split_factor)
    plan.core_num = 2 * used
    plan.decide("core split", f"{used} AIC x {plan.split_factor} S1 blocks", "contiguous runs of ceil(B*N2*G*S1o / "
                "AIC) S1 blocks per AIC (SameAB SetMultiCoreParams)")
    _fixed_sparse_split(plan, v, sp, min(plan.core_num // 2, _MAX_AIC))
    return plan


def _s1s2(p, v: FasView, sp: SparseInfo, plat: Platform, impl: int) -> FasPlan | None:
    if v.s2 <= 1024:
        return None
    plan = FasPlan("S1s2Bn2gs1", 96, v, sp, impl_mode=impl)
    plan.decide("template", plan.template, f"prio 96: S2 {v.s2} > 1024 [{_SRC} FlashAttentionScoreTilingS1s2Bn2gs1"
                "::IsCapable]")
    a1, a2 = _a16(v.s1), _a16(v.s2)
    s1b = min(64, a1)
    big = v.b * v.n1 * v.g * cdiv(v.s1, s1b) > plat.aiv
    plan.s1_basic = min(128, a1) if big else s1b
    plan.s2_basic = min(128, a2)
    plan.bmm1_nz = v.s2 % 64 != 0 and v.d != 64
    _s1s2_bases(plan, v, True, f"64, or 128 when B*N1*G*ceil(S1/64) = {v.b * v.n1 * v.g * cdiv(v.s1, s1b)} "
                f"exceeds the {plat.aiv} AIV (op_host counts G twice) [CalcS1S2BasicBlock]")
    plan.total = v.b * v.n2 * v.g * plan.s1_outer
    plan.core_num = min(plan.total, plat.aiv)
    plan.split_factor = cdiv(plan.total, plan.core_num)
    _fixed_sparse_split(plan, v, sp, min(plan.core_num, _MAX_AIV))
    plan.l1_reuse, why = _s1s2_l1_reuse(v, sp, plan.max_valid_s2_len)
    plan.decide("l1_reuse", plan.l1_reuse, why + " [S1s2Bn2gs1 SetEnableL1Reuse]")
    if plan.l1_reuse:
        plan.l1_pairs = "row"
        plan.split_factor = cdiv(plan.total, plan.core_num) * 2
        plan.decide("core split", f"AIV pairs x {plan.split_factor} S1 blocks" if not plan.balanced else "AIV pairs",
                    "L1 reuse: the two AIV of an AIC share one run and take alternate S1 blocks of each (b, n1) "
                    "row, the even AIV's S2 loop running to its partner's end (RefreshSplitFactor; kernel "
                    "Process/GetS2LoopRange)")
    elif not plan.balanced:
        plan.decide("core split", f"{cdiv(plan.total, plan.split_factor)} AIV x {plan.split_factor} S1 blocks",
                    "contiguous runs of ceil(B*N2*G*S1o / AIV) S1 blocks (SetMultiCoreParams)")
    return plan


def _s1s2_l1_reuse(v: FasView, sp: SparseInfo, max_valid: int) -> tuple[bool, str]:
    t = sp.sparse_type
    bng = v.b * v.n1 * v.g
    if v.dtype == "float32":
        return False, "fp32: off"
    if v.d > 128:
        return False, f"D {v.d} > 128: off"
    if v.d == 64 and v.layout == "BNSD" and not (v.s2 % 256 == 0 or v.s2 == 4032) and v.s2 != 42192:
        return False, "BNSD D 64 with S2 not a multiple of 256: off"
    if t == ALL:
        return True, "dense: on"
    if v.layout in ("BSND", "BSH") and v.s2 <= 2048 and v.d <= 64 and v.b * v.n1 <= 10:
        return False, "BSH/BSND, S2 <= 2048, D <= 64, B*N1 <= 10: off"
    if t in (CAUSAL, PREFIX):
        if bng <= 10 and v.s2 <= 2048:
            return False, f"causal/prefix with B*N1*G {bng} <= 10 and S2 <= 2048: off"
        return True, "causal/prefix: on"
    if t == BAND:
        if bng <= 10 and max_valid <= 2048 or max_valid <= 1024:
            return False, f"band with maxValidS2Len {max_valid} (B*N1*G {bng}): off"
        return True, f"band with maxValidS2Len {max_valid}: on"
    return False, f"sparse type {sp.name}: off"


def _s1(p, v: FasView, sp: SparseInfo, plat: Platform, impl: int) -> FasPlan | None:
    a1, a2, ad = _a16(v.s1), _a16(v.s2), _a16(v.d)
    nbytes = 4 if v.dtype == "float32" else 2
    ng = v.n2 * v.g
    if v.s2 > 1024:
        return None
    if v.s2 <= 128:
        big_l1 = ng * ((a1 + a2) * ad + a2) * nbytes >= plat.l1 or ng * (a1 + ad) * a2 * nbytes >= plat.l1
        if not big_l1 and ng * a1 * a2 * nbytes <= 65536 * 2:
            return None
        why = "the operands exceed L1" if big_l1 else "the N2*G*S1*S2 score block exceeds 128 KiB"
    else:
        why = f"128 < S2 {v.s2} <= 1024"
    plan = FasPlan("S1Bn2gs1", 97, v, sp, impl_mode=impl)
    plan.decide("template", plan.template, f"prio 97: {why} [{_SRC} FlashAttentionScoreTilingS1Bn2gs1::"
                "IsTemplateMatched]")
    plan.s1_basic, plan.s2_basic = min(128, a1), min(128, a2)
    sparse = sp.sparse_type != ALL
    # SetEnableL1Reuse
    aic_ratio, ratio_max = 1, 4
    if nbytes == 2:
        bng = v.b * v.n2 * v.g
        if v.s2 >= 512 and bng > 64 and v.d <= 128 or bng >= 4800 and v.s2 == 256 and v.d == 144:
            plan.l1_reuse, aic_ratio = True, 2
        if 512 <= a2 <= 1024 and v.s1 <= 3840 and ad == 64 and not sparse:
            plan.bmm2_l1, plan.l1_reuse, aic_ratio = True, False, 1
            if a2 == 512:
                ratio_max = 1
    plan.decide("l1_reuse", plan.l1_reuse, "S2 >= 512, B*N2*G > 64, D <= 128 (or B*N2*G >= 4800, S2 256, D 144), "
                "not fp32, unless the bmm2-from-L1 rule takes over [S1Bn2gs1 SetEnableL1Reuse]")
    if plan.bmm2_l1:
        plan.decide("bmm2 source", "L1", "aligned S2 in [512, 1024], S1 <= 3840, aligned D 64, dense: V stays in L1")
    s1o_basic = cdiv(v.s1, plan.s1_basic)
    ratio = 1

    def multi(r):
        return v.b * v.n2 * v.g * cdiv(s1o_basic, r)

    total = v.b * v.n2 * v.g * s1o_basic
    if not sparse:
        if a2 < 128:
            ratio_max = 1
        if v.s2 % 64 != 0 or v.s2 == 64 or (v.s2 >= 704 and v.s2 % 64 == 0 and v.s2 % 128 != 0 and
                                             v.b * v.n2 * v.g * v.s1 > 20480):
            if v.d <= 256:
                ratio_max = 4
            plan.bmm1_nz = True
        aiv = plat.aiv
        while (ratio < ratio_max and total > (ratio - 1) * aiv // ratio and plan.s1_basic * ratio < a1 and
               ratio * plan.s1_basic * a2 <= _WORKSPACE_LIMIT):
            ratio += 1
            total = multi(ratio)
        while (total <= (ratio - 1) * aiv // ratio or plan.s1_basic * ratio > a1 or
               ratio * plan.s1_basic * a2 > _WORKSPACE_LIMIT):
            ratio -= 1          # op_host does not recompute the total here
    plan.n_ratio = ratio
    plan.s1_base, plan.s2_base = plan.s1_basic * ratio, plan.s2_basic
    plan.s1_outer = cdiv(s1o_basic, ratio)
    plan.decide("s1_base", plan.s1_base, f"128 x S1 ratio {ratio} (N:1 grown while B*N2*G*S1o keeps the AIV busy, "
                f"at most {ratio_max}, {'off for a sparse call' if sparse else 'dense'}) [S1Bn2gs1 SetCoreParams]")
    plan.decide("s2_base", plan.s2_base, "min(128, aligned S2); the kernel computes the whole S2 range of an S1 "
                "block in one bmm1")
    plan.total = v.b * v.n2 * v.g * plan.s1_outer
    plan.core_num = min(plan.total, plat.aiv)
    plan.split_factor = cdiv(plan.total, plan.core_num) * aic_ratio
    if plan.l1_reuse:
        plan.l1_pairs = "flat"
    if not sparse:
        used = cdiv(plan.total, plan.split_factor // aic_ratio)
        if plan.l1_reuse and used % 2:
            used += 1
        plan.core_num = min(plat.aiv, used)
        plan.decide("core split", f"{plan.core_num} AIV, runs of {plan.split_factor} S1 blocks",
                    "contiguous runs of ceil(B*N2*G*S1o / AIV) S1 blocks" + (" shared by an AIV pair taking "
                    "alternate blocks (L1 reuse)" if plan.l1_reuse else "") + " [SetMultiCoreParams, "
                    "GetWorkspaceSize]")
    _fixed_sparse_split(plan, v, sp, min(plan.core_num, _MAX_AIV))
    _scalar_const(plan, p, v, "S1Bn2gs1")
    return plan


def _b(p, v: FasView, sp: SparseInfo, plat: Platform, impl: int) -> FasPlan | None:
    a1, a2 = _a16(v.s1), _a16(v.s2)
    nbytes = 4 if v.dtype == "float32" else 2
    if a2 > 128 or v.n2 * v.g * a1 * a2 * nbytes > 65536 * 2:
        return None
    plan = FasPlan("Bn2gs1s2_B", 98, v, replace(sp, sparse_type=ALL) if sp.sparse_type != ALL else sp,
                   impl_mode=impl)
    plan.decide("template", plan.template, f"prio 98: aligned S2 {a2} <= 128 and the N2*G*S1*S2 block fits 128 KiB "
                f"[{_SRC} FlashAttentionScoreTilingB::IsCapable]")
    if sp.sparse_type != ALL:
        plan.decide("sparse (template)", "ALL", "the B template does not split S2: the sparse type is reset and the "
                    "mask is applied element-wise (SetSparseParams)")
    plan.s2_basic = a2
    plan.s1_basic = min(8192 // a2 // 16 * 16, a1, 256)
    plan.s1_base, plan.s2_base, plan.n_ratio = plan.s1_basic, plan.s2_basic, 1
    plan.s1_outer = cdiv(v.s1, plan.s1_basic)
    plan.decide("s1_base", plan.s1_base, "8 KiB / aligned S2, at most 256 and aligned S1 (vector rows; bmm1 covers "
                "all heads and the full S1 of a batch) [FlashAttentionScoreTilingB::CalcS1S2BasicBlock]")
    plan.decide("s2_base", plan.s2_base, "aligned S2 (one block)")
    plan.total = v.b
    used = min(v.b, plat.aiv)
    plan.split_factor = cdiv(v.b, used)
    plan.core_num = cdiv(v.b, plan.split_factor)
    plan.decide("core split", f"{plan.core_num} AIV x {plan.split_factor} batches", "whole batches per AIV "
                "(FlashAttentionScoreTilingB::SetMultiCoreParams)")
    _scalar_const(plan, p, v, "B")
    return plan


_SCALAR_LISTS = {
    "S1Bn2gs1": ((128, 128, 80), (128, 128, 96), (128, 128, 128)),
    "B": ((16, 16, 80), (32, 32, 80), (48, 48, 80), (64, 64, 80), (16, 16, 96), (32, 32, 96)),
}
_S_TYPE = {16: 1, 32: 2, 48: 3, 64: 4, 80: 5, 96: 6, 112: 7, 128: 8}
_D_TYPE = {80: 5, 96: 6, 128: 8}


def _scalar_const(plan: FasPlan, p: FasParams, v: FasView, which: str) -> None:
    """``SetScalarConst`` under cvtile's matmul-base assumption (module doc)."""
    ad = _a16(v.d)
    if v.dtype != "bfloat16" or p.has_mask or p.has_pse or plan.has_drop or p.has_drop_mask or ad > 128:
        return
    if which == "B" and _LAYOUT_KEY[v.layout] != 1:
        return
    if which == "S1Bn2gs1":
        if not (_LAYOUT_KEY[v.layout] == 1 or v.layout == "SBH" and ad == 96) or plan.l1_reuse:
            return
        if v.s1 == v.s2 and v.s2 >= 928 and v.d == 64:
            return
    base = (plan.s1_basic, plan.s2_basic, ad)
    if base in _SCALAR_LISTS[which]:
        plan.scalar_types = (_S_TYPE[base[0]], _S_TYPE[base[1]], _D_TYPE[base[2]])
        plan.decide("scalar-constant matmul", base, "bf16 without mask/pse/dropout: the bmm base (M, N, K) matches "
                    f"a constant-tiling entry (SetScalarConst; base assumed = (s1, s2, aligned D))")


def _varlen(p, v: FasView, sp: SparseInfo, plat: Platform, impl: int) -> FasPlan:
    q_sum, kv_sum = sum(v.q_lens), sum(v.kv_lens)
    same_ab = (v.b >= 4 and q_sum >= 8192 and kv_sum >= 8192 and v.s1 >= 512 and v.s2 >= 512) or \
        (v.s2 > 5120 and v.s1 > 5120)
    if v.dtype == "float32" or (v.n1 == 1 and v.n2 == 1) or impl == 2:
        same_ab = False
    plan = FasPlan("VarLen", 94, v, sp, impl_mode=impl, same_ab=same_ab, split_unit="aic" if same_ab else "aiv")
    plan.decide("template", plan.template + (" (SameAB)" if same_ab else ""), "prio 94: TND; SameAB when B >= 4 with "
                "both token sums >= 8192 and max S1, S2 >= 512, or max S1, S2 > 5120 (not fp32, N1 = N2 = 1 or "
                f"inner_precise 2) [{_SRC} FlashAttentionVarLenScoreTiling::IsCapable]")
    a1, a2 = _a16(v.s1), _a16(v.s2)
    best = 128
    if q_sum > 10000 and v.s2 < 1024 and p.sparse_mode != 6:
        mid = sum(1 for kv in v.kv_lens if 512 <= kv < 1024)
        best = 256 if mid * 2 >= v.b or v.b >= 5 else 512
    if same_ab:
        plan.s1_basic = min(256, a1)
    else:
        plan.s1_basic = min(best, a1)
        if p.has_mask:
            plan.s1_basic = min(256, plan.s1_basic)
    plan.s2_basic = min(128, a2)
    n_ratio = 4 if plat.l2 <= _B96MB and same_ab and _a16(v.d) == 128 and v.t1 >= 48000 else 8
    _core_params(plan, v, n_ratio)
    if same_ab:
        rule = "SameAB: min(256, aligned max S1) cube rows, each AIV takes half"
    else:
        rule = (f"min(s1BasicBlockBest {best}, aligned max S1){', at most 256 with a mask' if p.has_mask else ''}; "
                "the best block is 256/512 for > 10000 query tokens with max S2 < 1024")
    plan.decide("s1_base", plan.s1_basic, rule + " [Analyze3DimLayout, CalcS1S2BasicBlock]")
    plan.decide("s2_base", plan.s2_basic, "min(128, aligned max S2)")
    plan.decide("n_ratio", plan.n_ratio, f"S2 blocks per loop step: {n_ratio} capped at the S2 block count (GetNRatio)")
    blocks = sum(cdiv(q, plan.s1_basic) for q in v.q_lens)
    plan.total = blocks * v.n2 * v.g
    used_aiv, used_aic = min(plan.total, plat.aiv), min(plan.total, plat.aic)
    plan.core_num = 2 * used_aic if same_ab else used_aiv
    plan.split_factor = cdiv(plan.total, used_aic if same_ab else used_aiv)
    plan.balanced = True
    plan.loads = varlen_loads(sp, v, plan.s1_basic)
    unit = "AIC" if same_ab else "AIV"
    plan.decide("core split", f"balanced over {used_aic if same_ab else used_aiv} {unit}", "always load-balanced: an "
                "even split, a greedy pass and BalanceLoad refinements, the better of even and refined kept "
                "(varlen SetSparseStartIdx) with GetS2RealSize/COF loads")
    return plan


def _key(p: FasParams, v: FasView, plan: FasPlan) -> None:
    t = plan.template
    ub = {"S1s2Bn2gs1": ("S1", "S2", "NONE"), "S1s2Bn2gs1SameAB": ("S1", "NONE", "NONE"),
          "S1Bn2gs1": ("S1", "D", "NONE"), "Bn2gs1s2_B": ("NONE", "NONE", "B"),
          "VarLen": ("S1", "NONE" if plan.same_ab else "S2", "NONE")}[t]
    fields = {"KernelTypeKey": 0, "UB0": AXIS[ub[0]], "UB1": AXIS[ub[1]], "Block": AXIS[ub[2]],
              "ImplMode": plan.impl_mode, "DataType": _DTYPE_KEY[v.dtype], "Layout": _LAYOUT_KEY[v.layout],
              "Bmm1Format": int(plan.bmm1_nz), "Bmm2Source": int(plan.bmm2_l1),
              "Sparse": NONE if t == "Bn2gs1s2_B" else ANY, "BigDoubleBuffer": 2, "HasDropOut": int(plan.has_drop),
              "HasAttenMask": int(p.has_mask), "HasPse": int(p.has_pse), "EnableL1Reuse": int(plan.l1_reuse),
              "HasRope": 0, "MatmulPolicyType": plan.matmul_policy, "S1TemplateType": plan.scalar_types[0],
              "S2TemplateType": plan.scalar_types[1], "DTemplateType": plan.scalar_types[2]}
    plan.key_fields = fields
    named = ", ".join(f"{k} {x}" for k, x in fields.items() if x)
    plan.tiling_key = plan.decide("tiling_key", encode_fas_key(fields), f"GET_TPL_TILING_KEY of the template's "
                                  f"GetTilingKey (fields: {named})")
