"""Plan search: op_host's FusedInferAttentionScore plan against the other legal plans, timed by the cost model.

Model
-----
A plan is op_host's tiling with some of its choices replaced (``tile_fia``'s ``overrides``): the M base
(query rows per block), the S2 base (keys per block), the core count and the kernel's preload depth. The
candidates are op_host's own bases and their halves and doubles (M in 16..1024, S2 in 64..16384, multiples
of 16), each with op_host's cost-based core split and with every AI core, at the platform's preload depth;
and op_host's plan at one preload step less and more (the hand-off slots and pipeline stages the compiler
gives the AIC/AIV programs; the flash-decode split follows the core split, as op_host derives it). Each goes
through the same checks, the same tiling machinery (block grid, split_core, flash-decode plan, workspace)
and the same kernel compilation as op_host's plan, and is timed by the cost model (``fia_cost``). A
candidate the kernel cannot take (it does not fit the on-chip budget, a check rejects it, or its preload
depth is below the pipeline's stages) is listed as illegal with its reason, never timed; two candidates
that come out as the same plan (the same bases, core count and preload) are timed once.

Only the arch22 FiaTilingNonQuant template reads overrides; another route gives op_host's plan alone
with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...dsl.errors import CompilationError
from ...tiling.errors import ParamError
from ...tiling.fia import UnsupportedPlanOverride
from ..errors import UnsupportedParameterError
from .cost import fia_cost
from .launch import kernel_platform

__all__ = ["PlanResult", "PlanSearch", "search_plans"]


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

    @property
    def legal(self) -> bool:
        return self.estimated_us is not None


@dataclass
class PlanSearch:
    op_host: PlanResult
    plans: list = field(default_factory=list)
    note: str = ""

    @property
    def best(self) -> PlanResult:
        return min((p for p in self.plans if p.legal), key=lambda p: p.estimated_us)

    @property
    def op_host_over_best(self) -> float:
        return self.op_host.estimated_us / self.best.estimated_us

    def to_dict(self) -> dict:
        def one(p):
            return {"overrides": p.overrides, "estimated_us": p.estimated_us and round(p.estimated_us, 3),
                    "bound": p.bound, "m_base": p.m_base, "s2_base": p.s2_base, "cores": p.cores, "fd": p.fd,
                    "preload": p.preload, "error": p.error}
        return {"op_host": one(self.op_host), "best": one(self.best), "op_host_over_best": self.op_host_over_best,
                "plans": [one(p) for p in self.plans], "note": self.note}

    def format(self) -> str:
        lines = ["plan search (cost model):", "  M base  S2 base  cores  fd   preload     estimate   bound   plan"]
        for p in sorted(self.plans, key=lambda p: (not p.legal, p.estimated_us or 0)):
            tag = "op_host" if p is self.op_host else ("best" if p is self.best else "")
            if p.legal:
                lines.append(f"  {p.m_base:6d}  {p.s2_base:7d}  {p.cores:5d}  {'on ' if p.fd else 'off'}  "
                             f"{p.preload:7d}  {p.estimated_us:9.2f} us  {p.bound:<7} {tag}")
            else:
                over = ", ".join(f"{k}={v}" for k, v in p.overrides.items())
                lines.append(f"  {over}: illegal ({p.error})")
        verdict = "op_host's plan is the best found" if self.best is self.op_host else \
            f"op_host's plan takes {self.op_host_over_best:.2f}x the best plan found"
        lines.append(f"  {verdict}" + (f"; {self.note}" if self.note else ""))
        return "\n".join(lines)


def _run(q, k, v, target, overrides, kw) -> PlanResult:
    try:
        rep = fia_cost(q, k, v, target=target, record="none", overrides=overrides or None, **kw)
    except (CompilationError, ParamError, UnsupportedParameterError) as e:
        return PlanResult(dict(overrides), None, error=str(e).splitlines()[0])
    t = rep.tiling
    return PlanResult(dict(overrides), rep.estimated_us, rep.bound, t.m_base, t.s2_base, t.used_cores, t.fd,
                      preload=kernel_platform(t).preload_depth)


def _halves_doubles(x: int, lo: int, hi: int) -> list:
    return sorted({c for c in (x // 2, x, x * 2) if lo <= c <= hi and c % 16 == 0})


def search_plans(query, key, value, *, target: str, **kwargs) -> PlanSearch:
    """Time op_host's plan and its neighbours (see the module docstring) for one call."""
    base = _run(query, key, value, target, {}, kwargs)
    if not base.legal:
        raise ValueError(f"op_host's own plan cannot be timed: {base.error}")
    search = PlanSearch(op_host=base, plans=[base])
    from ...tiling.platform import get_platform

    aic = get_platform(target).aic
    try:
        _run_checked(query, key, value, target, {"cores": base.cores}, kwargs)
    except UnsupportedPlanOverride as e:
        search.note = str(e)
        return search
    seen = {(base.m_base, base.s2_base, base.cores, base.preload)}
    candidates = [dict({"m_base": m, "s2_base": s2}, **({"cores": cores} if cores is not None else {}))
                  for m in _halves_doubles(base.m_base, 16, 1024) for s2 in _halves_doubles(base.s2_base, 64, 16384)
                  for cores in (None, aic) if (m, s2, cores) != (base.m_base, base.s2_base, None)]
    candidates += [{"preload_depth": depth} for depth in (base.preload - 1, base.preload + 1) if depth >= 1]
    for ov in candidates:
        got = _run(query, key, value, target, ov, kwargs)
        sig = (got.m_base, got.s2_base, got.cores, got.preload) if got.legal else tuple(sorted(ov.items()))
        if sig not in seen:
            seen.add(sig)
            search.plans.append(got)
    return search


def _run_checked(q, k, v, target, overrides, kw) -> None:
    """Raises ``UnsupportedPlanOverride`` when the call's template does not take overrides."""
    try:
        fia_cost(q, k, v, target=target, record="none", overrides=overrides, **kw)
    except (CompilationError, ParamError, UnsupportedParameterError):
        pass
