"""The parsed problem: what op_host's FIA info parser makes of one call (``FiaInfo``).

Model
-----
``parse_info(params, platform)`` reads a :class:`~cvtile.tiling.params.FiaParams`
the way ``FiaInfoParser::Parse`` reads a tiling context and returns a
:class:`FiaInfo`: the batch, head and sequence axes, the head dims, the q / kv /
out layouts, dtypes and quantisation mode, the KV storage (contiguous, tensor
list, paged), the actual sequence lengths, the mask / pse / prefix / padding /
lse / sink flags and the normalised pre/next tokens. The parser rejects what
it cannot read (an unknown layout, a rank that does not fit the layout, N1 not
a multiple of N2, pse_type other than 0, ...) with a ``ParamError``
(``checker="parse"``); everything else is left to the checkers.

Field names follow op_host's FiaTilingInfo in snake_case. Where op_host keeps
two readings of one thing, both are here (e.g. ``kv_size`` is the parser's
partial list, ``s2_per_batch`` the per-batch lengths the core split reads).

Invariants
----------
* ``n2_size >= 1`` and ``g_size * n2_size == n1_size`` once parsing succeeded
  (unless ``empty_tensor_flag``, where parsing stops after B, S1 and G = ``n1_size // n2_size``).
* ``s1_per_batch`` / ``s2_per_batch`` have ``b_size`` entries: a 1-element
  actual-length list broadcasts, TND/NTD lists are de-cumulated, a missing list
  means the tensor's S; ``s2_per_batch`` excludes the system prefix.
* ``actual_seq_q`` is None when op_host drops it (the legacy-IFA decode shape on
  arch22 ignores actual_seq_lengths and query_padding_size), and also when no
  values were given (``is_max_workspace`` tells them apart).
* Parsing never reads tensor contents other than the host integer lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import AclnnStatus, ParamError
from .layouts import INVALID_DIM, TILING_KEY_LAYOUT, LayoutShape, dim, numel, split_input_layout
from .params import FiaParams, TensorMeta
from .platform import Platform, get_platform

__all__ = ["FiaInfo", "parse_info", "INT_MAX", "present"]

#: The token clamp op_host applies to pre/next tokens.
INT_MAX = 2147483647

_FP16_BF16 = ("float16", "bfloat16")


def present(t: TensorMeta | None) -> bool:
    """A tensor reaches op_host iff it is given with rank >= 1 (a rank-0 slot is an absent optional input)."""
    return t is not None and len(t.shape) > 0


@dataclass
class FiaInfo:
    """One call as op_host's info parser sees it. See the module docstring for the conventions."""

    params: FiaParams
    platform: Platform
    arch: str
    # ------------------------------------------------------------ layouts
    input_layout: str = ""              # the attribute as given
    q_layout: str = "BSND"              # BSH/BSND/BNSD/TND/NTD
    out_layout: str = "BSND"            # BSH/BSND/BNSD/TND/NTD/NBSD
    kv_layout: str = "BSND"             # = q_layout, or the paged cache layout BnBsH/BnNBsD/NZ
    q_key_layout: int = 0               # tiling-key layout codes (BSH/BSND 0, BNSD 1, NZ 2, TND 3, NBSD 4, NTD 5)
    kv_key_layout: int = 0
    out_key_layout: int = 0
    # ------------------------------------------------------------ axes
    b_size: int = 0                     # B (TND: number of actual_seq_lengths entries)
    n1_size: int = 0                    # query heads (num_heads)
    n2_size: int = 0                    # kv heads (num_key_value_heads, 0 -> num_heads)
    g_size: int = 0                     # n1 / n2
    s1_size: int = 0                    # query S (TND: the largest per-batch length)
    s2_size: int = 0                    # kv S (paged: max blocks per batch * block_size; list: the longest)
    qk_head_dim: int = 0                # D of query/key
    v_head_dim: int = 0                 # D of value
    rope_head_dim: int = 0              # split rope D (query_rope), or qkD - vD for the combined rope
    q_t_size: int = 0                   # T of query (TND/NTD), else 0
    k_t_size: int = 0                   # T of key (TND/NTD), else 0
    q_size: tuple[int, ...] = ()        # the parser's query lengths (TND: per batch; else [S1])
    kv_size: tuple[int, ...] = ()       # the parser's kv lengths (as op_host collects them)
    s1_per_batch: tuple[int, ...] = ()  # per-batch query length the core split uses
    s2_per_batch: tuple[int, ...] = ()  # per-batch kv length (without the system prefix)
    # ------------------------------------------------------------ dtypes / quantisation
    q_dtype: str = ""
    kv_dtype: str = ""
    out_dtype: str = ""
    q_rope_dtype: str = "float16"
    k_rope_dtype: str = "float16"
    quant_mode: str = "no"              # "no" | "anti" (q dtype != kv dtype) | "full" (int8/fp8 q == kv)
    full_quant_mode: str = "none"       # none | per_tensor | per_block | mxfp8 | q_per_token_head_kv_per_tensor |
                                        # qk_per_token_head_v_per_head
    antiquant_flag: bool = False
    antiquant_mode: int = 0
    key_antiquant_mode: int = 0
    value_antiquant_mode: int = 0
    antiq_seq_size: int = 0             # S extent of per-token antiquant scales
    query_quant_mode: int = 0
    # ------------------------------------------------------------ kv storage / paged attention
    kv_storage_mode: str = "contiguous"  # contiguous | tensor_list | page_attention
    page_attention_flag: bool = False
    block_size: int = 0
    max_block_num_per_batch: int = 0    # arch22: block_table columns; arch35: from the actual kv lengths
    block_table_cols: int = 0
    total_block_num: int = 0            # dim 0 of the first key tensor
    kv_list_seq_lens: tuple[int, ...] = ()
    is_same_seq_all_kv_tensor: bool = True
    key_noncontig_dim: int = -1
    value_noncontig_dim: int = -1
    key_rope_noncontig_dim: int = -1
    has_view_stride: bool = False
    # ------------------------------------------------------------ actual sequence lengths
    actual_seq_q: tuple[int, ...] | None = None   # raw values (possibly cumulative); None when absent/dropped/no data
    actual_seq_kv: tuple[int, ...] | None = None
    actual_seq_q_present: bool = False  # the tensor reaches the tiling (even without data)
    actual_seq_q_given: tuple[int, ...] | None = None   # the values the caller gave, even where FIA drops them
    #                                                     (the legacy IFA tiling's ATB check still reads them)
    actual_seq_kv_present: bool = False
    actual_len_q_dims: int = 0          # element counts
    actual_len_kv_dims: int = 0
    is_accum_q_seq: bool = False        # TND/NTD cumulative lists
    is_accum_kv_seq: bool = False
    max_actualseq: int = 0
    is_same_actualseq: bool = True
    is_max_workspace: bool = False      # an actual-length tensor came without values ("tiling sink")
    # ------------------------------------------------------------ mask
    atten_mask_flag: bool = False
    sparse_mode: int = 0
    pre_token: int = INT_MAX            # normalised as the parser does (per sparse mode, clamped to +-INT_MAX)
    next_token: int = INT_MAX
    atten_mask_batch_stride: int = 0
    atten_mask_stride: int = 0
    sliding_flag: bool = False
    # ------------------------------------------------------------ other features
    pse_shift_flag: bool = False
    pse_type: int = 0
    enable_alibi_pse: bool = False
    pse_shift_by_batch: int = 0
    pse_shift_s1: int = 0
    pse_shift_s2: int = 0
    sys_prefix_flag: bool = False
    system_prefix_len: int = 0
    system_prefix_max_len: int = 0
    q_padding_flag: bool = False
    kv_padding_flag: bool = False
    softmax_lse_flag: bool = False
    total_lse_size: int = 0
    learnable_sink_flag: bool = False
    is_out_quant_enable: bool = False   # attention_out is not fp16/bf16 (post quantisation)
    is_out_quant_per_chn_out: bool = False
    is_out_quant_type_bf16: bool = False
    rope_mode: str = "none"             # none | split (query_rope/key_rope given) | combine (qkD > vD, e.g. 192/128)
    mla_mode: str = "none"              # none | split_d512 | split_d128 | combine_d128
    is_qkv_d_different: bool = False    # qkD != vD except the 192/128 combined rope
    is_legacy_ifa: bool = False         # S1 == 1, qkD == vD, no rope, BSH/BSND/BNSD
    need_init: bool = False
    empty_tensor_flag: bool = False
    total_output_size: int = 0
    inner_precise: int = 0
    scale: float = 1.0
    l2_cache_size: int = 0
    # ------------------------------------------------------------ route (filled by check_fia)
    route: Any = None

    # ------------------------------------------------------------ views
    @property
    def gqa(self) -> bool:
        return self.n1_size != self.n2_size

    def tensor(self, name: str) -> TensorMeta | None:
        t = getattr(self.params, name)
        return t if present(t) else None

    def has(self, name: str) -> bool:
        return present(getattr(self.params, name))


# ---------------------------------------------------------------------------------------------------------------------


def _fail(param: str, value, rule: str, status: AclnnStatus = AclnnStatus.INNER_TILING_ERROR) -> ParamError:
    return ParamError(param, value, rule, status=status, checker="parse")


def _i32(v: int) -> int:
    """An int64 attribute read through a 32-bit pointer (op_host reads num_heads etc. as int32)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def parse_info(params: FiaParams, platform: Platform | str, *, strict_heads: bool = True) -> FiaInfo:
    """Parse ``params`` as op_host's info parser does; ``ParamError`` on what it rejects.

    ``strict_heads=False`` takes num_heads that num_key_value_heads does not divide with G = the floor of
    the ratio, as the arch22 legacy routes do (they never run this parser's rule; the split-fuse tiling
    divides the head counts as it finds them)."""
    plat = get_platform(platform) if not isinstance(platform, Platform) else platform
    return _Parser(params, plat, strict_heads=strict_heads).run()


def parse_info_partial(params: FiaParams, platform: Platform | str) -> FiaInfo:
    """:func:`parse_info`'s info as far as the parser gets (``strict_heads=False``), never raising: what a legacy
    arch22 route's planner reads (layout, dtypes, axes) when op_host's FIA parser would reject a call that the
    legacy route's own checks take (e.g. a negative num_key_value_heads, which the split-fuse route does not
    look at; a softmax_lse missing under softmax_lse_flag, refused only after the rest is read)."""
    plat = get_platform(platform) if not isinstance(platform, Platform) else platform
    parser = _Parser(params, plat, strict_heads=False)
    try:
        return parser.run()
    except ParamError:
        return parser.info


class _Parser:
    def __init__(self, p: FiaParams, plat: Platform, strict_heads: bool = True):
        self.p = p
        self.strict_heads = strict_heads
        self.deferred: ParamError | None = None   # a refusal the partial parse raises after reading the rest
        self.info = FiaInfo(params=p, platform=plat, arch=plat.arch)

    # ---------------------------------------------------------------- driver
    def run(self) -> FiaInfo:
        p, info = self.p, self.info
        if info.platform.aic == 0 or info.platform.aiv == 0:
            raise _fail("platform", info.platform.name, "the platform reports no AI cores")
        self._kv_cache()
        self._required()
        info.q_dtype = p.query.dtype
        info.kv_dtype = p.key.dtype
        info.out_dtype = p.attention_out.dtype
        if present(p.query_rope):
            info.q_rope_dtype = p.query_rope.dtype
        if present(p.key_rope):
            info.k_rope_dtype = p.key_rope.dtype
        self._strides()
        self._kv_storage()
        self._quant_mode()
        self._antiquant_info()
        self._layouts()
        self._empty_tensor()
        self._axes()
        self._features()   # op_host reads the features even for empty tensors (pse_type is checked there)
        self._generate()
        if self.deferred is not None:
            raise self.deferred
        return info

    # ---------------------------------------------------------------- inputs
    def _kv_cache(self):
        p = self.p
        keys = [t for t in p.key_list if present(t)] if p.key_list else ([p.key] if present(p.key) else [])
        values = [t for t in p.value_list if present(t)] if p.value_list else ([p.value] if present(p.value) else [])
        if not keys:
            raise _fail("key", None, "key is required (at least one tensor)", AclnnStatus.PARAM_NULLPTR)
        if not values:
            raise _fail("value", None, "value is required (at least one tensor)", AclnnStatus.PARAM_NULLPTR)
        if len(keys) != len(values):
            raise _fail("key", len(keys), f"key and value must hold the same number of tensors, got {len(keys)} "
                        f"and {len(values)}")
        self.k_cache = [t.shape for t in keys]
        self.v_cache = [t.shape for t in values]
        self.k_metas = keys
        self.v_metas = values

    def _required(self):
        p = self.p
        for name in ("query", "attention_out"):
            if not present(getattr(p, name)):
                raise _fail(name, None, f"{name} is required", AclnnStatus.PARAM_NULLPTR)

    def _strides(self):
        """View strides of the K/V/key_rope caches (only the rank/positivity rules reject here)."""
        p, info = self.p, self.info
        kv_strided = any(t.stride_dims > 0 for t in self.k_metas + self.v_metas)
        krope = p.key_rope if present(p.key_rope) else None
        krope_strided = krope is not None and krope.stride_dims > 0
        info.has_view_stride = kv_strided or krope_strided
        if not info.has_view_stride:
            return
        checks = [("key", self.k_metas[0]), ("value", self.v_metas[0])]
        checks += [("key", t) for t in self.k_metas[1:] if t.stride_dims > 0]
        checks += [("value", t) for t in self.v_metas[1:] if t.stride_dims > 0]
        for name in ("key_antiquant_scale", "value_antiquant_scale"):
            t = getattr(p, name)
            if present(t):
                checks.append((name, t))
        if krope is not None:
            checks.append(("key_rope", krope))
        for name, t in checks:
            _validate_stride(name, t)
        # which dim of each cache breaks contiguity (-1: contiguous)
        for t in self.k_metas:
            d = _noncontig_dim(t)
            if d is not None:
                info.key_noncontig_dim = d
        for t in self.v_metas:
            d = _noncontig_dim(t)
            if d is not None:
                info.value_noncontig_dim = d
        if krope_strided:
            d = _noncontig_dim(krope)
            if d is not None:
                info.key_rope_noncontig_dim = d

    def _kv_storage(self):
        info = self.info
        if len(self.k_cache) > 1:
            info.kv_storage_mode = "tensor_list"
        elif present(self.p.block_table):
            info.kv_storage_mode = "page_attention"
        else:
            info.kv_storage_mode = "contiguous"
        info.page_attention_flag = info.kv_storage_mode == "page_attention"

    def _quant_mode(self):
        info = self.info
        if info.q_dtype != info.kv_dtype:
            info.quant_mode = "anti"
        elif info.q_dtype in _FP16_BF16:
            info.quant_mode = "no"
        else:
            info.quant_mode = "full"

    def _antiquant_info(self):
        p, info = self.p, self.info
        info.antiquant_flag = info.q_dtype != info.kv_dtype
        info.key_antiquant_mode = int(p.key_antiquant_mode)
        info.value_antiquant_mode = int(p.value_antiquant_mode)
        info.antiquant_mode = int(p.antiquant_mode)
        info.query_quant_mode = int(p.query_quant_mode)
        kscale, vscale = p.key_antiquant_scale, p.value_antiquant_scale
        if not (present(kscale) and present(vscale)) or not info.antiquant_flag:
            return
        k_per_chn_v_per_tok = (info.kv_dtype in ("int4", "int8") and p.key_antiquant_mode == 0
                               and p.value_antiquant_mode == 1)
        mode = p.key_antiquant_mode
        shape = (p.key_antiquant_offset if present(p.key_antiquant_offset) else kscale).shape
        if k_per_chn_v_per_tok:
            mode = p.value_antiquant_mode
            shape = (p.value_antiquant_offset if present(p.value_antiquant_offset) else vscale).shape
        if mode == 6:
            # per-token-group: the seq extent is only read with a system prefix, which the parser has not seen yet
            return
        if mode == 1:
            if len(shape) not in (2, 3):
                raise _fail("key_antiquant_scale", shape, "per-token antiquant scales must have 2 or 3 dims")
            info.antiq_seq_size = shape[2] if len(shape) == 3 else shape[1]
        elif mode == 3:
            if len(shape) != 3:
                raise _fail("key_antiquant_scale", shape, "per-token-head antiquant scales must have 3 dims")
            info.antiq_seq_size = shape[2]

    def _layouts(self):
        p, info = self.p, self.info
        info.input_layout = p.input_layout
        pair = split_input_layout(p.input_layout)
        if pair is None:
            raise _fail("input_layout", p.input_layout,
                        "input_layout must be one of BSH, BSND, BNSD, TND, NTD, BSH_NBSD, BSND_NBSD, BNSD_NBSD, "
                        "TND_NTD, NTD_TND, BNSD_BSND, BSND_BNSD, BSH_BNSD")
        info.q_layout, info.out_layout = pair
        if info.kv_storage_mode != "page_attention":
            info.kv_layout = info.q_layout
        else:
            rank = len(self.k_cache[0])
            kv = {3: "BnBsH", 4: "BnNBsD", 5: "NZ"}.get(rank)
            if kv is None:
                raise _fail("key", self.k_cache[0], "a paged key cache must have 3, 4 or 5 dims")
            info.kv_layout = kv
            if info.has_view_stride:
                need = 1 if kv == "BnBsH" else 2
                for name, t in (("key", self.k_metas[0]), ("value", self.v_metas[0])):
                    if t.stride_dims and t.stride_dims < need:
                        raise _fail(name, t.stride, f"a paged {kv} cache view needs a stride rank of at least {need}")
        info.q_key_layout = TILING_KEY_LAYOUT.get(info.q_layout, 0)
        info.kv_key_layout = TILING_KEY_LAYOUT.get(info.kv_layout, 0)
        info.out_key_layout = TILING_KEY_LAYOUT.get(info.out_layout, 0)

    def _empty_tensor(self):
        p, info = self.p, self.info
        q_n, o_n = numel(p.query.shape), numel(p.attention_out.shape)
        if (q_n == 0) != (o_n == 0):
            raise _fail("query", p.query.shape,
                        f"query and attention_out must both be empty or both non-empty (sizes {q_n} and {o_n})")
        if q_n == 0:
            info.empty_tensor_flag = True
            return
        if p.softmax_lse_flag and (not present(p.softmax_lse) or numel(p.softmax_lse.shape) == 0):
            err = _fail("softmax_lse", p.softmax_lse.shape if p.softmax_lse else None,
                        "softmax_lse must be a non-empty tensor when softmax_lse_flag is set")
            if self.strict_heads:
                raise err
            self.deferred = self.deferred or err   # the partial parse reads the rest first (the legacy routes')
        if all(numel(s) == 0 for s in self.k_cache) and all(numel(s) == 0 for s in self.v_cache):
            info.empty_tensor_flag = True

    # ---------------------------------------------------------------- axes
    def _axes(self):
        p, info = self.p, self.info
        n1 = _i32(p.num_heads)
        if n1 <= 0:
            raise _fail("num_heads", p.num_heads, "num_heads must be greater than 0")
        n2 = _i32(p.num_key_value_heads)
        if n2 < 0:
            raise _fail("num_key_value_heads", p.num_key_value_heads, "num_key_value_heads must not be negative")
        info.n1_size = n1
        info.n2_size = n1 if n2 == 0 else n2
        self.q_shape = LayoutShape(p.query.shape, info.q_layout, "query", n1)
        self.k_shape = LayoutShape(self.k_cache[0], info.kv_layout, "key", n1)
        self.v_shape = LayoutShape(self.v_cache[0], info.kv_layout, "value", info.n2_size)
        info.q_t_size = _u32(self.q_shape.get("T")) if self.q_shape.has("T") else 0
        info.qk_head_dim = _u32(self.q_shape.require("D"))
        info.v_head_dim = _u32(self.v_shape.require("D"))
        # legacy IFA shape: decode with equal head dims and no split rope on BSH/BSND/BNSD
        if p.input_layout in ("BSH", "BSND", "BNSD"):
            s = self.q_shape.require("S")
            if (_u32(s) == 1 and info.qk_head_dim == info.v_head_dim and not present(p.query_rope)
                    and not present(p.key_rope)):
                info.is_legacy_ifa = True
        self._update_info()
        self._max_workspace()
        self._batch_size()
        self._s1_size()
        # G is the head ratio even for an empty-tensor call: the legacy IFA tiling, which takes some of those,
        # sizes its staging areas with it
        info.g_size = info.n1_size // info.n2_size
        if info.empty_tensor_flag:
            return
        info.k_t_size = _u32(self.k_shape.get("T")) if self.k_shape.has("T") else 0
        if info.n1_size % info.n2_size != 0 and self.strict_heads:
            raise _fail("num_heads", info.n1_size,
                        f"num_heads must be a multiple of num_key_value_heads ({info.n2_size})")
        self._s2_size()
        self._rope_head_dim()

    def _update_info(self):
        """The arch22 legacy-IFA shape ignores the mask mode, tokens, query lengths and query padding."""
        p, info = self.p, self.info
        given = p.actual_seq_lengths if present(p.actual_seq_lengths) else None
        info.actual_seq_q_given = tuple(int(x) for x in given.data) if given is not None and given.data else None
        if info.is_legacy_ifa and info.arch == "arch22":
            self.sparse_mode = 0
            self.pre_attr = INT_MAX
            self.next_attr = INT_MAX
            self.act_q = None
            self.q_padding = None
        else:
            self.sparse_mode = _i32(p.sparse_mode)
            self.pre_attr = int(p.pre_tokens)
            self.next_attr = int(p.next_tokens)
            self.act_q = p.actual_seq_lengths if present(p.actual_seq_lengths) else None
            self.q_padding = p.query_padding_size if present(p.query_padding_size) else None
        self.act_kv = p.actual_seq_lengths_kv if present(p.actual_seq_lengths_kv) else None
        info.actual_seq_q_present = self.act_q is not None
        info.actual_seq_kv_present = self.act_kv is not None

    def _max_workspace(self):
        info = self.info
        info.is_max_workspace = ((self.act_kv is not None and self.act_kv.data is None)
                                 or (self.act_q is not None and self.act_q.data is None))

    def _act_q_size(self) -> int:
        info = self.info
        if self.act_q is None:
            raise _fail("actual_seq_lengths", None, f"actual_seq_lengths is required when input_layout is "
                        f"{info.q_layout}")
        n = numel(self.act_q.shape)
        if n <= 0:
            raise _fail("actual_seq_lengths", self.act_q.shape, "actual_seq_lengths must not be empty")
        return n

    def _batch_size(self):
        info = self.info
        if info.q_layout in ("TND", "NTD"):
            info.b_size = 1 if info.is_max_workspace else _u32(self._act_q_size())
        else:
            info.b_size = _u32(self.q_shape.require("B"))

    def _s1_size(self):
        info = self.info
        if info.q_layout in ("TND", "NTD"):
            q = self.act_q
            if q is None:
                raise _fail("actual_seq_lengths", None, f"actual_seq_lengths is required when input_layout is "
                            f"{info.q_layout}")
            if q.data is None:
                t = self.q_shape.require("T")
                info.s1_size = _u32(t)
                info.q_size = (info.s1_size,)
                return
            b = self._act_q_size()
            sizes, mx = [], 0
            for i in range(b):
                v = _data_at(q, i)
                s = v if i == 0 else v - _data_at(q, i - 1)
                sizes.append(s)
                mx = max(mx, s)
            info.q_size = tuple(sizes)
            info.s1_size = _u32(mx)
        else:
            info.s1_size = _u32(self.q_shape.require("S"))
            info.q_size = (info.s1_size,)

    def _s2_size(self):
        info = self.info
        mode = info.kv_storage_mode
        if mode == "contiguous":
            if info.kv_layout in ("TND", "NTD"):
                self._s2_from_actual()
            else:
                info.s2_size = self.k_shape.require("S")
                info.kv_list_seq_lens = (info.s2_size,)
                info.kv_size = (info.s2_size,)
        elif mode == "tensor_list":
            if info.kv_layout in ("TND", "NTD"):
                self._s2_from_actual()
            else:
                self.k_shape.require("S")
                lens = []
                first = self.k_shape.get("S")
                for shp in self.k_cache:
                    s = LayoutShape(shp, info.kv_layout, "key", info.n1_size).get("S")
                    lens.append(s)
                    if s != first:
                        info.is_same_seq_all_kv_tensor = False
                info.kv_list_seq_lens = tuple(lens)
                info.s2_size = max([0] + lens)
        else:
            self._s2_paged()

    def _s2_from_actual(self):
        info = self.info
        if self.act_kv is None:
            info.kv_size = (info.s2_size,)
            return
        info.s2_size = self._max_actual(self.act_kv, info.kv_layout)

    def _max_actual(self, t: TensorMeta, layout: str) -> int:
        info = self.info
        mx = 0
        sizes = list(info.kv_size)
        if t.data is not None:
            loop = min(numel(t.shape), info.b_size)
            for i in range(loop):
                v = _data_at(t, i)
                s = (v if i == 0 else v - _data_at(t, i - 1)) if layout in ("TND", "NTD") else v
                sizes.append(s)
                mx = max(mx, s)
        info.kv_size = tuple(sizes)
        if info.is_max_workspace:
            mx = dim(self.k_cache[0], 0)
        return mx

    def _s2_paged(self):
        p, info = self.p, self.info
        info.block_size = _i32(p.block_size)
        if info.block_size <= 0:
            raise _fail("block_size", p.block_size, "block_size must be greater than 0 with paged attention")
        bt = p.block_table
        if info.antiquant_flag:
            if len(bt.shape) != 2:
                raise _fail("block_table", bt.shape, "block_table must have 2 dims")
            info.max_block_num_per_batch = _u32(bt.shape[1])
        else:
            info.max_block_num_per_batch = 0
            kv = self.act_kv
            if kv is not None and kv.data is not None:
                n = numel(kv.shape)
                for i in range(min(info.b_size, n)):
                    v = _i32(_data_at(kv, i if n > 1 else 0))
                    blocks = _div_trunc(v + info.block_size - 1, info.block_size)
                    info.max_block_num_per_batch = max(info.max_block_num_per_batch, blocks)
        if len(bt.shape) != 2:
            raise _fail("block_table", bt.shape, "block_table must have 2 dims")
        info.block_table_cols = bt.shape[1]
        if info.is_max_workspace:
            info.s2_size = info.block_table_cols * info.block_size
        else:
            info.s2_size = info.max_block_num_per_batch * info.block_size

    def _rope_head_dim(self):
        p, info = self.p, self.info
        split = present(p.query_rope) and present(p.key_rope)
        if info.arch == "arch35":
            if split:
                info.rope_mode = "split"
            elif info.qk_head_dim == 192 and info.v_head_dim == 128:
                info.rope_mode = "combine"
            else:
                info.rope_mode = "none"
        else:
            # set first: a call refused below is still planned from this info by the legacy routes, whose
            # rope flag is the rope tensors' presence (IFATiling's ropeFlag_)
            info.rope_mode = "split" if split else "none"
            if info.qk_head_dim < info.v_head_dim:
                raise _fail("query", p.query.shape,
                            f"D of query ({info.qk_head_dim}) must not be smaller than D of value ({info.v_head_dim})")
            if info.qk_head_dim > info.v_head_dim:
                if split:
                    raise _fail("query", p.query.shape, "D of query must equal D of value when query_rope is given")
                info.rope_mode = "combine"
            else:
                info.rope_mode = "split" if split else "none"
        if info.rope_mode == "none":
            info.mla_mode = "none"
        elif info.rope_mode == "combine":
            info.mla_mode = "combine_d128"
        elif info.qk_head_dim == 512:
            info.mla_mode = "split_d512"
        elif info.qk_head_dim == 128:
            info.mla_mode = "split_d128"
        if info.rope_mode == "none":
            info.rope_head_dim = 0
        elif info.rope_mode == "combine":
            info.rope_head_dim = info.qk_head_dim - info.v_head_dim
        else:
            qr = LayoutShape(p.query_rope.shape, info.q_layout, "query_rope", info.n1_size).require("D")
            kr = LayoutShape(p.key_rope.shape, info.kv_layout, "key_rope", info.n2_size).require("D")
            if qr != kr:
                raise _fail("query_rope", p.query_rope.shape,
                            f"D of query_rope ({qr}) must equal D of key_rope ({kr})")
            info.rope_head_dim = _u32(qr)

    # ---------------------------------------------------------------- features
    def _features(self):
        p, info = self.p, self.info
        m = p.atten_mask
        info.atten_mask_flag = present(m) and numel(m.shape) != 0
        self._padding_flags()
        self._tokens()
        self._mask_info()
        self._actual_seq_info()
        self._system_prefix()
        self._pse()
        self._post_quant()
        self._full_quant_mode()

    def _padding_flags(self):
        p, info = self.p, self.info
        info.q_padding_flag = (not info.is_legacy_ifa or info.arch == "arch35") and self.q_padding is not None
        kvp = p.kv_padding_size if present(p.kv_padding_size) else None
        if info.is_legacy_ifa:
            info.kv_padding_flag = (kvp is not None and numel(kvp.shape) > 0
                                    and info.kv_storage_mode == "contiguous" and self.act_kv is not None)
        else:
            info.kv_padding_flag = kvp is not None
        if info.antiquant_flag:
            if info.q_padding_flag or (info.kv_padding_flag and info.s1_size == 1):
                info.need_init = True
        elif info.q_padding_flag or info.kv_padding_flag:
            info.need_init = True
        if info.quant_mode == "anti" and info.s1_size == 1:
            info.q_padding_flag = False

    def _tokens(self):
        info = self.info
        pre, nxt, sparse = self.pre_attr, self.next_attr, self.sparse_mode
        if sparse == 0:
            if info.atten_mask_flag and (info.q_padding_flag or info.kv_padding_flag):
                pre, nxt = INT_MAX, INT_MAX
        elif sparse == 1:
            pre, nxt = INT_MAX, INT_MAX
        elif sparse in (2, 3, 9):
            pre, nxt = INT_MAX, 0
        pre = max(-INT_MAX, min(INT_MAX, pre))
        nxt = max(-INT_MAX, min(INT_MAX, nxt))
        if sparse == 0 and not info.atten_mask_flag:
            pre, nxt = INT_MAX, INT_MAX
        if sparse == 0 and info.q_padding_flag:
            pre, nxt = INT_MAX, INT_MAX
        if info.quant_mode == "anti" and info.s1_size == 1:
            pre, nxt = INT_MAX, INT_MAX
        info.sparse_mode = sparse
        info.pre_token, info.next_token = pre, nxt

    def _mask_info(self):
        p, info = self.p, self.info
        if not info.atten_mask_flag:
            return
        raw_sparse = self.sparse_mode
        if raw_sparse == 9 and info.arch == "arch35":
            raise _fail("sparse_mode", 9, "sparse_mode 9 (tree mask) is not supported on this architecture")
        shape = p.atten_mask.shape
        nd = len(shape)
        if raw_sparse == 9:
            if info.q_layout in ("TND", "NTD"):
                if nd == 1:
                    info.atten_mask_batch_stride = info.atten_mask_stride = 1
            elif nd == 3:
                info.atten_mask_batch_stride = shape[2] * shape[1]
                info.atten_mask_stride = shape[2]
            return
        if nd == 2:
            info.atten_mask_batch_stride = shape[1] if info.s1_size == 1 else 0
        elif nd in (3, 4):
            info.atten_mask_batch_stride = shape[-1] * shape[-2] if shape[0] == info.b_size else 0
        info.atten_mask_stride = shape[-1] if raw_sparse in (0, 1) else 2048

    def _actual_seq_info(self):
        info = self.info
        info.max_actualseq = 0
        if info.is_max_workspace:
            info.max_actualseq = info.s2_size
            self._act_dims_only()
            return
        kv = self.act_kv
        if kv is not None:
            info.actual_len_kv_dims = _u32(numel(kv.shape))
            info.is_accum_kv_seq = info.kv_layout in ("TND", "NTD")
            if kv.data is not None:
                loop = 1 if (info.actual_len_kv_dims == 1 and len(info.kv_list_seq_lens) == 1) else info.b_size
                loop = min(loop, info.actual_len_kv_dims)
                self._kv_seq_loop(kv, loop)
        else:
            info.max_actualseq = info.s2_size
        q = self.act_q
        if q is not None:
            info.actual_len_q_dims = _u32(numel(q.shape))
            info.is_accum_q_seq = info.q_layout in ("TND", "NTD")
            if q.data is not None:
                for i in range(min(info.b_size, info.actual_len_q_dims)):
                    v = _data_at(q, i)
                    if info.q_layout in ("TND", "NTD") and i > 0:
                        v -= _data_at(q, i - 1)
                    if v != info.s1_size:
                        info.need_init = True
                        break
        if info.quant_mode == "anti" and info.s1_size == 1 and info.q_layout != "TND":
            info.actual_len_q_dims = 0

    def _act_dims_only(self):
        # with the tiling sink op_host returns before reading the element counts
        pass

    def _kv_seq_loop(self, kv: TensorMeta, loop: int):
        info = self.info
        prev = 0
        first = _data_at(kv, 0) if loop > 0 else 0
        for i in range(loop):
            raw = _data_at(kv, i)
            act = raw
            if info.antiquant_flag:
                if info.q_layout == "TND" and i > 0 and info.kv_storage_mode != "page_attention":
                    act -= _data_at(kv, i - 1)
                if info.s1_size == 1:
                    info.need_init = info.need_init or act == 0
            else:
                if info.q_layout in ("TND", "NTD"):
                    act -= prev
                    prev = raw
                info.need_init = info.need_init or act == 0
                if act != info.s2_size and info.q_layout not in ("TND", "NTD"):
                    info.need_init = True
            info.max_actualseq = max(info.max_actualseq, act)
            if raw != first:
                info.is_same_actualseq = False

    def _system_prefix(self):
        p, info = self.p, self.info
        if not (present(p.key_shared_prefix) and present(p.value_shared_prefix)):
            return
        kp = LayoutShape(p.key_shared_prefix.shape, info.kv_layout, "key_shared_prefix", info.n2_size)
        s = kp.get("S")
        info.system_prefix_max_len = _u32(s if s is not None else INVALID_DIM)
        info.sys_prefix_flag = True
        info.system_prefix_len = info.system_prefix_max_len
        lens = p.actual_shared_prefix_len
        if present(lens) and numel(lens.shape) != 0:
            if tuple(lens.shape) != (1,):
                raise _fail("actual_shared_prefix_len", lens.shape,
                            "actual_shared_prefix_len must have shape (1,) with a shared prefix")
            if lens.data is not None:
                info.system_prefix_len = _data_at(lens, 0)

    def _pse(self):
        p, info = self.p, self.info
        info.pse_type = int(p.pse_type)
        if info.pse_type != 0:
            raise _fail("pse_type", p.pse_type, "pse_type must be 0")
        pse = p.pse_shift
        if present(pse) and numel(pse.shape) != 0:
            info.pse_shift_flag = True
            if info.arch == "arch22":
                info.pse_shift_by_batch = 1 if pse.shape[0] != 1 else 0
            else:
                info.pse_shift_by_batch = pse.shape[0]
            info.pse_shift_s1 = dim(pse.shape, 2)
            info.pse_shift_s2 = dim(pse.shape, 3)

    def _post_quant(self):
        p, info = self.p, self.info
        if info.out_dtype not in _FP16_BF16:
            info.is_out_quant_enable = True
            qs = p.quant_scale2
            if present(qs):
                info.is_out_quant_per_chn_out = numel(qs.shape) != 1
                info.is_out_quant_type_bf16 = qs.dtype == "bfloat16"

    def _full_quant_mode(self):
        p, info = self.p, self.info
        if info.quant_mode != "full":
            return
        q, k, v = p.query_quant_mode, p.key_antiquant_mode, p.value_antiquant_mode
        if (q, k, v) == (7, 7, 7):
            raise _fail("query_quant_mode", q, "per-block quantisation (mode 7) is not supported for full quant")
        if (q, k, v) == (6, 6, 8):
            info.full_quant_mode = "mxfp8"
        elif (q, k, v) == (3, 3, 2):
            info.full_quant_mode = "qk_per_token_head_v_per_head"
        elif info.rope_mode == "split" and (q, k, v) == (3, 0, 0):
            info.full_quant_mode = "q_per_token_head_kv_per_tensor"
        else:
            info.full_quant_mode = "per_tensor"

    # ---------------------------------------------------------------- summary fields
    def _generate(self):
        p, info = self.p, self.info
        info.inner_precise = _i32(p.inner_precise)
        info.scale = float(p.scale)
        info.softmax_lse_flag = bool(p.softmax_lse_flag)
        info.total_lse_size = numel(p.softmax_lse.shape) if present(p.softmax_lse) else 0
        info.total_output_size = numel(p.attention_out.shape)
        info.total_block_num = dim(self.k_cache[0], 0)
        info.learnable_sink_flag = present(p.learnable_sink)
        info.is_qkv_d_different = (info.qk_head_dim != info.v_head_dim
                                   and not (info.qk_head_dim == 192 and info.v_head_dim == 128))
        info.sliding_flag = (info.sparse_mode == 4 and info.rope_mode == "split" and info.qk_head_dim == 512)
        info.l2_cache_size = info.platform.l2
        if info.arch == "arch22" and info.page_attention_flag:
            info.max_block_num_per_batch = info.block_table_cols
        if not hasattr(self, "act_q"):
            return
        info.actual_seq_q = self.act_q.data if self.act_q is not None else None
        info.actual_seq_kv = self.act_kv.data if self.act_kv is not None else None
        if info.empty_tensor_flag:
            return
        info.s1_per_batch = tuple(_per_batch(info.actual_seq_q, info.actual_len_q_dims or _n(self.act_q),
                                             info.is_accum_q_seq, info.b_size, info.s1_size))
        if info.actual_seq_kv is not None:
            kv = _per_batch(info.actual_seq_kv, info.actual_len_kv_dims or _n(self.act_kv), info.is_accum_kv_seq,
                            info.b_size, info.s2_size)
        elif info.kv_storage_mode == "tensor_list" and info.kv_list_seq_lens:
            kv = _per_batch(info.kv_list_seq_lens, len(info.kv_list_seq_lens), False, info.b_size, info.s2_size)
        else:
            kv = [info.s2_size] * info.b_size
        info.s2_per_batch = tuple(kv)


def _div_trunc(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _n(t: TensorMeta | None) -> int:
    return numel(t.shape) if t is not None else 0


def _data_at(t: TensorMeta, i: int) -> int:
    """Element ``i`` of a host list; reading past its end yields 0 (op_host would read unowned memory)."""
    d = t.data or ()
    return int(d[i]) if 0 <= i < len(d) else 0


def _per_batch(values, count: int, accumulated: bool, b: int, default: int) -> list[int]:
    """Per-batch lengths from an actual-length list as the core split reads it."""
    if values is None:
        return [default] * b
    vals = list(values)

    def at(i):
        return int(vals[i]) if 0 <= i < len(vals) else 0

    if count == 1:
        return [at(0)] * b
    if not accumulated:
        return [at(i) for i in range(b)]
    return [at(i) if i == 0 else at(i) - at(i - 1) for i in range(b)]


def _validate_stride(name: str, t: TensorMeta):
    """A view's stride rank must cover the tensor's rank, and non-singleton axes need positive strides."""
    if t.stride_dims == 0:
        return  # contiguous: op_host builds dense strides, which always pass
    if t.stride_dims < len(t.shape):
        raise _fail(name, t.stride, f"the stride rank of {name} ({t.stride_dims}) is smaller than its rank "
                    f"({len(t.shape)})")
    for i, d in enumerate(t.shape):
        if d > 1 and t.stride[i] <= 0:
            raise _fail(name, t.stride, f"the stride of {name} at non-singleton axis {i} must be positive")


def _noncontig_dim(t: TensorMeta) -> int | None:
    """The axis where a strided tensor stops being dense (None when dense or without strides)."""
    if t.stride_dims == 0:
        return None
    nd = len(t.shape)
    if t.stride_dims < nd:
        return nd
    if nd <= 1:
        return None
    expect = 1
    for i in range(nd - 1, -1, -1):
        if t.shape[i] == 1:
            continue
        if t.stride[i] != expect:
            return i
        expect *= t.shape[i]
    return None
