"""The facts the decision half reads about a checked problem: one flat record, built from A's ``FiaInfo``.

Model
-----
``tile_fia`` first runs the verdict half (``check_fia``: parse, checkers, route),
which returns a ``FiaInfo``. The decision half (block sizes, core split, flash
decode, workspace, tiling key) reads only the fields collected here, with the
meaning op_host's ``FiaTilingInfo`` gives them. :func:`view_from_info` is the one
place that knows ``FiaInfo``'s attribute names; every decision module takes a
``TilingView`` (or explicit arguments), so a rename on the verdict side touches
this file only.

Field meanings that matter (op_host's, not the user's):

* ``s2`` is op_host's ``s2Size``: the key's S axis for contiguous KV, the largest
  list entry for a tensor list, ``maxBlockNumPerBatch * blockSize`` with paged
  attention (blocks derived from the actual KV lengths; the block table's width
  in a "tiling sink"), the largest actual length for TND KV;
* ``pre_tokens`` / ``next_tokens`` / ``sparse_mode`` after the parser's
  normalisation (no mask resets them to INT_MAX, causal modes set next to 0, ...);
* ``actual_q`` / ``actual_kv`` are the raw host lists (possibly cumulative), None
  when the input is absent;
* ``pre_tokens_attr`` / ``next_tokens_attr`` / ``num_kv_heads_attr`` are the
  attributes as the caller gave them (the split-fuse route reads them without the
  parser's normalisation) and ``pse_shape`` the pse_shift shape (() when absent);
* ``max_workspace`` is op_host's "tiling sink" flag: a length list is present but
  has no values, so the split is skipped.

Invariants
----------
* ``g * n2 == n1``; ``q_layout`` / ``kv_layout`` / ``out_layout`` are layout names of
  :mod:`.layouts` (paged KV: ``BnBsH`` / ``BnNBsD`` / ``NZ``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod as _prod

__all__ = ["TilingView", "view_from_info"]


@dataclass(frozen=True)
class TilingView:
    arch: str
    template: str                      # the template the route chose (e.g. "FiaTilingNonQuant")
    route: str = "fia"                 # "fia" / "ifa" / "pfa" / "fai" / "empty"
    input_layout: str = "BSH"          # the attribute as given (e.g. "BSND_BNSD")
    q_layout: str = "BSH"
    kv_layout: str = "BSH"
    out_layout: str = "BSH"
    batch: int = 1
    n1: int = 1
    n2: int = 1
    g: int = 1
    s1: int = 1
    s2: int = 0
    qk_dim: int = 0
    v_dim: int = 0
    rope_dim: int = 0
    q_dtype: str = "float16"
    kv_dtype: str = "float16"
    out_dtype: str = "float16"
    q_t: int = 0                       # T of query for TND/NTD
    actual_q: tuple | None = None
    actual_kv: tuple | None = None
    actual_q_dims: int = 0
    actual_q_given: tuple | None = None  # the caller's query lengths even where FIA drops them (legacy IFA)
    actual_kv_dims: int = 0
    accum_q: bool = False
    accum_kv: bool = False
    max_actual_seq: int = 0
    same_actual_seq: bool = True
    max_workspace: bool = False
    kv_list_lens: tuple = ()
    kv_storage: str = "contiguous"     # "contiguous" / "tensor_list" / "page_attention"
    block_size: int = 0
    max_block_num_per_batch: int = 0
    block_table_width: int = 0
    key_cache_rank: int = 0            # rank of the key (cache) tensor
    mask: bool = False
    sparse_mode: int = 0
    pre_tokens: int = 2147483647
    next_tokens: int = 2147483647
    inner_precise: int = 0
    prefix: bool = False
    prefix_len: int = 0
    prefix_max_len: int = 0
    pse: bool = False
    alibi: bool = False
    pse_type: int = 0
    pse_shape: tuple = ()
    num_kv_heads_attr: int = -1        # num_key_value_heads as given (0 = "same as num_heads"); -1 unknown
    pre_tokens_attr: int = 2147483647
    next_tokens_attr: int = 2147483647
    q_padding: bool = False
    kv_padding: bool = False
    out_quant: bool = False
    sink: bool = False
    lse: bool = False
    quant_mode: str = "none"           # "none" / "anti" / "full"
    # "none" / "per_tensor" / "per_block" / "mxfp8" / "q_per_token_head_kv_per_tensor" / "qk_per_token_head_v_per_head"
    full_quant_mode: str = "none"
    antiquant_mode: int = 0
    key_antiquant_mode: int = 0
    value_antiquant_mode: int = 0
    kv_antiquant_split: bool = False   # the key's and the value's own antiquant scales (not the stacked one)
    query_quant_mode: int = 0
    rope_mode: str = "none"            # "none" / "split" / "combine"
    mla_mode: str = "none"             # "none" / "split_d512" / "split_d128" / "combine_d128"
    empty: bool = False
    out_numel: int = 0                 # elements of attention_out
    qkv_d_different: bool = False
    dequant_scale_query_rank: int = 0
    extras: dict = field(default_factory=dict, compare=False)

    @property
    def tnd(self) -> bool:
        return self.q_layout in ("TND", "NTD")

    @property
    def paged(self) -> bool:
        return self.kv_storage == "page_attention"

    @property
    def tensor_list(self) -> bool:
        return self.kv_storage == "tensor_list"

    @property
    def s1_major(self) -> bool:
        """The M fold order: S1-major (BSH/BSND/TND) or G-major (BNSD, NTD)."""
        return self.q_layout in ("BSH", "BSND", "TND")


_QUANT = {"no": "none", "none": "none", "anti": "anti", "full": "full"}


def _tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else x


def view_from_info(info, **overrides) -> TilingView:
    """A :class:`TilingView` of the verdict half's ``FiaInfo`` (``tiling/info.py``)."""
    g = lambda name, default=None: getattr(info, name, default)  # noqa: E731
    route = g("route")
    p = g("params")
    key = getattr(p, "key", None) if p is not None else None
    dsq = getattr(p, "dequant_scale_query", None) if p is not None else None
    bt = getattr(p, "block_table", None) if p is not None else None
    pse = getattr(p, "pse_shift", None) if p is not None else None
    kw = dict(
        arch=g("arch"), template=getattr(route, "template", "") or "", route=getattr(route, "route", "fia") or "fia",
        input_layout=g("input_layout", "BSH") or "BSH", q_layout=g("q_layout", "BSH") or "BSH",
        kv_layout=g("kv_layout", "BSH") or "BSH", out_layout=g("out_layout", "BSH") or "BSH",
        batch=g("b_size", 1), n1=g("n1_size", 1), n2=g("n2_size", 1), g=g("g_size", 1), s1=g("s1_size", 1),
        s2=g("s2_size", 0), qk_dim=g("qk_head_dim", 0), v_dim=g("v_head_dim", 0), rope_dim=g("rope_head_dim", 0),
        q_dtype=g("q_dtype", "float16"), kv_dtype=g("kv_dtype", "float16"), out_dtype=g("out_dtype", "float16"),
        q_t=g("q_t_size", 0), actual_q=_tuple(g("actual_seq_q")), actual_kv=_tuple(g("actual_seq_kv")),
        actual_q_dims=g("actual_len_q_dims", 0), actual_q_given=_tuple(g("actual_seq_q_given")),
        actual_kv_dims=g("actual_len_kv_dims", 0),
        accum_q=bool(g("is_accum_q_seq", False)), accum_kv=bool(g("is_accum_kv_seq", False)),
        max_actual_seq=g("max_actualseq", 0), same_actual_seq=bool(g("is_same_actualseq", True)),
        max_workspace=bool(g("is_max_workspace", False)), kv_list_lens=_tuple(g("kv_list_seq_lens", ())) or (),
        kv_storage=g("kv_storage_mode", "contiguous") or "contiguous", block_size=g("block_size", 0),
        max_block_num_per_batch=g("max_block_num_per_batch", 0), block_table_width=g("block_table_cols", 0),
        key_cache_rank=len(key.shape) if key is not None else 0,
        mask=bool(g("atten_mask_flag", False)), sparse_mode=g("sparse_mode", 0),
        pre_tokens=g("pre_token", 2147483647), next_tokens=g("next_token", 2147483647),
        inner_precise=g("inner_precise", 0), prefix=bool(g("sys_prefix_flag", False)),
        prefix_len=g("system_prefix_len", 0), prefix_max_len=g("system_prefix_max_len", 0),
        pse=bool(g("pse_shift_flag", False)), alibi=bool(g("enable_alibi_pse", False)), pse_type=g("pse_type", 0),
        pse_shape=tuple(pse.shape) if pse is not None else (),
        num_kv_heads_attr=getattr(p, "num_key_value_heads", -1) if p is not None else -1,
        pre_tokens_attr=getattr(p, "pre_tokens", 2147483647) if p is not None else 2147483647,
        next_tokens_attr=getattr(p, "next_tokens", 2147483647) if p is not None else 2147483647,
        q_padding=bool(g("q_padding_flag", False)), kv_padding=bool(g("kv_padding_flag", False)),
        out_quant=bool(g("is_out_quant_enable", False)), sink=bool(g("learnable_sink_flag", False)),
        lse=bool(g("softmax_lse_flag", False)), quant_mode=_QUANT.get(g("quant_mode", "no"), "none"),
        full_quant_mode=g("full_quant_mode", "none") or "none", antiquant_mode=g("antiquant_mode", 0),
        key_antiquant_mode=g("key_antiquant_mode", 0),
        value_antiquant_mode=g("value_antiquant_mode", 0), query_quant_mode=g("query_quant_mode", 0),
        kv_antiquant_split=p is not None and getattr(p, "key_antiquant_scale", None) is not None
        and len(p.key_antiquant_scale.shape) > 0,
        rope_mode=g("rope_mode", "none") or "none", mla_mode=g("mla_mode", "none") or "none",
        empty=bool(g("empty_tensor_flag", False)), qkv_d_different=bool(g("is_qkv_d_different", False)),
        dequant_scale_query_rank=len(dsq.shape) if dsq is not None else 0,
        out_numel=_numel(p.attention_out.shape) if p is not None and p.attention_out is not None else 0,
    )
    if bt is not None and not kw["block_table_width"] and len(bt.shape) > 1:
        kw["block_table_width"] = bt.shape[1]
    kw = {k: val for k, val in kw.items() if val is not None or k in ("actual_q", "actual_kv", "actual_q_given")}
    kw.update(overrides)
    return TilingView(**kw)


def _numel(shape) -> int:
    return int(_prod(int(d) for d in shape))
