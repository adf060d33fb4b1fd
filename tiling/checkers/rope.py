"""FIA checker family "rope": query_rope / key_rope (the split rope of MLA).

Rules (op_host rope checker); "split rope" means both query_rope and key_rope are given
---------------------------------------------------------------------------------------
single_para (split rope): rope dtypes fp16 or bf16; rope D 64.
existence (split rope): both rope tensors present.
cross_feature (split rope)
  * no shared prefix, no pse_shift, no alibi pse; arch22 also: no left padding, no tensor list, no post-quant.
  * decode MLA (D 512): no left padding, no tensor list; S1 >= 1 (full quant: S1 <= 16, both skipped for the
    tiling sink); num_heads in {1,2,...,128} (arch35 non-quant: 1..128); num_key_value_heads 1.
  * MXFP8 full quant: a key_rope view must be dense, except (paged) along its first two axes; other modes:
    a non-paged key_rope view must be dense.
  * antiquant: no rope tensors.
consistency
  * both or neither rope tensor;
  * split rope: D of query/key 128 or 512 (MXFP8: 64 or 128); query_rope and (contiguous) key_rope have the rank
    of query/key and equal axes except D (BSH: equal head counts); paged key_rope matches the key cache in
    rank, block number, block size and heads; tensor lists: key_rope B = list length, S and N per layout;
  * non-quant split rope: query_rope dtype = query dtype, key_rope dtype = key dtype.
"""

from __future__ import annotations

from ..layouts import dim
from .base import CheckContext, fail, first_noncontiguous_axis, shape_str

CHECKER = "rope"
_MLA_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _split(c: CheckContext) -> bool:
    return c.info.rope_mode == "split"


def single_para(c: CheckContext) -> None:
    i = c.info
    if not _split(c):
        return
    if i.q_rope_dtype not in ("float16", "bfloat16"):
        fail(CHECKER, "query_rope", i.q_rope_dtype, "query_rope must be fp16 or bf16")
    if i.k_rope_dtype not in ("float16", "bfloat16"):
        fail(CHECKER, "key_rope", i.k_rope_dtype, "key_rope must be fp16 or bf16")
    if i.rope_head_dim != 64:
        fail(CHECKER, "query_rope", shape_str(c.t("query_rope")), f"the rope head dim must be 64, got "
             f"{i.rope_head_dim}")


def existence(c: CheckContext) -> None:
    if _split(c) and (c.t("query_rope") is None or c.t("key_rope") is None):
        fail(CHECKER, "key_rope", None, "query_rope and key_rope must both be given")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if not _split(c):
        return
    qr = shape_str(c.t("query_rope"))
    if i.sys_prefix_flag:
        fail(CHECKER, "key_shared_prefix", shape_str(c.t("key_shared_prefix")),
             "a shared prefix is not supported with query_rope")
    if i.pse_shift_flag:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), "pse_shift is not supported with query_rope")
    if i.enable_alibi_pse:
        fail(CHECKER, "pse_type", i.pse_type, "pse_type 2/3 is not supported with query_rope")
    if c.arch22:
        if i.q_padding_flag or i.kv_padding_flag:
            fail(CHECKER, "query_padding_size", None, "left padding is not supported with query_rope")
        if i.kv_storage_mode == "tensor_list":
            fail(CHECKER, "key", "tensor list", "key tensor lists are not supported with query_rope")
        if i.is_out_quant_enable:
            fail(CHECKER, "attention_out", i.out_dtype, "post-quant output is not supported with query_rope")
    if i.mla_mode == "split_d512":
        if i.q_padding_flag or i.kv_padding_flag:
            fail(CHECKER, "query_padding_size", None, "left padding is not supported for decode MLA")
        if i.kv_storage_mode == "tensor_list":
            fail(CHECKER, "key", "tensor list", "key tensor lists are not supported with query_rope")
        if not i.is_max_workspace:
            if i.s1_size < 1:
                fail(CHECKER, "query", shape_str(c.t("query")), "decode MLA needs S of query >= 1")
            if c.full_quant and i.s1_size > 16:
                fail(CHECKER, "query", shape_str(c.t("query")), "full-quant decode MLA needs S of query in [1, 16]")
        if c.non_quant and c.arch35:
            if not 1 <= i.n1_size <= 128:
                fail(CHECKER, "num_heads", i.n1_size, "decode MLA needs num_heads in [1, 128]")
        elif i.n1_size not in _MLA_HEADS:
            fail(CHECKER, "num_heads", i.n1_size, "decode MLA needs num_heads a power of two in 1..128")
        if c.p.num_key_value_heads != 1:
            fail(CHECKER, "num_key_value_heads", c.p.num_key_value_heads, "decode MLA needs num_key_value_heads 1")
    _key_rope_contiguous(c)
    if c.anti_quant and (c.t("query_rope") is not None or c.t("key_rope") is not None):
        fail(CHECKER, "query_rope", qr, "rope tensors are not supported with antiquant")


def _key_rope_contiguous(c: CheckContext) -> None:
    i = c.info
    kr = c.t("key_rope")
    if c.full_quant and i.full_quant_mode == "mxfp8":
        stride = kr.stride if kr.stride_dims > 0 else None
        if stride is None and i.has_view_stride:
            stride = None  # op_host builds dense strides for it: always contiguous
        ax = first_noncontiguous_axis(kr.shape, stride)
        if ax is not None and not i.page_attention_flag:
            fail(CHECKER, "key_rope", kr.stride, "MXFP8 full quant needs a dense key_rope without paged attention")
        if ax is not None and ax not in (0, 1) and i.page_attention_flag:
            fail(CHECKER, "key_rope", kr.stride,
                 f"MXFP8 paged key_rope may be strided only along axes 0 and 1, not axis {ax}")
        return
    if not i.has_view_stride or i.page_attention_flag:
        return
    if i.key_rope_noncontig_dim != -1:
        fail(CHECKER, "key_rope", kr.stride, "without paged attention key_rope must be dense")


def consistency(c: CheckContext) -> None:
    i = c.info
    qr, kr = c.t("query_rope"), c.t("key_rope")
    if qr is None and kr is not None:
        fail(CHECKER, "key_rope", kr.shape, "key_rope needs query_rope")
    if kr is None and qr is not None:
        fail(CHECKER, "key_rope", None, "query_rope needs key_rope")
    if _split(c):
        if c.full_quant and i.full_quant_mode == "mxfp8":
            if i.qk_head_dim not in (64, 128):
                fail(CHECKER, "query", shape_str(c.t("query")), "MXFP8 with rope needs D of query/key 64 or 128")
        elif i.qk_head_dim not in (128, 512):
            fail(CHECKER, "query", shape_str(c.t("query")), "with rope D of query/key must be 128 or 512")
        _rope_matches(c, c.p.query.shape, qr.shape, "query")
        if i.kv_storage_mode == "contiguous":
            _rope_matches(c, c.p.key.shape, kr.shape, "key")
        if i.kv_storage_mode == "page_attention":
            _paged_key_rope(c, c.p.key.shape, kr.shape)
        if i.kv_storage_mode == "tensor_list":
            _list_key_rope(c, kr.shape)
    if c.non_quant and _split(c):
        if i.q_rope_dtype != i.q_dtype:
            fail(CHECKER, "query_rope", i.q_rope_dtype, f"query_rope must have the query dtype ({i.q_dtype})")
        if i.k_rope_dtype != i.kv_dtype:
            fail(CHECKER, "key_rope", i.k_rope_dtype, f"key_rope must have the key dtype ({i.kv_dtype})")


def _rope_matches(c: CheckContext, s, r, name: str) -> None:
    i = c.info
    rname = name + "_rope"
    if len(s) != len(r):
        fail(CHECKER, rname, r, f"{rname} must have the rank of {name} ({len(s)})")
    for ax in range(len(s) - 1):
        if s[ax] != r[ax]:
            fail(CHECKER, rname, r, f"axis {ax} of {rname} must equal axis {ax} of {name} {s}")
    if i.q_layout == "BSH":
        n = _cdiv(s[-1], i.qk_head_dim) & 0xFFFFFFFF
        rn = _cdiv(r[-1], i.rope_head_dim) & 0xFFFFFFFF
        if n != rn:
            fail(CHECKER, rname, r, f"the head count of {rname} ({rn}) must equal that of {name} ({n})")


def _paged_key_rope(c: CheckContext, k, r) -> None:
    i = c.info
    if len(k) != len(r):
        fail(CHECKER, "key_rope", r, f"a paged key_rope must have the rank of the key cache ({len(k)})")
    if len(k) == 3:
        kv = (dim(k, 0), dim(k, 1), _cdiv(dim(k, 2), i.qk_head_dim))
        rv = (dim(r, 0), dim(r, 1), _cdiv(dim(r, 2), i.rope_head_dim))
    elif len(k) == 4:
        kv = (dim(k, 0), dim(k, 2), dim(k, 1))
        rv = (dim(r, 0), dim(r, 2), dim(r, 1))
    else:
        kv = (dim(k, 0), dim(k, 3), dim(k, 1))
        rv = (dim(r, 0), dim(r, 3), dim(r, 1))
    kv = tuple(x & 0xFFFFFFFF for x in kv)
    rv = tuple(x & 0xFFFFFFFF for x in rv)
    for what, a, b in zip(("block number", "block size", "head count"), kv, rv):
        if a != b:
            fail(CHECKER, "key_rope", r, f"the {what} of a paged key_rope ({b}) must equal that of key ({a})")


def _list_key_rope(c: CheckContext, r) -> None:
    i = c.info
    keys = [t.shape for t in c.p.key_list]
    if len(keys) != dim(r, 0):
        fail(CHECKER, "key_rope", r, f"B of key_rope must equal the number of key tensors ({len(keys)})")
    layout = i.input_layout
    if layout in ("BNSD", "BNSD_BSND"):
        s_ax, n_of = 2, (lambda s, d: dim(s, 1))
    elif layout == "BSH":
        s_ax, n_of = 1, (lambda s, d: _cdiv(dim(s, 2), d))
    elif layout == "BSND":
        s_ax, n_of = 1, (lambda s, d: dim(s, 2))
    else:
        return
    rs, rn = dim(r, s_ax), n_of(r, i.rope_head_dim)
    for k in keys:
        if dim(k, s_ax) != rs:
            fail(CHECKER, "key_rope", r, f"S of key_rope ({rs}) must equal S of every key tensor ({dim(k, s_ax)})")
        if n_of(k, i.qk_head_dim) != rn:
            fail(CHECKER, "key_rope", r, "N of key_rope must equal N of every key tensor")
