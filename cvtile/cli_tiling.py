"""The ``cvtile tiling`` and ``cvtile cases`` commands: what op_host would decide for a shape, and UT-corpus runs.

``cvtile tiling`` builds a FusedInferAttentionScore call from a few shape options
(tensor metadata only, no data), runs ``tile_fia`` and prints the template, the
tiling key, the block sizes, the cores used and the flash-decode plan, each with the
op_host rule that decided it (``--json``: the whole ``FiaTiling``). A call op_host
would reject prints the aclnn status and the rule, and exits with status 1.

``cvtile cases PATH.csv`` runs an op_host tiling UT CSV: it prints the rows whose
verdict or key disagree, then the summary line, and exits with status 1 when a row
raised something other than a rejection (a cvtile bug), else 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from cvtile.tiling import DEFAULT_TARGET, FiaParams, ParamError, TensorMeta
from cvtile.tiling.fia import format_tiling, tile_fia
from cvtile.tiling.platform import get_platform

__all__ = ["add_tiling_parser", "add_shape_options", "run_tiling", "build_params", "build_call", "run_ut_cases"]

_LAYOUTS = ("BSH", "BSND", "BNSD", "TND", "NTD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD", "TND_NTD", "NTD_TND",
            "BNSD_BSND", "BSND_BNSD", "BSH_BNSD")


def add_tiling_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("tiling", help="show the op_host tiling decisions of a FusedInferAttentionScore call",
                              description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    add_shape_options(p)
    p.add_argument("--json", action="store_true", help="print FiaTiling.to_dict() as JSON")
    p.add_argument("--compare", action="store_true",
                   help="also time op_host's plan and its neighbours (M/S2 bases halved and doubled, all cores) "
                        "with the cost model and show the best against op_host's")
    p.add_argument("--mask-mod", default=None, metavar="SPEC",
                   help="also classify the tiling's blocks by a variant's mask_mod (a gallery entry such as "
                        "sliding_window:256, prefix_lm:128, causal, or module:attribute) and show the block map the "
                        "kernel skips by: its density, live columns and row height")
    p.set_defaults(func=run_tiling)
    return p


def add_shape_options(p) -> None:
    """The shape options of a FusedInferAttentionScore call (``cvtile tiling`` and ``cvtile cost``)."""
    p.add_argument("--batch", "-b", type=int, default=4, help="B (default 4)")
    p.add_argument("--num-heads", "-n", type=int, default=32, help="query heads N (default 32)")
    p.add_argument("--num-kv-heads", type=int, default=None,
                   help="key/value heads (default 8, or num-heads when 8 does not divide it)")
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
    nkv = args.num_kv_heads or (8 if n % 8 == 0 else n)
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
    attrs = {"num_heads": n, "num_key_value_heads": nkv, "input_layout": args.layout, "scale": d ** -0.5,
             "sparse_mode": args.sparse_mode, "pre_tokens": args.pre_tokens, "next_tokens": args.next_tokens,
             "block_size": args.block_size, "inner_precise": args.inner_precise, "softmax_lse_flag": bool(args.lse)}
    return tensors, attrs


def run_tiling(args) -> int:
    params = build_params(args)
    try:
        t = tile_fia(params, args.target)
    except ParamError as e:
        if args.json:
            print(json.dumps({"rejected": e.to_dict()}, indent=2))
        else:
            print(f"rejected: {e}")
        return 1
    search = _compare(args) if getattr(args, "compare", False) else None
    if isinstance(search, int):
        return search
    bmap = _block_map(args, t) if getattr(args, "mask_mod", None) else None
    if isinstance(bmap, int):
        return bmap
    if args.json:
        doc = t.to_dict()
        if search is not None:
            doc["plan_search"] = search.to_dict()
        if bmap is not None:
            doc["block_map"] = {"visited": bmap.visited, "full": bmap.full, "total": bmap.total,
                                "density": bmap.density, "row_tasks": len(bmap.tasks), "rows": bmap.height,
                                "live_columns": bmap.live, "columns": bmap.columns, "pairs": bmap.pairs}
        print(json.dumps(doc, indent=2))
    else:
        print(format_tiling(t))
        if search is not None:
            print(search.format())
        if bmap is not None:
            print(f"{args.mask_mod}: {bmap.summary()}")
    return 0


def _block_map(args, t):
    """The block map of ``--mask-mod`` over the tiling's tasks, or exit status 2 for a spec cvtile cannot use."""
    from cvtile.kernels.fia.launch import effective_lengths, m_capacity
    from cvtile.kernels.variants import Hooks, VariantError
    from cvtile.kernels.variants.block_map import plan_block_map
    from cvtile.kernels.variants.gallery import hook_from_spec

    try:
        hooks = Hooks(mask_mod=hook_from_spec(args.mask_mod))
        qlen, kvlen = effective_lengths(t)
        tasks = [task for c in t.cores for task in c.tasks]
        nkv = args.num_kv_heads or (8 if args.num_heads % 8 == 0 else args.num_heads)
        return plan_block_map(tasks, hooks, m_cap=m_capacity(t, tasks), s2_base=t.s2_base, qlen=qlen, kvlen=kvlen,
                              group=args.num_heads // nkv, order=t.m_order)
    except VariantError as e:
        print(f"cvtile tiling --mask-mod: {e}", file=sys.stderr)
        return 2


def _compare(args):
    """The plan search of ``--compare`` (``kernels.fia.plan_search``), or exit status 2 for a call cvtile
    cannot time."""
    from cvtile.cli_cost import arrays_of_call, dtype_overrides_of_call
    from cvtile.dsl.errors import CompilationError
    from cvtile.kernels.errors import UnsupportedParameterError
    from cvtile.kernels.fia.plan_search import search_plans

    tensors, attrs = build_call(args)
    arrays = arrays_of_call(tensors)
    q, k, v = arrays.pop("query"), arrays.pop("key"), arrays.pop("value")
    try:
        return search_plans(q, k, v, target=args.target, **arrays, **attrs, **dtype_overrides_of_call(tensors))
    except (UnsupportedParameterError, CompilationError, ValueError) as e:
        print(f"cvtile tiling --compare: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2


def run_ut_cases(path, arch: str | None = None, as_json: bool = False) -> int:
    """``cvtile cases PATH.csv``: print the disagreeing rows, then the summary line (or the JSON record)."""
    from cvtile.tiling.corpus import run_corpus

    result = run_corpus(path, arch)
    if as_json:
        print(result.to_json(indent=2))
    else:
        for r in result.mismatches():
            what = []
            if not r.verdict_ok:
                what.append(f"verdict {r.actual} (expected {r.expected})")
            if r.key_checked and not r.key_ok:
                what.append(f"key {r.key} (expected {r.expected_key})")
            detail = f" — {r.error}" if r.error else ""
            print(f"{r.case}: {'; '.join(what)}{detail}")
        print(f"{result.summary_line()} [{result.arch}, {result.seconds:.2f} s]")
    return 1 if result.errors else 0


def main(argv=None) -> int:  # a stand-alone entry for the two commands until cvtile/cli.py wires them
    parser = argparse.ArgumentParser(prog="cvtile")
    sub = parser.add_subparsers(dest="command", required=True)
    add_tiling_parser(sub)
    cases = sub.add_parser("cases", help="run an op_host tiling UT CSV")
    cases.add_argument("path")
    cases.add_argument("--arch", default=None)
    cases.add_argument("--json", action="store_true")
    cases.set_defaults(func=lambda a: run_ut_cases(a.path, a.arch, a.json))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
