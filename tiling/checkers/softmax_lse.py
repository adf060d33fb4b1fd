"""FIA checker family "softmax_lse": the optional log-sum-exp output.

Rules (op_host softmax-lse checker), all only when softmax_lse_flag is set
--------------------------------------------------------------------------
* single_para: softmax_lse is float32.
* existence: softmax_lse is given.
* cross_feature: TND/NTD output -> [T of query, N1, 1]; other layouts -> [B, N1, S1, 1]; not in GQA (no rope)
  with D of query/key != D of value.
"""

from __future__ import annotations

from ..errors import AclnnStatus
from .base import CheckContext, fail

CHECKER = "softmax_lse"


def single_para(c: CheckContext) -> None:
    lse = c.t("softmax_lse")
    if c.info.softmax_lse_flag and lse is not None and lse.dtype != "float32":
        fail(CHECKER, "softmax_lse", lse.dtype, "softmax_lse must be float32", AclnnStatus.PARAM_INVALID)


def existence(c: CheckContext) -> None:
    if c.info.softmax_lse_flag and c.t("softmax_lse") is None:
        fail(CHECKER, "softmax_lse", None, "softmax_lse is required when softmax_lse_flag is set",
             AclnnStatus.PARAM_NULLPTR)


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if i.softmax_lse_flag and not i.empty_tensor_flag:
        s = c.p.softmax_lse.shape
        if i.out_layout in ("TND", "NTD"):
            if len(s) != 3:
                fail(CHECKER, "softmax_lse", s, "softmax_lse must have 3 dims [T, N, 1] with TND/NTD output")
            if s[0] != i.q_t_size or s[1] != i.n1_size or s[2] != 1:
                fail(CHECKER, "softmax_lse", s, f"softmax_lse must be [{i.q_t_size}, {i.n1_size}, 1]")
        else:
            if len(s) != 4:
                fail(CHECKER, "softmax_lse", s, "softmax_lse must have 4 dims [B, N, S1, 1]")
            if s[0] != i.b_size or s[1] != i.n1_size or s[2] != i.s1_size or s[3] != 1:
                fail(CHECKER, "softmax_lse", s, f"softmax_lse must be [{i.b_size}, {i.n1_size}, {i.s1_size}, 1]")
    if i.is_qkv_d_different and i.rope_mode == "none" and i.softmax_lse_flag:
        fail(CHECKER, "softmax_lse_flag", True,
             "softmax_lse is not supported in GQA when D of query/key differs from D of value")
