"""The ``cvtile emit`` command: a kernel or an operator call written out as an Ascend C project.

``cvtile emit fia [case options] -o DIR [--target T] [--check] [--run]`` records the kernels one
FusedInferAttentionScore call launches (the attention kernel and, with flash-decode, its combine
kernel) on the case the options describe (the ``cvtile run`` options), and writes them as one project
in DIR; with no case option, each of ``cvtile run``'s default cases into ``DIR/<case name>``. ``cvtile emit FILE.py -o DIR`` does the same for whatever the
file's ``main()`` launches (every example has one); ``cvtile emit CORPUS.json --case ID -o DIR`` for the
operator call of one case of an st corpus or a tiny_rdv file (FusedInferAttentionScore, FlashAttentionScore or
RingAttentionUpdate; the inputs ``cvtile cases`` draws for it with the same ``--seed``; a tiny_rdv file's one
case needs no ``--case``). ``--check`` runs the declaration-header syntax check
(arch22 and arch35, AIC and AIV macro sets), ``--run`` builds the project against the CPU twin, runs it
and compares every output with the simulator's pipelined-order result, printing PASS/FAIL per output.
Exit status: 0 all good, 1 a check or comparison failed, 2 a user error or an unsupported kernel (one
line on stderr).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from .cli_options import add_case_options, case_options_of, check_output_dir

__all__ = ["add_emit_parser", "run_emit"]


def add_emit_parser(sub):
    p = sub.add_parser("emit", help="write a kernel or an operator call as an Ascend C project",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("what", help="'fia' (the FusedInferAttentionScore call of the case options), a .py file "
                                "whose main() launches cvtile kernels, or an st corpus / tiny_rdv .json file")
    add_case_options(p)
    p.add_argument("--case", dest="st_case", metavar="ID",
                   help="with a .json corpus: the id or name of the case whose call to emit")
    p.add_argument("-o", "--output", required=True, type=Path, help="the project directory to write")
    p.add_argument("--check", action="store_true", help="syntax-check every kernel file (arch22 and arch35)")
    p.add_argument("--run", action="store_true", help="build on the CPU twin, run, compare with the simulator")
    p.set_defaults(func=run_emit)
    return p


def _fail(msg: str) -> int:
    print(f"cvtile emit: {msg}", file=sys.stderr)
    return 2


def _fia_specs(args):
    """(case spec, project directory) pairs: the default cases into DIR/<case name> when no case option is
    given, else the one case into DIR."""
    from .cases import DEFAULT_CASES, with_options

    given = case_options_of(args)
    if not given:
        return [(spec, args.output / spec.name) for spec in DEFAULT_CASES]
    return [(with_options(DEFAULT_CASES[0], name="custom", **given), args.output)]


def _record_fia(spec, seed):
    from .cases import make_inputs
    from .dsl.jit import record_launches
    from .kernels.fia.api import npu_fused_infer_attention_score
    from .kernels.precision import twin_tolerance

    if spec.kv_dtype in ("int4", "float8_e4m3fn", "hifloat8"):   # narrow caches: widened, or an FP8 tensor
        raise _UserError(f"kv_dtype={spec.kv_dtype!r}: the Ascend C backend does not lower the chip's narrow KV loads "
                         "(int4 and HiF8 caches are simulated widened, int4 as int8 and HiF8 as the query's dtype; an "
                         "FP8 cache is a float8_e4m3fn tensor its declaration header has no type for), so it emits no "
                         "such kernel (use --kv-dtype int8)")
    q, k, v, kw = make_inputs(spec, seed)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, target=spec.target, **kw)
    return rec.launches, twin_tolerance(q.dtype), spec.describe()


def _record_file(path: Path):
    from .dsl.jit import record_launches

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"cvtile_emit_{path.stem}".replace("-", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, "main"):
        raise AttributeError(f"{path}: has no main() that launches kernels")
    import contextlib
    import io

    with record_launches() as rec, contextlib.redirect_stdout(io.StringIO()):
        mod.main()
    from .kernels.precision import tolerance

    return rec.launches, tolerance, str(path)


def _record_st_case(path: Path, wanted: str | None, seed: int):
    """The launches of one st / tiny_rdv case's operator call (``st_runner.find_case``, ``case_inputs``)."""
    from .dsl.jit import record_launches
    from .kernels.precision import tolerance
    from .kernels.st_runner import case_inputs, default_api, find_case, load_api

    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        index, case = find_case(path, wanted)
    except ValueError as e:
        raise _UserError(str(e)) from None
    kwargs = case_inputs(case, seed)
    with record_launches() as rec:
        load_api(default_api(path))(**kwargs)
    return rec.launches, tolerance, f"{path} case {case.id} (index {index})"


def run_emit(args) -> int:
    from .dsl.errors import CompilationError
    from .kernels.errors import UnsupportedParameterError
    from .tiling.errors import ParamError

    try:
        if args.what == "fia":
            jobs = [(lambda spec=spec: _record_fia(spec, args.seed), out) for spec, out in _fia_specs(args)]
        elif args.what.endswith(".py"):
            jobs = [(lambda: _record_file(Path(args.what)), args.output)]
        elif args.what.endswith(".json"):
            jobs = [(lambda: _record_st_case(Path(args.what), args.st_case, args.seed), args.output)]
        else:
            return _fail(f"unknown kernel or operator {args.what!r}: give 'fia', a .py file with a main() or an "
                         "st corpus .json file with --case ID")
        if args.st_case is not None and not args.what.endswith(".json"):
            return _fail(f"--case {args.st_case!r} names a case of an st corpus: give the corpus .json file")
        for _, out in jobs:     # an output directory that cannot be made fails before any kernel compiles
            check_output_dir(out)
        failed = False
        for record, out in jobs:
            failed |= _emit_one(args, record, out)
    except (ParamError, UnsupportedParameterError, FileNotFoundError, AttributeError) as e:
        return _fail(str(e).splitlines()[0])
    except _Unsupported as e:
        return _fail(f"not supported by the Ascend C backend: {str(e).splitlines()[0]}")
    except CompilationError as e:
        return _fail(str(e).splitlines()[0])
    except _UserError as e:
        return _fail(str(e))
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


class _UserError(Exception):
    pass


from .dsl.ascendc import AscendCError as _Unsupported  # noqa: E402


def _emit_one(args, record, out: Path) -> bool:
    """Record, emit, check and run one project; True when a check or the comparison failed."""
    from .dsl import ascendc

    records, tol, what = record()
    if not records:
        raise _UserError(f"{what}: launched no cvtile kernel")
    t0 = time.perf_counter()
    launches = [ascendc.Launch.of(r) for r in records]
    for L in launches:
        ascendc.lowered(L.kernel)
    t_lower = time.perf_counter() - t0
    from .kernels.precision import MAX_FAIL_RATIO

    res = ascendc.emit(str(out), launches, tolerance=tol, max_fail_ratio=MAX_FAIL_RATIO)
    kernels = res["kernels"]
    print(f"{what}: {len(records)} launch(es) of {len(kernels)} kernel(s) written to {out} "
          f"(lowering {t_lower:.2f} s)")
    for lk in kernels:
        n = lk.source.count("\n")
        print(f"  op_kernel/{lk.name}.cpp  {n} lines, {lk.kernel_type}, tiling struct {lk.tiling_struct}")
    failed = False
    if args.check:
        try:
            t0 = time.perf_counter()
            done = ascendc.check_project(str(out), kernels)
            print(f"  syntax check PASS: {len(done)} file x macro-set checks (arch22/arch35 x AIC/AIV) in "
                  f"{time.perf_counter() - t0:.1f} s")
        except ascendc.NoCompiler as e:
            raise _UserError(str(e)) from None
        except ascendc.CheckFailed as e:
            failed = True
            print(f"  syntax check FAIL: {e}")
    if args.run:
        arch = ascendc.arch_of(launches[0].kernel.platform)
        try:
            t0 = time.perf_counter()
            report = ascendc.run_project(str(out), arch)
            print(f"  twin run ({arch}) in {time.perf_counter() - t0:.1f} s:")
            for line in report.splitlines():
                print(f"    {line}")
        except ascendc.NoCompiler as e:
            raise _UserError(str(e)) from None
        except ascendc.CheckFailed as e:
            failed = True
            print(f"  twin run ({arch}) FAIL: {e}")
    return failed
