"""Route and template choice of FusedInferAttentionScore (which host tiling handles a call).

Model
-----
arch22 (Atlas A2/A3). ``route_arch22`` decides first, on the raw parameters,
whether the call goes to the new template framework ("fia": parse, checkers,
template registry) or to the legacy tilings. The new framework is taken when
the platform's vector:cube ratio is 1 or 2, query and key are both fp16 or
both bf16, the head dims can be read from the layout, and the call is neither
the "legacy preferred" decode shape (S1 == 1, D == Dv, no rope, BSH/BSND/BNSD,
MHA, no paged cache, and D 256 without a shared prefix or D 80 with one) nor,
without a split rope, the TND split-fuse shape (``fai_shape``), and the layout
is not NSD. Legacy calls go, in this order of precedence, to the split-fuse
"FAI" tiling (``fai_shape`` plus head-dim / block-size limits), the legacy IFA
tiling (``uses_ifa``: the decode, MTP, ATB, MLA and sliding-window shapes) or
else the legacy PFA tiling.

Inside the new framework ``choose_template`` walks the registry by priority
and takes the first template whose ``IsCapable`` holds: arch22 EmptyTensor (0)
-> NonQuantMla (9) -> NonQuant (29); arch35 NonQuantMla (5) -> NonQuant GQA (28)
-> FullQuant MX (210) -> FullQuant GQA (211) -> the catch-all impl (999). A
capable template's own tiling failing fails the call (no fall-through).

Invariants
----------
* Routing never raises; it only names where the call goes and why.
* ``RouteRecord.priority`` is the registry priority for framework templates and
  None for the legacy arch22 tilings.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layouts import dim
from .params import FiaParams
from .platform import Platform
from .blocks_arch35 import s1_outer_split_enabled

__all__ = ["RouteRecord", "route_arch22", "legacy_route_arch22", "choose_template", "fai_shape", "uses_ifa",
           "legacy_head_dims", "ARCH22_TEMPLATES", "ARCH35_TEMPLATES"]


@dataclass(frozen=True)
class RouteRecord:
    """Where a call goes: route ("fia", "ifa", "pfa", "fai"), template, registry priority, and the rule why."""

    arch: str
    route: str
    template: str
    priority: int | None
    reason: str

    def __str__(self) -> str:
        pr = f" (priority {self.priority})" if self.priority is not None else ""
        return f"{self.arch}/{self.route}: {self.template}{pr} — {self.reason}"


ARCH22_TEMPLATES = (("FiaTilingEmptyTensor", 0), ("FiaTilingNonQuantMla", 9), ("FiaTilingNonQuant", 29))
ARCH35_TEMPLATES = (("FiaTilingNonQuantMlaArch35", 5), ("FiaTilingNonQuantArch35", 28),
                    ("FiaTilingFullQuantMxArch35", 210), ("FiaTilingFullQuantGqaArch35", 211),
                    ("FusedInferAttentionScoreTilingImpl", 999))

_FP16_BF16 = ("float16", "bfloat16")


def _present(t) -> bool:
    return t is not None and len(t.shape) > 0


def _cdiv(a: int, b: int) -> int:
    """C division (truncating); a zero divisor yields 0 instead of trapping."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ------------------------------------------------------------------------------------------------- arch22 routing

def _layout_group(layout: str) -> int:
    if layout in ("BNSD_BSND", "BSND_BNSD", "BNSD_NBSD", "BSND_NBSD", "BNSD", "BSND"):
        return 0
    if layout in ("BSH", "BSH_NBSD", "BSH_BNSD"):
        return 1
    if layout in ("TND", "NTD", "TND_NTD", "NTD_TND"):
        return 2
    return -1


def legacy_head_dims(p: FiaParams) -> tuple[int, int, int] | None:
    """(query D, query_rope D, value D) as the arch22 router reads them, or None when they cannot be read."""
    group = _layout_group(p.input_layout)
    q = p.query.shape
    qr = p.query_rope.shape if _present(p.query_rope) else None
    n = p.num_heads
    if group == 0:
        if len(q) != 4:
            return None
        qd, qrd = q[3], (dim(qr, 3) if qr is not None else 0)
    elif group == 1:
        if len(q) != 3:
            return None
        qd, qrd = _cdiv(q[2], n), (_cdiv(dim(qr, 2), n) if qr is not None else 0)
    elif group == 2:
        if len(q) != 3:
            return None
        qd, qrd = q[2], (dim(qr, 2) if qr is not None else 0)
    else:
        return None
    nkv = p.num_key_value_heads or n
    if not _present(p.value):
        return None
    v = p.value.shape
    if _present(p.block_table):
        if len(v) == 3:
            vd = _cdiv(v[2], nkv)
        elif len(v) == 4:
            vd = v[3]
        elif len(v) == 5:
            vd = v[2] * v[4]
        else:
            return None
    elif group == 0:
        if len(v) != 4:
            return None
        vd = v[3]
    elif group in (1, 2):
        if len(v) != 3:
            return None
        vd = _cdiv(v[2], nkv) if group == 1 else v[2]
    else:
        return None
    return qd, qrd, vd


def _router_query_s(p: FiaParams) -> int | None:
    layout, q = p.input_layout, p.query.shape
    if layout == "BNSD":
        return q[2] if len(q) == 4 else None
    if layout == "BSND":
        return q[1] if len(q) == 4 else None
    if layout == "BSH":
        return q[1] if len(q) == 3 else None
    return 0


def fai_shape(p: FiaParams, *, forbid_post_quant: bool = True) -> bool:
    """The TND split-fuse ("FAI") shape: TND, no split rope, sparse 0/3/4, MHA without (bf16 and inner_precise 1)
    and without (sparse 0 with a mask) or GQA with inner_precise 0, a sink only when not (D 64 with a bf16 sink),
    and head dims <= 256 and equal (paged caches: block size a multiple of 16 and <= 512; NZ caches also D a
    multiple of 16 and not 64 or 128). The router's version also excludes a quant_scale2 (post-quant); the legacy
    dispatcher's does not (``forbid_post_quant=False``)."""
    layout = p.input_layout
    q, k, v = p.query.shape, p.key.shape, p.value.shape
    if layout != "TND":
        return False
    if _present(p.learnable_sink) and dim(q, 2) == 64 and p.learnable_sink.dtype == "bfloat16":
        return False
    if _present(p.query_rope) and _present(p.key_rope):
        return False
    if p.sparse_mode not in (0, 3, 4):
        return False
    mha = p.num_key_value_heads == 0 or p.num_heads == p.num_key_value_heads
    mha_ok = (mha and not (p.query.dtype == "bfloat16" and p.inner_precise == 1)
              and not (p.sparse_mode == 0 and _present(p.atten_mask)))
    gqa_ok = not mha and p.inner_precise == 0
    if not (mha_ok or gqa_ok):
        return False
    if forbid_post_quant and _present(p.quant_scale2):
        return False
    return _fai_dims_ok(p, dim(q, 2), k, v, p.num_key_value_heads)


def _fai_dims_ok(p: FiaParams, qd: int, k, v, nkv: int) -> bool:
    if not _present(p.block_table):
        kd, vd = dim(k, 2), dim(v, 2)
        return qd <= 256 and kd <= 256 and vd <= 256 and qd == kd == vd
    if len(k) == 3:
        kd, vd, bs = _cdiv(k[2], nkv), _cdiv(v[2], nkv), k[1]
        return qd <= 256 and kd <= 256 and vd <= 256 and qd == kd == vd and bs % 16 == 0 and bs <= 512
    if len(k) == 5:
        kd, vd, bs = dim(k, 2) * 16, dim(v, 2) * 16, k[3]
        ok = qd <= 256 and kd <= 256 and vd <= 256 and qd == kd == vd and qd % 16 == 0
        return ok and qd not in (64, 128) and bs % 16 == 0 and bs <= 512
    return False


def route_arch22(p: FiaParams, plat: Platform) -> tuple[bool, str]:
    """(True, reason) when the call goes to the new template framework, else (False, reason)."""
    if plat.aiv not in (plat.aic, 2 * plat.aic):
        return False, f"vector:cube ratio {plat.aiv}:{plat.aic} is neither 1 nor 2"
    if p.query is None or p.key is None:
        return False, "query or key missing"
    qt, kt = p.query.dtype, p.key.dtype
    if qt not in _FP16_BF16 or qt != kt:
        return False, (f"query/key dtypes {qt}/{kt} are not both fp16 or both bf16 "
                       "(quantised calls use the legacy tilings)")
    dims = legacy_head_dims(p)
    if dims is None:
        return False, "head dims cannot be read from the layout"
    qd, qrd, vd = dims
    qs = _router_query_s(p)
    if qs is None:
        return False, "query rank does not fit the layout"
    mha = p.num_key_value_heads == 0 or p.num_heads == p.num_key_value_heads
    paged = _present(p.block_table)
    prefix = _present(p.key_shared_prefix) or _present(p.value_shared_prefix)
    if (qd == vd and qrd == 0 and qs == 1 and p.input_layout in ("BNSD", "BSND", "BSH")
            and ((qd == 256 and not prefix) or (qd == 80 and prefix)) and mha and not paged):
        return False, "MHA decode with D 256 (or D 80 with a shared prefix) prefers the legacy IFA template"
    split_rope = _present(p.query_rope) and _present(p.key_rope)
    if not split_rope and fai_shape(p):
        return False, "TND split-fuse shape goes to the FAI tiling"
    if p.input_layout == "NSD":
        return False, "layout NSD is served by the legacy tilings"
    return True, "fp16/bf16 with query dtype == key dtype: new template framework"


def uses_ifa(p: FiaParams, layout: str, qd: int, qs: int) -> str | None:
    """The legacy-IFA shape that matches (a short name), or None."""
    q_rope = _present(p.query_rope)
    ifa_layouts = ("BSH", "BNSD", "BSND", "BNSD_NBSD", "BSND_NBSD", "BSH_NBSD")
    # GQA decode
    if not q_rope:
        if layout in ("TND_NTD", "TND") and qd == 512:
            return "gqa_ifa"
        if layout in ifa_layouts and qs == 1:
            return "gqa_ifa"
    # GQA MTP with an NZ cache
    if not q_rope and (layout in ifa_layouts or layout == "TND") and len(p.key.shape) == 5:
        s = _tnd_query_s(p) if layout == "TND" else qs
        if 1 <= s <= 16:
            if layout != "TND" or (qd == 128 and p.query.dtype == "bfloat16" and p.key.dtype == "int8"
                                   and p.value.dtype == "int8"):
                return "gqa_mtp"
    # ATB decode: TND int8 cache, paged, D != 512, fp32 antiquant scale and offset
    if (layout in ("TND_NTD", "TND") and p.key.dtype == "int8" and p.query.dtype != "int8"
            and _present(p.block_table) and qd != 512 and _present(p.antiquant_scale)
            and _present(p.antiquant_offset) and p.antiquant_scale.dtype == "float32"
            and p.antiquant_offset.dtype == "float32"):
        return "atb_ifa"
    if q_rope:
        if layout in ("TND_NTD", "TND") and qd == 512:
            return "mla_ifa"
        if layout in ifa_layouts and (qs == 1 or (1 < qs <= 32 and qd == 512)):
            return "mla_ifa"
        if layout in ifa_layouts and qd == 512 and p.sparse_mode == 4:
            return "sliding_attention"
    return None


def _tnd_query_s(p: FiaParams) -> int:
    bt = p.block_table
    b = dim(bt.shape, 0) if _present(bt) else 0
    if b == 0:
        return 0
    q, kv = p.actual_seq_lengths, p.actual_seq_lengths_kv
    qd = q.data if _present(q) else None
    kvd = kv.data if _present(kv) else None
    if qd is None or kvd is None:
        t = p.query.shape[0]
        return (t + b - 1) // b
    mx = 0
    for i in range(b):
        a = qd[i] if i < len(qd) else 0
        prev = qd[i - 1] if 0 < i <= len(qd) else 0
        mx = max(mx, a if i == 0 else a - prev)
    return mx


def legacy_route_arch22(p: FiaParams, qd: int, qs: int) -> tuple[str, str]:
    """("fai" | "ifa" | "pfa", reason) for a call the new framework does not take."""
    layout = p.input_layout
    if fai_shape(p, forbid_post_quant=False):
        return "fai", "TND split-fuse shape (head dims <= 256 and equal)"
    kind = uses_ifa(p, layout, qd, qs)
    if kind is not None:
        return "ifa", f"legacy IFA shape ({kind})"
    return "pfa", "neither split-fuse nor an IFA shape: legacy PFA"


# ------------------------------------------------------------------------------------------------ templates

def _arch22_capable(name: str, info) -> bool:
    if name == "FiaTilingEmptyTensor":
        return info.empty_tensor_flag
    if info.empty_tensor_flag:
        return False
    if info.q_dtype not in _FP16_BF16 or info.q_dtype != info.kv_dtype:
        return False
    if name == "FiaTilingNonQuant":
        return True
    # FiaTilingNonQuantMla
    if (info.learnable_sink_flag or info.sys_prefix_flag or info.pse_shift_flag or info.q_padding_flag
            or info.kv_padding_flag or info.out_dtype == "int8" or info.kv_storage_mode == "tensor_list"):
        return False
    if info.rope_mode != "split":
        return False
    if info.qk_head_dim != info.v_head_dim or info.qk_head_dim != 512 or info.rope_head_dim != 64:
        return False
    if info.n2_size != 1:
        return False
    if info.input_layout not in ("BSH", "BSND", "BNSD", "TND", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD"):
        return False
    return info.sparse_mode in (0, 3, 4, 9)


def _arch35_gqa_features_free(info) -> bool:
    return not (info.sys_prefix_flag or info.pse_shift_flag or info.enable_alibi_pse or info.q_padding_flag
                or info.kv_padding_flag or info.is_out_quant_enable or info.learnable_sink_flag
                or info.is_qkv_d_different or info.kv_storage_mode == "tensor_list")


def _arch35_capable(name: str, info) -> bool:
    if name == "FusedInferAttentionScoreTilingImpl":
        return True
    if info.empty_tensor_flag:
        return False
    if name == "FiaTilingFullQuantMxArch35":
        return info.full_quant_mode == "mxfp8"
    if name == "FiaTilingFullQuantGqaArch35":
        return info.full_quant_mode == "qk_per_token_head_v_per_head"
    if info.quant_mode != "no":
        return False
    if name == "FiaTilingNonQuantMlaArch35":
        if info.mla_mode != "split_d512" or not _arch35_gqa_features_free(info):
            return False
        n1 = info.n1_size
        if 1 <= n1 <= 128 and (n1 & (n1 - 1)) != 0:
            return True   # head counts that are not a power of two always go here
        if info.sparse_mode not in (0, 3) or (info.sparse_mode == 0 and info.atten_mask_flag):
            return False
        if info.qk_head_dim != 512 or info.rope_head_dim != 64 or info.v_head_dim != 512:
            return False
        if info.n2_size != 1 or not 1 <= n1 <= 128:
            return False
        return info.q_layout == "TND" and info.out_layout == "NTD" and info.kv_layout == "NZ"
    # FiaTilingNonQuantArch35 (GQA)
    if info.mla_mode in ("split_d512", "split_d128"):
        return False
    if not _arch35_gqa_features_free(info):
        return False
    if info.sparse_mode in (1, 2, 4) or (info.sparse_mode == 0 and info.atten_mask_flag):
        return False
    if info.q_layout not in ("BSH", "BSND", "BNSD", "TND"):
        return False
    if info.qk_head_dim != 128 and info.mla_mode != "combine_d128":
        return False
    return not s1_outer_split_enabled(info)


def choose_template(info) -> RouteRecord:
    """The first capable template of the registry (new framework, after the checkers)."""
    if info.arch == "arch35":
        for name, prio in ARCH35_TEMPLATES:
            if _arch35_capable(name, info):
                return RouteRecord("arch35", "fia", name, prio, _template_reason(name, info))
        raise AssertionError("the arch35 impl template is always capable")
    for name, prio in ARCH22_TEMPLATES:
        if _arch22_capable(name, info):
            return RouteRecord("arch22", "fia", name, prio, _template_reason(name, info))
    return RouteRecord("arch22", "fia", "", None, "no template is capable")


def _template_reason(name: str, info) -> str:
    return {
        "FiaTilingEmptyTensor": "query/attention_out (or all of key/value) are empty tensors",
        "FiaTilingNonQuantMla": "split rope with D = Dv = 512, rope D 64, one kv head, no extra features",
        "FiaTilingNonQuant": "fp16/bf16 query == key dtype (the general non-quant template)",
        "FiaTilingNonQuantMlaArch35": "non-quant split-rope D512 MLA",
        "FiaTilingNonQuantArch35": "non-quant GQA with D 128 (or 192/128 combined rope), no extra features, "
                                   "sparse 0 without mask or 3, BSH/BSND/BNSD/TND, no S1-outer split",
        "FiaTilingFullQuantMxArch35": "MXFP8 full quant (query/key/value quant modes 6/6/8)",
        "FiaTilingFullQuantGqaArch35": "full quant with per-token-head q/k and per-head v (modes 3/3/2)",
        "FusedInferAttentionScoreTilingImpl": "no specialised template is capable: the catch-all impl template",
    }[name]
