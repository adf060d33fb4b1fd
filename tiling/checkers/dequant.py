"""FIA checker family "dequant": quantisation parameters (antiquant KV caches and full quant).

Model
-----
The call's quantisation is read from dtypes: query dtype != key dtype is
*antiquant* (a quantised KV cache, key/value_antiquant_scale per mode); equal
non-fp16/bf16 dtypes are *full quant*, whose flavour comes from the three
quant modes (see ``FiaInfo.full_quant_mode``): per-tensor (GQA int8), MLA
(query per-token-head 3, key/value per-tensor 0, with split rope), MXFP8
(6/6/8) and FP8 GQA (3/3/2).

Antiquant modes (key_antiquant_mode / value_antiquant_mode): 0 per-channel (or per-tensor with a [1] scale),
1 per-token, 2 per-tensor-head, 3 per-token-head, 4 per-token with PA-managed scales, 5 per-token-head with
PA-managed scales, 6 per-token-group (MX); key and value modes are equal except the 0/1 mix.

Rules (op_host dequant checker)
-------------------------------
non-quant (arch35): no quant-scale or antiquant tensors at all.
antiquant
  * single_para: modes in 0..6 and equal (or 0/1); cache dtypes per mode (per-tensor [1] scales need int8;
    0 int8/int4/hif8/fp8; 1 int8/int4/fp8; 4 int8/fp8; 2 int8; 3 int8/int4; 5 int8; 0/1 int8/int4 and an int8
    cache needs fp16 query and output; 6 fp4_e2m1).
  * existence: both key and value scales; antiquant_mode 0 (no combined antiquant_scale / _offset); offsets in
    pairs; no offsets with fp8/hif8/fp4 caches.
  * cross_feature: layouts BSH/BSND/BNSD/BNSD_BSND/TND (int8 not TND; BNSD_BSND not with S1 = 1); S1 > 1 with an
    int8 cache: modes 2-5 unsupported, modes 0/1 need bf16 query+output, S1 <= 16 and a contiguous cache; int4 only
    with S1 = 1; paged: per-token / per-token-head scales cover max blocks * block_size (per-token-group along
    the second-last axis); no combined rope.
  * consistency: scale dtypes per mode (0 and 2: the query dtype; 1, 3, 4, 5: float32; 0/1: query dtype / float32;
    6: float8_e8m0); scale shapes per mode (see ``_key_scale_shape``); key and value scales equal (except 0/1);
    offsets have their scale's dtype and shape.
full quant
  * single_para: scale dtypes (MLA: float32; per-tensor: quant_scale1 float32, dequant_scale1/2 uint64 or
    float32; MXFP8: float8_e8m0 and quant_scale1 float32; FP8 GQA: float32); modes per flavour; scale shapes
    (MLA: key/value scales [1]; per-tensor: all [1]; MXFP8 / FP8 GQA quant_scale1 [1]).
  * existence: the flavour's scales present and non-empty, the other flavours' tensors absent; FP8 GQA needs a
    paged cache.
  * cross_feature: (q, kv, out) in (int8, int8, bf16), (fp8, fp8, fp16/bf16), (hif8, hif8, fp16/bf16) and value
    dtype = key dtype; flavour dtypes, layouts (per-tensor: no NBSD/transposed/TND/NTD; MLA fp8/hif8: BSH BSND
    BNSD TND and the NBSD/NTD outputs, int8: BSH BSND TND BSH_NBSD BSND_NBSD TND_NTD; MXFP8: TND; FP8 GQA: NTD_TND
    with a BnNBsD cache), axes (MLA: N1 a power of two <= 128, N2 1, G <= 128, D 512; others: N1, N2 in
    [1, 256], G in [1, 64]; MXFP8 D 64/64 or 128/128; FP8 GQA D 128; per-tensor 1 <= D <= 512 and D == Dv),
    FP8 GQA view strides, the query/kv scale shapes (MLA query scale, MXFP8 and FP8 GQA layouts), and the
    features each flavour lacks (post-quant, rope, pse, left padding, prefix, tensor lists, NZ caches, S1 = 1 ...).
"""

from __future__ import annotations

from ..layouts import dim, numel
from .base import CheckContext, ceil_div, fail, first_noncontiguous_axis, shape_str, view_stride

CHECKER = "dequant"
_MLA_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _modes(c: CheckContext) -> tuple[int, int]:
    return c.p.key_antiquant_mode, c.p.value_antiquant_mode


# ================================================================================================ phases

def single_para(c: CheckContext) -> None:
    if c.full_quant:
        _fq_scale_dtypes(c)
        _fq_modes(c)
        _fq_scale_shapes(c)
    elif c.anti_quant:
        _aq_modes(c)
        _aq_kv_dtype(c)


def existence(c: CheckContext) -> None:
    if c.non_quant:
        if c.arch35:
            for name in ("dequant_scale1", "quant_scale1", "dequant_scale2", "dequant_scale_query", "antiquant_scale",
                         "antiquant_offset", "key_antiquant_scale", "key_antiquant_offset", "value_antiquant_scale",
                         "value_antiquant_offset"):
                if c.t(name) is not None:
                    fail(CHECKER, name, shape_str(c.t(name)), f"{name} must be absent without quantisation")
    elif c.full_quant:
        _fq_existence(c)
    else:
        _aq_existence(c)


def cross_feature(c: CheckContext) -> None:
    if c.full_quant:
        _fq_dtype_combo(c)
        _fq_flavour_dtypes(c)
        _fq_layouts(c)
        _fq_axes(c)
        _fp8gqa_strides(c)
        _fq_scale_shapes_cross(c)
        _fq_features(c)
    elif c.anti_quant:
        _aq_features(c)


def consistency(c: CheckContext) -> None:
    if c.anti_quant:
        _aq_scale_dtypes(c)
        _aq_scale_shapes(c)
        _aq_offsets(c)


# ================================================================================================ antiquant

def _aq_modes(c: CheckContext) -> None:
    km, vm = _modes(c)
    for name, m in (("key_antiquant_mode", km), ("value_antiquant_mode", vm)):
        if m not in range(7):
            fail(CHECKER, name, m, f"{name} must be in 0..6")
    if (km, vm) != (0, 1) and km != vm:
        fail(CHECKER, "value_antiquant_mode", vm,
             f"key and value antiquant modes must be equal (except key 0 with value 1), got {km} and {vm}")


def _aq_kv_dtype(c: CheckContext) -> None:
    i = c.info
    ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    if ks is None or vs is None:
        return
    kv = i.kv_dtype
    km, vm = _modes(c)

    def need(allowed, what):
        if kv not in allowed:
            fail(CHECKER, "key", kv, f"antiquant {what} needs a {'/'.join(allowed)} cache")

    if (km, vm) == (0, 0):
        if tuple(ks.shape) == (1,) and kv != "int8":
            fail(CHECKER, "key", kv, "per-tensor antiquant (scale [1]) needs an int8 cache")
        need(("int8", "int4", "hifloat8", "float8_e4m3fn"), "per-channel mode 0")
    elif (km, vm) == (1, 1):
        need(("int8", "int4", "float8_e4m3fn"), "per-token mode 1")
    elif (km, vm) == (4, 4):
        need(("int8", "float8_e4m3fn"), "paged per-token mode 4")
    elif (km, vm) == (2, 2):
        need(("int8",), "per-tensor-head mode 2")
    elif (km, vm) == (3, 3):
        need(("int8", "int4"), "per-token-head mode 3")
    elif (km, vm) == (5, 5):
        need(("int8",), "paged per-token-head mode 5")
    elif (km, vm) == (0, 1):
        need(("int8", "int4"), "key per-channel with value per-token")
        if kv == "int8" and (i.q_dtype != "float16" or i.out_dtype != "float16"):
            fail(CHECKER, "query", i.q_dtype,
                 "key per-channel with value per-token on an int8 cache needs fp16 query and output")
    elif (km, vm) == (6, 6):
        need(("float4_e2m1",), "per-token-group mode 6")


def _aq_existence(c: CheckContext) -> None:
    ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    if ks is None or vs is None:
        fail(CHECKER, "key_antiquant_scale" if ks is None else "value_antiquant_scale", None,
             "antiquant needs both key_antiquant_scale and value_antiquant_scale")
    if c.p.antiquant_mode != 0:
        fail(CHECKER, "antiquant_mode", c.p.antiquant_mode, "antiquant supports only the key/value split mode 0")
    if c.t("antiquant_scale") is not None:
        fail(CHECKER, "antiquant_scale", shape_str(c.t("antiquant_scale")),
             "the combined antiquant_scale is not supported; use key/value_antiquant_scale")
    if c.t("antiquant_offset") is not None:
        fail(CHECKER, "antiquant_offset", shape_str(c.t("antiquant_offset")),
             "the combined antiquant_offset is not supported; use key/value_antiquant_offset")
    ko, vo = c.t("key_antiquant_offset"), c.t("value_antiquant_offset")
    if (ko is None) != (vo is None):
        fail(CHECKER, "value_antiquant_offset" if vo is None else "key_antiquant_offset", None,
             "key_antiquant_offset and value_antiquant_offset come together")
    if c.p.key.dtype in ("float8_e4m3fn", "hifloat8", "float4_e2m1") and ko is not None:
        fail(CHECKER, "key_antiquant_offset", ko.shape, f"{c.p.key.dtype} caches take no antiquant offset")


def _aq_features(c: CheckContext) -> None:
    i = c.info
    layout = i.input_layout
    if layout not in ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND"):
        fail(CHECKER, "input_layout", layout, "antiquant supports input_layout BSH, BSND, BNSD, BNSD_BSND, TND")
    if i.kv_dtype == "int8" and layout == "TND":
        fail(CHECKER, "input_layout", layout, "an int8 antiquant cache does not support TND")
    if i.s1_size == 1 and layout == "BNSD_BSND":
        fail(CHECKER, "input_layout", layout, "antiquant decode (S of query 1) does not support BNSD_BSND")
    km, vm = _modes(c)
    if i.s1_size > 1:
        if km in (2, 3, 4, 5) and i.kv_dtype == "int8":
            fail(CHECKER, "key_antiquant_mode", km, "an int8 cache with S of query > 1 does not support modes 2-5")
        if km in (0, 1) and i.kv_dtype == "int8" and (i.q_dtype != "bfloat16" or i.out_dtype != "bfloat16"):
            fail(CHECKER, "query", i.q_dtype,
                 "an int8 cache in mode 0/1 with S of query > 1 needs bf16 query and output")
        if km in (0, 1) and i.kv_dtype == "int8" and i.s1_size > 16:
            fail(CHECKER, "query", shape_str(c.t("query")), "an int8 cache in mode 0/1 needs S of query <= 16")
        if km in (0, 1) and i.kv_dtype == "int8" and i.kv_storage_mode != "contiguous":
            fail(CHECKER, "key", "not contiguous", "an int8 cache in mode 0/1 with S of query > 1 must be contiguous")
        if i.kv_dtype in ("int4", "int32"):
            fail(CHECKER, "key", i.kv_dtype, "int4 caches support only S of query 1")
    if i.kv_storage_mode == "page_attention":
        need = _u32(i.max_block_num_per_batch * i.block_size)
        ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
        if (km, vm) in ((1, 1), (3, 3)):
            nd = len(ks.shape)
            if dim(ks.shape, nd - 1) < need:
                fail(CHECKER, "key_antiquant_scale", ks.shape, f"paged per-token scales must cover max blocks * "
                     f"block_size ({need}) along the last axis")
            if dim(vs.shape, nd - 1) < need:
                fail(CHECKER, "value_antiquant_scale", vs.shape, f"paged per-token scales must cover max blocks * "
                     f"block_size ({need}) along the last axis")
        if (km, vm) == (6, 6):
            nd = len(ks.shape)
            if dim(ks.shape, nd - 2) < need:
                fail(CHECKER, "key_antiquant_scale", ks.shape, f"paged per-token-group scales must cover max blocks "
                     f"* block_size ({need}) along the second-last axis")
    if i.rope_mode == "combine":
        fail(CHECKER, "query", shape_str(c.t("query")), "antiquant does not support the combined rope (D 192/128)")


def _aq_scale_dtypes(c: CheckContext) -> None:
    i = c.info
    km, vm = _modes(c)
    ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    q = i.q_dtype
    want = {(0, 0): (q, q), (1, 1): ("float32", "float32"), (2, 2): (q, q), (3, 3): ("float32", "float32"),
            (5, 5): ("float32", "float32"), (4, 4): ("float32", "float32"), (0, 1): (q, "float32"),
            (6, 6): ("float8_e8m0", "float8_e8m0")}.get((km, vm))
    if want is None:
        return
    if ks.dtype != want[0]:
        fail(CHECKER, "key_antiquant_scale", ks.dtype, f"antiquant modes {km}/{vm} need a {want[0]} key scale")
    if vs.dtype != want[1]:
        fail(CHECKER, "value_antiquant_scale", vs.dtype, f"antiquant modes {km}/{vm} need a {want[1]} value scale")


def _aq_scale_shapes(c: CheckContext) -> None:
    km, vm = _modes(c)
    ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    if (km, vm) in ((0, 0), (0, 1)):
        _per_channel_shape(c, ks.shape)
    if (km, vm) == (1, 1):
        _per_token_shape(c, ks.shape, "key_antiquant_scale")
    if (km, vm) == (2, 2):
        _per_tensor_head_shape(c, ks.shape)
    if (km, vm) == (3, 3):
        _per_token_head_shape(c, ks.shape)
    if (km, vm) == (4, 4):
        _paged_per_token_shape(c, ks.shape)
    if (km, vm) == (5, 5):
        _paged_per_token_head_shape(c, ks.shape)
    if (km, vm) == (0, 1):
        _per_token_shape(c, vs.shape, "value_antiquant_scale")
    if (km, vm) == (6, 6):
        _per_token_group_shape(c, ks.shape)
    if (km, vm) != (0, 1) and tuple(ks.shape) != tuple(vs.shape):
        fail(CHECKER, "value_antiquant_scale", vs.shape,
             f"value_antiquant_scale must have the shape of key_antiquant_scale {tuple(ks.shape)}")


def _per_channel_shape(c: CheckContext, s) -> None:
    i = c.info
    n, d = i.n2_size, i.qk_head_dim
    h = _u32(n * d)
    allowed = {1: [(h,), (1,)], 2: [(1, h), (n, d)], 3: [(1, n, d), (n, 1, d)], 4: [(1, n, 1, d), (1, 1, n, d)]}
    if len(s) not in allowed:
        fail(CHECKER, "key_antiquant_scale", s, "per-channel antiquant scales must have 1 to 4 dims")
    if tuple(s) not in allowed[len(s)]:
        fail(CHECKER, "key_antiquant_scale", s, f"a {len(s)}-D per-channel scale must be one of "
             f"{' or '.join(str(list(x)) for x in allowed[len(s)])}")


def _tnd_sink_skip(c: CheckContext) -> bool:
    return c.info.is_max_workspace and c.info.q_layout in ("TND", "NTD")


def _per_token_shape(c: CheckContext, s, name: str) -> None:
    i = c.info
    if _tnd_sink_skip(c):
        return
    b, s2 = i.b_size, i.s2_size
    if len(s) == 2:
        if s[0] != b or s[1] < s2:
            fail(CHECKER, name, s, f"a 2-D per-token scale must be [B ({b}), >= S of key ({s2})]")
    elif len(s) == 3:
        if s[0] != 1 or s[1] != b or s[2] < s2:
            fail(CHECKER, name, s, f"a 3-D per-token scale must be [1, B ({b}), >= S of key ({s2})]")
    else:
        fail(CHECKER, name, s, "per-token scales must have 2 or 3 dims")


def _per_tensor_head_shape(c: CheckContext, s) -> None:
    if tuple(s) != (c.info.n2_size,):
        fail(CHECKER, "key_antiquant_scale", s, f"per-tensor-head scales must be [N2] = [{c.info.n2_size}]")


def _per_token_head_shape(c: CheckContext, s) -> None:
    i = c.info
    if _tnd_sink_skip(c):
        return
    if len(s) != 3:
        fail(CHECKER, "key_antiquant_scale", s, "per-token-head scales must have 3 dims")
    if s[0] != i.b_size or s[1] != i.n2_size or s[2] < i.s2_size:
        fail(CHECKER, "key_antiquant_scale", s,
             f"per-token-head scales must be [B ({i.b_size}), N2 ({i.n2_size}), >= S of key ({i.s2_size})]")


def _paged_per_token_shape(c: CheckContext, s) -> None:
    i = c.info
    if len(s) != 2:
        fail(CHECKER, "key_antiquant_scale", s, "paged per-token scales must have 2 dims")
    want = (_u32(i.total_block_num), _u32(i.block_size))
    if tuple(s) != want:
        fail(CHECKER, "key_antiquant_scale", s,
             f"paged per-token scales must be [block_num, block_size] = {list(want)}")


def _paged_per_token_head_shape(c: CheckContext, s) -> None:
    i = c.info
    if len(s) != 3:
        fail(CHECKER, "key_antiquant_scale", s, "paged per-token-head scales must have 3 dims")
    want = (_u32(i.total_block_num), i.n2_size, _u32(i.block_size))
    if tuple(s) != want:
        fail(CHECKER, "key_antiquant_scale", s,
             f"paged per-token-head scales must be [block_num, N2, block_size] = {list(want)}")


def _per_token_group_shape(c: CheckContext, s) -> None:
    i = c.info
    if _tnd_sink_skip(c):
        return
    if len(s) != 5:
        fail(CHECKER, "key_antiquant_scale", s, "per-token-group scales must have 5 dims")
    if s[0] != 1 or s[1] != i.b_size or s[2] != i.n2_size or s[3] < i.s2_size or s[4] != i.qk_head_dim // 32:
        fail(CHECKER, "key_antiquant_scale", s, f"per-token-group scales must be [1, B ({i.b_size}), N2 "
             f"({i.n2_size}), >= S of key ({i.s2_size}), D/32 ({i.qk_head_dim // 32})]")


def _aq_offsets(c: CheckContext) -> None:
    for side in ("key", "value"):
        off, sc = c.t(f"{side}_antiquant_offset"), c.t(f"{side}_antiquant_scale")
        if off is not None and sc is not None and off.dtype != sc.dtype:
            fail(CHECKER, f"{side}_antiquant_offset", off.dtype,
                 f"{side}_antiquant_offset must have the dtype of {side}_antiquant_scale ({sc.dtype})")
    ks, vs = c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    ko, vo = c.t("key_antiquant_offset"), c.t("value_antiquant_offset")
    if None in (ks, vs, ko, vo):
        return
    if tuple(ko.shape) != tuple(ks.shape):
        fail(CHECKER, "key_antiquant_offset", ko.shape, f"key_antiquant_offset must have the shape of its scale "
             f"{tuple(ks.shape)}")
    if tuple(vo.shape) != tuple(vs.shape):
        fail(CHECKER, "value_antiquant_offset", vo.shape, f"value_antiquant_offset must have the shape of its "
             f"scale {tuple(vs.shape)}")


# ================================================================================================ full quant

def _flavour(c: CheckContext) -> str:
    return c.info.full_quant_mode


def _fq_scale_dtypes(c: CheckContext) -> None:
    f = _flavour(c)
    dq, ks, vs = c.t("dequant_scale_query"), c.t("key_antiquant_scale"), c.t("value_antiquant_scale")
    if f == "q_per_token_head_kv_per_tensor" and None not in (dq, ks, vs):
        for name, t in (("dequant_scale_query", dq), ("key_antiquant_scale", ks), ("value_antiquant_scale", vs)):
            if t.dtype != "float32":
                fail(CHECKER, name, t.dtype, "MLA full quant scales must be float32")
    if f == "per_tensor":
        qs1, ds1, ds2 = c.t("quant_scale1"), c.t("dequant_scale1"), c.t("dequant_scale2")
        if None not in (qs1, ds1, ds2):
            if qs1.dtype != "float32":
                fail(CHECKER, "quant_scale1", qs1.dtype, "per-tensor full quant needs a float32 quant_scale1")
            for name, t in (("dequant_scale1", ds1), ("dequant_scale2", ds2)):
                if t.dtype not in ("uint64", "float32"):
                    fail(CHECKER, name, t.dtype, f"per-tensor full quant needs {name} uint64 or float32")
    if f in ("mxfp8", "qk_per_token_head_v_per_head") and None not in (dq, ks, vs):
        want = "float8_e8m0" if f == "mxfp8" else "float32"
        what = "MXFP8" if f == "mxfp8" else "FP8 GQA"
        for name, t in (("dequant_scale_query", dq), ("key_antiquant_scale", ks), ("value_antiquant_scale", vs)):
            if t.dtype != want:
                fail(CHECKER, name, t.dtype, f"{what} full quant needs {name} {want}")
        qs1 = c.t("quant_scale1")
        if qs1 is not None and qs1.dtype != "float32":
            fail(CHECKER, "quant_scale1", qs1.dtype, f"{what} full quant needs a float32 quant_scale1")


def _fq_modes(c: CheckContext) -> None:
    f = _flavour(c)
    p = c.p
    want = {"per_tensor": (0, 0, 0), "q_per_token_head_kv_per_tensor": (3, 0, 0), "mxfp8": (6, 6, 8),
            "qk_per_token_head_v_per_head": (3, 3, 2)}.get(f)
    got = (p.query_quant_mode, p.key_antiquant_mode, p.value_antiquant_mode)
    if want is not None and got != want:
        fail(CHECKER, "query_quant_mode", got, f"{f.replace('_', ' ')} full quant needs query/key/value quant modes "
             f"{want}")


def _scalar_shape_ok(t) -> bool:
    return t is None or (len(t.shape) == 1 and numel(t.shape) == 1)


def _fq_scale_shapes(c: CheckContext) -> None:
    f = _flavour(c)
    names = {"q_per_token_head_kv_per_tensor": ("key_antiquant_scale", "value_antiquant_scale"),
             "per_tensor": ("quant_scale1", "dequant_scale1", "dequant_scale2"),
             "mxfp8": ("quant_scale1",), "qk_per_token_head_v_per_head": ("quant_scale1",)}.get(f, ())
    for name in names:
        if not _scalar_shape_ok(c.t(name)):
            fail(CHECKER, name, c.t(name).shape, f"{name} must have shape [1] in this full-quant mode")


def _fq_existence(c: CheckContext) -> None:
    f = _flavour(c)
    if f == "per_tensor":
        required = ("quant_scale1", "dequant_scale1", "dequant_scale2")
        forbidden = ("antiquant_offset", "key_antiquant_offset", "value_antiquant_offset", "antiquant_scale",
                     "key_antiquant_scale", "value_antiquant_scale", "dequant_scale_query", "key_rope_antiquant_scale")
    elif f == "q_per_token_head_kv_per_tensor":
        required = ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale")
        forbidden = ("antiquant_offset", "key_antiquant_offset", "value_antiquant_offset", "quant_scale1",
                     "dequant_scale1", "dequant_scale2", "antiquant_scale", "key_rope_antiquant_scale")
    elif f in ("mxfp8", "qk_per_token_head_v_per_head"):
        required = ("dequant_scale_query", "key_antiquant_scale", "value_antiquant_scale")
        forbidden = ("antiquant_offset", "key_antiquant_offset", "value_antiquant_offset", "dequant_scale1",
                     "dequant_scale2", "quant_scale2", "quant_offset2", "antiquant_scale", "key_rope_antiquant_scale")
    else:
        return
    for name in required:
        if c.t(name) is None:
            fail(CHECKER, name, None, f"{f.replace('_', ' ')} full quant needs {name}")
    if f == "per_tensor" and any(numel(c.t(n).shape) == 0 for n in required):
        fail(CHECKER, "quant_scale1", None, "per-tensor full-quant scales must not be empty")
    for name in forbidden:
        if c.t(name) is not None:
            fail(CHECKER, name, shape_str(c.t(name)), f"{name} must be absent in {f.replace('_', ' ')} full quant")
    if f == "qk_per_token_head_v_per_head" and c.t("block_table") is None:
        fail(CHECKER, "block_table", None, "FP8 GQA full quant supports only paged attention")


def _fq_dtype_combo(c: CheckContext) -> None:
    i = c.info
    combo = (i.q_dtype, i.kv_dtype, i.out_dtype)
    ok = {("int8", "int8", "bfloat16"), ("float8_e4m3fn", "float8_e4m3fn", "float16"),
          ("float8_e4m3fn", "float8_e4m3fn", "bfloat16"), ("hifloat8", "hifloat8", "float16"),
          ("hifloat8", "hifloat8", "bfloat16")}
    if combo not in ok:
        fail(CHECKER, "query", combo, "full quant supports (query, key/value, attention_out) dtypes "
             "(int8, int8, bf16), (fp8_e4m3fn, fp8_e4m3fn, fp16/bf16), (hifloat8, hifloat8, fp16/bf16)")
    value_dtype = c.p.value_as_read.dtype
    if value_dtype != i.kv_dtype:
        fail(CHECKER, "value", value_dtype, f"full quant needs value dtype = key dtype ({i.kv_dtype})")


def _fq_flavour_dtypes(c: CheckContext) -> None:
    i = c.info
    f = _flavour(c)
    if f == "q_per_token_head_kv_per_tensor":
        if i.q_dtype not in ("float8_e4m3fn", "int8", "hifloat8"):
            fail(CHECKER, "query", i.q_dtype, "MLA full quant needs fp8_e4m3fn, int8 or hifloat8 query/key/value")
        if i.out_dtype != "bfloat16":
            fail(CHECKER, "attention_out", i.out_dtype, "MLA full quant needs bf16 output")
        if i.q_rope_dtype != "bfloat16" or i.k_rope_dtype != "bfloat16":
            fail(CHECKER, "query_rope", (i.q_rope_dtype, i.k_rope_dtype), "MLA full quant needs bf16 rope tensors")
    elif f == "per_tensor":
        if i.q_dtype != "int8":
            fail(CHECKER, "query", i.q_dtype, "per-tensor full quant needs an int8 query")
    elif f == "mxfp8":
        if i.q_dtype != "float8_e4m3fn":
            fail(CHECKER, "query", i.q_dtype, "MXFP8 full quant needs fp8_e4m3fn query/key/value")
        if i.out_dtype not in ("bfloat16", "float16"):
            fail(CHECKER, "attention_out", i.out_dtype, "MXFP8 full quant needs fp16 or bf16 output")
        if i.rope_mode == "split":
            if i.q_rope_dtype != "bfloat16" or i.k_rope_dtype != "bfloat16":
                fail(CHECKER, "query_rope", (i.q_rope_dtype, i.k_rope_dtype), "MXFP8 with rope needs bf16 rope tensors")
            if i.out_dtype != "bfloat16":
                fail(CHECKER, "attention_out", i.out_dtype, "MXFP8 with rope needs bf16 output")
    elif f == "qk_per_token_head_v_per_head":
        if i.q_dtype != "float8_e4m3fn":
            fail(CHECKER, "query", i.q_dtype, "FP8 GQA full quant needs fp8_e4m3fn query/key/value")
        if i.out_dtype not in ("bfloat16", "float16"):
            fail(CHECKER, "attention_out", i.out_dtype, "FP8 GQA full quant needs fp16 or bf16 output")


def _fq_layouts(c: CheckContext) -> None:
    i = c.info
    f = _flavour(c)
    layout = i.input_layout
    if f == "per_tensor" and layout in ("BNSD_NBSD", "BSND_NBSD", "BSH_NBSD", "BSH_BNSD", "BSND_BNSD", "TND", "NTD",
                                        "NTD_TND", "TND_NTD"):
        fail(CHECKER, "input_layout", layout, f"per-tensor full quant does not support input_layout {layout}")
    if f == "q_per_token_head_kv_per_tensor":
        fp8 = ("BSH", "BSND", "BNSD", "TND", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD")
        int8 = ("BSH", "BSND", "TND", "BSH_NBSD", "BSND_NBSD", "TND_NTD")
        if i.q_dtype in ("float8_e4m3fn", "hifloat8") and layout not in fp8:
            fail(CHECKER, "input_layout", layout, f"fp8/hif8 MLA full quant needs input_layout in {', '.join(fp8)}")
        if i.q_dtype == "int8" and layout not in int8:
            fail(CHECKER, "input_layout", layout, f"int8 MLA full quant needs input_layout in {', '.join(int8)}")
    if f == "mxfp8" and layout != "TND":
        fail(CHECKER, "input_layout", layout, "MXFP8 full quant needs input_layout TND")
    if f == "qk_per_token_head_v_per_head":
        if layout != "NTD_TND":
            fail(CHECKER, "input_layout", layout, "FP8 GQA full quant needs input_layout NTD_TND")
        if i.q_layout != "NTD":
            fail(CHECKER, "input_layout", layout, "FP8 GQA full quant needs an NTD query")
        if i.kv_layout != "BnNBsD":
            fail(CHECKER, "key", c.p.key.shape, "FP8 GQA full quant needs a BnNBsD paged cache")


def _fq_axes(c: CheckContext) -> None:
    i = c.info
    f = _flavour(c)
    mla = f == "q_per_token_head_kv_per_tensor"
    if mla:
        if i.n1_size not in _MLA_HEADS:
            fail(CHECKER, "num_heads", i.n1_size, "MLA full quant needs num_heads a power of two in 1..128")
    elif not 1 <= i.n1_size <= 256:
        fail(CHECKER, "num_heads", i.n1_size, "full quant needs num_heads in [1, 256]")
    if i.n1_size % i.n2_size:
        fail(CHECKER, "num_heads", i.n1_size, "num_heads must be a multiple of num_key_value_heads")
    if mla:
        if i.n2_size != 1:
            fail(CHECKER, "num_key_value_heads", i.n2_size, "MLA full quant needs one kv head")
        if not 1 <= i.g_size <= 128:
            fail(CHECKER, "num_heads", i.n1_size, "MLA full quant needs G in [1, 128]")
    else:
        if not 1 <= i.n2_size <= 256:
            fail(CHECKER, "num_key_value_heads", i.n2_size, "full quant needs num_key_value_heads in [1, 256]")
        if not 1 <= i.g_size <= 64:
            fail(CHECKER, "num_heads", i.n1_size, "full quant needs G in [1, 64]")
    d, dv = i.qk_head_dim, i.v_head_dim
    if mla:
        if d != 512:
            fail(CHECKER, "query", shape_str(c.t("query")), "MLA full quant needs D 512")
    elif f == "mxfp8":
        if (d, dv) not in ((128, 128), (64, 64)):
            fail(CHECKER, "query", shape_str(c.t("query")), "MXFP8 full quant needs D of query and value both 64 or "
                 "both 128")
    elif f == "qk_per_token_head_v_per_head":
        if d != 128 or dv != 128:
            fail(CHECKER, "query", shape_str(c.t("query")), "FP8 GQA full quant needs D 128")
    else:
        if not 1 <= d <= 512:
            fail(CHECKER, "query", shape_str(c.t("query")), "per-tensor full quant needs 1 <= D <= 512")
        if d != dv:
            fail(CHECKER, "value", shape_str(c.t("value")), "per-tensor full quant needs D of value = D of key")


def _fp8gqa_strides(c: CheckContext) -> None:
    i = c.info
    if _flavour(c) != "qk_per_token_head_v_per_head" or not i.has_view_stride:
        return
    ks = c.t("key_antiquant_scale")
    if ks is not None and ks.stride_dims >= 2 and ks.stride[2] != 1:
        fail(CHECKER, "key_antiquant_scale", ks.stride, "the block axis of the key scale view must have stride 1")
    for name, d in (("key", i.qk_head_dim), ("value", i.v_head_dim)):
        t = c.t(name)
        if t is not None and t.stride_dims >= 4 and (t.stride[3] != 1 or t.stride[2] != d):
            fail(CHECKER, name, t.stride, f"a {name} cache view must have strides (..., {d}, 1) on its last two axes")


def _fq_scale_shapes_cross(c: CheckContext) -> None:
    f = _flavour(c)
    if f == "q_per_token_head_kv_per_tensor":
        _mla_query_scale(c)
    elif f == "mxfp8":
        _mxfp8_scales(c)
    elif f == "qk_per_token_head_v_per_head":
        _fp8gqa_scales(c)


def _mla_query_scale(c: CheckContext) -> None:
    i = c.info
    q = c.p.query.shape
    s = c.p.dequant_scale_query.shape
    if i.q_layout == "BSH":
        if len(s) != len(q):
            fail(CHECKER, "dequant_scale_query", s, "with BSH the query scale must have the rank of query")
        if q[0] != s[0] or q[1] != s[1] or _u32(c.p.num_heads) != s[2]:
            fail(CHECKER, "dequant_scale_query", s, f"with BSH the query scale must be [B, S, num_heads] = "
                 f"[{q[0]}, {q[1]}, {c.p.num_heads}]")
    elif i.q_layout in ("BSND", "BNSD", "TND"):
        if len(s) != len(q) - 1:
            fail(CHECKER, "dequant_scale_query", s, "the query scale must have the query's rank minus one")
        for ax in range(len(s)):
            if q[ax] != s[ax]:
                fail(CHECKER, "dequant_scale_query", s, f"axis {ax} of the query scale must equal axis {ax} of query")


def _contiguous_except(name: str, shape, stride, allowed_axes) -> None:
    ax = first_noncontiguous_axis(shape, stride)
    if ax is not None and ax not in allowed_axes:
        fail(CHECKER, name, stride, f"{name} may be strided only along axes {sorted(allowed_axes)}, not axis {ax}")


def _mxfp8_scales(c: CheckContext) -> None:
    i, p = c.info, c.p
    q, k = p.query.shape, p.key.shape
    v = p.key_list[1].shape if len(p.key_list) > 1 else p.value.shape
    dq, ks, vs = p.dequant_scale_query.shape, p.key_antiquant_scale.shape, p.value_antiquant_scale.shape
    scale_rank = (6 if i.kv_layout == "NZ" else 5) if i.page_attention_flag else 4
    if not i.page_attention_flag:
        for name, shape in (("key", k), ("value", v), ("key_antiquant_scale", ks), ("value_antiquant_scale", vs)):
            if first_noncontiguous_axis(shape, view_stride(c, name)) is not None:
                fail(CHECKER, name, view_stride(c, name), "MXFP8 without paged attention needs dense tensors")
    if len(dq) not in (4, 5):
        fail(CHECKER, "dequant_scale_query", dq, "the MXFP8 query scale must have 4 or 5 dims")
    if len(ks) != scale_rank or len(vs) != scale_rank:
        fail(CHECKER, "key_antiquant_scale", ks, f"MXFP8 key/value scales must have {scale_rank} dims here")
    if len(dq) == 4:
        if dq[0] != dim(q, 0) or dq[1] != i.n1_size or dq[2] != ceil_div(dim(q, 2), 64) or dq[3] != 2:
            fail(CHECKER, "dequant_scale_query", dq, "a 4-D MXFP8 query scale must be [T, N1, ceil(D/64), 2]")
    elif (dq[0] != i.n2_size or dq[1] != dim(q, 0) or dq[2] != i.g_size or dq[3] != ceil_div(dim(q, 2), 64)
          or dq[4] != 2):
        fail(CHECKER, "dequant_scale_query", dq, "a 5-D MXFP8 query scale must be [N2, T, G, ceil(D/64), 2]")
    if i.page_attention_flag:
        if i.kv_layout not in ("BnNBsD", "NZ"):
            fail(CHECKER, "key", k, "MXFP8 paged caches must be BnNBsD or NZ")
        _contiguous_except("key", k, view_stride(c, "key"), (0, 1))
        _contiguous_except("value", v, view_stride(c, "value"), (0, 1))
        bs = i.block_size
        if i.kv_layout == "BnNBsD":
            _contiguous_except("key_antiquant_scale", ks, view_stride(c, "key_antiquant_scale"), (0, 1))
            _contiguous_except("value_antiquant_scale", vs, view_stride(c, "value_antiquant_scale"), (0, 1))
            kw = (_u32(i.total_block_num), i.n2_size, bs, ceil_div(i.qk_head_dim, 64), 2)
            vw = (_u32(i.total_block_num), i.n2_size, ceil_div(bs, 64), i.v_head_dim, 2)
        else:
            _contiguous_except("key_antiquant_scale", ks, view_stride(c, "key_antiquant_scale"), (0, 1))
            _contiguous_except("value_antiquant_scale", vs, view_stride(c, "value_antiquant_scale"), (0, 1))
            kw = (_u32(i.total_block_num), i.n2_size, ceil_div(bs, 16), ceil_div(i.qk_head_dim, 64), 16, 2)
            vw = (_u32(i.total_block_num), i.n2_size, ceil_div(i.v_head_dim, 16), ceil_div(bs, 64), 16, 2)
        if tuple(ks) != kw:
            fail(CHECKER, "key_antiquant_scale", ks, f"the paged MXFP8 key scale must be {list(kw)}")
        if tuple(vs) != vw:
            fail(CHECKER, "value_antiquant_scale", vs, f"the paged MXFP8 value scale must be {list(vw)}")
        return
    if ks[0] != dim(k, 0) or ks[1] != i.n2_size or ks[2] != ceil_div(dim(k, 2), 64) or ks[3] != 2:
        fail(CHECKER, "key_antiquant_scale", ks, "the MXFP8 key scale must be [T, N2, ceil(D/64), 2]")
    if i.is_max_workspace and i.q_layout == "TND":
        return
    t64 = _value_scale_t(c)
    if vs[0] != t64 or vs[1] != i.n2_size or vs[2] != dim(v, 2) or vs[3] != 2:
        fail(CHECKER, "value_antiquant_scale", vs, f"the MXFP8 value scale must be [{t64}, N2, D, 2] "
             "(sum over batches of ceil(S2/64))")


def _value_scale_t(c: CheckContext) -> int:
    """Sum over batches of ceil(kv length / 64) from the cumulative kv lengths (0 without values)."""
    i = c.info
    kv = c.t("actual_seq_lengths_kv")
    if i.is_max_workspace or kv is None or kv.data is None:
        return 0
    d = kv.data
    total = 0
    for b in range(i.b_size):
        cur = d[b] if b < len(d) else 0
        prev = (d[b - 1] if b - 1 < len(d) else 0) if b else 0
        total += ceil_div(cur - prev if b else cur, 64)
    return total


def _fp8gqa_scales(c: CheckContext) -> None:
    i, p = c.info, c.p
    q = p.query.shape
    dq, ks, vs = p.dequant_scale_query.shape, p.key_antiquant_scale.shape, p.value_antiquant_scale.shape
    if len(dq) != 2:
        fail(CHECKER, "dequant_scale_query", dq, "the FP8 GQA query scale must be 2-D [N1, T]")
    if dq[0] != i.n1_size or dq[1] != dim(q, 1):
        fail(CHECKER, "dequant_scale_query", dq, f"the FP8 GQA query scale must be [{i.n1_size}, {dim(q, 1)}]")
    if len(ks) != 3:
        fail(CHECKER, "key_antiquant_scale", ks, "the FP8 GQA key scale must be 3-D [block_num, N2, block_size]")
    want = (_u32(i.total_block_num), i.n2_size, i.block_size)
    if tuple(ks) != want:
        fail(CHECKER, "key_antiquant_scale", ks, f"the FP8 GQA key scale must be {list(want)}")
    _contiguous_except("key_antiquant_scale", ks, view_stride(c, "key_antiquant_scale"), (0, 1))
    _contiguous_except("key", p.key.shape, view_stride(c, "key"), (0, 1))
    if len(vs) != 1:
        fail(CHECKER, "value_antiquant_scale", vs, "the FP8 GQA value scale must be 1-D [N2]")
    if vs[0] != i.n2_size:
        fail(CHECKER, "value_antiquant_scale", vs, f"the FP8 GQA value scale must be [{i.n2_size}]")
    v = p.key_list[1].shape if len(p.key_list) > 1 else p.value.shape
    _contiguous_except("value", v, view_stride(c, "value"), (0, 1))


def _fq_features(c: CheckContext) -> None:
    i = c.info
    f = _flavour(c)
    if f == "per_tensor":
        if i.is_out_quant_enable:
            fail(CHECKER, "attention_out", i.out_dtype, "per-tensor full quant does not support post-quant output")
        if i.mla_mode != "none":
            fail(CHECKER, "query_rope", shape_str(c.t("query_rope")), "per-tensor full quant does not support rope")
        if i.enable_alibi_pse:
            fail(CHECKER, "pse_type", i.pse_type, "per-tensor full quant does not support pse_type 2/3")
        if len(c.p.key.shape) == 5:
            fail(CHECKER, "key", c.p.key.shape, "per-tensor full quant does not support the NZ paged cache")
        if i.s1_size == 1:
            fail(CHECKER, "query", shape_str(c.t("query")), "per-tensor full quant does not support S of query 1")
        return
    if f not in ("q_per_token_head_kv_per_tensor", "mxfp8", "qk_per_token_head_v_per_head"):
        return
    what = {"q_per_token_head_kv_per_tensor": "MLA", "mxfp8": "MXFP8", "qk_per_token_head_v_per_head": "FP8 GQA"}[f]
    if i.enable_alibi_pse:
        fail(CHECKER, "pse_type", i.pse_type, f"{what} full quant does not support pse_type 2/3")
    if i.pse_shift_flag:
        fail(CHECKER, "pse_shift", shape_str(c.t("pse_shift")), f"{what} full quant does not support pse_shift")
    if i.q_padding_flag or i.kv_padding_flag:
        fail(CHECKER, "query_padding_size", None, f"{what} full quant does not support left padding")
    if i.sys_prefix_flag:
        fail(CHECKER, "key_shared_prefix", shape_str(c.t("key_shared_prefix")),
             f"{what} full quant does not support a shared prefix")
    if i.kv_storage_mode == "tensor_list":
        fail(CHECKER, "key", "tensor list", f"{what} full quant does not support key/value tensor lists")
    if f == "q_per_token_head_kv_per_tensor":
        if i.q_dtype == "int8" and not (i.kv_storage_mode == "page_attention" and len(c.p.key.shape) == 5):
            fail(CHECKER, "key", c.p.key.shape, "int8 MLA full quant needs the NZ paged cache")
        return
    if f == "qk_per_token_head_v_per_head" and i.rope_mode != "none":
        fail(CHECKER, "query_rope", shape_str(c.t("query_rope")), "FP8 GQA full quant does not support rope")
    if i.inner_precise not in (0, 1):
        fail(CHECKER, "inner_precise", i.inner_precise, f"{what} full quant needs inner_precise 0 or 1")
