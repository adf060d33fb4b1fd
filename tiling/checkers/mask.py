"""FIA checker family "mask": atten_mask dtype/format/shape, sparse_mode and pre/next tokens.

Rules (op_host mask checker)
----------------------------
single_para
  * atten_mask dtype bool / int8 / uint8, format ND/NCHW/NHWC/NCDHW.
  * sparse_mode in {0, 1, 2, 3, 4, 9}.
cross_feature
  * non-quant: decode MLA (split rope D 512) allows sparse 0/3/4/9; differing head dims allow sparse 0/2/3;
    arch22 sparse 9 (tree) needs the split rope, no left padding, no pse, no shared prefix, no int8 output and
    every batch's query length <= its kv length (batches with kv length 0 and the tiling sink skip this).
  * antiquant: decode (S1 = 1) allows sparse 0 only.
  * full quant: decode MLA with fp8/hif8/int8 query needs (mask -> sparse 3) and (no mask -> sparse 0); int8 MLA
    outside TND: S1 = 1 -> sparse 0 without mask, S1 > 1 -> sparse 3 with mask; MXFP8 (quant modes 6/6/8) and
    FP8 GQA (3/3/2) allow only sparse 0 without a mask or sparse 3 with one.
consistency
  * -next_tokens must not exceed pre_tokens (antiquant decode is exempt); antiquant + band + int8 output needs
    non-negative tokens.
  * a sparse mode other than 0 needs a mask.
  * mask shapes: sparse 0/1 -> [>=S1, >=S2+prefix] batches 1 or B (2-D only on arch22 without rope for
    BSH/BSND/BNSD/BNSD_BSND, 4-D with a singleton N); sparse 2/3/4 -> the compressed 2048x2048 mask (2-D, 3-D or
    4-D with singleton leading axes); sparse 9 -> 1-D or 3-D; antiquant decode -> 2/3/4-D [B or 1, (1,) >=S1,
    >=S2+prefix] with sparse 0/1 (2-D as above on arch22). The tiling sink skips shape checks (arch22 only
    for sparse 0/1).
"""

from __future__ import annotations

from ..errors import AclnnStatus
from ..layouts import dim
from .base import DTYPE_NAMES, FORMATS, CheckContext, fail, shape_str

CHECKER = "mask"
COMPRESSED = 2048
_SPARSE_MODES = (0, 1, 2, 3, 4, 9)
_TWO_DIM_LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND")


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def expected_mask(sparse_mode: int) -> str:
    """The atten_mask a sparse mode takes, in words (for the errors that find it missing)."""
    if sparse_mode in (2, 3, 4):
        return (f"the compressed {COMPRESSED}x{COMPRESSED} mask template triu(ones({COMPRESSED}, {COMPRESSED}), 1), "
                f"shape ({COMPRESSED}, {COMPRESSED}), (1, {COMPRESSED}, {COMPRESSED}) or (1, 1, {COMPRESSED}, "
                f"{COMPRESSED}); cvtile.kernels.golden.mask_template() builds it")
    if sparse_mode == 9:
        return "the tree mask"
    return "a full mask (1 = masked out) of shape (S1, S2), (B|1, S1, S2) or (B|1, 1, S1, S2)"


def single_para(c: CheckContext) -> None:
    m = c.t("atten_mask")
    if m is not None:
        if m.dtype not in DTYPE_NAMES["atten_mask"]:
            fail(CHECKER, "atten_mask", m.dtype, "atten_mask dtype must be int8, uint8 or bool",
                 AclnnStatus.PARAM_INVALID)
        if m.format not in FORMATS:
            fail(CHECKER, "atten_mask", m.format, f"atten_mask format must be one of {', '.join(FORMATS)}",
                 AclnnStatus.PARAM_INVALID)
    if c.info.sparse_mode not in _SPARSE_MODES:
        fail(CHECKER, "sparse_mode", c.info.sparse_mode, "sparse_mode must be one of 0, 1, 2, 3, 4, 9")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    sm = i.sparse_mode
    if c.non_quant:
        if i.mla_mode == "split_d512" and sm not in (0, 3, 4, 9):
            fail(CHECKER, "sparse_mode", sm, "decode MLA supports sparse_mode 0, 3, 4 and 9")
        if i.is_qkv_d_different and sm not in (0, 2, 3):
            fail(CHECKER, "sparse_mode", sm, "with D of query/key != D of value only sparse_mode 0, 2, 3 are supported")
        if c.arch22:
            _tree_mask_features(c)
    elif c.anti_quant:
        if i.s1_size == 1 and sm != 0:
            fail(CHECKER, "sparse_mode", sm, "antiquant decode (S of query 1) supports sparse_mode 0 only")
    else:
        _full_quant_mla(c)
        p = c.p
        qm, km, vm = p.query_quant_mode, p.key_antiquant_mode, p.value_antiquant_mode
        ok = (sm == 0 and not i.atten_mask_flag) or (sm == 3 and i.atten_mask_flag)
        if (qm, km, vm) == (6, 6, 8) and not ok:
            fail(CHECKER, "sparse_mode", sm, "MXFP8 full quant supports sparse_mode 0 without mask or 3 with mask")
        if (qm, km, vm) == (3, 3, 2) and not ok:
            fail(CHECKER, "sparse_mode", sm, "FP8 GQA full quant supports sparse_mode 0 without mask or 3 with mask")


def _tree_mask_features(c: CheckContext) -> None:
    i = c.info
    if i.sparse_mode != 9:
        return
    if i.rope_mode != "split":
        fail(CHECKER, "sparse_mode", 9, "sparse_mode 9 (tree mask) needs query_rope/key_rope")
    if i.q_padding_flag or i.kv_padding_flag:
        fail(CHECKER, "query_padding_size", None, "sparse_mode 9 does not support left padding")
    if i.pse_shift_flag:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), "sparse_mode 9 does not support pse_shift")
    if i.sys_prefix_flag:
        fail(CHECKER, "key_shared_prefix", shape_str(c.t("key_shared_prefix")),
             "sparse_mode 9 does not support a shared prefix")
    if i.out_dtype == "int8":
        fail(CHECKER, "attention_out", i.out_dtype, "sparse_mode 9 does not support int8 output")
    if i.is_max_workspace:
        return
    for qs, kvs in zip(i.q_size, i.kv_size):
        if kvs == 0:
            continue
        if qs > kvs:
            fail(CHECKER, "actual_seq_lengths", qs,
                 f"sparse_mode 9 needs each query length <= its kv length ({qs} > {kvs})")


def _full_quant_mla(c: CheckContext) -> None:
    i = c.info
    if i.mla_mode != "split_d512":
        return
    sm, has_mask = i.sparse_mode, i.atten_mask_flag
    if i.q_dtype in ("float8_e4m3fn", "hifloat8", "int8"):
        if has_mask and sm != 3:
            fail(CHECKER, "sparse_mode", sm, "full-quant MLA with a mask needs sparse_mode 3")
        if not has_mask and sm != 0:
            fail(CHECKER, "sparse_mode", sm, "full-quant MLA without a mask needs sparse_mode 0")
    if i.q_dtype == "int8" and i.input_layout not in ("TND", "TND_NTD"):
        if i.s1_size == 1:
            if sm != 0:
                fail(CHECKER, "sparse_mode", sm, "int8 MLA decode (S of query 1) needs sparse_mode 0")
            if has_mask:
                fail(CHECKER, "atten_mask", shape_str(c.t("atten_mask")),
                     "int8 MLA decode (S of query 1) takes no atten_mask")
        else:
            if sm != 3:
                fail(CHECKER, "sparse_mode", sm, "int8 MLA with S of query > 1 needs sparse_mode 3")
            if not has_mask:
                fail(CHECKER, "atten_mask", None, "int8 MLA with S of query > 1 needs an atten_mask")


def consistency(c: CheckContext) -> None:
    _tokens(c)
    _dim_and_shape(c)


def _tokens(c: CheckContext) -> None:
    i = c.info
    if c.anti_quant and i.s1_size == 1:
        return
    if -i.next_token > i.pre_token:
        fail(CHECKER, "pre_tokens", (i.pre_token, i.next_token),
             "the attended band is empty: -next_tokens must not exceed pre_tokens")
    if (i.antiquant_flag and i.sparse_mode == 4 and i.out_dtype == "int8"
            and (i.pre_token < 0 or i.next_token < 0)):
        fail(CHECKER, "pre_tokens", (i.pre_token, i.next_token),
             "with int8 output and sparse_mode 4, pre_tokens and next_tokens must not be negative")


def _min_mask_s2(i) -> int:
    base = i.s2_size if i.kv_storage_mode == "page_attention" else i.max_actualseq
    return _u32(base + i.system_prefix_len)


def _dim_and_shape(c: CheckContext) -> None:
    i = c.info
    sm = i.sparse_mode
    if not i.atten_mask_flag and sm != 0:
        fail(CHECKER, "atten_mask", None, f"sparse_mode {sm} needs an atten_mask: {expected_mask(sm)}")
    if not i.atten_mask_flag:
        return
    if i.is_max_workspace and (c.arch35 or sm in (0, 1)):
        return
    if i.antiquant_flag and i.s1_size == 1:
        _decode_antiquant_mask(c)
        return
    q_size, kv_size, batch, heads = _mask_extents(c)
    min_s2 = _min_mask_s2(i)
    if sm in (0, 1):
        ok = q_size >= i.s1_size and kv_size >= min_s2 and batch in (1, i.b_size) and _u32(heads) == 1
        if not ok:
            fail(CHECKER, "atten_mask", shape_str(c.t("atten_mask")),
                 f"atten_mask must be [B ({i.b_size}) or 1, >= S of query ({i.s1_size}), >= S of key ({i.s2_size}) "
                 f"+ prefix ({i.system_prefix_len})]")
    elif sm in (2, 3, 4):
        ok = batch == 1 and _u32(heads) == 1 and q_size == COMPRESSED and kv_size == COMPRESSED
        if not ok:
            fail(CHECKER, "atten_mask", shape_str(c.t("atten_mask")),
                 f"sparse_mode {sm} needs the compressed mask [2048, 2048], [1, 2048, 2048] or [1, 1, 2048, 2048]")


def _two_dim_allowed(c: CheckContext) -> None:
    i = c.info
    if i.rope_mode == "none":
        if i.input_layout not in _TWO_DIM_LAYOUTS:
            fail(CHECKER, "atten_mask", shape_str(c.t("atten_mask")),
                 f"a 2-D mask with sparse_mode 0/1 needs layout BSH, BSND, BNSD or BNSD_BSND, not {i.input_layout}")
    else:
        fail(CHECKER, "atten_mask", shape_str(c.t("atten_mask")),
             "a 2-D mask with sparse_mode 0/1 is not supported with rope or differing head dims")


def _mask_extents(c: CheckContext) -> tuple[int, int, int, int]:
    """(query extent, kv extent, batch, heads) of the mask as op_host reads it (u32 where op_host stores u32)."""
    i = c.info
    s = c.p.atten_mask.shape
    nd = len(s)
    if i.sparse_mode == 9:
        if nd not in (1, 3):
            fail(CHECKER, "atten_mask", s, "sparse_mode 9 needs a 1-D or 3-D atten_mask")
        if i.q_layout in ("TND", "NTD"):
            if i.is_max_workspace:
                return 0, 0, 1, 1
            size = sum(q * q for q in i.q_size)
        else:
            size = i.s1_size
        return _u32(size), _u32(size), _u32(dim(s, 0)), 1
    if nd == 2:
        if i.sparse_mode in (0, 1):
            if c.arch35:
                fail(CHECKER, "atten_mask", s, f"a 2-D atten_mask is not supported with sparse_mode {i.sparse_mode}")
            _two_dim_allowed(c)
        return _u32(s[0]), _u32(s[1]), 1, 1
    if nd == 3:
        return _u32(s[1]), _u32(s[2]), _u32(s[0]), 1
    if nd == 4:
        return _u32(s[2]), _u32(s[3]), _u32(s[0]), s[1]
    fail(CHECKER, "atten_mask", s, "atten_mask must have 2, 3 or 4 dims")


def _decode_antiquant_mask(c: CheckContext) -> None:
    i = c.info
    s = c.p.atten_mask.shape
    nd = len(s)
    min_s2 = _min_mask_s2(i)
    if nd == 2:
        if c.arch22 and i.sparse_mode in (0, 1):
            _two_dim_allowed(c)
            return
        fail(CHECKER, "atten_mask", s, "use a 3-D [B, S1, S2] or 4-D [B, 1, S1, S2] atten_mask")
    if nd == 3 and i.sparse_mode in (0, 1):
        if (s[0] not in (i.b_size, 1)) or s[1] < i.s1_size or s[2] < min_s2:
            fail(CHECKER, "atten_mask", s, "atten_mask must be [B or 1, >= S of query, >= S of key + prefix]")
        return
    if nd == 4 and i.sparse_mode in (0, 1):
        if (s[0] not in (i.b_size, 1)) or s[1] != 1 or s[2] < i.s1_size or s[3] < min_s2:
            fail(CHECKER, "atten_mask", s, "atten_mask must be [B or 1, 1, >= S of query, >= S of key + prefix]")
        return
    fail(CHECKER, "atten_mask", s, "atten_mask must have 2, 3 or 4 dims (3/4 only with sparse_mode 0/1)")
