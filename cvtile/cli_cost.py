"""The ``cvtile cost`` and ``cvtile trace`` commands: the cost model on an attention call.

``cvtile cost [the shape options of cvtile tiling] [--op fia|fas] --target T [--json]`` builds the call the
options describe (FusedInferAttentionScore, or with ``--op fas`` the FlashAttentionScore forward of the same
shapes: ``fas_keywords``) (zero data: only shapes and lengths matter), runs the operator's host side and times
every launch it makes with the cost model (``cvtile.sim.cost``): the estimated time, what bounds it
(cube / vector / memory / sync / scalar / launch), the per-pipe busy fractions and the critical path's
top source lines. ``cvtile trace [case options] -o DIR`` does the same for a ``cvtile run`` case (the
default decode case with no option) and writes ``DIR/trace.json`` (Chrome trace: Perfetto or
chrome://tracing opens it), ``DIR/timeline.png`` and ``DIR/roofline.png``. Exit status 0, or 2 with
one line on stderr for a call op_host rejects or cvtile does not support.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .cli_call import add_shape_options, arrays_of_call, build_call, dtype_overrides_of_call
from .cli_options import add_case_options, case_options_of, check_output_dir

__all__ = ["add_cost_parsers", "run_cost", "run_trace"]


def add_cost_parsers(sub) -> None:
    doc = __doc__.split("\n\n")[1]
    p = sub.add_parser("cost", help="estimate how fast the chip runs a FusedInferAttentionScore (or FlashAttentionScore) call",
                       description=doc)
    add_shape_options(p)
    p.add_argument("--op", choices=("fia", "fas"), default="fia",
                   help="the operator: fia = FusedInferAttentionScore (default); fas = FlashAttentionScore")
    p.add_argument("--json", action="store_true", help="the report as JSON (estimated_us, bound, busy, ...)")
    p.set_defaults(func=run_cost)
    t = sub.add_parser("trace", help="write the cost model's timeline (Chrome trace) and PNGs for a case",
                       description=doc)
    add_case_options(t)
    t.add_argument("-o", "--output", required=True, type=Path, help="directory for trace.json and the PNGs")
    t.add_argument("--all-blocks", action="store_true",
                   help="record every block of every core (default: the critical block only)")
    t.set_defaults(func=run_trace)


def _fail(cmd: str, msg: str) -> int:
    print(f"cvtile {cmd}: {msg}", file=sys.stderr)
    return 2


def run_cost(args) -> int:
    from .dsl.errors import CompilationError
    from .kernels.errors import UnsupportedParameterError
    from .kernels.fia.cost import fia_cost
    from .sim.cost import ModelError
    from .tiling.errors import ParamError
    from .tiling.platform import UnknownPlatformError, get_platform

    from .cases import check_kv_dtype

    try:
        get_platform(args.target)
        check_kv_dtype(args.kv_dtype, args.target)
        tensors, attrs = build_call(args)
        arrays = arrays_of_call(tensors)   # zero-stride stand-ins: a call of any size costs no memory
        q, k, v = arrays.pop("query"), arrays.pop("key"), arrays.pop("value")
        if args.op == "fas":
            from .kernels.fas.cost import fas_cost

            report = fas_cost(q, k, v, target=args.target, **fas_keywords(args, arrays, attrs))
        else:
            report = fia_cost(q, k, v, target=args.target, **arrays, **attrs, **dtype_overrides_of_call(tensors))
    except (ParamError, UnsupportedParameterError, UnknownPlatformError, ModelError, CompilationError) as e:
        return _fail("cost", str(e).splitlines()[0])
    if args.json:
        print(report.to_json())
    else:
        print(report.summary())
        for lc in report.launches:
            print(f"  {lc.kernel}: critical path (block {lc.critical_block}) "
                  + ", ".join(f"{k} {v / max(1e-9, sum(lc.path.values())):.0%}" for k, v in lc.path.items() if v))
            for cycles, line, kind, pipe in lc.path_lines[:5]:
                print(f"    {cycles / lc.clock_mhz:9.3f} us  {line:<28} {kind} ({pipe})")
    return 0


def fas_keywords(args, arrays: dict, attrs: dict) -> dict:
    """``npu_fusion_attention`` keywords of the ``cvtile tiling`` shape options (the FIA call they build, mapped
    to FlashAttentionScore's names); an option FlashAttentionScore has no counterpart for is a ``ParamError``."""
    from .tiling.errors import ParamError

    layout = attrs["input_layout"]
    if layout not in ("BSH", "BSND", "BNSD", "TND"):
        raise ParamError("layout", layout, "FlashAttentionScore takes BSH, SBH, BSND, BNSD or TND (no separate "
                         "output layout)", status=161002, checker="cli")
    for opt, name in (("block_size", "--block-size"), ("rope_dim", "--rope-dim"), ("lse", "--lse"),
                      ("kv_dtype", "--kv-dtype")):
        if getattr(args, opt, None):
            raise ParamError(name, getattr(args, opt), "not an option of FlashAttentionScore", status=161002,
                             checker="cli")
    kw = {"head_num": attrs["num_heads"], "input_layout": layout, "scale": attrs["scale"],
          "sparse_mode": attrs["sparse_mode"], "pre_tockens": attrs["pre_tokens"],
          "next_tockens": attrs["next_tokens"], "inner_precise": attrs["inner_precise"]}
    if "atten_mask" in arrays:
        kw["atten_mask"] = arrays["atten_mask"].astype(bool)
    if layout == "TND":
        kw["actual_seq_qlen"] = arrays.get("actual_seq_lengths")
        kw["actual_seq_kvlen"] = arrays.get("actual_seq_lengths_kv")
    elif args.actual_q or args.actual_kv:
        raise ParamError("--actual-q", args.actual_q or args.actual_kv, "FlashAttentionScore takes actual lengths "
                         "with the TND layout only", status=161002, checker="cli")
    return kw


def run_trace(args) -> int:
    from .cases import DEFAULT_CASES, make_inputs, with_options
    from .dsl.errors import CompilationError
    from .kernels.errors import UnsupportedParameterError
    from .kernels.fia.cost import fia_cost
    from .sim.cost import ModelError, write_chrome_trace
    from .sim.cost.plots import roofline_png, timeline_png
    from .tiling.errors import ParamError
    from .tiling.platform import UnknownPlatformError, get_platform

    given = case_options_of(args)
    spec = with_options(DEFAULT_CASES[0], name="custom", **given) if given else DEFAULT_CASES[0]
    check_output_dir(args.output)     # before the call: a directory that cannot be made costs nothing
    try:
        platform = get_platform(spec.target)
        q, k, v, kw = make_inputs(spec, args.seed)
        report = fia_cost(q, k, v, target=spec.target, record="all" if args.all_blocks else "critical", **kw)
    except (ParamError, UnsupportedParameterError, UnknownPlatformError, ModelError, CompilationError) as e:
        return _fail("trace", str(e).splitlines()[0])
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    trace = write_chrome_trace(report, out / "trace.json")
    timeline = timeline_png(report, out / "timeline.png")
    flops = sum(lc.flops for lc in report.launches)
    roof = roofline_png(report, platform, out / "roofline.png", flops)
    (out / "cost.json").write_text(report.to_json())
    print(f"{spec.name}: {spec.describe()}")
    print(report.summary())
    print(f"wrote {trace}, {timeline}, {roof}, {out / 'cost.json'}")
    return 0
