"""FIA checker family "post_quant": quantised attention output (quant_scale2 / quant_offset2).

Post-quant is on when attention_out is neither fp16 nor bf16.

Rules (op_host post-quant checker)
----------------------------------
single_para: quant_scale2 / quant_offset2 dtypes float32 or bf16.
existence: post-quant needs a non-empty quant_scale2.
cross_feature (post-quant)
  * attention_out int8, fp8_e4m3fn or hifloat8;
  * quant_scale2 float32 unless the query is bf16;
  * 1-D quant_scale2: N1*Dv elements (per channel, only for BSH/BSND/BNSD/BNSD_BSND) or 1 (per tensor);
    higher rank: N1*Dv elements (BSH/BSND/BNSD/BNSD_BSND) or exactly [N1, Dv] (other layouts);
  * non-quant: a shared prefix needs int8 output; arch22 with S1 > 1, int8 output and a non-empty quant_offset2:
    every batch's attended band (after the sparse-mode shift) must reach every query row;
  * antiquant: attention_out has the key dtype; fp8_e4m3fn keys in per-token (1/1) or paged per-token (4/4)
    modes need fp16/bf16 output.
consistency: quant_offset2 has quant_scale2's dtype, rank and element count.
"""

from __future__ import annotations

from ..layouts import numel
from .base import DTYPE_NAMES, CheckContext, fail, shape_str

CHECKER = "post_quant"
INT_MAX = 2147483647


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def single_para(c: CheckContext) -> None:
    for name in ("quant_scale2", "quant_offset2"):
        t = c.t(name)
        if t is not None and t.dtype not in DTYPE_NAMES[name]:
            fail(CHECKER, name, t.dtype, f"{name} must be bf16 or float32")


def existence(c: CheckContext) -> None:
    if not c.info.is_out_quant_enable:
        return
    qs = c.t("quant_scale2")
    if qs is None:
        fail(CHECKER, "quant_scale2", None, f"attention_out dtype {c.info.out_dtype} (post-quant) needs quant_scale2")
    if numel(qs.shape) <= 0:
        fail(CHECKER, "quant_scale2", qs.shape, "quant_scale2 must not be empty")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if not i.is_out_quant_enable:
        return
    if i.out_dtype not in ("int8", "float8_e4m3fn", "hifloat8"):
        fail(CHECKER, "attention_out", i.out_dtype, "post-quant output must be int8, fp8_e4m3fn or hifloat8")
    qs = c.t("quant_scale2")
    if i.q_dtype != "bfloat16" and qs.dtype != "float32":
        fail(CHECKER, "quant_scale2", qs.dtype, "quant_scale2 must be float32 unless the query is bf16")
    _scale_layout(c, qs)
    if c.non_quant:
        if i.sys_prefix_flag and i.out_dtype != "int8":
            fail(CHECKER, "attention_out", i.out_dtype, "post-quant with a shared prefix needs int8 output")
        if c.arch22:
            _rows_valid(c)
    elif c.anti_quant:
        if i.out_dtype != i.kv_dtype:
            fail(CHECKER, "attention_out", i.out_dtype, f"antiquant post-quant output must have the key dtype "
                 f"({i.kv_dtype})")
        km, vm = c.p.key_antiquant_mode, c.p.value_antiquant_mode
        if (km, vm) in ((1, 1), (4, 4)) and i.kv_dtype == "float8_e4m3fn" and i.out_dtype not in ("bfloat16",
                                                                                                   "float16"):
            fail(CHECKER, "attention_out", i.out_dtype,
                 f"fp8_e4m3fn keys in antiquant modes {km}/{vm} need fp16 or bf16 output")


def _scale_layout(c: CheckContext, qs) -> None:
    i = c.info
    size = numel(qs.shape)
    per_channel = _u32(c.p.num_heads) * i.v_head_dim
    layout_ok = i.input_layout in ("BSH", "BSND", "BNSD", "BNSD_BSND")
    if len(qs.shape) == 1:
        if (size != per_channel or not layout_ok) and size != 1:
            fail(CHECKER, "quant_scale2", qs.shape,
                 f"quant_scale2 must hold 1 (per tensor) or num_heads*Dv = {per_channel} (per channel) elements")
    elif layout_ok:
        if size != per_channel:
            fail(CHECKER, "quant_scale2", qs.shape, f"per-channel quant_scale2 must hold num_heads*Dv = "
                 f"{per_channel} elements")
    elif tuple(qs.shape) != (_u32(c.p.num_heads), i.v_head_dim):
        fail(CHECKER, "quant_scale2", qs.shape, f"per-channel quant_scale2 must be [{_u32(c.p.num_heads)}, "
             f"{i.v_head_dim}] with input_layout {i.input_layout}")


def _rows_valid(c: CheckContext) -> None:
    """Rows outside every attended band would be quantised garbage when an offset is added (int8, S1 > 1)."""
    i = c.info
    if i.s1_size <= 1:
        return
    off = c.t("quant_offset2")
    check = i.out_dtype == "int8" and off is not None and numel(off.shape) != 0
    if i.is_max_workspace or not check:
        return
    q = c.t("actual_seq_lengths") if i.actual_seq_q_present else None
    kv = c.t("actual_seq_lengths_kv")
    qn = numel(q.shape) if q is not None else 0
    kvn = numel(kv.shape) if kv is not None else 0
    prefix = i.system_prefix_len
    for b in range(i.b_size):
        if qn == 0 or q.data is None:
            s1 = i.s1_size
        else:
            s1 = _u32(_at(q.data, b if qn > 1 else 0))
        if kvn == 0 or kv is None or kv.data is None:
            if i.kv_storage_mode == "contiguous":
                s2 = i.s2_size
            else:
                s2 = i.kv_list_seq_lens[b] if b < len(i.kv_list_seq_lens) else 0
        else:
            s2 = _u32(_at(kv.data, b if kvn > 1 else 0))
        if i.sparse_mode == 3:
            pre, nxt = INT_MAX, s2 + prefix - s1
        elif i.sparse_mode == 4:
            pre, nxt = i.pre_token - s2 - prefix + s1, i.next_token + s2 + prefix - s1
        else:
            pre, nxt = i.pre_token, i.next_token
        if pre + s2 + prefix - s1 < 0 or nxt < 0:
            fail(CHECKER, "quant_offset2", shape_str(off),
                 f"batch {b}: with int8 output and quant_offset2, sparse_mode {i.sparse_mode} and these tokens leave "
                 "query rows outside every attended band")


def _at(vals, k: int) -> int:
    return int(vals[k]) if 0 <= k < len(vals) else 0


def consistency(c: CheckContext) -> None:
    i = c.info
    off, qs = c.t("quant_offset2"), c.t("quant_scale2")
    if not i.is_out_quant_enable or off is None:
        return
    if off.dtype != qs.dtype:
        fail(CHECKER, "quant_offset2", off.dtype, f"quant_offset2 must have the dtype of quant_scale2 ({qs.dtype})")
    if len(off.shape) != len(qs.shape):
        fail(CHECKER, "quant_offset2", off.shape, f"quant_offset2 must have the rank of quant_scale2 ({len(qs.shape)})")
    if numel(off.shape) != numel(qs.shape):
        fail(CHECKER, "quant_offset2", off.shape, "quant_offset2 must have as many elements as quant_scale2")
