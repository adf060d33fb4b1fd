"""FIA checker family "paged_attention": block_table, block_size and the paged KV cache layouts.

Rules (op_host paged-attention checker); all but the last apply only with a paged cache
----------------------------------------------------------------------------------------
single_para: block_table int32, 2-D, no zero axis; block_size > 0.
existence: block_table present.
cross_feature
  * actual_seq_lengths_kv with values (except the tiling sink);
  * full quant: MXFP8 forbids the 3-D (BnBsH) cache; FP8 GQA (3/3/2) needs the 4-D (BnNBsD) cache; other full
    quant with BSH/BSND(_NBSD) layouts forbids the 4-D cache; arch22 full quant: BnBsH/BnNBsD/NZ caches need a
    BSH/BSND/BNSD/TND/NTD query;
  * sparse 0/1 with a mask: the mask's last axis >= max blocks per batch * block_size;
  * no left padding, no shared prefix; arch35: equal head dims; an int8 query only with the split rope;
  * antiquant: not with an int8 cache in key antiquant mode 0/1 when S1 > 1; a 4-D cache needs BNSD or TND.
consistency
  * block_size: non-quant -> rope or D 64/128: multiple of 16 in [16, 1024]; otherwise S1 > 1: multiple of 128
    in [128, 1024], S1 = 1: multiple of 16 in [16, 512]; antiquant -> multiple of 32 bytes / cache element size,
    at most 512; full quant -> decode MLA 128, MXFP8 64/128/256/512/1024, FP8 GQA 128.
  * block_table: [B, >= max blocks per batch] (with kv lengths given, not the tiling sink); the key / value /
    key_rope caches match block_size, the kv head count and the head dims (3-D: H = N2 * D, at most 65535;
    4-D: N2 and D; 5-D NZ: N2, D0 = 32 bytes / element (antiquant: 16) and D1 = D / D0).
  * views: arch22 only the split-rope D512 MLA template takes a strided cache and only along axis 0; arch35
    antiquant and per-token-head MLA full quant need dense caches, BnBsH caches may be strided along axis 0,
    BnNBsD/NZ caches along axes 0/1.
  * without a paged cache every key / value / key_rope view must be dense.
"""

from __future__ import annotations

from ..layouts import dim, numel
from .base import CheckContext, fail, shape_str

CHECKER = "paged_attention"
H_LIMIT = 65535
_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "int8": 1, "hifloat8": 1, "float8_e4m3fn": 1, "int4": 0.5,
               "float4_e2m1": 0.5}


def _paged(c: CheckContext) -> bool:
    return c.info.kv_storage_mode == "page_attention"


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def single_para(c: CheckContext) -> None:
    if not _paged(c):
        return
    bt = c.t("block_table")
    if bt is not None:
        if bt.dtype != "int32":
            fail(CHECKER, "block_table", bt.dtype, "block_table must be int32")
        if len(bt.shape) != 2:
            fail(CHECKER, "block_table", bt.shape, "block_table must be 2-D")
        if numel(bt.shape) == 0:
            fail(CHECKER, "block_table", bt.shape, "every axis of block_table must be positive")
    if c.info.block_size <= 0:
        fail(CHECKER, "block_size", c.info.block_size, "block_size must be positive with paged attention")


def existence(c: CheckContext) -> None:
    if _paged(c) and c.t("block_table") is None:
        fail(CHECKER, "block_table", None, "paged attention needs block_table")


def _max_blocks(c: CheckContext) -> int:
    """The largest per-batch block count from actual_seq_lengths_kv (0 without values)."""
    i = c.info
    kv = c.t("actual_seq_lengths_kv")
    if kv is None or kv.data is None:
        return 0
    n = min(numel(kv.shape), i.b_size)
    best = 0
    for k in range(n):
        v = kv.data[k] if k < len(kv.data) else 0
        best = max(best, _div_trunc(v + i.block_size - 1, i.block_size))
    return best


def cross_feature(c: CheckContext) -> None:
    i, p = c.info, c.p
    if not _paged(c):
        return
    kv = c.t("actual_seq_lengths_kv")
    if not i.is_max_workspace and (kv is None or kv.data is None or numel(kv.shape) == 0):
        fail(CHECKER, "actual_seq_lengths_kv", None, "paged attention needs actual_seq_lengths_kv values")
    _kv_layout(c)
    mask = c.t("atten_mask")
    if i.sparse_mode in (0, 1) and mask is not None and kv is not None:
        need = _max_blocks(c) * i.block_size
        if mask.shape[-1] < need:
            fail(CHECKER, "atten_mask", mask.shape, f"with paged attention the last mask axis must be >= max blocks "
                 f"per batch * block_size ({need})")
    # the pse rule only applies to pse_type != 0, which the parser already rejects
    for name in ("query_padding_size", "kv_padding_size"):
        if name == "query_padding_size" and i.is_legacy_ifa and i.arch == "arch22":
            continue        # GetUpdateInfo drops the query padding of the arch22 legacy-IFA shape first
        if c.t(name) is not None:
            fail(CHECKER, name, shape_str(c.t(name)), "left padding is not supported with paged attention")
    for name in ("key_shared_prefix", "value_shared_prefix"):
        if c.t(name) is not None:
            fail(CHECKER, name, shape_str(c.t(name)), "a shared prefix is not supported with paged attention")
    if c.arch35 and i.is_qkv_d_different:
        fail(CHECKER, "value", shape_str(p.value), "paged attention needs equal head dims for query, key and value")
    if i.q_dtype == "int8" and i.rope_mode != "split":
        fail(CHECKER, "query", i.q_dtype, "an int8 query with paged attention is supported only for MLA full quant")
    if c.anti_quant:
        if i.s1_size > 1 and p.key_antiquant_mode in (0, 1) and i.kv_dtype == "int8":
            fail(CHECKER, "key_antiquant_mode", p.key_antiquant_mode,
                 "paged attention with an int8 cache in antiquant mode 0/1 needs S of query 1")
        if len(p.key.shape) == 4 and i.q_key_layout not in (1, 3):
            fail(CHECKER, "input_layout", i.input_layout, "a 4-D paged cache needs input_layout BNSD or TND")


def _kv_layout(c: CheckContext) -> None:
    i = c.info
    if not c.full_quant:
        return
    nd = len(c.p.key.shape)
    if i.full_quant_mode == "mxfp8":
        if nd == 3:
            fail(CHECKER, "key", c.p.key.shape, "MXFP8 full quant does not support the BnBsH paged cache")
    elif i.full_quant_mode == "qk_per_token_head_v_per_head":
        if nd != 4:
            fail(CHECKER, "key", c.p.key.shape, "FP8 GQA full quant needs the BnNBsD paged cache")
    elif i.input_layout in ("BSH", "BSND", "BSH_NBSD", "BSND_NBSD") and nd == 4:
        fail(CHECKER, "input_layout", i.input_layout, "the BnNBsD paged cache is not supported with this layout")
    if c.arch22 and i.q_layout not in ("BSH", "BSND", "BNSD", "TND", "NTD"):
        fail(CHECKER, "input_layout", i.input_layout, "paged caches need a BSH, BSND, BNSD, TND or NTD query")


def consistency(c: CheckContext) -> None:
    i = c.info
    if not _paged(c):
        for name, d in (("key", i.key_noncontig_dim), ("value", i.value_noncontig_dim),
                        ("key_rope", i.key_rope_noncontig_dim)):
            if d != -1:
                fail(CHECKER, name, getattr(c.t(name), "stride", None),
                     f"without paged attention {name} must be a dense tensor")
        return
    _block_size(c)
    _block_table(c)
    _non_contiguous(c)


def _block_size(c: CheckContext) -> None:
    i = c.info
    bs = i.block_size
    if c.non_quant:
        if i.rope_mode != "none" or i.qk_head_dim in (64, 128):
            if not (16 <= bs <= 1024 and bs % 16 == 0):
                fail(CHECKER, "block_size", bs, "block_size must be a multiple of 16 in [16, 1024]")
        else:
            if i.s1_size > 1 and not (128 <= bs <= 1024 and bs % 128 == 0):
                fail(CHECKER, "block_size", bs, "with S of query > 1 block_size must be a multiple of 128 in "
                     "[128, 1024]")
            if i.s1_size == 1 and not (16 <= bs <= 512 and bs % 16 == 0):
                fail(CHECKER, "block_size", bs, "with S of query 1 block_size must be a multiple of 16 in [16, 512]")
    elif c.anti_quant:
        align = int(32 / _ELEM_BYTES.get(i.kv_dtype, 2))
        if bs > 512 or bs < align or bs % align != 0:
            fail(CHECKER, "block_size", bs, f"antiquant paged attention with a {i.kv_dtype} cache needs block_size "
                 f"a multiple of {align} in [{align}, 512]")
    else:
        if i.mla_mode == "split_d512" and bs != 128:
            fail(CHECKER, "block_size", bs, "full-quant MLA paged attention needs block_size 128")
        if i.full_quant_mode == "mxfp8" and bs not in (64, 128, 256, 512, 1024):
            fail(CHECKER, "block_size", bs, "MXFP8 paged attention needs block_size 64, 128, 256, 512 or 1024")
        if i.full_quant_mode == "qk_per_token_head_v_per_head" and bs != 128:
            fail(CHECKER, "block_size", bs, "FP8 GQA paged attention needs block_size 128")


def _block_table(c: CheckContext) -> None:
    i = c.info
    if i.is_max_workspace or c.t("actual_seq_lengths_kv") is None:
        return
    need = _max_blocks(c)
    bt = c.p.block_table.shape
    if dim(bt, 0) != i.b_size or dim(bt, 1) < need:
        fail(CHECKER, "block_table", bt, f"block_table must be [B ({i.b_size}), >= max blocks per batch ({need})]")
    _cache_shape(c, c.p.key.shape, "key", i.qk_head_dim)
    _cache_shape(c, c.p.value.shape, "value", i.v_head_dim)
    if i.rope_mode == "split":
        _cache_shape(c, c.p.key_rope.shape, "key_rope", i.rope_head_dim)


def _cache_shape(c: CheckContext, s, name: str, d: int) -> None:
    i = c.info
    bs = i.block_size
    if len(s) == 3:
        if s[1] != bs:
            fail(CHECKER, name, s, f"the block axis of the paged {name} must be block_size ({bs})")
        h = (i.n2_size * d) & 0xFFFFFFFF
        if s[2] != h:
            fail(CHECKER, name, s, f"H of the paged {name} must be N2*D = {h}")
        if s[2] > H_LIMIT:
            fail(CHECKER, name, s, f"H of the paged {name} must be <= {H_LIMIT}")
    elif len(s) == 4:
        if s[1] != i.n2_size:
            fail(CHECKER, name, s, f"N of the paged {name} must be {i.n2_size}")
        if s[2] != bs:
            fail(CHECKER, name, s, f"the block axis of the paged {name} must be block_size ({bs})")
        if s[3] != d:
            fail(CHECKER, name, s, f"D of the paged {name} must be {d}")
    else:
        if dim(s, 1) != i.n2_size:
            fail(CHECKER, name, s, f"N of the paged {name} must be {i.n2_size}")
        if dim(s, 3) != bs:
            fail(CHECKER, name, s, f"the block axis of the paged {name} must be block_size ({bs})")
        if c.anti_quant:
            d0 = 16
        else:
            elem = _ELEM_BYTES.get(i.kv_dtype, 2) if i.kv_dtype in ("float16", "bfloat16", "int8", "hifloat8",
                                                                    "float8_e4m3fn") else 2
            if c.full_quant and name == "key_rope":
                elem = 2
            d0 = int(32 / elem)
        if dim(s, 4) != d0:
            fail(CHECKER, name, s, f"the last axis of the NZ paged {name} must be {d0}")
        if dim(s, 2) != d // d0:
            fail(CHECKER, name, s, f"D1 of the NZ paged {name} must be {d // d0}")


def _mla_d512_strided_ok(c: CheckContext) -> bool:
    i = c.info
    if (i.empty_tensor_flag or not i.page_attention_flag or i.quant_mode != "no" or i.rope_mode != "split"
            or i.mla_mode != "split_d512"):
        return False
    if i.q_dtype not in ("float16", "bfloat16") or i.q_dtype != i.kv_dtype or i.out_dtype == "int8":
        return False
    if i.qk_head_dim != 512 or i.v_head_dim != 512 or i.rope_head_dim != 64 or i.n2_size != 1:
        return False
    if i.learnable_sink_flag or i.sys_prefix_flag or i.pse_shift_flag or i.q_padding_flag or i.kv_padding_flag:
        return False
    if i.input_layout not in ("BSH", "BSND", "BNSD", "TND", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD"):
        return False
    return i.sparse_mode in (0, 3, 4, 9)


def _non_contiguous(c: CheckContext) -> None:
    i = c.info
    dims = {"key": i.key_noncontig_dim, "value": i.value_noncontig_dim, "key_rope": i.key_rope_noncontig_dim}
    if not i.has_view_stride or all(d == -1 for d in dims.values()):
        return
    if c.arch22:
        if not _mla_d512_strided_ok(c):
            fail(CHECKER, "key", c.p.key.stride, "on this architecture only the split-rope D512 MLA paged template "
                 "takes strided caches")
        for name, d in dims.items():
            t = c.t(name)
            bn_stride = t.stride[0] if t is not None and t.stride else 0
            if d > 0:
                fail(CHECKER, name, t.stride if t else None, f"a strided {name} cache may break density only along "
                     f"axis 0, not axis {d}")
            if d == 0 and bn_stride == 0:
                fail(CHECKER, name, t.stride if t else None, f"the axis-0 stride of {name} must be positive")
        return
    if c.anti_quant or i.full_quant_mode == "q_per_token_head_kv_per_tensor":
        for name, d in dims.items():
            if d != -1:
                fail(CHECKER, name, getattr(c.t(name), "stride", None),
                     f"antiquant / per-token-head MLA full quant paged caches must be dense "
                     f"({name} breaks at axis {d})")
        return
    limit = 0 if i.kv_layout == "BnBsH" else 1 if i.kv_layout in ("BnNBsD", "NZ") else None
    if limit is None:
        return
    for name, d in dims.items():
        if d > limit:
            fail(CHECKER, name, getattr(c.t(name), "stride", None),
                 f"a {i.kv_layout} paged {name} may be strided only along axes <= {limit}, not axis {d}")
