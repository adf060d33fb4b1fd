"""The FusedInferAttentionScore call that ``cvtile tiling`` and ``cvtile cost`` build from shape options.

``add_shape_options`` adds the options (B, N, KV heads, S1, S2, D, layout, dtypes, masks, paged cache, rope,
lengths, target); ``build_call`` turns the parsed options into the call op_host sees: tensor metadata
(``TensorMeta``, no data) and length lists under torch_npu's names, and the attributes. ``build_params`` is
its ``FiaParams``; ``arrays_of_call`` gives numpy stand-ins for the commands that run the host side or the
cost model: each data tensor a zero-stride view of one zero, so a call of any size (a production KV cache of
hundreds of GiB) costs no memory, since neither reads a tensor's values; ``dtype_overrides_of_call`` the V2
dtype keywords a HiF8 cache needs. The options' ranges are checked by ``cli_options.validate_shape_options``.
"""

from __future__ import annotations

import numpy as np

from cvtile.tiling import DEFAULT_TARGET, FiaParams, TensorMeta
from cvtile.tiling.platform import get_platform

__all__ = ["add_shape_options", "build_call", "build_params", "arrays_of_call", "dtype_overrides_of_call"]

_LAYOUTS = ("BSH", "BSND", "BNSD", "TND", "NTD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD", "NTD_TND",
            "BNSD_BSND", "BSND_BNSD", "BSH_BNSD")


def add_shape_options(p) -> None:
    """The shape options of a FusedInferAttentionScore call (``cvtile tiling`` and ``cvtile cost``)."""
    p.add_argument("--batch", "-b", type=int, default=4, help="B (default 4)")
    p.add_argument("--num-heads", "-n", type=int, default=32, help="query heads N (default 32)")
    p.add_argument("--num-kv-heads", type=int, default=None,
                   help="key/value heads (default 8, or num-heads when 8 does not divide it; 0: "
                        "num_key_value_heads 0, which op_host reads as num-heads)")
    p.add_argument("--q-seqlen", type=int, default=1, help="query sequence S1 (default 1: decode)")
    p.add_argument("--kv-seqlen", type=int, default=4096, help="key/value sequence S2 (default 4096)")
    p.add_argument("--head-dim", "-d", type=int, default=128, help="D of query and key (default 128)")
    p.add_argument("--value-head-dim", type=int, default=None, help="D of value (default: head-dim)")
    p.add_argument("--rope-dim", type=int, default=0, help="split rope head dim (query_rope/key_rope), 0 = none")
    p.add_argument("--dtype", default="float16", help="query/key/value dtype (float16, bfloat16)")
    p.add_argument("--kv-dtype", choices=("int8", "int4", "float8_e4m3fn", "hifloat8"), default=None,
                   help="a KV-antiquant cache: int8, int4, float8_e4m3fn or hifloat8 (both no offset; hifloat8 "
                        "Ascend950 only) key/value with per-channel scale/offset in the query's "
                        "dtype (stacked antiquant_scale/offset; on arch35 key_/value_antiquant_scale/offset) "
                        "(default: key/value in --dtype)")
    p.add_argument("--layout", default="BNSD", choices=_LAYOUTS, help="input_layout (default BNSD)")
    p.add_argument("--sparse-mode", type=int, default=0, help="sparse_mode 0..4 (2/3/4 add the 2048x2048 mask)")
    p.add_argument("--mask", action="store_true", help="pass an explicit atten_mask (sparse 0/1)")
    p.add_argument("--pre-tokens", type=int, default=2147483647)
    p.add_argument("--next-tokens", type=int, default=2147483647)
    p.add_argument("--block-size", type=int, default=0, help="paged KV cache block size (0 = contiguous KV)")
    p.add_argument("--actual-q", type=int, nargs="+", default=None, help="actual_seq_lengths (per batch)")
    p.add_argument("--actual-kv", type=int, nargs="+", default=None, help="actual_seq_lengths_kv (per batch)")
    p.add_argument("--inner-precise", type=int, default=0)
    p.add_argument("--lse", action="store_true", help="softmax_lse_flag: also output the log-sum-exp")
    p.add_argument("--target", "-t", default=DEFAULT_TARGET, help=f"platform (default {DEFAULT_TARGET})")


#: the caches that take no antiquant offset (op_host refuses one)
_NO_OFFSET = ("float8_e4m3fn", "hifloat8")


def _shape(layout: str, b: int, n: int, s: int, d: int) -> tuple:
    if layout in ("BSH",):
        return (b, s, n * d)
    if layout == "BSND":
        return (b, s, n, d)
    if layout == "BNSD":
        return (b, n, s, d)
    if layout == "TND":
        return (b * s, n, d)
    if layout == "NTD":
        return (n, b * s, d)
    if layout == "NBSD":
        return (n, b, s, d)
    raise ValueError(f"layout {layout!r}")


def build_params(args) -> FiaParams:
    """A FiaParams (metadata only) for the ``cvtile tiling`` options."""
    tensors, attrs = build_call(args)
    return FiaParams.from_api(tensors, attrs, source="cvtile tiling")


def build_call(args) -> tuple:
    """The FusedInferAttentionScore call of the ``cvtile tiling`` options: (tensor name -> TensorMeta or length
    list, attribute name -> value), with torch_npu's names."""
    b, n, s1, s2 = args.batch, args.num_heads, args.q_seqlen, args.kv_seqlen
    # 0 is torch_npu's "as many as num_heads" (the attribute stays 0, the tensors have N heads); None the default
    nkv_attr = args.num_kv_heads if args.num_kv_heads is not None else (8 if n % 8 == 0 else n)
    nkv = nkv_attr or n
    d = args.head_dim
    dv = args.value_head_dim or d
    dt = args.dtype
    q_layout, _, out_layout = args.layout.partition("_")
    out_layout = out_layout or q_layout
    kv_layout = "TND" if q_layout in ("TND", "NTD") else q_layout
    tensors: dict = {}
    tensors["query"] = TensorMeta(_shape(q_layout, b, n, s1, d), dt)
    tensors["attention_out"] = TensorMeta(_shape(out_layout, b, n, s1, dv), dt)
    actual_q = list(args.actual_q) if args.actual_q else None
    actual_kv = list(args.actual_kv) if args.actual_kv else None
    if q_layout in ("TND", "NTD"):          # cumulative lengths (the KV ones only without a paged cache)
        actual_q = actual_q or [s1 * (i + 1) for i in range(b)]
        if not args.block_size:
            actual_kv = actual_kv or [s2 * (i + 1) for i in range(b)]
    if args.block_size:
        bs = args.block_size
        blocks_per_batch = -(-s2 // bs)
        cache_layout = "BNSD" if q_layout == "BNSD" else "BSH"
        kshape = (b * blocks_per_batch, nkv, bs, d) if cache_layout == "BNSD" else (b * blocks_per_batch, bs, nkv * d)
        vshape = (b * blocks_per_batch, nkv, bs, dv) if cache_layout == "BNSD" else (b * blocks_per_batch, bs, nkv * dv)
        tensors["key"] = TensorMeta(kshape, dt)
        tensors["value"] = TensorMeta(vshape, dt)
        tensors["block_table"] = TensorMeta((b, blocks_per_batch), "int32")
        actual_kv = actual_kv or [s2] * b
    else:
        tensors["key"] = TensorMeta(_shape(kv_layout, b, nkv, s2, d), dt)
        tensors["value"] = TensorMeta(_shape(kv_layout, b, nkv, s2, dv), dt)
    kv_dtype = getattr(args, "kv_dtype", None)
    if kv_dtype:   # KV antiquant: an integer cache with per-channel scale and offset
        for name in ("key", "value"):
            tensors[name] = TensorMeta(tensors[name].shape, kv_dtype)
        if get_platform(args.target).arch == "arch35":   # Ascend950 takes the key's and the value's apart
            for name in ("key_antiquant_scale", "value_antiquant_scale", "key_antiquant_offset",
                         "value_antiquant_offset")[:2 if kv_dtype in _NO_OFFSET else 4]:
                tensors[name] = TensorMeta((nkv, 1, d), dt)
        else:
            for name in ("antiquant_scale", "antiquant_offset")[:1 if kv_dtype in _NO_OFFSET else 2]:
                tensors[name] = TensorMeta((2, nkv, 1, d), dt)
    if args.rope_dim:
        r = args.rope_dim
        tensors["query_rope"] = TensorMeta(_shape(q_layout, b, n, s1, r), dt)
        kshape = tensors["key"].shape
        h_layout = (args.block_size and q_layout != "BNSD") or (not args.block_size and kv_layout == "BSH")
        tensors["key_rope"] = TensorMeta(kshape[:-1] + ((nkv * r) if h_layout else r,), dt)
    if args.sparse_mode in (2, 3, 4):
        tensors["atten_mask"] = TensorMeta((2048, 2048), "int8")
    elif args.mask:
        tensors["atten_mask"] = TensorMeta((b, 1, s1, s2), "int8")
    if actual_q is not None:
        tensors["actual_seq_lengths"] = actual_q
    if actual_kv is not None:
        tensors["actual_seq_lengths_kv"] = actual_kv
    if args.lse:
        lse_shape = (b * s1, n, 1) if q_layout in ("TND", "NTD") else (b, n, s1, 1)
        tensors["softmax_lse"] = TensorMeta(lse_shape, "float32")
    attrs = {"num_heads": n, "num_key_value_heads": nkv_attr, "input_layout": args.layout, "scale": d ** -0.5,
             "sparse_mode": args.sparse_mode, "pre_tokens": args.pre_tokens, "next_tokens": args.next_tokens,
             "block_size": args.block_size, "inner_precise": args.inner_precise, "softmax_lse_flag": bool(args.lse)}
    return tensors, attrs


def arrays_of_call(tensors: dict) -> dict:
    """numpy stand-ins for a call's tensor metadata: each data tensor a read-only zero-stride view of one zero of
    its dtype (``host_memory.stand_in``: no memory whatever its size; a hifloat8 tensor's as uint8 codes, which
    ``dtype_overrides_of_call`` marks; an int4 cache packed 8 values per int32, as the API takes it), the
    2048x2048 mask template for a sparse-mode mask, a block table numbering the blocks in order; length lists pass
    through. The tiling and the cost model read only the shapes, dtypes and these small tensors' values."""
    from .host_memory import stand_in
    from .kernels.golden import mask_template

    out = {}
    for name, meta in tensors.items():
        if not hasattr(meta, "shape"):
            out[name] = list(meta)
            continue
        if name == "block_table":
            out[name] = np.arange(int(np.prod(meta.shape)), dtype=np.int32).reshape(meta.shape)
        elif name == "atten_mask" and tuple(meta.shape) == (2048, 2048):
            out[name] = mask_template()
        elif name not in _OUTPUTS:
            out[name] = stand_in(*_storage_of(meta))
    return out


#: tensors of a call's metadata that are outputs: ``arrays_of_call`` makes no array for them
_OUTPUTS = ("attention_out", "softmax_lse")


def _storage_of(meta) -> tuple:
    """The shape and numpy dtype of a tensor's stand-in: a hifloat8 tensor's as uint8 codes, an int4 one packed 8
    values per int32 along its last axis (``golden.int4``), any other in its own dtype."""
    from .kernels.golden.dtypes import numpy_dtype
    from .kernels.golden.hifloat8 import HIFLOAT8

    if meta.dtype == HIFLOAT8:
        return tuple(meta.shape), np.uint8
    if meta.dtype == "int4":
        return (*meta.shape[:-1], -(-meta.shape[-1] // 8)), np.int32
    return tuple(meta.shape), numpy_dtype(meta.dtype)


def dtype_overrides_of_call(tensors: dict) -> dict:
    """V2's ``key_dtype`` / ``value_dtype`` keywords of a call's tensor metadata: "hifloat8" for a HiF8 key /
    value (whose stand-in ``arrays_of_call`` gives as uint8 codes), as ``fia_cost`` takes them."""
    from .kernels.golden.hifloat8 import HIFLOAT8

    return {f"{name}_dtype": HIFLOAT8 for name in ("key", "value")
            if getattr(tensors.get(name), "dtype", None) == HIFLOAT8}
