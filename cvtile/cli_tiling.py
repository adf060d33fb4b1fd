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

from cvtile.tiling import ParamError
from cvtile.tiling.fia import format_tiling, tile_fia

from .cli_call import add_shape_options, arrays_of_call, build_call, build_params, dtype_overrides_of_call

__all__ = ["add_tiling_parser", "run_tiling", "run_ut_cases"]

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
        return plan_block_map(tasks, hooks, m_cap=m_capacity(t, tasks), s2_base=t.s2_base, qlen=qlen, kvlen=kvlen,
                              group=t.group, order=t.m_order)
    except VariantError as e:
        print(f"cvtile tiling --mask-mod: {e}", file=sys.stderr)
        return 2


def _compare(args):
    """The plan search of ``--compare`` (``kernels.fia.plan_search``), or exit status 2 for a call cvtile
    cannot time."""
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
