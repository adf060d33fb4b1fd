"""FIA checker family "left_padding": query_padding_size / kv_padding_size.

Rules (op_host left-padding checker)
------------------------------------
single_para (non-quant): an enabled padding size is a 1-D tensor of one element.
cross_feature (when either padding is enabled)
  * the matching actual length list is given and non-empty (skipped for the tiling sink);
  * layouts BSH_BNSD, BSND_BNSD, TND, NTD, NTD_TND, TND_NTD are not supported;
  * not with alibi pse (pse_type 2/3), not with paged attention;
  * antiquant with S1 > 1: not with an int8 cache in key antiquant mode 0 or 1;
  * not in GQA (no rope) with D of query/key != D of value.
"""

from __future__ import annotations

from ..layouts import numel
from .base import CheckContext, fail, shape_str

CHECKER = "left_padding"


def single_para(c: CheckContext) -> None:
    if not c.non_quant:
        return
    i = c.info
    for flag, name in ((i.q_padding_flag, "query_padding_size"), (i.kv_padding_flag, "kv_padding_size")):
        t = c.t(name)
        if flag and t is not None:
            if numel(t.shape) != 1:
                fail(CHECKER, name, t.shape, f"{name} must hold exactly one element")
            if len(t.shape) != 1:
                fail(CHECKER, name, t.shape, f"{name} must be 1-D")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if i.q_padding_flag and not i.is_max_workspace:
        q = c.t("actual_seq_lengths") if i.actual_seq_q_present else None
        if q is None or numel(q.shape) == 0:
            fail(CHECKER, "actual_seq_lengths", None, "query_padding_size needs actual_seq_lengths")
    if i.kv_padding_flag and not i.is_max_workspace:
        kv = c.t("actual_seq_lengths_kv")
        if kv is None or numel(kv.shape) == 0:
            fail(CHECKER, "actual_seq_lengths_kv", None, "kv_padding_size needs actual_seq_lengths_kv")
    padded = i.q_padding_flag or i.kv_padding_flag
    if not padded:
        return
    name = "query_padding_size" if i.q_padding_flag else "kv_padding_size"
    if i.input_layout in ("BSH_BNSD", "BSND_BNSD", "TND", "NTD", "NTD_TND", "TND_NTD"):
        fail(CHECKER, "input_layout", i.input_layout, f"left padding is not supported with input_layout "
             f"{i.input_layout}")
    if i.enable_alibi_pse:
        fail(CHECKER, name, shape_str(c.t(name)), "left padding is not supported with pse_type 2/3")
    if i.kv_storage_mode == "page_attention":
        fail(CHECKER, name, shape_str(c.t(name)), "left padding is not supported with paged attention")
    if c.anti_quant and i.s1_size > 1 and c.p.key_antiquant_mode in (0, 1) and i.kv_dtype == "int8":
        fail(CHECKER, name, shape_str(c.t(name)),
             "left padding is not supported with an int8 cache in antiquant mode 0/1 when S of query > 1")
    if i.is_qkv_d_different and i.rope_mode == "none":
        fail(CHECKER, name, shape_str(c.t(name)),
             "left padding is not supported in GQA when D of query/key differs from D of value")
