"""FIA checker family "learnable_sink": the per-head sink logits.

Rules (op_host learnable-sink checker), only when learnable_sink is given
------------------------------------------------------------------------
single_para
  * dtype: arch35 fp16 or bf16 and equal to the query dtype; arch22 bf16.
  * shape: 1-D with N1 elements.
cross_feature (enforced on arch35 only; arch22 logs the same findings without rejecting)
  * no left padding, no shared prefix, no alibi pse, no pse_shift, no post-quant output, inner_precise 0,
    non-quant GQA only (not decode MLA);
  * D of query in {64, 128, 192}, D of value in {64, 128}.
"""

from __future__ import annotations

from .base import CheckContext, fail, shape_str

CHECKER = "learnable_sink"


def single_para(c: CheckContext) -> None:
    i = c.info
    sink = c.t("learnable_sink")
    if not i.learnable_sink_flag or sink is None:
        return
    if c.arch35:
        if sink.dtype not in ("float16", "bfloat16"):
            fail(CHECKER, "learnable_sink", sink.dtype, "learnable_sink must be fp16 or bf16")
        if sink.dtype != i.q_dtype:
            fail(CHECKER, "learnable_sink", sink.dtype, f"learnable_sink must have the query dtype ({i.q_dtype})")
    elif sink.dtype != "bfloat16":
        fail(CHECKER, "learnable_sink", sink.dtype, "learnable_sink must be bf16 on this architecture")
    if len(sink.shape) != 1:
        fail(CHECKER, "learnable_sink", sink.shape, "learnable_sink must be 1-D")
    if sink.shape[0] != i.n1_size:
        fail(CHECKER, "learnable_sink", sink.shape, f"learnable_sink must have num_heads ({i.n1_size}) elements")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if not i.learnable_sink_flag or not c.arch35:
        return
    shape = shape_str(c.t("learnable_sink"))
    if i.q_padding_flag or i.kv_padding_flag:
        fail(CHECKER, "learnable_sink", shape, "learnable_sink does not support left padding")
    if i.sys_prefix_flag:
        fail(CHECKER, "learnable_sink", shape, "learnable_sink does not support a shared prefix")
    if i.enable_alibi_pse:
        fail(CHECKER, "pse_type", i.pse_type, "learnable_sink does not support pse_type 2/3")
    if i.pse_shift_flag:
        fail(CHECKER, "learnable_sink", shape, "learnable_sink does not support pse_shift")
    if i.is_out_quant_enable:
        fail(CHECKER, "learnable_sink", shape, "learnable_sink does not support post-quant output")
    if i.inner_precise != 0:
        fail(CHECKER, "inner_precise", i.inner_precise, "learnable_sink needs inner_precise 0")
    if not (c.non_quant and i.mla_mode != "split_d512"):
        fail(CHECKER, "learnable_sink", shape, "learnable_sink is supported only for non-quant GQA")
    if i.qk_head_dim not in (64, 128, 192):
        fail(CHECKER, "query", shape_str(c.t("query")), "learnable_sink needs D of query in {64, 128, 192}")
    if i.v_head_dim not in (64, 128):
        fail(CHECKER, "value", shape_str(c.t("value")), "learnable_sink needs D of value in {64, 128}")
