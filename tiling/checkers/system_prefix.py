"""FIA checker family "system_prefix": key_shared_prefix / value_shared_prefix / actual_shared_prefix_len.

Rules (op_host system-prefix checker)
-------------------------------------
cross_feature (prefix given)
  * not with paged attention; not with tensor lists (arch22 only when S1 > 1); not with left padding or alibi;
    not with layouts BSH_BNSD, BSND_BNSD, TND, NTD, NTD_TND, TND_NTD; not with MLA (any rope); not with
    int8/int8, fp8/fp8 or hif8/hif8 full quant; post-quant needs int8 output.
  * antiquant: S1 > 1 -> key/value modes 0/0 or 1/1 with an int8 cache; S1 = 1 -> per mode pair: 0/0 int8
    (1-D scales) or int8/int4, 1/1 int8/int4, 2/2 int8, 3/3 int8/int4, 4/4 int8, 5/5 int8, 0/1 int8/int4; other
    pairs are rejected (checked only when key and value antiquant scales are given).
consistency
  * both prefix tensors have the rank of key; their dtypes equal the key dtype and each other;
  * batch axis 1; BNSD/BSND: N and D equal key's and each other's; BSH: H equal key's and each other's;
    equal S;
  * actual_shared_prefix_len (with values): layout BSH/BSND/BNSD/BNSD_BSND; value in [0, S of the prefixes];
  * key_shared_prefix and value_shared_prefix come together.
"""

from __future__ import annotations

from ..layouts import dim
from .base import CheckContext, fail, shape_str

CHECKER = "system_prefix"


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if not i.sys_prefix_flag:
        return
    kp = shape_str(c.t("key_shared_prefix"))
    if i.kv_storage_mode == "page_attention":
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with paged attention")
    if ((i.s1_size > 1 and c.arch22) or c.arch35) and i.kv_storage_mode == "tensor_list":
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with key/value tensor lists")
    if i.q_padding_flag or i.kv_padding_flag:
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with left padding")
    if i.enable_alibi_pse:
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with pse_type 2/3")
    if i.input_layout in ("BSH_BNSD", "BSND_BNSD", "TND", "NTD", "NTD_TND", "TND_NTD"):
        fail(CHECKER, "key_shared_prefix", kp, f"a shared prefix is not supported with input_layout {i.input_layout}")
    if i.mla_mode in ("combine_d128", "split_d128"):
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with prefill MLA")
    if i.mla_mode == "split_d512":
        fail(CHECKER, "key_shared_prefix", kp, "a shared prefix is not supported with decode MLA")
    for dt in ("int8", "float8_e4m3fn", "hifloat8"):
        if i.q_dtype == dt and i.kv_dtype == dt:
            fail(CHECKER, "key_shared_prefix", kp, f"a shared prefix is not supported when query and key are {dt}")
    if i.is_out_quant_enable and i.out_dtype != "int8":
        fail(CHECKER, "attention_out", i.out_dtype, "a shared prefix with post-quant needs int8 output")
    if c.anti_quant:
        _antiquant(c)


def _antiquant(c: CheckContext) -> None:
    i = c.info
    km, vm = c.p.key_antiquant_mode, c.p.value_antiquant_mode
    kv = i.kv_dtype
    if i.s1_size > 1:
        if (km, vm) in ((0, 0), (1, 1)):
            if kv != "int8":
                fail(CHECKER, "key", kv, f"a shared prefix with S of query > 1 and antiquant modes {km}/{vm} needs an "
                     "int8 cache")
        else:
            fail(CHECKER, "key_antiquant_mode", (km, vm),
                 "a shared prefix with S of query > 1 supports antiquant modes 0/0 and 1/1 only")
        return
    if i.s1_size != 1:
        return
    ks = c.t("key_antiquant_scale")
    if ks is None or c.t("value_antiquant_scale") is None:
        return
    int8_only = "int8 cache"
    int8_int4 = "int8 or int4 cache"
    if (km, vm) == (0, 0):
        need = int8_only if len(ks.shape) == 1 else int8_int4
    elif (km, vm) in ((1, 1), (3, 3), (0, 1)):
        need = int8_int4
    elif (km, vm) in ((2, 2), (4, 4), (5, 5)):
        need = int8_only
    else:
        fail(CHECKER, "key_antiquant_mode", (km, vm),
             f"antiquant modes {km}/{vm} are not supported with a shared prefix and S of query 1")
    allowed = ("int8",) if need == int8_only else ("int8", "int4")
    if kv not in allowed:
        fail(CHECKER, "key", kv, f"a shared prefix with S of query 1 and antiquant modes {km}/{vm} needs an {need}")


def consistency(c: CheckContext) -> None:
    i = c.info
    kp, vp = c.t("key_shared_prefix"), c.t("value_shared_prefix")
    key = c.p.key.shape
    if i.sys_prefix_flag and (len(kp.shape) != len(key) or len(vp.shape) != len(key)):
        fail(CHECKER, "key_shared_prefix", kp.shape, f"shared prefixes must have the rank of key ({len(key)})")
    if kp is not None and vp is not None:
        if kp.dtype != i.kv_dtype:
            fail(CHECKER, "key_shared_prefix", kp.dtype, f"key_shared_prefix must have the key dtype ({i.kv_dtype})")
        if kp.dtype != vp.dtype:
            fail(CHECKER, "value_shared_prefix", vp.dtype,
                 "value_shared_prefix must have the dtype of key_shared_prefix")
        _shapes(c, kp.shape, vp.shape, key)
        _prefix_len(c, kp.shape, vp.shape)
    if kp is not None and vp is None:
        fail(CHECKER, "value_shared_prefix", None, "key_shared_prefix needs value_shared_prefix")
    if kp is None and vp is not None:
        fail(CHECKER, "key_shared_prefix", None, "value_shared_prefix needs key_shared_prefix")


def _shapes(c: CheckContext, k, v, key) -> None:
    i = c.info
    if dim(k, 0) != 1:
        fail(CHECKER, "key_shared_prefix", k, "the batch axis of key_shared_prefix must be 1")
    if dim(v, 0) != 1:
        fail(CHECKER, "value_shared_prefix", v, "the batch axis of value_shared_prefix must be 1")
    ks = vs = 0
    if i.kv_layout in ("BNSD", "BSND"):
        s_ax, n_ax = (2, 1) if i.kv_layout == "BNSD" else (1, 2)
        ks, vs = _u32(dim(k, s_ax)), _u32(dim(v, s_ax))
        kn, vn, keyn = _u32(dim(k, n_ax)), _u32(dim(v, n_ax)), _u32(dim(key, n_ax))
        kd, vd, keyd = _u32(dim(k, 3)), _u32(dim(v, 3)), _u32(dim(key, 3))
        if kn != keyn:
            fail(CHECKER, "key_shared_prefix", k, f"N of key_shared_prefix must equal N of key ({keyn})")
        if kn != vn:
            fail(CHECKER, "value_shared_prefix", v, "N of value_shared_prefix must equal N of key_shared_prefix")
        if kd != keyd:
            fail(CHECKER, "key_shared_prefix", k, f"D of key_shared_prefix must equal D of key ({keyd})")
        if kd != vd:
            fail(CHECKER, "value_shared_prefix", v, "D of value_shared_prefix must equal D of key_shared_prefix")
    if i.kv_layout == "BSH":
        kh, vh, keyh = _u32(dim(k, 2)), _u32(dim(v, 2)), _u32(dim(key, 2))
        ks, vs = _u32(dim(k, 1)), _u32(dim(v, 1))
        if kh != keyh:
            fail(CHECKER, "key_shared_prefix", k, f"H of key_shared_prefix must equal H of key ({keyh})")
        if kh != vh:
            fail(CHECKER, "value_shared_prefix", v, "H of value_shared_prefix must equal H of key_shared_prefix")
    if ks != vs:
        fail(CHECKER, "value_shared_prefix", v, "S of value_shared_prefix must equal S of key_shared_prefix")


def _prefix_len(c: CheckContext, k, v) -> None:
    i = c.info
    lens = c.t("actual_shared_prefix_len")
    if lens is None or lens.data is None:
        return
    layout = i.input_layout
    if layout not in ("BSND", "BNSD", "BSH", "BNSD_BSND"):
        fail(CHECKER, "input_layout", layout, "actual_shared_prefix_len needs input_layout BSH, BSND, BNSD or "
             "BNSD_BSND")
    s_ax = 2 if layout in ("BNSD", "BNSD_BSND") else 1
    ks, vs = _u32(dim(k, s_ax)), _u32(dim(v, s_ax))
    n = lens.data[0] if lens.data else 0
    if n > ks:
        fail(CHECKER, "actual_shared_prefix_len", n, f"actual_shared_prefix_len must not exceed S of key_shared_prefix "
             f"({ks})")
    if n > vs:
        fail(CHECKER, "actual_shared_prefix_len", n, f"actual_shared_prefix_len must not exceed S of "
             f"value_shared_prefix ({vs})")
    if n < 0:
        fail(CHECKER, "actual_shared_prefix_len", n, "actual_shared_prefix_len must not be negative")
