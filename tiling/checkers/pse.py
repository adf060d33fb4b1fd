"""FIA checker family "pse": pse_type and the pse_shift tensor.

Rules (op_host pse checker)
---------------------------
single_para
  * pse_type must be 0 (an external shift added after scaling).
cross_feature (with a non-empty pse_shift)
  * not with D of query/key != D of value;
  * (unless the tiling sink) not with MLA (split or combined rope) and not with layouts BSH_BNSD, BSND_BNSD,
    TND, NTD, NTD_TND, TND_NTD.
consistency
  * dtype: fp16 for fp16/int8 query, bf16 for bf16 query.
  * rank 4; [1 or B, N1, 1, >= S2 + prefix] when its S1 axis is 1, else [1 or B, N1, >= S1, >= S2 + prefix]
    (prefix = the actual_shared_prefix_len value when given).
"""

from __future__ import annotations

from ..layouts import numel
from .base import CheckContext, fail, shape_str

CHECKER = "pse"


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def single_para(c: CheckContext) -> None:
    if c.p.pse_type != 0:
        fail(CHECKER, "pse_type", c.p.pse_type, "pse_type must be 0")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if not i.pse_shift_flag:
        return
    if i.is_qkv_d_different:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")),
             "pse_shift is not supported when D of query/key differs from D of value")
    if i.is_max_workspace:
        return
    if i.mla_mode != "none":
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), "pse_shift is not supported with MLA (rope)")
    if i.input_layout in ("BSH_BNSD", "BSND_BNSD", "TND", "NTD", "NTD_TND", "TND_NTD"):
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")),
             f"pse_shift is not supported with input_layout {i.input_layout}")


def consistency(c: CheckContext) -> None:
    i = c.info
    pse = c.t("pse_shift")
    if i.pse_shift_flag:
        want = {"float16": "float16", "int8": "float16", "bfloat16": "bfloat16"}.get(i.q_dtype)
        if want is not None and pse.dtype != want:
            fail(CHECKER, "pse_shift", pse.dtype, f"pse_shift must be {want} for a {i.q_dtype} query")
    if pse is None:
        return
    s = pse.shape
    if len(s) != 4:
        fail(CHECKER, "pse_shift", s, "pse_shift must have 4 dims")
    b, n, ps1, ps2 = (_u32(x) for x in s)
    prefix = 0
    lens = c.t("actual_shared_prefix_len")
    if lens is not None and numel(lens.shape) != 0 and lens.data:
        prefix = _u32(lens.data[0])
    need_s2 = i.s2_size + prefix
    if ps1 > 1:
        if (b not in (1, i.b_size)) or n != i.n1_size or ps1 < i.s1_size or ps2 < need_s2:
            fail(CHECKER, "pse_shift", s, f"pse_shift must be [1 or {i.b_size}, {i.n1_size}, >= {i.s1_size}, "
                 f">= {need_s2}]")
    elif (b not in (1, i.b_size)) or n != i.n1_size or ps1 != 1 or ps2 < need_s2:
        fail(CHECKER, "pse_shift", s, f"pse_shift must be [1 or {i.b_size}, {i.n1_size}, 1, >= {need_s2}]")
