"""``tile_fia``: the whole host-side tiling of FusedInferAttentionScore for one call, with every decision explained.

Model
-----
``tile_fia(params, platform)`` runs the verdict half first (``check_fia``: parse,
checkers, route and template choice; a rejected call raises ``ParamError`` with
the aclnn status), then the decision half for the chosen template:

=========================  =============================================
arch22 route / template     planner
=========================  =============================================
fia / FiaTilingEmptyTensor  :func:`.plan_arch22.plan_empty`
fia / FiaTilingNonQuantMla  :func:`.plan_arch22.plan_mla`
fia / FiaTilingNonQuant     :func:`.plan_arch22.plan_gqa`
ifa / IFATiling             :func:`.plan_legacy.plan_ifa`
pfa / PromptFlash...        :func:`.plan_legacy.plan_pfa`
fai / split-fuse            :func:`.plan_fai.plan_fai`
arch35 templates            :mod:`.plan_arch35`
=========================  =============================================

Each planner fills a :class:`~.draft.Draft` (block sizes, core work as ``RowTask``s,
FD tasks and the combine's vector work, workspace size and layout, tiling key and
its decoded fields) and records a :class:`~.result.Decision` with the op_host rule
for every choice. ``format_tiling`` renders the result for people.

The plan search's ``overrides`` reach the planner as ``Draft.overrides``; :mod:`.plan_overrides`
says which planner reads which (``tile_view`` refuses the others with ``UnsupportedPlanOverride``)
and checks their values; ``tile_fia`` itself applies ``preload_depth``, a kernel setting.

Invariants
----------
* A returned tiling's key decodes to ``key_fields``; ``fd`` is True iff ``fd_tasks`` is non-empty.
* Nothing here rejects a call: rejections are the verdict half's (one copy of each rule).
"""

from __future__ import annotations

from .block_grid import per_batch_lengths
from .draft import Draft
from .errors import UnsupportedPlanOverride
from .plan_overrides import check_override_keys
from .platform import DEFAULT_TARGET, Platform, get_platform
from .result import Decision, FiaTiling
from .view import TilingView, view_from_info

__all__ = ["tile_fia", "tile_view", "format_tiling", "UnsupportedPlanOverride"]


def tile_fia(params, platform: Platform | str = DEFAULT_TARGET, overrides: dict | None = None) -> FiaTiling:
    """Tile one FusedInferAttentionScore call on ``platform`` (raises ``ParamError`` when op_host would reject it).
    ``overrides`` (plan search): replace op_host's choices by these before the derived machinery runs; which
    planner reads which (``m_base``, ``s2_base``, ``cores``, ``kv_splits``) is :mod:`.plan_overrides`' table,
    and one it does not read raises ``UnsupportedPlanOverride``. Every template takes the kernel's preload
    depth (``preload_depth``: the hand-off slots and pipeline stages the compiler gives the AIC/AIV programs,
    the platform's by default; recorded in ``extras``, read by the kernel launch; op_host's workspace figure
    stays its own, sized for its fixed preload)."""
    from .verdict import check_fia

    plat = platform if isinstance(platform, Platform) else get_platform(platform)
    info = check_fia(params, plat)
    view = view_from_info(info)
    t = tile_view(view, plat, overrides)
    route = getattr(info, "route", None)
    if route is not None:
        t.decisions.insert(0, _route_decision(route))
    # the legacy IFA decode class (S1 == 1, D == Dv, no rope, BSH/BSND/BNSD) initialises the lse of rows
    # without KV to FLOAT_MIN on A2/A3 instead of +inf; kernels that mirror the chip need to know
    t.extras["legacy_ifa"] = bool(getattr(info, "is_legacy_ifa", False)) and info.arch == "arch22"
    if overrides and "preload_depth" in overrides:
        depth = int(overrides["preload_depth"])
        if depth < 1:
            raise ValueError(f"overrides: preload_depth must be at least 1, got {depth}")
        t.extras["preload_depth"] = depth
        t.decisions.append(Decision("preload_depth", depth, f"plan search override (the platform's is "
                                                            f"{plat.preload_depth})"))
    return t


def _route_decision(route):
    where = f"{route.route}/{route.template}"
    pr = f", registry priority {route.priority}" if route.priority is not None else ""
    return Decision("template", where, f"{route.reason}{pr}")


def tile_view(view: TilingView, plat: Platform, overrides: dict | None = None) -> FiaTiling:
    """The decision half on an already checked problem (a :class:`~.view.TilingView`)."""
    from . import plan_arch22, plan_arch35, plan_fai, plan_legacy

    q0 = per_batch_lengths(view.batch, view.s1, view.actual_q, cumulative=view.accum_q) if view.batch else ()
    kv0 = per_batch_lengths(view.batch, view.s2, view.actual_kv, cumulative=view.accum_kv) if view.batch else ()
    d = Draft(view, plat.name, q0, kv0, overrides)
    arch22 = {"FiaTilingEmptyTensor": plan_arch22.plan_empty, "FiaTilingNonQuantMla": plan_arch22.plan_mla,
              "FiaTilingNonQuant": plan_arch22.plan_gqa}
    arch35 = {"FiaTilingNonQuantArch35": plan_arch35.plan_gqa, "FiaTilingNonQuantMlaArch35": plan_arch35.plan_mla,
              "FiaTilingFullQuantMxArch35": plan_arch35.plan_mx,
              "FiaTilingFullQuantGqaArch35": plan_arch35.plan_fullquant_gqa,
              "FusedInferAttentionScoreTilingImpl": plan_arch35.plan_impl}
    legacy = {"ifa": plan_legacy.plan_ifa, "pfa": plan_legacy.plan_pfa, "fai": plan_fai.plan_fai}
    check_override_keys(view, overrides)
    if view.arch == "arch22" and view.route in legacy:
        legacy[view.route](d, plat)
    else:
        table = arch22 if view.arch == "arch22" else arch35
        planner = table.get(view.template)
        if planner is None:
            raise ValueError(f"no planner for template {view.template!r} on {view.arch}")
        planner(d, plat)
    return d.finish()


# ------------------------------------------------------------------------------------------------ formatting
def _fmt_bytes(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.2f} {unit} ({n} B)"
    return f"{n} B"


def format_tiling(t: FiaTiling) -> str:
    """A human summary: template, key, block sizes, cores, FD, workspace, then every decision with its reason."""
    lines = [f"FusedInferAttentionScore tiling on {t.platform} ({t.arch})",
             f"  template    : {t.route}/{t.template}",
             f"  tiling key  : {t.tiling_key}"]
    if t.key_fields:
        shown = ", ".join(f"{k}={v}" for k, v in t.key_fields.items())
        lines.append(f"  key fields  : {shown}")
    lines.append(f"  problem     : B={t.batch} N={t.num_heads} Nkv={t.num_kv_heads} G={t.group} D={t.head_dim} "
                 f"Dv={t.value_head_dim} layout={t.layout}")
    lines.append(f"  blocks      : M base {t.m_base} rows ({t.m_order} fold), S2 base {t.s2_base}")
    tasks = sum(len(c.tasks) for c in t.cores)
    lines.append(f"  cores used  : {t.used_cores} ({tasks} row tasks)")
    if t.fd:
        lines.append(f"  flash decode: on, {len(t.fd_tasks)} split row block(s), up to {t.kv_splits} KV splits, "
                     f"combine on {len(t.fd_vector_work)} vector cores")
    else:
        lines.append("  flash decode: off")
    lines.append(f"  workspace   : {_fmt_bytes(t.workspace_bytes)}")
    for name, (off, n) in t.workspace_layout.items():
        lines.append(f"      {name:<20s} @ {off:>12d}  {n:>12d} B")
    lines.append("  decisions:")
    for dec in t.decisions:
        lines.append(f"    - {dec.what} = {dec.value}")
        lines.append(f"        {dec.rule}")
    return "\n".join(lines)
