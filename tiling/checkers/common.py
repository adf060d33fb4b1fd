"""FIA checker family "common": dtypes, formats, head counts, layouts, ranks and the shape consistency of
query / key / value / attention_out.

Rules (op_host common checker, both architectures unless noted)
---------------------------------------------------------------
single_para
  * non-quant: query/key/value are fp16 or bf16; attention_out is fp16, bf16, int8, hifloat8 or fp8_e4m3fn.
  * query/key/value/attention_out formats are ND, NCHW, NHWC or NCDHW.
  * decode MLA (split rope, D 512): num_heads in {1,2,4,...,128} (arch35 non-quant: 1..128) and one kv head.
  * input_layout: no rope -> BSH BSND BNSD TND NTD BSND_BNSD BSH_BNSD NTD_TND BNSD_BSND (arch22 adds the head-dim
    rules of ``_no_rope_layout_dims``); decode MLA -> BSH BSND BNSD TND BNSD_NBSD BSND_NBSD BSH_NBSD TND_NTD;
    other rope -> the no-rope list, and a combined rope needs qk D 192 / v D 128.
  * inner_precise in [0, 4].
  * query rank 4 for BNSD/BSND and 3 for BSH/TND/NTD; the same for key by its layout.
consistency
  * non-quant layout crossovers (TND, NTD, transposed layouts): no tensor list, no pse, D limits.
  * D of query/key differs from D of value (other than 192/128) -> fp16/bf16 only.
  * paged caches: key/value cache shapes agree with each other and with the heads / head dims
    (arch22 NZ without rope: D 64 or 128; non-quant NZ: last axis 16).
  * tensor lists: no block_table, no TND/NTD, B <= 65536, per-tensor H/N/D/S agree, B == list length.
  * query dtype == attention_out dtype unless post-quant or full quant.
  * B in (0, 65536]; D <= 512; with differing D both <= 128; decode MLA S1 >= 1 and G rules.
  * query vs attention_out axis by axis (through the transposing layouts); key vs value axis by axis;
    D of value == D of attention_out; N of query == num_heads (BSH: H % num_heads); N of key ==
    num_key_value_heads; B of query == B of key; D of key == D of query.
  * arch35: no paged cache with differing D; TND never with a tensor list.
"""

from __future__ import annotations

from ..errors import AclnnStatus
from ..layouts import dim
from .base import FORMATS, CheckContext, fail, shape_str

CHECKER = "common"

B_LIMIT = 65536
D_LIMIT = 512
INNER_PRECISE_LIMIT = 4
_MLA_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
_GQA_LAYOUTS = ("BSH", "BSND", "BNSD", "TND", "NTD", "BSND_BNSD", "BSH_BNSD", "NTD_TND", "BNSD_BSND")
_MLA_LAYOUTS = ("BSH", "BSND", "BNSD", "TND", "BNSD_NBSD", "BSND_NBSD", "BSH_NBSD", "TND_NTD")


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ------------------------------------------------------------------------------------------------ single para

def single_para(c: CheckContext) -> None:
    p, i = c.p, c.info
    if c.non_quant:
        for name, allowed in (("query", ("float16", "bfloat16")), ("key", ("float16", "bfloat16")),
                              ("value", ("float16", "bfloat16")),
                              ("attention_out", ("float16", "bfloat16", "int8", "hifloat8", "float8_e4m3fn"))):
            t = p.value_as_read if name == "value" else getattr(p, name)
            if t.dtype not in allowed:
                fail(CHECKER, name, t.dtype, f"dtype of {name} must be one of {', '.join(allowed)} without "
                     "quantisation", AclnnStatus.PARAM_INVALID)
    for name in ("query", "key", "value", "attention_out"):
        t = p.value_as_read if name == "value" else getattr(p, name)
        if t.format not in FORMATS:
            fail(CHECKER, name, t.format, f"format of {name} must be one of {', '.join(FORMATS)}",
                 AclnnStatus.PARAM_INVALID)
    _head_num(c)
    _input_layout(c)
    if i.inner_precise > INNER_PRECISE_LIMIT or i.inner_precise < 0:
        fail(CHECKER, "inner_precise", i.inner_precise, f"inner_precise must be in [0, {INNER_PRECISE_LIMIT}]")
    _dim_num(c)


def _head_num(c: CheckContext) -> None:
    i = c.info
    if i.mla_mode != "split_d512":
        return
    if c.non_quant and c.arch35:
        if not 1 <= i.n1_size <= 128:
            fail(CHECKER, "num_heads", i.n1_size, "num_heads must be in [1, 128] for decode MLA")
    elif i.n1_size not in _MLA_HEADS:
        fail(CHECKER, "num_heads", i.n1_size, "num_heads must be a power of two in 1..128 for decode MLA")
    if i.n2_size != 1:
        fail(CHECKER, "num_key_value_heads", i.n2_size, "decode MLA needs exactly one kv head")


def _input_layout(c: CheckContext) -> None:
    i = c.info
    layout = i.input_layout
    if i.rope_mode == "none":
        if layout not in _GQA_LAYOUTS:
            fail(CHECKER, "input_layout", layout, f"without rope input_layout must be one of {', '.join(_GQA_LAYOUTS)}")
        if c.arch22:
            _no_rope_layout_dims(c, layout)
    elif i.mla_mode == "split_d512":
        if layout not in _MLA_LAYOUTS:
            fail(CHECKER, "input_layout", layout, f"decode MLA input_layout must be one of {', '.join(_MLA_LAYOUTS)}")
    else:
        if layout not in _GQA_LAYOUTS:
            fail(CHECKER, "input_layout", layout,
                 f"prefill MLA input_layout must be one of {', '.join(_GQA_LAYOUTS)}")
        if i.rope_mode == "combine" and (i.qk_head_dim != 192 or i.v_head_dim != 128):
            fail(CHECKER, "query", shape_str(c.t("query")),
                 f"with D of query ({i.qk_head_dim}) != D of value ({i.v_head_dim}) only 192/128 is supported")


def _no_rope_layout_dims(c: CheckContext, layout: str) -> None:
    """arch22 without rope: head-dim alignment per layout."""
    i = c.info
    dv = i.v_head_dim
    if not i.is_legacy_ifa and dv % 16 != 0 and layout in ("BSH", "BSND", "BNSD", "BNSD_BSND"):
        fail(CHECKER, "value", dv, f"with S1 > 1 and input_layout {layout} the head dim must be a multiple of 16")
    if i.is_legacy_ifa and dv not in (64, 128) and layout == "BNSD_BSND":
        fail(CHECKER, "value", dv, "decode (S1 = 1) with BNSD_BSND supports head dims 64 and 128 only")
    if layout in ("NTD", "BSH_BNSD", "BSND_BNSD", "NTD_TND") and dv not in (64, 128):
        fail(CHECKER, "value", dv, f"input_layout {layout} supports head dims 64 and 128 only")
    if layout == "TND" and dv not in (64, 128, 192):
        fail(CHECKER, "value", dv, "input_layout TND supports head dims 64, 128 and 192 only")


def _dim_num(c: CheckContext) -> None:
    i = c.info
    qn, kn = len(c.p.query.shape), len(c.p.key.shape)
    if i.q_layout in ("BNSD", "BSND") and qn != 4:
        fail(CHECKER, "query", qn, f"query must have 4 dims with input_layout {i.input_layout}")
    if i.q_layout in ("BSH", "TND", "NTD") and qn != 3:
        fail(CHECKER, "query", qn, f"query must have 3 dims with input_layout {i.input_layout}")
    if i.kv_layout in ("BNSD", "BSND") and kn != 4:
        fail(CHECKER, "key", kn, f"key must have 4 dims with input_layout {i.input_layout}")
    if i.kv_layout in ("BSH", "TND", "NTD") and kn != 3:
        fail(CHECKER, "key", kn, f"key must have 3 dims with input_layout {i.input_layout}")


# ------------------------------------------------------------------------------------------------ existence

def existence(c: CheckContext) -> None:
    for name in ("query", "key", "value", "attention_out"):
        if c.t(name) is None:
            fail(CHECKER, name, None, f"{name} is required", AclnnStatus.PARAM_NULLPTR)


# ------------------------------------------------------------------------------------------------ consistency

def consistency(c: CheckContext) -> None:
    p, i = c.p, c.info
    if c.non_quant:
        _tnd_crossover(c)
        _ntd_crossover(c)
        _transpose_crossover(c)
    _multi_dtype(c)
    if i.kv_storage_mode == "page_attention":
        _paged_key_value(c)
    elif i.kv_storage_mode == "tensor_list":
        _tensor_list(c)
    if not i.is_out_quant_enable and not c.full_quant and p.query.dtype != p.attention_out.dtype:
        fail(CHECKER, "attention_out", p.attention_out.dtype,
             f"attention_out must have the dtype of query ({p.query.dtype}) without post-quant")
    _axis(c)
    _query_out(c)
    _key_value(c)
    _value_out_d(c)
    _query_shape(c)
    _key_shape(c)
    _query_key(c)
    _multi_attr(c)


def _is_gqa(c: CheckContext) -> bool:
    return c.non_quant and c.info.mla_mode == "none"


def _tnd_crossover(c: CheckContext) -> None:
    i = c.info
    if i.q_layout != "TND":
        return
    if i.mla_mode == "split_d512" and i.input_layout == "TND_NTD" and i.is_out_quant_enable:
        fail(CHECKER, "quant_scale2", None, "decode MLA with TND_NTD does not support post-quant output")
    if i.kv_storage_mode == "tensor_list":
        fail(CHECKER, "key", "tensor list", "TND layouts do not support key/value tensor lists")
    if i.pse_shift_flag:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), "pse_shift is not supported with TND layouts")


def _ntd_crossover(c: CheckContext) -> None:
    i = c.info
    if i.q_layout != "NTD":
        return
    if _is_gqa(c):
        if i.qk_head_dim not in (64, 128):
            fail(CHECKER, "query", shape_str(c.t("query")), f"GQA with {i.input_layout} needs D 64 or 128")
        if i.is_qkv_d_different:
            fail(CHECKER, "input_layout", i.input_layout,
                 f"GQA with {i.input_layout} needs equal D for query/key and value")
    if i.kv_storage_mode == "tensor_list":
        fail(CHECKER, "key", "tensor list", f"input_layout {i.input_layout} does not support tensor lists")
    if i.pse_shift_flag:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), f"pse_shift is not supported with {i.input_layout}")


def _transpose_crossover(c: CheckContext) -> None:
    i = c.info
    layout = i.input_layout
    if layout not in ("BSH_BNSD", "BSND_BNSD", "BNSD_BSND"):
        return
    gqa = _is_gqa(c)
    if gqa and i.is_qkv_d_different:
        fail(CHECKER, "input_layout", layout, f"GQA with {layout} needs equal D for query/key and value")
    if layout in ("BSH_BNSD", "BSND_BNSD"):
        if gqa and i.qk_head_dim not in (64, 128):
            fail(CHECKER, "query", shape_str(c.t("query")), f"GQA with {layout} needs D 64 or 128")
        if i.kv_storage_mode == "tensor_list":
            fail(CHECKER, "key", "tensor list", f"input_layout {layout} does not support tensor lists")
        if i.pse_shift_flag:
            fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), f"pse_shift is not supported with {layout}")
    elif gqa:
        if i.out_dtype == "int8" and i.qk_head_dim % 32 != 0:
            fail(CHECKER, "query", shape_str(c.t("query")), f"GQA with {layout} and int8 output needs D % 32 == 0")
        if i.qk_head_dim % 16 != 0:
            fail(CHECKER, "query", shape_str(c.t("query")), f"GQA with {layout} needs D % 16 == 0")


def _multi_dtype(c: CheckContext) -> None:
    if not c.info.is_qkv_d_different:
        return
    for name in ("query", "attention_out", "key", "value"):
        t = getattr(c.p, name)
        if t.dtype not in ("float16", "bfloat16"):
            fail(CHECKER, name, t.dtype, f"{name} must be fp16 or bf16 when D of query/key differs from D of value")


def _paged_key_value(c: CheckContext) -> None:
    i = c.info
    ks, vs = c.p.key.shape, c.p.value.shape
    knd = len(ks)
    k = dict(bn=i.total_block_num, n=i.n2_size, bs=i.block_size, d=i.qk_head_dim, h=i.qk_head_dim * i.n2_size,
             d0=16, d1=i.qk_head_dim // 16)
    v = dict(bn=i.total_block_num, n=i.n2_size, bs=i.block_size, d=i.v_head_dim, h=i.v_head_dim * i.n2_size,
             d0=16, d1=i.v_head_dim // 16)
    if knd != len(vs):
        fail(CHECKER, "value", vs, f"a paged value cache must have the rank of the key cache ({knd})")
    for dst, s in ((k, ks), (v, vs)):
        if knd == 3:
            dst.update(bn=s[0], bs=s[1], h=s[2])
        elif knd == 4:
            dst.update(bn=s[0], n=s[1], bs=s[2], d=s[3])
        elif knd == 5:
            dst.update(bn=s[0], n=s[1], d1=s[2], bs=s[3], d0=s[4])
        else:
            fail(CHECKER, "key", ks, "a paged key cache must have 3 to 5 dims")
    if c.arch22 and i.kv_layout == "NZ" and i.rope_mode == "none" and (k["d"] not in (64, 128) or
                                                                       v["d"] not in (64, 128)):
        fail(CHECKER, "key", ks, "an NZ paged cache without rope supports head dims 64 and 128 only")
    combine = i.mla_mode == "combine_d128"
    mismatch = False
    if knd == 5:
        mismatch = (k["bn"] != v["bn"] or k["n"] != v["n"] or (k["d1"] != v["d1"] and not combine)
                    or k["bs"] != v["bs"] or (k["d0"] != v["d0"] and not combine))
    elif knd == 4:
        mismatch = (k["bn"] != v["bn"] or k["n"] != v["n"] or k["bs"] != v["bs"] or (k["d"] != v["d"] and not combine))
    elif knd == 3:
        mismatch = k["bn"] != v["bn"] or k["bs"] != v["bs"] or (k["h"] != v["h"] and not combine)
    if mismatch:
        fail(CHECKER, "value", vs, f"paged key {ks} and value {vs} caches disagree")
    if k["d"] != i.qk_head_dim:
        fail(CHECKER, "key", ks, f"D of the key cache must be {i.qk_head_dim}")
    if v["d"] != i.v_head_dim:
        fail(CHECKER, "value", vs, f"D of the value cache must be {i.v_head_dim}")
    if k["h"] != i.qk_head_dim * i.n2_size:
        fail(CHECKER, "key", ks, f"H of the key cache must be {i.qk_head_dim * i.n2_size}")
    if v["h"] != i.v_head_dim * i.n2_size:
        fail(CHECKER, "value", vs, f"H of the value cache must be {i.v_head_dim * i.n2_size}")
    if c.non_quant:
        if k["d0"] != 16 or v["d0"] != 16:
            fail(CHECKER, "key", ks, "the last axis of NZ key/value caches must be 16")
        if k["d1"] != i.qk_head_dim // 16:
            fail(CHECKER, "key", ks, f"D1 of the key cache must be {i.qk_head_dim // 16}")
        if v["d1"] != i.v_head_dim // 16:
            fail(CHECKER, "value", vs, f"D1 of the value cache must be {i.v_head_dim // 16}")


def _tensor_list(c: CheckContext) -> None:
    i, p = c.info, c.p
    if c.t("block_table") is not None:
        fail(CHECKER, "block_table", shape_str(c.t("block_table")), "block_table must be absent with tensor lists")
    if i.input_layout in ("TND", "NTD", "NTD_TND", "TND_NTD"):
        fail(CHECKER, "input_layout", i.input_layout, "tensor lists do not support TND/NTD layouts")
    if i.b_size > B_LIMIT:
        fail(CHECKER, "query", shape_str(p.query), f"B must be <= {B_LIMIT} with tensor lists")
    ks = [t.shape for t in p.key_list]
    vs = [t.shape for t in p.value_list]
    if all(_numel(s) == 0 for s in ks) and all(_numel(s) == 0 for s in vs):
        return
    _tensor_list_shapes(c, ks, vs)
    if i.b_size != len(ks):
        fail(CHECKER, "key", len(ks), f"the number of key tensors must equal B of query ({i.b_size})")
    for s in ks:
        _key_d_valid(c, s)


def _numel(s) -> int:
    n = 1
    for d in s:
        n *= d
    return n


def _tensor_list_shapes(c: CheckContext, ks, vs) -> None:
    i = c.info
    layout = i.input_layout
    krope = c.t("key_rope")
    nkv = i.n2_size if i.n2_size != 0 else i.n1_size
    if layout == "BSH":
        s_ax, kd_name = 1, "H"
        n_ax = None
    elif layout in ("BNSD", "BNSD_BSND", "BNSD_NBSD"):
        s_ax, n_ax, kd_name = 2, 1, "D"
    else:
        s_ax, n_ax, kd_name = 1, 2, "D"
    d_ax = 2 if layout == "BSH" else 3
    rope_s = dim(krope.shape, s_ax) if krope is not None else 0
    if krope is not None and dim(krope.shape, 0) != len(ks):
        fail(CHECKER, "key_rope", krope.shape, f"B of key_rope must equal the number of key tensors ({len(ks)})")
    if n_ax is not None and nkv != dim(ks[0], n_ax):
        fail(CHECKER, "key", ks[0], f"N of the first key tensor must be num_key_value_heads ({nkv})")
    std_n = dim(ks[0], n_ax) if n_ax is not None else None
    std_k, std_v = dim(ks[0], d_ax), dim(vs[0], d_ax)
    for idx, (k, v) in enumerate(zip(ks, vs)):
        if n_ax is not None and (dim(k, n_ax) != std_n or dim(v, n_ax) != std_n):
            fail(CHECKER, "key", k, f"N of key/value tensor {idx} must be {std_n}")
        if dim(k, d_ax) != std_k:
            fail(CHECKER, "key", k, f"{kd_name} of key tensor {idx} must equal that of the first key tensor")
        if dim(v, d_ax) != std_v:
            fail(CHECKER, "value", v, f"{kd_name} of value tensor {idx} must equal that of the first value tensor")
        if dim(k, s_ax) != dim(v, s_ax):
            fail(CHECKER, "value", v, f"S of key tensor {idx} must equal S of value tensor {idx}")
        if krope is not None and dim(k, s_ax) != rope_s:
            fail(CHECKER, "key_rope", krope.shape, f"S of key tensor {idx} must equal S of key_rope")


def _axis(c: CheckContext) -> None:
    i, p = c.info, c.p
    if i.b_size > B_LIMIT or i.b_size <= 0:
        fail(CHECKER, "query", shape_str(p.query), f"B ({i.b_size}) must be in (0, {B_LIMIT}]")
    if i.s2_size < 0:
        fail(CHECKER, "key", shape_str(p.key), "S of key must not be negative")
    if i.qk_head_dim > D_LIMIT:
        fail(CHECKER, "query", shape_str(p.query), f"D of query ({i.qk_head_dim}) must be <= {D_LIMIT}")
    if i.v_head_dim > D_LIMIT:
        fail(CHECKER, "value", shape_str(p.value), f"D of value ({i.v_head_dim}) must be <= {D_LIMIT}")
    if i.is_qkv_d_different and i.qk_head_dim > 128:
        fail(CHECKER, "query", shape_str(p.query), "D of query must be <= 128 when it differs from D of value")
    if i.is_qkv_d_different and i.v_head_dim > 128:
        fail(CHECKER, "value", shape_str(p.value), "D of value must be <= 128 when it differs from D of query")
    if i.mla_mode != "split_d512":
        return
    if i.s1_size < 1:
        fail(CHECKER, "query", shape_str(p.query), "decode MLA needs S of query >= 1")
    if c.non_quant and c.arch35:
        if not 1 <= i.g_size <= 128:
            fail(CHECKER, "num_heads", i.n1_size, "decode MLA needs G in [1, 128]")
        if i.n1_size & (i.n1_size - 1):
            if i.learnable_sink_flag:
                fail(CHECKER, "learnable_sink", shape_str(c.t("learnable_sink")),
                     "decode MLA with num_heads not a power of two does not support learnable_sink")
            if i.is_out_quant_enable:
                fail(CHECKER, "attention_out", i.out_dtype,
                     "decode MLA with num_heads not a power of two does not support post-quant output")
            if i.sparse_mode == 0 and i.atten_mask_flag:
                fail(CHECKER, "num_heads", i.n1_size,
                     "decode MLA with num_heads not a power of two does not support sparse_mode 0 with a mask")
    elif i.g_size not in _MLA_HEADS:
        fail(CHECKER, "num_heads", i.n1_size, "decode MLA needs G a power of two in 1..128")


def _query_out_pairs(layout: str, q, o):
    """(query axis, query value, matching attention_out value) pairs op_host compares for ``layout``."""
    if layout in ("BNSD_BSND", "BSND_BNSD"):
        return [(1, dim(q, 1), dim(o, 2)), (2, dim(q, 2), dim(o, 1))]
    if layout == "BSH_BNSD":
        return [(2, dim(q, 2), dim(o, 3) * dim(o, 1))]
    if layout == "BSND_NBSD":
        return [(1, dim(q, 1), dim(o, 2)), (2, dim(q, 2), dim(o, 0))]
    if layout == "BNSD_NBSD":
        return [(1, dim(q, 1), dim(o, 0)), (2, dim(q, 2), dim(o, 2))]
    if layout == "BSH_NBSD":
        return [(2, dim(q, 2), dim(o, 3) * dim(o, 0))]
    if layout in ("NTD_TND", "TND_NTD"):
        return [(0, dim(q, 0), dim(o, 1)), (1, dim(q, 1), dim(o, 0))]
    return [(k, dim(q, k), dim(o, k)) for k in range(len(q))]


def _query_out(c: CheckContext) -> None:
    i = c.info
    q, o = c.p.query.shape, c.p.attention_out.shape
    layout = i.input_layout
    if len(q) != len(o) and layout not in ("BSH_BNSD", "BSH_NBSD"):
        fail(CHECKER, "attention_out", o, f"attention_out must have the rank of query ({len(q)})")
    if not 3 <= len(q) <= 4:
        fail(CHECKER, "query", q, "query must have 3 or 4 dims")
    last = len(q) - 1
    for k, qv, ov in _query_out_pairs(layout, q, o):
        if k == last and (i.mla_mode == "combine_d128" or i.is_qkv_d_different):
            continue
        if qv != ov:
            fail(CHECKER, "attention_out", o,
                 f"axis {k} of query {q} must match attention_out {o} for input_layout {layout}")


def _key_value(c: CheckContext) -> None:
    i, p = c.info, c.p
    if i.kv_storage_mode != "contiguous":
        return
    k, v = p.key.shape, p.value.shape
    if p.key.dtype != p.value.dtype:
        fail(CHECKER, "value", p.value.dtype, f"value must have the dtype of key ({p.key.dtype})")
    if len(k) != len(v):
        fail(CHECKER, "value", v, f"value must have the rank of key ({len(k)})")
    if not 3 <= len(k) <= 5:
        fail(CHECKER, "key", k, "key must have 3 to 5 dims")
    last = len(k) - 1
    for ax in range(len(k)):
        if ax == last and (i.mla_mode == "combine_d128" or i.is_qkv_d_different):
            continue
        if k[ax] != v[ax]:
            fail(CHECKER, "value", v, f"axis {ax} of key {k} must equal axis {ax} of value {v}")


def _value_out_d(c: CheckContext) -> None:
    i, p = c.info, c.p
    if i.kv_storage_mode != "contiguous":
        return
    v, o = p.value.shape, p.attention_out.shape
    vd = v[-1] if i.kv_layout != "BSH" else _cdiv(v[-1], i.n2_size)
    od = o[-1] if i.out_layout != "BSH" else _cdiv(o[-1], i.n1_size)
    if vd != od:
        fail(CHECKER, "attention_out", o, f"D of attention_out ({od}) must equal D of value ({vd})")


def _heads_valid(name: str, shape, layout: str, n: int, attr: str) -> None:
    """N of a q/k tensor equals its heads attribute; a BSH H is a multiple of it."""
    heads = {"BNSD": dim(shape, 1), "TND": dim(shape, 1), "BSND": dim(shape, 2), "NTD": dim(shape, 0)}.get(layout, n)
    if heads != n:
        fail(CHECKER, name, shape, f"N of {name} must equal {attr} ({n})")
    if layout == "BSH" and dim(shape, 2) % n != 0:
        fail(CHECKER, name, shape, f"H of {name} must be a multiple of {attr} ({n})")


def _query_shape(c: CheckContext) -> None:
    _heads_valid("query", c.p.query.shape, c.info.q_layout, c.info.n1_size, "num_heads")


def _key_nh_valid(c: CheckContext, k) -> None:
    _heads_valid("key", k, c.info.kv_layout, c.info.n2_size, "num_key_value_heads")


def _key_d_valid(c: CheckContext, k) -> None:
    i = c.info
    kd = k[-1] if i.kv_layout != "BSH" else _cdiv(k[-1], i.n2_size)
    if (kd & 0xFFFFFFFF) != i.qk_head_dim:
        fail(CHECKER, "key", k, f"D of key must equal D of query ({i.qk_head_dim})")


def _key_shape(c: CheckContext) -> None:
    i = c.info
    if i.kv_storage_mode == "page_attention":
        return
    if i.kv_storage_mode == "contiguous":
        _key_nh_valid(c, c.p.key.shape)
    else:
        for t in c.p.key_list:
            _key_nh_valid(c, t.shape)


def _query_key(c: CheckContext) -> None:
    i, p = c.info, c.p
    if i.kv_storage_mode != "contiguous":
        return
    if c.non_quant and p.query.dtype != p.key.dtype:
        fail(CHECKER, "key", p.key.dtype, f"key must have the dtype of query ({p.query.dtype})")
    if i.q_layout not in ("TND", "NTD") and i.b_size != dim(p.key.shape, 0):
        fail(CHECKER, "key", p.key.shape, f"B of key must equal B of query ({i.b_size})")
    _key_d_valid(c, p.key.shape)


def _multi_attr(c: CheckContext) -> None:
    i = c.info
    if c.arch35 and i.kv_storage_mode == "page_attention" and i.is_qkv_d_different:
        fail(CHECKER, "block_table", shape_str(c.t("block_table")),
             "paged attention is not supported when D of query/key differs from D of value")
    if i.q_layout == "TND" and i.kv_storage_mode == "tensor_list":
        fail(CHECKER, "key", "tensor list", "TND layouts do not support key/value tensor lists")
