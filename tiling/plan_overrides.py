"""The plan search's overrides of op_host's choices: which planner reads which, and their checks.

Model
-----
``tile_fia(params, platform, overrides)`` hands the overrides to the planner in ``Draft.overrides``; the
planner puts each in place of op_host's own choice *before* the derived machinery (block grid, core split,
flash-decode plan, workspace, key) runs, so an overridden plan is built exactly as op_host builds its own.
Which planner reads which override:

====================================  ===========================================================
arch / route / template                overrides read
====================================  ===========================================================
arch22 fia FiaTilingNonQuant           ``m_base``, ``s2_base``, ``cores`` (split_core's core count)
arch22 fia FiaTilingNonQuantMla        ``m_base``, ``s2_base``, ``cores``
arch22 ifa IFATiling                   ``cores`` (SetCoreNum), ``kv_splits`` (SplitBNS's kvSplitPart;
                                       1 = no flash decode), ``s2_base`` (sInner)
arch22 fai FlashAttentionInferSplitFuse ``cores`` (the cube cores the split-fuse split works over)
arch22 pfa PromptFlashAttentionTiling  ``m_base`` (2 x sOuter), ``s2_base`` (sInner), ``cores``
arch35 FiaTilingNonQuant(Mla)Arch35    ``cores`` (split_core_v2's core count)
====================================  ===========================================================

``preload_depth`` is the kernel's, not a planner's: ``tile_fia`` takes it for every template. Variants
that build no per-core work from these numbers refuse them with :class:`~.errors.UnsupportedPlanOverride`
(a tiling sink, the IFA ATB kernel, the PFA TND and empty-tensor branches, the empty-tensor template).

Invariants
----------
* Without overrides every planner takes op_host's path unchanged.
* An override value a rule forbids raises ``ParamError`` naming ``overrides.<name>`` and the rule.
"""

from __future__ import annotations

from .errors import ParamError, UnsupportedPlanOverride

__all__ = ["OVERRIDE_KEYS", "KERNEL_OVERRIDES", "check_override_keys", "forced", "refuse_overrides"]

#: the kernel-side overrides ``tile_fia`` applies itself, whatever the template
KERNEL_OVERRIDES = frozenset({"preload_depth"})

_BASES_CORES = frozenset({"m_base", "s2_base", "cores"})

#: (arch, route, template) -> the planner overrides it reads
OVERRIDE_KEYS = {
    ("arch22", "fia", "FiaTilingNonQuant"): _BASES_CORES,
    ("arch22", "fia", "FiaTilingNonQuantMla"): _BASES_CORES,
    ("arch22", "ifa", "IFATiling"): frozenset({"cores", "kv_splits", "s2_base"}),
    ("arch22", "fai", "FlashAttentionInferSplitFuse"): frozenset({"cores"}),
    ("arch22", "pfa", "PromptFlashAttentionTiling"): _BASES_CORES,
    ("arch35", "fia", "FiaTilingNonQuantArch35"): frozenset({"cores"}),
    ("arch35", "fia", "FiaTilingNonQuantMlaArch35"): frozenset({"cores"}),
}


def check_override_keys(view, overrides: dict | None) -> None:
    """Refuse overrides the call's planner does not read (``UnsupportedPlanOverride``, naming them)."""
    planner_keys = set(overrides or {}) - KERNEL_OVERRIDES
    if not planner_keys:
        return
    where = (view.arch, view.route, view.template)
    taken = OVERRIDE_KEYS.get(where, frozenset())
    extra = sorted(planner_keys - taken)
    if extra:
        took = f"it reads {sorted(taken)}" if taken else "it reads none"
        raise UnsupportedPlanOverride(f"plan overrides {extra} are not read by the {view.arch} "
                                      f"{view.route}/{view.template} planner ({took})")


def refuse_overrides(d, variant: str) -> None:
    """A planner variant that builds no per-core work from the overrides refuses them, saying why."""
    planner_keys = sorted(set(d.overrides) - KERNEL_OVERRIDES)
    if planner_keys:
        raise UnsupportedPlanOverride(f"plan overrides {planner_keys} do not apply to {d.view.route}/"
                                      f"{d.view.template}: {variant}")


def forced(d, name: str, *, lo: int = 1, hi: int | None = None, multiple: int = 1, rule: str = "") -> int | None:
    """The override ``name`` as an int checked against ``lo <= x <= hi`` and ``x % multiple == 0``; None when
    not given. A value outside raises ``ParamError`` (param ``overrides.<name>``) with ``rule`` appended."""
    if name not in d.overrides:
        return None
    x = int(d.overrides[name])
    broke = []
    if x < lo:
        broke.append(f"at least {lo}")
    if hi is not None and x > hi:
        broke.append(f"at most {hi}")
    if multiple > 1 and x % multiple:
        broke.append(f"a multiple of {multiple}")
    if broke:
        raise ParamError(f"overrides.{name}", x, "must be " + " and ".join(broke) + (f" ({rule})" if rule else ""),
                         checker="plan search")
    return x
