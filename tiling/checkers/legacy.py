"""arch22 legacy routes: the entry checks every legacy call passes, then the FAI / IFA / PFA route's own checks.

Model
-----
A call the new template framework does not take (see ``route.route_arch22``)
goes through op_host's legacy entry: key/value cache views must be dense (only
the regular split-fuse / D512 MLA paged routes take dim-0 strides), query,
key, value and attention_out must be present, the head count read from the
query must be non-zero and D <= 512, the value head dim must be readable from
the layout, the layout-specific ranks must hold, and attention_out must have
exactly the shape the layout implies. The call then goes to the split-fuse
("FAI") tiling, the legacy IFA tiling or the legacy PFA tiling
(``route.legacy_route_arch22``), each with its own checks
(``legacy_fai``, ``legacy_ifa``, ``legacy_pfa``).

The legacy entry reads "value" as the context's third *input instance*; with a
key/value tensor list that is the second key tensor, and this module mirrors that.

Invariants
----------
* ``check_legacy`` returns a ``FiaInfo`` (parsed leniently: a field the new
  parser could not read keeps its default) whose ``route`` names the legacy
  route; every rejection is a ``ParamError`` with ``checker`` ``legacy`` or the
  route family.
"""

from __future__ import annotations

from ..errors import AclnnStatus, ParamError
from ..info import FiaInfo, parse_info, parse_info_partial, present
from ..layouts import INPUT_LAYOUTS, dim, numel
from ..params import FiaParams, TensorMeta
from ..platform import Platform
from ..route import RouteRecord, fai_shape, legacy_route_arch22

__all__ = ["check_legacy", "LegacyDims", "legacy_value", "legacy_entry"]

CHECKER = "legacy"
_TEMPLATES = {"fai": "FlashAttentionInferSplitFuse", "ifa": "IFATiling", "pfa": "PromptFlashAttentionTiling"}


def _fail(param: str, value, rule: str, status=AclnnStatus.INNER_TILING_ERROR):
    raise ParamError(param, value, rule, status=status, checker=CHECKER)


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        _fail("num_heads", b, "a head count of 0 cannot split the hidden axis")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def legacy_value(p: FiaParams) -> TensorMeta | None:
    """The tensor the legacy entry reads as "value": the second key tensor of a key/value tensor list."""
    v = p.value_as_read
    return v if present(v) else None


class LegacyDims:
    """The axes the legacy entry reads from query / value / attrs (B, N of query, S, T, D of query, D of value)."""

    __slots__ = ("b", "qn", "qs", "qt", "qd", "vd")

    def __init__(self, b, qn, qs, qt, qd, vd):
        self.b, self.qn, self.qs, self.qt, self.qd, self.vd = b, qn, qs, qt, qd, vd


def _kv_heads(p: FiaParams) -> int:
    return p.num_key_value_heads if p.num_key_value_heads != 0 else p.num_heads


def legacy_entry(p: FiaParams) -> LegacyDims:
    """The checks of op_host's legacy entry; returns the axes it read."""
    layout = p.input_layout
    _cache_views(p)
    v = legacy_value(p)
    for name, t in (("query", p.query), ("key", p.key if present(p.key) else None), ("value", v),
                    ("attention_out", p.attention_out)):
        if t is None or not present(t):   # a 0-D tensor reaches op_host as an absent one (``present``)
            scalar = t is not None and t.dtype.lower() != "object"    # None reaches here as a 0-D object array
            _fail(name, f"0-D {t.dtype}" if scalar else None, f"{name} is required"
                  + (" (a 0-D tensor reads as absent)" if scalar else ""), AclnnStatus.PARAM_NULLPTR)
    q, out = p.query.shape, p.attention_out.shape
    if numel(q) == 0 and numel(out) != 0:
        _fail("query", q, "query must not be empty when attention_out is not")
    paged = present(p.block_table)
    b = 1 if layout == "NSD" else dim(q, 0)
    if layout in ("NSD", "NTD_TND"):
        qn = dim(q, 0)
    elif layout in ("BSND_NBSD", "BSND"):
        qn = dim(q, 2)
    elif layout in ("BSH", "BSH_NBSD"):
        qn = p.num_heads
    else:
        qn = dim(q, 1)
    if qn == 0:
        _fail("num_heads", qn, "the query head count must not be 0")
    if layout in ("NSD", "BSH", "BSH_NBSD", "BSND_NBSD", "BSND"):
        qs = dim(q, 1)
    elif layout in ("BNSD_BSND", "BNSD_NBSD", "BNSD"):
        qs = dim(q, 2)
    else:
        qs = dim(q, 1) if layout == "NTD_TND" else dim(q, 0)
    qt = 0
    if layout in ("TND", "TND_NTD"):
        qt = dim(q, 0)
    elif layout == "NTD_TND":
        qt = dim(q, 1)
    vd = _value_d(p, v, layout, paged)
    if layout in ("NSD", "TND", "TND_NTD", "NTD_TND"):
        qd = dim(q, 2)
    elif layout in ("BNSD_BSND", "BNSD_NBSD", "BNSD", "BSND_NBSD", "BSND"):
        qd = dim(q, 3)
    else:
        qd = _cdiv(dim(q, 2), p.num_heads)
    if qd > 512:
        _fail("query", q, f"D of query ({qd}) must be <= 512")
    _layout_ranks(p, layout, qs, qd, paged, v)
    _out_shape(p, layout, LegacyDims(b, qn, qs, qt, qd, vd))
    return LegacyDims(b, qn, qs, qt, qd, vd)


def _value_d(p: FiaParams, v: TensorMeta, layout: str, paged: bool) -> int:
    s = v.shape
    if paged:
        if len(s) == 3:
            return _cdiv(s[2], _kv_heads(p))
        if len(s) == 4:
            return s[3]
        if len(s) == 5:
            return s[2] * s[4]
        _fail("value", s, "a paged value cache must have 3, 4 or 5 dims")
    if layout in ("NSD", "TND", "TND_NTD", "NTD_TND"):
        if len(s) != 3:
            _fail("value", s, f"without block_table and with input_layout {layout} key/value must have 3 dims")
        return s[2]
    if layout in ("BNSD_BSND", "BNSD_NBSD", "BNSD", "BSND_NBSD", "BSND"):
        if len(s) != 4:
            _fail("value", s, f"without block_table and with input_layout {layout} key/value must have 4 dims")
        return s[3]
    return _cdiv(dim(s, 2), _kv_heads(p))


def _layout_ranks(p: FiaParams, layout: str, qs: int, qd: int, paged: bool, v: TensorMeta) -> None:
    q_rope, k_rope = present(p.query_rope), present(p.key_rope)
    if q_rope != k_rope:
        _fail("key_rope" if q_rope else "query_rope", None, "query_rope and key_rope must both be given or both absent")
    if q_rope:
        mla_layouts = ("BSH", "BNSD", "BSND", "BNSD_NBSD", "BSND_NBSD", "BSH_NBSD", "TND_NTD", "TND", "NTD_TND")
        if layout not in mla_layouts:
            _fail("input_layout", layout, "with query_rope input_layout must be one of " + ", ".join(mla_layouts))
        if layout == "TND" and qd == 512 and not paged:
            _fail("block_table", None, "MLA with TND and D 512 needs paged attention")
    if layout == "BNSD_BSND" and qs == 1:
        _fail("input_layout", layout, "BNSD_BSND is not supported when S of query is 1")
    if layout == "SH":
        _fail("input_layout", layout, "layout SH is not supported")
    three = ("BSH", "BSH_NBSD", "TND", "TND_NTD", "NTD_TND", "NSD")
    need = 3 if layout in three else 4
    if len(p.query.shape) != need:
        _fail("query", p.query.shape, f"with input_layout {layout} query must have {need} dims")
    if not paged and layout in ("TND", "NTD_TND"):
        if len(p.key.shape) != 3 or len(v.shape) != 3:
            _fail("key", p.key.shape, f"with input_layout {layout} key and value must have 3 dims")


def _out_shape(p: FiaParams, layout: str, d: LegacyDims) -> None:
    out_layout = layout.rsplit("_", 1)[-1]
    expect = {
        "NSD": (d.qn, d.qs, d.vd), "BSH": (d.b, d.qs, d.vd * d.qn), "NBSD": (d.qn, d.b, d.qs, d.vd),
        "BSND": (d.b, d.qs, d.qn, d.vd), "BNSD": (d.b, d.qn, d.qs, d.vd), "NTD": (d.qn, d.qt, d.vd),
        "TND": (d.qt, d.qn, d.vd),
    }.get(out_layout)
    out = tuple(p.attention_out.shape)
    if expect is None:
        _fail("input_layout", layout, f"unknown input_layout (no output layout {out_layout}); valid layouts: "
              f"{', '.join(INPUT_LAYOUTS)}")
    if len(out) != len(expect):
        _fail("attention_out", out, f"with output layout {out_layout} attention_out must have {len(expect)} dims")
    if out != tuple(expect):
        _fail("attention_out", out, f"with output layout {out_layout} attention_out must be {list(expect)}")


# ------------------------------------------------------------------------------------------------ cache views

def _dense(shape, stride, rank) -> bool:
    if stride is None or rank == 0:
        return True
    if rank < len(shape):
        return False
    expect = 1
    for ax in range(len(shape) - 1, -1, -1):
        if shape[ax] != 1 and stride[ax] != expect:
            return False
        expect *= shape[ax]
    return True


def _dense_from_axis1(shape, stride, rank) -> bool:
    if stride is None or rank == 0:
        return True
    if rank < len(shape):
        return False
    if len(shape) > 0 and shape[0] > 1 and stride[0] <= 0:
        return False
    expect = 1
    for ax in range(len(shape) - 1, 0, -1):
        if shape[ax] != 1 and stride[ax] != expect:
            return False
        expect *= shape[ax]
    return True


def _cache_views(p: FiaParams) -> None:
    """Legacy routes need dense caches, except a dim-0 strided cache on the regular paged split-fuse route."""
    caches = list(p.key_list or ()) + list(p.value_list or ())
    kr = p.key_rope if present(p.key_rope) else None
    has_meta = any(t.stride_dims for t in caches) or (kr is not None and kr.stride_dims)
    if not has_meta:
        return
    non_dense = any(not _dense(t.shape, t.stride, t.stride_dims) for t in caches)
    non_dense = non_dense or (kr is not None and not _dense(kr.shape, kr.stride, kr.stride_dims))
    if not non_dense:
        return
    regular_ok = (present(p.block_table) and fai_shape(p)
                  and all(_dense_from_axis1(t.shape, t.stride, t.stride_dims) for t in caches)
                  and (kr is None or _dense(kr.shape, kr.stride, kr.stride_dims)))
    if not regular_ok:
        _fail("key", p.key.stride, "strided key/value caches are supported only by the regular paged split-fuse "
              "and D512 MLA routes")


# ------------------------------------------------------------------------------------------------ driver

def check_legacy(p: FiaParams, plat: Platform, reason: str) -> FiaInfo:
    from . import legacy_fai, legacy_ifa, legacy_pfa

    dims = legacy_entry(p)
    route, why = legacy_route_arch22(p, dims.qd, dims.qs)
    if route == "fai":
        legacy_fai.check(p, plat, dims)
    elif route == "ifa":
        legacy_ifa.check(p, plat, dims)
    else:
        legacy_pfa.check(p, plat, dims)
    try:
        info = parse_info(p, plat)
    except ParamError:
        info = parse_info_partial(p, plat)   # what the FIA parser rejects: its info as far as it got
    info.route = RouteRecord("arch22", route, _TEMPLATES[route], None, f"{reason}; {why}")
    if route == "pfa" and legacy_pfa.pfa_empty(p):
        info.empty_tensor_flag = True      # the PFA tiling's empty exit (``plan_legacy.plan_pfa``)
    return info
