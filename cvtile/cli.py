"""The ``cvtile`` command line (also ``python -m cvtile``).

Commands
--------
``cvtile run [case options] [--order program|pipelined] [--json]``
    Runs attention cases on the simulator and checks them against the float64
    golden: with no case option, the built-in default cases (a GQA decode that
    uses flash-decode and a causal prefill); with options, one case built from
    them. ``--order pipelined`` runs the split, synced, pipelined programs the
    chip runs instead of the kernel as written. Prints each case, its tiling
    summary (template, M/S2 base, cores, flash-decode splits), the worst errors
    with PASS/FAIL under the dtype's tolerance, and simulated vs golden wall
    time; ``--json`` adds a sha256 of every output, so two runs compare
    bitwise. Exits 1 when a case fails.
``cvtile tiling [case options] [--json]``
    What op_host decides for a call (template, key, blocks, core split,
    flash-decode) and why; exits 1 when op_host would reject the call.
``cvtile emit fia|FILE.py [case options] -o DIR [--check] [--run]``
    Writes the kernels an operator call (or a file's ``main()``) launches as
    an Ascend C kernel-launch project; ``--check`` syntax-checks them against
    the declaration header, ``--run`` runs them on the CPU twin against the
    simulator (see ``cli_emit``).
``cvtile cost [tiling's shape options] [--json]`` / ``cvtile trace [case options] -o DIR``
    The cost model on a FusedInferAttentionScore call: estimated time, bound,
    per-pipe busy fractions and critical path; ``trace`` also writes a Chrome
    trace and timeline/roofline PNGs (see ``cli_cost``).
``cvtile cases PATH [--arch A] [--limit N] [--workers N] [--scheduler [ADDRESS]] [--json]``
    Runs a corpus: an op_host tiling UT CSV (verdict and tiling-key agreement),
    an st JSON corpus (random inputs in each case's ranges, run through the
    operator API, compared with the golden), or a tiny_rdv case file or folder
    (one model-shaped FIA call per file, built as the upstream tiny_rdv harness
    builds it). Ends with one summary line. ``--workers N`` runs st / tiny_rdv
    cases in N local processes, ``--scheduler`` on dask.distributed (a
    LocalCluster when no address is given); the results are the serial run's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli_cost import add_cost_parsers
from .cli_options import (add_case_options, case_options_of, non_negative_int, positive_float, positive_int,
                          validate_shape_options)
from .cli_emit import add_emit_parser
from .cli_tiling import add_tiling_parser, run_tiling, run_ut_cases

__all__ = ["main", "build_parser"]

class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2), for every subcommand."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cvtile", description="Ascend attention kernels on a CPU: simulate, "
                     "check against float64 goldens, and show the op_host tiling.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="simulate attention cases and check them against the golden",
                         description="With no case option: the built-in default cases. Any option makes one "
                                     "case from the decode default with the given fields changed.")
    add_case_options(run)
    run.add_argument("--order", choices=("program", "pipelined"), default="program",
                     help="the simulator's execution order: program = the kernel as written (default, fast); "
                          "pipelined = the AIC and AIV programs the compiler splits it into, meeting at flags")
    run.add_argument("--json", action="store_true", help="machine-readable results (with a sha256 per output)")
    run.set_defaults(func=_run)

    tiling = add_tiling_parser(sub)
    tiling.set_defaults(func=run_tiling)
    validate_shape_options(tiling)
    add_emit_parser(sub)
    add_cost_parsers(sub)
    validate_shape_options(sub.choices["cost"])   # the tiling's shape options

    cases = sub.add_parser("cases", help="run a corpus: an op_host UT CSV, an st JSON file, tiny_rdv cases, or a "
                                         "flash_attn redline train CSV")
    cases.add_argument("path", type=Path)
    cases.add_argument("--arch", choices=("arch22", "arch35"), help="UT CSV: the arch (default: from the file)")
    cases.add_argument("--limit", type=positive_int, help="st JSON: run only the first N cases (default: all)")
    cases.add_argument("--case", action="append",
                       help="st JSON / tiny_rdv / redline CSV: run only these case ids/names (repeatable)")
    cases.add_argument("--seed", type=non_negative_int, default=None,
                       help="st JSON / tiny_rdv / redline CSV: seed of the random inputs (default 0)")
    cases.add_argument("--golden", choices=("lowp", "exact", "st"), default=None,
                       help="st JSON / tiny_rdv: lowp = P rounded to the query dtype before P.V (default); "
                            "exact = unrounded float64; st = as the upstream st harness judges each case: its "
                            "fp32 golden (overflow to inf, NaN rows agree) or, for cv_fused_double_benchmark "
                            "(TND) cases, the double benchmark against an online-softmax benchmark")
    cases.add_argument("--json", action="store_true", help="machine-readable results")
    cases.add_argument("--workers", type=positive_int, default=None,
                       help="st JSON / tiny_rdv: run the cases in N local processes; the results are those of the "
                            "serial run (default 1; with --scheduler and no address: the LocalCluster's processes, "
                            "default 2)")
    cases.add_argument("--scheduler", nargs="?", const="local", default=None, metavar="ADDRESS",
                       help="st JSON / tiny_rdv: run the cases on dask.distributed at this scheduler address "
                            "(e.g. tcp://host:8786); with no address a LocalCluster is started on this machine and "
                            "closed afterwards; the results are those of the serial run (needs the dask extra)")
    cases.add_argument("--max-gflop", type=positive_float, default=None,
                       help="redline CSV: skip rows with more matmul work than this (default "
                            "cvtile.kernels.redline.DEFAULT_MAX_GFLOP)")
    cases.set_defaults(func=_cases)
    return parser


def main(argv=None) -> int:
    from .kernels.errors import UnsupportedParameterError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        return 0
    except (ValueError, UnsupportedParameterError, OSError, MemoryError) as e:
        # ParamError, UnknownPlatformError, HostMemoryError, bad case values; an output directory that cannot be
        # made or written (OSError); an allocation the memory check could not foresee (MemoryError)
        text = str(e).strip().splitlines()
        print(f"cvtile {args.command}: {type(e).__name__}: {text[0] if text else ''}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from .cases import DEFAULT_CASES, check_kv_dtype, run_case, with_options
    from .kernels.errors import UnsupportedParameterError
    from .tiling.errors import ParamError

    given = case_options_of(args)
    specs = [with_options(DEFAULT_CASES[0], name="custom", **given)] if given else list(DEFAULT_CASES)
    for spec in specs:   # a cache the target has no dtype for is a user error (main: one line, exit 2)
        check_kv_dtype(spec.kv_dtype, spec.target)
    results, failed = [], False
    for spec in specs:
        try:
            r = run_case(spec, seed=args.seed, order=args.order)
        except (ParamError, UnsupportedParameterError) as e:
            failed = True
            if args.json:
                results.append({"spec": spec.describe(), "error": str(e)})
            else:
                print(f"{spec.name}: {spec.describe()}\n  rejected: {e}")
            continue
        failed |= not r.passed
        if args.json:
            results.append(r.to_dict())
        else:
            _print_result(r)
    if args.json:
        print(json.dumps(results, indent=2))
    return 1 if failed else 0


def _print_result(r) -> None:
    t = r.tiling
    print(f"{r.spec.name}: {r.spec.describe()}")
    fd = f"flash-decode on: {t['fd_tasks']} split row blocks, up to {t['kv_splits']} KV splits" if t["fd"] \
        else "flash-decode off"
    print(f"  tiling: {t['template']} (key {t['tiling_key']}), M base {t['m_base']}, S2 base {t['s2_base']}, "
          f"{t['used_cores']} cores, {fd}")
    if t.get("fd_reason"):
        print(f"          ({t['fd_reason']})")
    for name, rep in r.reports.items():
        verdict = "PASS" if rep["passed"] else "FAIL"
        print(f"  {name:<14} {verdict}  max abs err {rep['max_abs_err']:.3e}  max rel err {rep['max_rel_err']:.3e}"
              f"  ({rep['violations']} of {rep['total']} outside rtol {rep['rtol']:.3g} atol {rep['atol']:.3g})")
    print(f"  wall time: simulated ({r.order} order) {r.sim_seconds:.3f} s, golden {r.golden_seconds:.3f} s"
          f" (kernel compile or disk-cache load {r.compile_seconds:.1f} s)")
    print(f"  {pass_rule(r.reports)}: {'PASS' if r.passed else 'FAIL'}")


def pass_rule(reports: dict) -> str:
    """The rule PASS stands for, with the allowed fraction outside tolerance (``kernels.precision.compare``)."""
    from .kernels.precision import MAX_OUTLIER, OUTLIER_FLOOR

    ratios = sorted({rep["max_fail_ratio"] for rep in reports.values()})
    allowed = " / ".join(f"{100 * x:.2f}%" for x in ratios) or "0%"
    return (f"pass rule (each output: at most {allowed} of its elements outside rtol/atol, none with "
            f"|a-g| / max(|a|, |g|, {OUTLIER_FLOOR:.4g}) of {MAX_OUTLIER:g} or more, no non-finite value where the "
            f"golden differs)")


#: the options of ``cases`` that only some corpus kinds take, and which (an option not given is None)
_KIND_OPTIONS = {"arch": ("ut",), "max_gflop": ("redline",), "case": ("st", "redline"), "seed": ("st", "redline"),
                 "limit": ("st",), "golden": ("st",), "workers": ("st",), "scheduler": ("st",)}
_KIND_NAMES = {"ut": "an op_host UT CSV", "redline": "a redline CSV", "st": "an st JSON corpus or tiny_rdv cases"}


def _foreign_option(args, kind: str) -> str | None:
    """The first option given that the corpus kind does not take, as a user error line; None when all apply."""
    for name, kinds in _KIND_OPTIONS.items():
        if getattr(args, name) is not None and kind not in kinds:
            return (f"cvtile cases: --{name.replace('_', '-')} does not apply to {_KIND_NAMES[kind]} "
                    f"({args.path}); it is for {' and '.join(_KIND_NAMES[k] for k in kinds)}")
    return None


def _cases(args) -> int:
    path = args.path
    if not path.exists():
        print(f"cvtile cases: {path}: no such file", file=sys.stderr)
        return 2
    if path.suffix.lower() == ".csv":
        from .kernels.redline import is_redline_csv

        kind = "redline" if is_redline_csv(path) else "ut"
    elif path.suffix.lower() == ".json" or path.is_dir():
        kind = "st"
    else:
        print(f"cvtile cases: {path}: expected an op_host UT .csv, an st .json corpus, or a tiny_rdv .json file or "
              "folder", file=sys.stderr)
        return 2
    refusal = _foreign_option(args, kind)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    if kind == "redline":
        return _redline_cases(args)
    if kind == "ut":
        return run_ut_cases(path, args.arch, args.json)
    return _st_cases(args)


_PROGRESS: dict = {}


def _progress_line(rec) -> None:
    """A one-line progress counter on stderr (a terminal only) for a sweep over worker processes or a dask
    scheduler."""
    _PROGRESS[rec.status] = _PROGRESS.get(rec.status, 0) + 1
    done = sum(_PROGRESS.values())
    counts = ", ".join(f"{v} {k}" for k, v in sorted(_PROGRESS.items()))
    print(f"\r{done} cases done: {counts}", end="", file=sys.stderr, flush=True)


def _redline_cases(args) -> int:
    from .kernels.redline import DEFAULT_MAX_GFLOP, run_redline

    budget = args.max_gflop if args.max_gflop is not None else DEFAULT_MAX_GFLOP
    result = run_redline(args.path, max_gflop=budget, seed=args.seed or 0, select=args.case)
    return _report(args, result, "golden: lowp (FAS, float64, P rounded to the input dtype before P.V); "
                                 f"tolerances: each row's precision_tolerances; work budget {budget:g} GFLOP")


def _report(args, result, golden_line: str) -> int:
    """Print a corpus result (JSON, or the non-passing records, the golden line and the summary); exit 1 when a
    case failed or errored."""
    bad = result.count("failed") + result.count("error")
    if args.json:
        print(result.to_json(indent=2))
        return 1 if bad else 0
    for rec in result.records:
        if rec.status != "passed":
            print(f"{rec.name}: {rec.status}: {rec.reason}")
    print(golden_line)
    print(result.summary_line())
    return 1 if bad else 0


def _st_cases(args) -> int:
    from .kernels.st_runner import (SchedulerConnectError, SchedulerUnavailableError, corpus_kind, default_api,
                                    golden_for, load_api, run_st_corpus)

    try:
        kind = corpus_kind(args.path)
    except ValueError as exc:   # not JSON, or a folder / file that is neither an st list nor tiny_rdv cases
        print(f"cvtile cases: {args.path}: {exc}", file=sys.stderr)
        return 2
    # the corpus' operator: RingAttentionUpdate's, torch_npu's V1 FIA for tiny_rdv, else the aclnn V4 set
    api = load_api(default_api(args.path))
    golden, golden_line = golden_for(args.golden or "lowp", kind=kind)
    pooled = (args.workers or 1) > 1 or args.scheduler is not None
    progress = _progress_line if pooled and sys.stderr.isatty() else None
    _PROGRESS.clear()
    try:
        result = run_st_corpus(args.path, api, golden=golden, limit=args.limit, seed=args.seed or 0,
                               select=args.case, workers=args.workers, scheduler=args.scheduler, progress=progress)
    except (SchedulerUnavailableError, SchedulerConnectError) as exc:   # dask missing, or the address is silent
        print(f"cvtile cases: {exc}", file=sys.stderr)
        return 2
    finally:
        if progress is not None and _PROGRESS:
            print(file=sys.stderr)
    return _report(args, result, golden_line)


if __name__ == "__main__":
    sys.exit(main())
