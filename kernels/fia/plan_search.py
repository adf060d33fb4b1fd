"""Plan search: op_host's FusedInferAttentionScore plan against the other legal plans, timed by the cost model.

Model
-----
A plan is op_host's tiling with some of its choices replaced (``tile_fia``'s ``overrides``), which the call's
planner reads in place of its own before it derives the rest (:mod:`cvtile.tiling.plan_overrides`). The
candidates depend on the route op_host takes:

* arch22 ``FiaTilingNonQuant`` / ``FiaTilingNonQuantMla``: op_host's M and S2 bases and their halves and
  doubles rounded down to multiples of 16 (M in 16..1024, S2 in 64..16384), each with op_host's cost-based core split and
  with every cube core. Flash decode follows the core split (split_core cuts a row where a core's share
  ends), so it has no split count of its own to search;
* arch22 legacy IFA decode (``IFATiling``, its KV-antiquant kernel too): the flash-decode split count
  ``kv_splits`` (1 = no flash decode, 2, half and double op_host's, and the most, split cores / (B*N2)),
  each at op_host's sInner and its half and double; and op_host's rules over half its split cores;
* arch22 split-fuse (``FlashAttentionInferSplitFuse``): a quarter, a half and three quarters of the cube
  cores (its flash-decode split follows from the count); its 128 x 512 tiles are kernel constants;
* arch22 PFA (``PromptFlashAttentionTiling``): sOuter (M = 2 x sOuter) and sInner, halved and doubled,
  each with op_host's greedy over all and over half of its cores;
* arch35 ``FiaTilingNonQuant(Mla)Arch35``: split_core_v2 over half and over all the cube cores (their
  blocks are fixed configs);

and, on every route, op_host's plan at one preload step less and more (the hand-off slots and pipeline
stages the compiler gives the AIC/AIV programs). Each candidate goes through the same checks, the same
tiling machinery (block grid, core split, flash-decode plan, workspace, key) and the same kernel
compilation as op_host's plan, and is timed by the cost model (``fia_cost``). A candidate the kernel cannot
take (an override a rule forbids, it does not fit the on-chip budget, a check rejects it, its preload depth
is below the pipeline's stages) is listed as illegal with its reason (``PlanResult.dropped`` "illegal"),
never timed. A candidate the cost model cannot time (its programs deadlock: ``ModelDeadlock``, "deadlock"; any
other ``ModelError``, "model") is no verdict on the plan: it is listed apart (``PlanSearch.model_dropped``),
counted and named in the search's note, and never taken for the best. Two candidates that come out as the
same plan (the same per-core work, key and preload) are timed once.

A route whose planner reads no overrides (``PlanSearch.note`` says which and why: the arch22 empty-tensor
template, a tiling sink, the IFA ATB kernel, the PFA TND branch, the arch35 quant templates and catch-all)
gets op_host's plan and its preload neighbours only (``PlanSearch.searched`` False).

Every candidate is timed as cvtile builds it. Where that build runs op_host's plan otherwise than the chip's
kernel (``fia.cost.build_notes``: the IFA units per vector core, run by cvtile in more waves), the plan keeps the
cost report's notes (``PlanResult.notes``) and the search's note repeats them, so a verdict against op_host's
plan is not read as the chip's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ...dsl.errors import CompilationError
from ...sim.cost import ModelDeadlock, ModelError
from ...tiling.errors import ParamError, UnsupportedPlanOverride
from ...tiling.platform import Platform, get_platform
from ...tiling.plan_overrides import OVERRIDE_KEYS
from ..errors import UnsupportedParameterError
from .cost import fia_cost, fia_plan
from .launch import kernel_platform

__all__ = ["PlanResult", "PlanSearch", "search_plans"]

_ILLEGAL = (CompilationError, ParamError, UnsupportedParameterError)


@dataclass
class PlanResult:
    overrides: dict
    estimated_us: float | None
    bound: str = ""
    m_base: int = 0
    s2_base: int = 0
    cores: int = 0
    fd: bool = False
    error: str = ""
    preload: int = 0
    kv_splits: int = 1
    tiling: object = field(default=None, repr=False, compare=False)
    #: why the plan has no estimate: "" (timed), "illegal" (the planner, a check or the compilation rejects it),
    #: "deadlock" (the cost model's programs deadlock on it), "model" (another reason the model cannot time it)
    dropped: str = ""
    #: the cost report's notes (``fia.cost.build_notes``): where cvtile's build runs the plan otherwise than the chip
    notes: list = field(default_factory=list, compare=False)

    @property
    def legal(self) -> bool:
        return self.estimated_us is not None


@dataclass
class PlanSearch:
    op_host: PlanResult
    plans: list = field(default_factory=list)
    note: str = ""
    #: the planner's choices were searched (False: op_host's plan and its preload neighbours only)
    searched: bool = False

    @property
    def best(self) -> PlanResult:
        return min((p for p in self.plans if p.legal), key=lambda p: p.estimated_us)

    @property
    def model_dropped(self) -> list:
        """The candidates the cost model could not time (a deadlock or another ``ModelError``): not illegal plans."""
        return [p for p in self.plans if p.dropped in ("deadlock", "model")]

    @property
    def op_host_over_best(self) -> float:
        return self.op_host.estimated_us / self.best.estimated_us

    def to_dict(self) -> dict:
        def one(p):
            return {"overrides": p.overrides, "estimated_us": p.estimated_us and round(p.estimated_us, 3),
                    "bound": p.bound, "m_base": p.m_base, "s2_base": p.s2_base, "cores": p.cores, "fd": p.fd,
                    "kv_splits": p.kv_splits, "preload": p.preload, "error": p.error, "dropped": p.dropped,
                    "notes": list(p.notes)}
        t = self.op_host.tiling
        return {"route": f"{t.route}/{t.template}" if t is not None else "", "op_host": one(self.op_host),
                "best": one(self.best), "op_host_over_best": self.op_host_over_best, "searched": self.searched,
                "plans": [one(p) for p in self.plans], "model_dropped": [one(p) for p in self.model_dropped],
                "note": self.note}

    def format(self) -> str:
        t = self.op_host.tiling
        head = "plan search (cost model):" + (f" {t.route}/{t.template}" if t is not None else "")
        lines = [head, "  M base  S2 base  cores  fd  splits  preload     estimate   bound   plan"]
        for p in sorted(self.plans, key=lambda p: (not p.legal, p.estimated_us or 0)):
            tag = "op_host" if p is self.op_host else ("best" if p is self.best else "")
            if p.legal:
                lines.append(f"  {p.m_base:6d}  {p.s2_base:7d}  {p.cores:5d}  {'on ' if p.fd else 'off'} "
                             f"{p.kv_splits:6d}  {p.preload:7d}  {p.estimated_us:9.2f} us  {p.bound:<7} {tag}")
            else:
                what = "illegal" if p.dropped == "illegal" else f"not timed, cost model {p.dropped}"
                lines.append(f"  {_overrides(p)}: {what} ({p.error})")
        verdict = "op_host's plan is the best found" if self.best is self.op_host else \
            f"op_host's plan takes {self.op_host_over_best:.2f}x the best plan found"
        lines.append(f"  {verdict}" + (f"; {self.note}" if self.note else ""))
        return "\n".join(lines)


def _illegal(overrides: dict, e: Exception) -> PlanResult:
    why = "deadlock" if isinstance(e, ModelDeadlock) else "model" if isinstance(e, ModelError) else "illegal"
    return PlanResult(dict(overrides), None, error=str(e).splitlines()[0], dropped=why)


def _overrides(p: PlanResult) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.overrides.items()) or "op_host's plan"


def _signature(t) -> str:
    """The plan's identity: its key, bases, per-core work, FD plan and preload depth."""
    what = (t.tiling_key, t.m_base, t.s2_base, t.cores, t.fd_tasks, kernel_platform(t).preload_depth)
    return hashlib.sha1(repr(what).encode()).hexdigest()


def _time(q, k, v, target, overrides, kw) -> PlanResult:
    try:
        rep = fia_cost(q, k, v, target=target, record="none", overrides=overrides or None, **kw)
    except _ILLEGAL as e:
        return _illegal(overrides, e)
    t = rep.tiling
    return PlanResult(dict(overrides), rep.estimated_us, rep.bound, t.m_base, t.s2_base, t.used_cores, t.fd,
                      preload=kernel_platform(t).preload_depth, kv_splits=t.kv_splits if t.fd else 1, tiling=t,
                      notes=list(rep.notes))


def _halves_doubles(x: int, lo: int, hi: int, step: int = 16) -> list:
    """``x`` (op_host's, whatever it is) with its half and double rounded down to whole ``step``s."""
    return sorted({x} | {c // step * step for c in (x // 2, x * 2) if lo <= c // step * step <= hi})


# ---------------------------------------------------------------------------------------------- candidates
def _changed(t, **choice) -> dict:
    """The overrides of ``choice`` that differ from op_host's tiling ``t`` (``cores`` None: op_host's split)."""
    now = {"m_base": t.m_base, "s2_base": t.s2_base, "cores": None}
    return {k: v for k, v in choice.items() if v != now.get(k)}


def _bases_cores(t, plat: Platform) -> list:
    """arch22 GQA / MLA: bases halved and doubled, each with op_host's core split and with every core."""
    got = [_changed(t, m_base=m, s2_base=s2, cores=cores)
           for m in _halves_doubles(t.m_base, 16, 1024) for s2 in _halves_doubles(t.s2_base, 64, 16384)
           for cores in (None, plat.aic)]
    return [ov for ov in got if ov]


def _ifa(t, plat: Platform) -> list:
    """Legacy IFA: the flash-decode split count (each at op_host's sInner and its half and double), and op_host's
    rules over half its split cores."""
    units = t.decision("split_units").value
    most = max(units // max(t.batch * t.num_kv_heads, 1), 1)
    now = t.kv_splits if t.fd else 1
    splits = sorted({p for p in (1, 2, now // 2, now, now * 2, most) if 1 <= p <= most})
    out = [dict(_changed(t, s2_base=s), kv_splits=p) for p in splits for s in _halves_doubles(t.s2_base, 16, 1 << 20)
           if (p, s) != (now, t.s2_base)]
    return out + ([{"cores": units // 2}] if units >= 2 else [])


def _fai(t, plat: Platform) -> list:
    return [{"cores": n} for n in sorted({plat.aic // 4, plat.aic // 2, plat.aic * 3 // 4}) if n >= 1]


def _pfa(t, plat: Platform) -> list:
    got = [_changed(t, m_base=m, s2_base=s2, cores=cores)
           for m in _halves_doubles(t.m_base, 32, 512, 32) for s2 in _halves_doubles(t.s2_base, 64, 8192)
           for cores in (None, max(t.used_cores // 2, 1))]
    return [ov for ov in got if ov]


def _arch35_cores(t, plat: Platform) -> list:
    return [{"cores": n} for n in sorted({max(plat.aic // 2, 1), plat.aic})]


_CANDIDATES = {"FiaTilingNonQuant": _bases_cores, "FiaTilingNonQuantMla": _bases_cores, "IFATiling": _ifa,
               "FlashAttentionInferSplitFuse": _fai, "PromptFlashAttentionTiling": _pfa,
               "FiaTilingNonQuantArch35": _arch35_cores, "FiaTilingNonQuantMlaArch35": _arch35_cores}


def _planner_candidates(t, plat: Platform) -> tuple[list, str]:
    """The planner overrides to try for op_host's tiling ``t``, or none and the reason."""
    where = (t.arch, t.route, t.template)
    if where not in OVERRIDE_KEYS:
        return [], f"the {t.arch} {t.route}/{t.template} planner reads no overrides: preload depth only"
    return _CANDIDATES[t.template](t, plat), ""


# ---------------------------------------------------------------------------------------------- search
def search_plans(query, key, value, *, target: str, **kwargs) -> PlanSearch:
    """Time op_host's plan and its neighbours (see the module docstring) for one call."""
    base = _time(query, key, value, target, {}, kwargs)
    if not base.legal:
        raise ValueError(f"op_host's own plan cannot be timed: {base.error}")
    search = PlanSearch(op_host=base, plans=[base])
    planner, search.note = _planner_candidates(base.tiling, get_platform(target))
    seen = {_signature(base.tiling)}
    if planner:
        try:
            _try(search, seen, planner, (query, key, value, target, kwargs))
            search.searched = True
        except UnsupportedPlanOverride as e:
            search.plans, seen, search.note = [base], {_signature(base.tiling)}, f"{e}: preload depth only"
    preload = [{"preload_depth": depth} for depth in (base.preload - 1, base.preload + 1) if depth >= 1]
    _try(search, seen, preload, (query, key, value, target, kwargs))
    if base.notes:   # op_host's plan timed as cvtile builds it, not as the chip runs it
        said = "op_host's plan: " + "; ".join(base.notes)
        search.note = f"{search.note}; {said}" if search.note else said
    dropped = search.model_dropped
    if dropped:
        said = f"{len(dropped)} candidate{'s' * (len(dropped) > 1)} the cost model could not time (not counted " \
               "as illegal): " + "; ".join(f"{_overrides(p)} ({p.dropped})" for p in dropped)
        search.note = f"{search.note}; {said}" if search.note else said
    return search


def _try(search: PlanSearch, seen: set, candidates: list, call: tuple) -> None:
    """Plan each candidate, time the ones that are new plans, list the illegal ones with their reason."""
    q, k, v, target, kw = call
    for ov in candidates:
        try:
            sig = _signature(fia_plan(q, k, v, target=target, overrides=ov, **kw))
        except _ILLEGAL as e:
            sig, got = tuple(sorted(ov.items())), _illegal(ov, e)
        else:
            got = None if sig in seen else _time(q, k, v, target, ov, kw)
        if sig not in seen:
            seen.add(sig)
            search.plans.append(got)
