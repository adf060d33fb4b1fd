"""Run an st corpus (FusedInferAttentionScore, RingAttentionUpdate) or tiny_rdv cases through an operator API.

Model
-----
A corpus is an st JSON list (:mod:`.st_cases`) or tiny_rdv cases, one file or a folder of them
(:mod:`.tiny_rdv`; :func:`load_cases` tells them apart). For every case: build random inputs
(:meth:`StCase.make_inputs`, seeded by ``(seed, case id)``), call
``api(**kwargs)`` (torch_npu's V1 keywords plus the aclnn V4 additions
``learnable_sink``, ``dequant_scale_query`` and ``query_quant_mode``: the default API is
``cvtile.kernels.fia.api.fused_infer_attention_score_v4``), call ``golden(**kwargs)`` and
compare the outputs with :func:`cvtile.kernels.precision.compare` under the
tolerance class of the query's dtype (the lse, when requested, under the same
class, as the upstream flash_attn tests do). The default golden is
``fia_golden_lowp``: float64 throughout except that P is rounded to the query
dtype before P·V, the convention of the upstream/op-plugin test goldens
(softmax in high precision, cast to the input dtype, then the second matmul)
and what the chip's cube multiplies. ``--golden exact`` judges against the
unrounded float64 golden instead (bf16 cases with peaked softmax rows then
fail by P's rounding alone). ``--golden st`` judges each case the way the upstream st harness does
(``fia_golden_st``, read from ``executor_aclnnFusedInferAttentionScoreV4.py``): a case whose ``standard``
is ``"default"`` (the BSH/BSND/BNSD cases) against the executor's fp32 golden (fp32 scores, softmax and
P·V, P and the output rounded to the query dtype; a q·k beyond fp32 overflows to inf and its row is NaN, as
on the chip) with ``compare`` (NaN equals NaN, an inf the same inf); a ``cv_fused_double_benchmark`` case
(the TND ones) by :func:`cvtile.kernels.precision.compare_double_benchmark`: the output's errors against the
float64 golden within the case's ratios of the errors of an online-softmax benchmark (KV blocks of 512, P
rounded against the running max), an inf/NaN passing where the golden's or the benchmark's state matches.
A golden that takes ``accuracy_standard`` gets the case's ``standard["acc"]``. Every run prints the
convention it used in a ``golden: ...`` line before the summary. Each case ends in one status:

* ``passed`` — every compared output passed;
* ``failed`` — a numeric comparison failed (or an expected output was missing);
* ``unsupported`` — the API raised an exception whose class (or a base class)
  is named ``UnsupportedParameterError``, or the golden raised
  ``NotImplementedError`` (the golden does not model the feature, e.g.
  quantisation or rope);
* ``error`` — anything else raised (input building, the API, the golden), with
  the message;
* ``skipped`` — only when the caller asked for a size cap (``max_elements``)
  and the case's input tensors exceed it, or for cases past ``limit``.

Large cases are run, not skipped, unless the caller sets ``max_elements``.

A RingAttentionUpdate corpus (cases whose ``aclnn_name`` / ``api_type`` say so, see
:func:`case_kind`) is judged the same way with its own outputs: ``attn_out``, ``softmax_max`` and
``softmax_sum``, all under the tolerance class of ``prev_attn_out``'s dtype, against
``ring_attention_update_golden`` (``rau_golden``); the API is ``npu_ring_attention_update``.
Every output's report is kept in ``CaseRecord.reports``.

tiny_rdv cases run through torch_npu's V1 ``npu_fused_infer_attention_score`` (what their harness calls;
:func:`default_api` picks each corpus' operator) on the platform their inputs name (``CaseRecord.target``);
a case whose inputs cannot be built for a reason the simulator does not model (an int8 query) is
``unsupported`` like an API refusal.

Where the cases run
-------------------
Serially in the calling process by default; ``workers=N`` spreads them over N local processes (``spawn``);
``scheduler=ADDRESS`` submits them to a dask.distributed scheduler (``"local"`` starts a ``LocalCluster`` of
``workers`` processes, 2 when not given, and closes it afterwards; a remote scheduler's workers must import
cvtile and see the corpus at the same path). Both run one per-case function (:func:`_run_one`: the corpus
re-read by position, then :func:`run_case`), refuse an ``api`` or ``golden`` that plain pickle cannot send to
another process, and fill the records in corpus order. dask is an optional extra (``pip install
'cvtile[dask]'``), imported only when a scheduler is asked for: without it the run raises
:class:`SchedulerUnavailableError`, and an address that does not answer within
:data:`SCHEDULER_CONNECT_TIMEOUT` raises :class:`SchedulerConnectError`.

Invariants
----------
* One case's failure never stops the run; the record keeps the reason.
* The records of a run over processes or a scheduler are those of the serial run (each case's inputs come
  from its own seed), in corpus order; only ``seconds`` differ.
* ``StResult.summary_line()`` is ``cases: N run, P passed, F failed, U unsupported, E errors``
  (with ``, S skipped`` appended when any case was skipped).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .golden.dtypes import canonical_dtype, numpy_dtype, to_numpy
from .golden.fia import fia_golden, fia_golden_lowp, fia_golden_st
from .precision import Benchmarked, compare, compare_double_benchmark
from .st_cases import StCase, load_st_cases
from .tiny_rdv import is_tiny_rdv_path, load_tiny_rdv

__all__ = ["CaseRecord", "StResult", "StKind", "FIA_KIND", "RAU_KIND", "FAS_KIND", "case_kind", "corpus_kind", "rau_golden",
           "run_st_corpus", "run_case", "golden_api", "is_unsupported", "load_cases", "default_api", "load_api", "check_selected",
           "corpus_launches", "feature_sample", "feature_cover",
           "FIA_GOLDENS", "golden_for", "main", "case_inputs", "find_case", "SchedulerUnavailableError", "SchedulerConnectError",
           "SCHEDULER_CONNECT_TIMEOUT"]

STATUSES = ("passed", "failed", "unsupported", "error", "skipped")


@dataclass(frozen=True)
class StKind:
    """What a corpus' operator returns and how it is judged: the input whose dtype picks the tolerance class
    and the names of the compared outputs, in the API's (and the golden's) output order. A golden output of
    None is one the call did not request (FIA's lse without ``softmax_lse_flag``)."""

    name: str
    dtype_input: str
    outputs: tuple


FIA_KIND = StKind("FusedInferAttentionScore", "query", ("attention_out", "softmax_lse"))
RAU_KIND = StKind("RingAttentionUpdate", "prev_attn_out", ("attn_out", "softmax_max", "softmax_sum"))
FAS_KIND = StKind("FlashAttentionScore", "query", ("attention_out", "softmax_max", "softmax_sum"))


def case_kind(case: StCase) -> StKind:
    """The kind of a case: RingAttentionUpdate by its ``aclnn_name`` / ``api_type``, FlashAttentionScore (and its
    varlen form) by ``aclnn_name``, else FIA."""
    if case.is_ring_attention_update:
        return RAU_KIND
    if getattr(case, "is_flash_attention_score", False):   # tiny_rdv cases are FIA calls
        return FAS_KIND
    return FIA_KIND


#: the FIA golden conventions a run may judge against: name -> (golden, what it computes)
FIA_GOLDENS = {
    "lowp": (fia_golden_lowp, "float64 scores and softmax, P rounded to the query dtype before P.V"),
    "exact": (fia_golden, "float64 throughout"),
    "st": (fia_golden_st, "the upstream st harness': acc default cases against its fp32 golden (fp32 q.k, "
                          "softmax and P.V; P and the output rounded to the query dtype; a q.k beyond fp32 is inf "
                          "and its row NaN) with NaN = NaN, inf = the same inf; cv_fused_double_benchmark cases "
                          "(TND) by the double benchmark: errors vs the float64 golden within the case's ratios "
                          "(max_re, avg_re, rmse, small-value count) of an online-softmax benchmark's (KV blocks "
                          "of 512, P rounded against the running max); an inf/NaN passes where the golden's or "
                          "the benchmark's state matches; full quant (int8 q/k/v) against the float64 full-quant "
                          "golden, its output in fp16 or post-quant int8"),
}


def golden_for(name: str, rau: bool = False, *, kind: StKind | None = None) -> tuple[Callable, str]:
    """(golden, the ``golden: ...`` line a run prints) of a convention name for a corpus kind (``rau=True`` is
    ``kind=RAU_KIND``; RingAttentionUpdate has one golden, FlashAttentionScore "exact" or the P rounding of the
    others)."""
    kind = kind or (RAU_KIND if rau else FIA_KIND)
    if kind is RAU_KIND:
        return rau_golden, "golden: ring_attention_update_golden (float64)"
    if kind is FAS_KIND:
        from .fas.api import fas_golden_api

        if name == "exact":
            return functools.partial(fas_golden_api, p_dtype=None), "golden: exact (FAS, float64 throughout)"
        return fas_golden_api, "golden: lowp (FAS, float64, P rounded to the input dtype before P.V)"
    fn, what = FIA_GOLDENS[name]
    return fn, f"golden: {name} ({what})"


def load_cases(path) -> list:
    """The cases of a corpus: a tiny_rdv file or folder (:mod:`.tiny_rdv`), else an st JSON list (a folder that
    holds no tiny_rdv cases is a ``ValueError``)."""
    if is_tiny_rdv_path(path):
        return load_tiny_rdv(path)
    if Path(path).is_dir():
        raise ValueError(f"{path}: a corpus folder must hold tiny_rdv case files (*.json)")
    return load_st_cases(path)


def corpus_kind(path) -> StKind:
    """The kind of a corpus file (of its first case; FIA for an empty file)."""
    cases = load_cases(path)
    return case_kind(cases[0]) if cases else FIA_KIND


def default_api(path) -> str:
    """``module:function`` of the operator API a corpus describes: RingAttentionUpdate's, torch_npu's V1
    ``npu_fused_infer_attention_score`` for tiny_rdv (what its harness calls), else the aclnn V4 set."""
    kind = corpus_kind(path)
    if kind is RAU_KIND:
        return "cvtile.kernels.ring_attention_update:npu_ring_attention_update"
    if kind is FAS_KIND:
        return "cvtile.kernels.fas.api:flash_attention_score"
    if is_tiny_rdv_path(path):
        return "cvtile.kernels.fia.api:npu_fused_infer_attention_score"
    return "cvtile.kernels.fia.api:fused_infer_attention_score_v4"


def _cheapest(cases, indices) -> int:
    """The index among ``indices`` of the case with the fewest input elements, ties to the first."""
    return min(indices, key=lambda i: (cases[i].elements(), i))


def feature_sample(path) -> list[int]:
    """Indices of one st case per distinct feature set (the optional inputs a case gives): the one with the
    fewest input elements, ties to the first. Every feature combination of the corpus, each at its cheapest."""
    cases = load_st_cases(path)
    by_set: dict = {}
    for i, case in enumerate(cases):
        by_set.setdefault(tuple(sorted(case.features())), []).append(i)
    return sorted(_cheapest(cases, indices) for indices in by_set.values())


def feature_cover(path) -> list[int]:
    """Indices of a few st cases that together give every optional input of the corpus at least once, and one
    case that gives none: for each optional input, the rarest first, the case with the fewest input elements
    among those giving it (ties to the first), unless a case already chosen gives it. Every feature once, each
    at its cheapest, not every combination (``feature_sample`` gives those)."""
    cases = load_st_cases(path)
    features = [set(c.features()) for c in cases]
    giving: dict = {}
    for i, fs in enumerate(features):
        for f in fs:
            giving.setdefault(f, []).append(i)
    chosen: set = set()
    covered: set = set()
    for f in sorted(giving, key=lambda f: (len(giving[f]), f)):
        if f not in covered:
            best = _cheapest(cases, giving[f])
            chosen.add(best)
            covered |= features[best]
    plain = [i for i, fs in enumerate(features) if not fs]
    if plain:
        chosen.add(_cheapest(cases, plain))
    return sorted(chosen)


def corpus_launches(path, api: Callable | None = None):
    """Each case's launches, recorded without running them (``record_launches(run=False)``: the kernels are
    specialised, traced and run through the passes, neither compiled by numba nor run): yields ``(case index,
    launches)`` per case the API takes, ``(case index, exc)`` with the exception of one it refuses or fails on.
    What the compile count, the backends' coverage sweeps and the generation tests read."""
    from ..dsl.jit import record_launches

    api = api or load_api(default_api(path))
    for i, case in enumerate(load_cases(path)):
        try:
            kwargs = case.make_inputs(np.random.default_rng(0))
            with record_launches(run=False) as rec:
                api(**kwargs)
        except Exception as e:   # noqa: BLE001  (the caller decides what a refusal or a failure means)
            yield i, e
            continue
        yield i, rec.launches


def rau_golden(**kwargs):
    """The RingAttentionUpdate golden with the operator API's keywords."""
    from .golden.ring_attention_update import ring_attention_update_golden

    return ring_attention_update_golden(**kwargs)


@dataclass
class CaseRecord:
    """The outcome of one case: status, reason, the comparison reports (``out``, ``lse``) as dicts,
    and ``detail`` (a short traceback for API errors)."""

    id: Any
    name: str
    status: str
    reason: str = ""
    features: list = field(default_factory=list)
    elements: int = 0
    seconds: float = 0.0
    out: dict | None = None
    lse: dict | None = None
    detail: str = ""
    #: every compared output's report by output name (``out``/``lse`` are FIA's two of them)
    reports: dict = field(default_factory=dict)
    #: the platform the case ran on when its inputs name one (tiny_rdv cases), else ""
    target: str = ""

    def _worst(self, key: str) -> float | None:
        reps = list(self.reports.values()) or [self.out, self.lse]
        vals = [r[key] for r in reps if r and isinstance(r.get(key), float)]
        return max(vals) if vals else None

    @property
    def max_abs_err(self) -> float | None:
        return self._worst("max_abs_err")

    @property
    def max_rel_err(self) -> float | None:
        return self._worst("max_rel_err")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["max_abs_err"] = self.max_abs_err
        d["max_rel_err"] = self.max_rel_err
        return d


@dataclass
class StResult:
    """All case records of one run."""

    path: str
    records: list[CaseRecord]
    seed: int = 0

    def count(self, status: str) -> int:
        return sum(1 for r in self.records if r.status == status)

    @property
    def run(self) -> int:
        return sum(1 for r in self.records if r.status != "skipped")

    def by_status(self, status: str) -> list[CaseRecord]:
        return [r for r in self.records if r.status == status]

    def summary_line(self) -> str:
        line = (f"cases: {self.run} run, {self.count('passed')} passed, {self.count('failed')} failed, "
                f"{self.count('unsupported')} unsupported, {self.count('error')} errors")
        skipped = self.count("skipped")
        return line + (f", {skipped} skipped" if skipped else "")

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps({"path": self.path, "seed": self.seed, "summary": self.summary_line(),
                           "counts": {s: self.count(s) for s in STATUSES},
                           "cases": [r.to_dict() for r in self.records]}, indent=indent, default=_json_default)


def _json_default(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, tuple):
        return list(v)
    return repr(v)


def is_unsupported(exc: BaseException) -> bool:
    """True when ``exc``'s class or a base class is named ``UnsupportedParameterError``."""
    return any(cls.__name__ == "UnsupportedParameterError" for cls in type(exc).__mro__)


def golden_api(golden: Callable = fia_golden_lowp, *, out_dtype: Any = None, lse_dtype: Any = np.float32) -> Callable:
    """An operator-shaped wrapper of a golden: returns ``(out cast to the query dtype, lse as fp32)``.

    Useful to exercise the runner (and any caller of the operator API) without
    the simulator: its outputs round exactly as the chip stores them.
    """

    def api(query, key, value, **kwargs):
        out, lse = golden(query, key, value, **kwargs)
        dt = numpy_dtype(out_dtype if out_dtype is not None else to_numpy(query).dtype)
        out_c = out.astype(np.float32).astype(dt)
        lse_c = None if lse is None else lse.astype(lse_dtype)
        return out_c, (lse_c if lse_c is not None else np.zeros((0,), dtype=np.float32))

    api.__name__ = f"golden_api({getattr(golden, '__name__', 'golden')})"
    return api


def _short_exc(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_case(case: StCase, api: Callable, *, golden: Callable = fia_golden_lowp, seed: int = 0) -> CaseRecord:
    """Build inputs, run the API and the golden, compare; never raises."""
    t0 = time.perf_counter()
    rec = CaseRecord(id=case.id, name=case.name, status="error", features=case.features(),
                     elements=case.elements())
    try:
        kwargs = case_inputs(case, seed)
        rec.target = str(kwargs.get("target", ""))
    except Exception as exc:  # noqa: BLE001 - every failure is a record
        if is_unsupported(exc):
            rec.status, rec.reason = "unsupported", f"inputs: {exc}"
        else:
            rec.reason = f"inputs: {_short_exc(exc)}"
        return _done(rec, t0)
    try:
        result = api(**kwargs)
    except Exception as exc:  # noqa: BLE001
        if is_unsupported(exc):
            rec.status, rec.reason = "unsupported", str(exc)
        else:
            rec.reason = f"api: {_short_exc(exc)}"
            rec.detail = traceback.format_exc(limit=-3)
        return _done(rec, t0)
    try:
        g_outs = _as_tuple(golden(**kwargs, **_case_context(golden, case)))
    except NotImplementedError as exc:
        rec.status, rec.reason = "unsupported", f"golden: {exc}"
        return _done(rec, t0)
    except Exception as exc:  # noqa: BLE001
        rec.reason = f"golden: {_short_exc(exc)}"
        return _done(rec, t0)
    try:
        kind = case_kind(case)
        a_outs = _as_tuple(result)
        if not a_outs:
            raise ValueError("the API returned an empty tuple")
        dtype = canonical_dtype(to_numpy(kwargs[kind.dtype_input]).dtype)
        if dtype not in ("float16", "bfloat16", "float32", "float64"):
            dtype = canonical_dtype(to_numpy(a_outs[0]).dtype)
        reasons = []
        for i, name in enumerate(kind.outputs):
            g = g_outs[i] if i < len(g_outs) else None
            if g is None:
                continue
            a = a_outs[i] if i < len(a_outs) else None
            if a is None or to_numpy(a).size == 0:
                reasons.append(f"{name}: requested but the API returned none")
                continue
            if isinstance(g, Benchmarked):
                rep = compare_double_benchmark(a, g.golden, g.benchmark, g.dtype, g.limits, name=name)
            else:
                rep = compare(a, g, dtype, name=name)
            rec.reports[name] = rep.to_dict()
            if not rep.passed:
                reasons.append(str(rep))
        rec.out = rec.reports.get(kind.outputs[0])
        rec.lse = rec.reports.get("softmax_lse")
        rec.status = "failed" if reasons else "passed"
        rec.reason = "; ".join(reasons)
    except Exception as exc:  # noqa: BLE001
        rec.status, rec.reason = "error", f"compare: {_short_exc(exc)}"
    return _done(rec, t0)


def _case_context(golden: Callable, case) -> dict:
    """``{"accuracy_standard": the case's standard["acc"]}`` for a golden that takes it (None for a case that
    names none, e.g. tiny_rdv: the golden's own default), else nothing."""
    try:
        takes = "accuracy_standard" in inspect.signature(golden).parameters
    except (TypeError, ValueError):   # a builtin or an object without a signature
        takes = False
    return {"accuracy_standard": getattr(case, "accuracy_standard", None)} if takes else {}


def _as_tuple(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def case_inputs(case, seed: int = 0) -> dict:
    """The API keywords of one case as the runner draws them (the run's seed and the case's id seed the
    generator), so ``cvtile emit`` of a case builds the call ``cvtile cases`` ran."""
    return case.make_inputs(np.random.default_rng([int(seed), _case_seed(case.id)]))


def find_case(path, wanted: str | None):
    """(index, case) of the case of the corpus at ``path`` whose id or name is ``wanted`` (None: the corpus'
    only case); ``ValueError`` naming what was wanted and what there is otherwise."""
    cases = load_cases(path)
    if wanted is None:
        if len(cases) == 1:
            return 0, cases[0]
        raise ValueError(f"{path} holds {len(cases)} cases: name one with --case ID (a case id or name)")
    for i, case in enumerate(cases):
        if str(case.id) == str(wanted) or case.name == wanted:
            return i, case
    ids = [str(c.id) for c in cases]
    shown = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
    raise ValueError(f"--case {wanted!r}: no case of {path} has that id or name (ids: {shown})")


def _case_seed(case_id) -> int:
    try:
        return int(case_id) & 0x7FFFFFFF
    except (TypeError, ValueError):
        return sum(map(ord, str(case_id))) & 0x7FFFFFFF


def _done(rec: CaseRecord, t0: float) -> CaseRecord:
    rec.seconds = round(time.perf_counter() - t0, 4)
    return rec


def check_selected(wanted: set, found: set, path) -> None:
    """Refuse a selection (``--case``) naming no case of the corpus: a typo would otherwise run nothing and pass."""
    missing = sorted(wanted - found)
    if missing:
        raise ValueError(f"--case {', '.join(missing)}: no case of {Path(path).name} has this id or name")


def run_st_corpus(path, api: Callable, *, golden: Callable = fia_golden_lowp, limit: int | None = None, seed: int = 0,
                  max_elements: int | None = None, select: Iterable | None = None,
                  progress: Callable[[CaseRecord], None] | None = None, workers: int | None = None,
                  scheduler: str | None = None) -> StResult:
    """Run the corpus at ``path`` through ``api``; see the module doc for the statuses.

    ``limit`` runs only the first ``limit`` selected cases (the rest are
    reported as skipped); ``max_elements`` skips cases whose input tensors hold
    more elements; ``select`` restricts the run to case ids or names (one that
    names no case is a ``ValueError``, not an empty run).
    ``workers`` > 1 runs the cases in that many local processes (``spawn``;
    ``api`` and ``golden`` must be importable module-level functions, else a
    ``ValueError`` before any process starts). ``scheduler`` runs them on
    dask.distributed instead: a scheduler address (``"tcp://host:8786"``) or
    ``"local"`` for a ``LocalCluster`` of ``workers`` processes (2 when
    ``workers`` is None), started and closed here; the same refusal applies,
    dask missing raises :class:`SchedulerUnavailableError` and an address that
    does not answer :class:`SchedulerConnectError`. Either way each case's
    inputs come from its own seed, so the records are those of the serial run,
    in corpus order (only ``seconds`` differ); ``progress`` then sees the run
    records as they complete.
    """
    every = load_cases(path)
    positions = list(range(len(every)))   # each selected case's place in the file (what a worker re-reads)
    if select is not None:
        wanted = {str(s) for s in select}
        positions = [p for p in positions if str(every[p].id) in wanted or every[p].name in wanted]
        check_selected(wanted, {str(every[p].id) for p in positions} | {every[p].name for p in positions}, path)
    cases = [every[p] for p in positions]
    records: list = [None] * len(cases)
    todo = []
    ran = 0
    for i, case in enumerate(cases):
        if limit is not None and ran >= limit:
            records[i] = CaseRecord(case.id, case.name, "skipped", f"beyond --limit {limit}", case.features(),
                                    case.elements())
        elif max_elements is not None and case.elements() > max_elements:
            records[i] = CaseRecord(case.id, case.name, "skipped",
                                    f"{case.elements()} input elements exceed --max-elements {max_elements}",
                                    case.features(), case.elements())
        else:
            todo.append(i)
            ran += 1
    nproc = workers or 1
    if scheduler is not None:
        _check_sendable(api, golden, f"scheduler={scheduler!r}", "run without a scheduler")
        if todo:
            _run_on_dask(scheduler, path, positions, todo, records, api, golden, seed, workers, progress)
    elif nproc > 1 and len(todo) > 1:
        _run_in_processes(path, positions, todo, records, api, golden, seed, nproc, progress)
    pooled = scheduler is not None or nproc > 1
    for i, case in enumerate(cases):
        if records[i] is None:
            records[i] = run_case(case, api, golden=golden, seed=seed)
            if progress is not None:
                progress(records[i])
        elif not pooled and progress is not None:
            progress(records[i])
    return StResult(path=str(path), records=records, seed=seed)


def _run_in_processes(path, positions, todo, records, api, golden, seed, workers, progress):
    """Fill ``records[i]`` for every i of ``todo`` (case ``positions[i]`` of the file) from a pool of ``workers``
    spawned processes."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    _check_sendable(api, golden, f"workers={workers}", "run with workers=1")
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(_run_one, str(path), positions[i], api, golden, seed): i for i in todo}
        for fut in as_completed(futures):
            i = futures[fut]
            records[i] = fut.result()
            if progress is not None:
                progress(records[i])


def _check_sendable(api, golden, where: str, instead: str) -> None:
    """Refuse (``ValueError``) an api or golden that plain pickle cannot send to another process (a closure or a
    lambda), before any process or cluster starts."""
    import pickle

    for name, fn in (("api", api), ("golden", golden)):
        try:
            pickle.dumps(fn)
        except Exception as exc:   # noqa: BLE001  (a closure or lambda cannot reach another process)
            raise ValueError(f"{where}: the {name} {fn!r} is not an importable module-level function "
                             f"({type(exc).__name__}); {instead}") from None


class SchedulerUnavailableError(ImportError):
    """A run asked for a dask scheduler (``--scheduler``) but dask.distributed is not installed."""


class SchedulerConnectError(OSError):
    """The dask scheduler at the given address did not answer within :data:`SCHEDULER_CONNECT_TIMEOUT`."""


#: how long a run waits for a dask scheduler address to answer (a dask time string)
SCHEDULER_CONNECT_TIMEOUT = "10s"


def _run_on_dask(scheduler: str, path, positions, todo, records, api, golden, seed, workers, progress):
    """Fill ``records[i]`` for every i of ``todo`` from dask.distributed: the scheduler at ``scheduler``, or a
    ``LocalCluster`` of ``workers`` (2 when None) single-threaded processes for ``"local"``, closed afterwards.
    Each case is one task of :func:`_run_one`, as in the process pool."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SchedulerUnavailableError(
            "--scheduler needs dask.distributed, which is not installed: pip install 'dask[distributed]' "
            "(or pip install -e '.[dask]')") from None
    cluster = None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=min(workers or 2, len(todo)), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            address = cluster
        else:
            address = scheduler
        try:
            client = Client(address, timeout=SCHEDULER_CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise SchedulerConnectError(f"--scheduler {scheduler}: no dask scheduler answered ({exc})") from None
        with client:
            futures = [client.submit(_run_one, str(path), positions[i], api, golden, seed, pure=False)
                       for i in todo]
            where = {fut.key: i for fut, i in zip(futures, todo)}
            for fut in as_completed(futures):
                i = where[fut.key]
                records[i] = fut.result()
                if progress is not None:
                    progress(records[i])
    finally:
        if cluster is not None:
            cluster.close()


@functools.lru_cache(maxsize=4)
def _worker_cases(path: str) -> list:
    return load_cases(path)


def _run_one(path: str, position: int, api, golden, seed: int) -> CaseRecord:
    """A worker's case (a pool process' or a dask worker's): the corpus read once per worker process (cases are
    data: re-reading is exact)."""
    return run_case(_worker_cases(path)[position], api, golden=golden, seed=seed)


def load_api(spec: str) -> Callable:
    """The callable named by ``module:function`` (``golden`` for the golden-as-api wrapper)."""
    if spec == "golden":
        return golden_api()
    module, _, attr = spec.partition(":")
    obj = importlib.import_module(module)
    for part in (attr or "npu_fused_infer_attention_score").split("."):
        obj = getattr(obj, part)
    return obj


def main(argv: list[str] | None = None) -> int:
    """``python -m cvtile.kernels.st_runner CORPUS.json [--api module:function|golden] ...``"""
    ap = argparse.ArgumentParser(prog="python -m cvtile.kernels.st_runner", description=main.__doc__)
    ap.add_argument("corpus", help="st corpus JSON (e.g. cases/st/fia_v4.json), a tiny_rdv file or folder")
    ap.add_argument("--api", default=None,
                    help="operator API as module:function, or 'golden' for the golden-as-api wrapper (default: the "
                         "corpus' operator, see default_api)")
    ap.add_argument("--golden", choices=tuple(FIA_GOLDENS), default="lowp",
                    help="; ".join(f"{k}: {v[1]}" for k, v in FIA_GOLDENS.items()))
    ap.add_argument("--limit", type=int, default=None, help="run only the first N cases")
    ap.add_argument("--max-elements", type=int, default=None,
                    help="skip (report as skipped) cases with more input elements")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", action="append", default=None, help="case id or name (repeatable)")
    ap.add_argument("--json", default=None, help="write the full result as JSON to this file")
    ap.add_argument("-v", "--verbose", action="store_true", help="print one line per case")
    ap.add_argument("--workers", type=int, default=1, help="run the cases in N local processes (default 1)")
    args = ap.parse_args(argv)
    kind = corpus_kind(args.corpus)
    api = load_api(args.api or default_api(args.corpus))

    def show(rec: CaseRecord):
        if args.verbose:
            err = rec.max_abs_err
            err_s = f" max_abs={err:.3e}" if err is not None else ""
            judge = " [double benchmark]" if any("limits" in r for r in rec.reports.values()) else ""
            print(f"{rec.id!s:>5} {rec.status:<11} {rec.seconds:7.2f}s{err_s}{judge} {rec.reason[:160]}", flush=True)

    golden, golden_line = golden_for(args.golden, kind=kind)
    res = run_st_corpus(args.corpus, api, golden=golden, limit=args.limit, seed=args.seed, max_elements=args.max_elements,
                        select=args.case, progress=show, workers=args.workers)
    if args.json:
        with open(args.json, "w") as f:
            f.write(res.to_json())
    print(golden_line)
    print(res.summary_line())
    return 0 if res.count("failed") == 0 and res.count("error") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
