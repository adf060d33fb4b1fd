"""The op_host tiling mirror of FlashAttentionScore (training forward), arch22 (Atlas A2 / A3).

Model
-----
``tile_fas(params, target)`` answers what the real operator's host side decides for one call, read from the
public ops-transformer sources (``attention/flash_attention_score/op_host/``: ``flash_attention_score_tiling.cpp``
the router, ``flash_attention_score_tiling_general.cpp`` the templates, ``..._tiling_common.cpp`` the block
dim; ``op_api/aclnn_flash_attention_score.cpp`` the aclnn pre-processing; ``op_kernel/*.h`` the kernels' walk
over the tiling). Rules are restated, no code is copied. The steps, each in its own module:

1. :mod:`.fas_params` — the checks (``ParamError`` with the aclnn status) and the aclnn pad/transpose;
2. :mod:`.fas_sparse` — sparse-mode normalisation, the kernels' S2 range per S1 block, the split loads;
3. :mod:`.fas_route` — the template (priority order 90 DropMask pass, 94 VarLen, 95 S1s2Bn2gs1SameAB,
   96 S1s2Bn2gs1, 97 S1Bn2gs1, 98 Bn2gs1s2_B; or the empty-tensor path), block sizes, flags, tiling key
   (:mod:`.fas_key`);
4. :mod:`.fas_split` — the multi-core split and every core's ordered task list.

The result is a ``FasTiling``. ``core_tasks`` holds one tuple of ``FasTask`` per AI core (AIC, with its two
AIV); op_host itself splits over AIV for every template but the SameAB ones, and ``worker_tasks`` keeps that
split (``split_unit`` says which). The split is computed on first access of ``core_tasks`` /
``worker_tasks`` / ``core_num`` (a large call lists millions of tasks).

What is not derivable
---------------------
* The tiling key is exact for every field but the three scalar-constant template types, which depend on the
  matmul API's base M/N/K; cvtile assumes the bases keep the whole K (see :mod:`.fas_route`), which matches the
  op_host unit tests. ``tiling_key`` is None only for the "Empty" route (nothing launched).
* Tensor shapes beyond presence (mask / pse / drop-mask shapes) are not modelled; their shape checks and the
  alibi-1024 pse rules are not mirrored.
* Ascend 950 (arch35) is not mirrored: a 950 target raises ``ParamError``.

Invariants (tests check them)
-----------------------------
* Every (b, n1, S1 block) is in exactly one task of one core, and the tasks' S2 ranges cover every visible
  (query, key) pair. For a full S1 block the causal, prefix, full and varlen (modes 1-8) ranges list exactly
  the S2 blocks holding a visible element; a band cut with op_host's 128-aligned pre/next (fixed-length modes
  0/3/4, TND mode 0) may add one block per side, and a tail S1 block's range follows its nominal rows.
  Rows with no visible key keep op_host's fallback range.
* ``priority`` is the final template's registration priority (None for the empty routes).
* ``decisions`` records every derived value with the op_host function that made it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .errors import AclnnStatus, ParamError
from .fas_params import FasParams, check_fas, tiling_view
from .fas_route import FasPlan, route
from .fas_split import FasTask, core_count, core_groups, worker_starts, worker_tasks
from .platform import DEFAULT_TARGET, get_platform
from .result import Decision

__all__ = ["FasParams", "FasTask", "FasTiling", "tile_fas", "format_fas_tiling"]

_LIST_LIMIT = 200_000      # explain() lists the cores' tasks up to this many S1 blocks


@dataclass(frozen=True)
class FasTiling:
    """What op_host decides for one FlashAttentionScore call (see the module doc)."""

    platform: str
    arch: str
    template: str                  # "VarLen", "S1s2Bn2gs1SameAB", "S1s2Bn2gs1", "S1Bn2gs1", "Bn2gs1s2_B",
    #                                "EmptyTensor", "Empty"
    priority: int | None
    tiling_key: int | None
    s1_base: int                   # query rows of one task (SameAB: the AIC's rows, each AIV takes half)
    s2_base: int                   # KV positions of one S2 block
    n_ratio: int                   # S2 blocks per kernel loop step (s1s2 families); S1Bn2gs1: its S1 ratio
    sparse_type: str               # op_host's normalised SparseEnum name
    pre_tokens: int                # the left-up window op_host passes the kernel
    next_tokens: int
    impl_mode: int                 # 0 high precision, 2 invalid-line
    same_ab: bool
    l1_reuse: bool
    split_unit: str                # "aiv" or "aic": what op_host's split balances over
    block_dim: int                 # AIC groups launched (CalcTschBlockDim)
    drop_mask_pass: bool           # the prio-90 drop-mask conversion runs first
    layout: str                    # the layout op_host sees (after the aclnn transpose)
    dtype: str
    b: int
    n1: int
    n2: int
    d: int                         # head dims op_host sees (after the aclnn pad)
    dv: int
    q_lens: tuple
    kv_lens: tuple
    key_fields: dict = field(default_factory=dict, compare=False)
    decisions: tuple = field(default=(), compare=False)
    _plan: FasPlan | None = field(default=None, repr=False, compare=False)

    @cached_property
    def worker_tasks(self) -> tuple:
        """op_host's split: one tuple of tasks per worker (AIV, or AIC for SameAB) in its order."""
        if self._plan is None or self._plan.total == 0:
            return ()
        return tuple(worker_tasks(self._plan))

    @cached_property
    def worker_starts(self) -> tuple:
        """op_host's ``sparseStartIdx`` / ``split_factor`` run starts, one per worker."""
        if self._plan is None or self._plan.total == 0:
            return ()
        return tuple(worker_starts(self._plan))

    @cached_property
    def core_tasks(self) -> tuple:
        """One tuple of ``FasTask`` per AI core, in the core's order (trailing idle cores dropped)."""
        if self._plan is None:
            return ()
        return tuple(core_groups(self._plan, list(self.worker_tasks)))

    @cached_property
    def core_num(self) -> int:
        """AI cores (AIC) with work (``len(core_tasks)``): at most the platform's AIC count."""
        if self._plan is None or self._plan.total == 0:
            return 0
        return core_count(self._plan)

    def decision(self, what: str) -> Decision | None:
        """The first decision named ``what`` (None if there is none)."""
        return next((d for d in self.decisions if d.what == what), None)

    def explain(self) -> str:
        return format_fas_tiling(self)


def tile_fas(params: FasParams, target: str = DEFAULT_TARGET, *, aclnn: bool = True) -> FasTiling:
    """Check the call (``ParamError`` as the operator) and return its tiling. ``aclnn=False`` tiles the raw
    shapes as op_host's unit tests do (no aclnn pad / transpose)."""
    plat = get_platform(target)
    if plat.arch != "arch22":
        raise ParamError("target", plat.name, f"the FlashAttentionScore tiling mirror covers arch22 (Atlas A2/A3) "
                         f"only; {plat.name} is {plat.arch} (not mirrored)", status=AclnnStatus.PARAM_INVALID,
                         checker="fas")
    check_fas(params)
    view = tiling_view(params, aclnn=aclnn)
    plan = route(params, view, plat)
    plan.decisions.insert(0, Decision("platform", plat.name, f"{plat.aic} AIC / {plat.aiv} AIV, L1 {plat.l1} B, "
                                      f"L2 {plat.l2} B (GetPlatformInfo)"))
    sp = plan.sparse
    return FasTiling(platform=plat.name, arch=plat.arch, template=plan.template, priority=plan.priority,
                     tiling_key=plan.tiling_key, s1_base=plan.s1_base, s2_base=plan.s2_base, n_ratio=plan.n_ratio,
                     sparse_type=sp.name, pre_tokens=sp.pre, next_tokens=sp.next, impl_mode=plan.impl_mode,
                     same_ab=plan.same_ab, l1_reuse=plan.l1_reuse, split_unit=plan.split_unit,
                     block_dim=plan.block_dim, drop_mask_pass=plan.drop_mask_pass, layout=view.layout,
                     dtype=view.dtype, b=view.b, n1=view.n1, n2=view.n2, d=view.d, dv=view.dv, q_lens=view.q_lens,
                     kv_lens=view.kv_lens, key_fields=dict(plan.key_fields), decisions=tuple(plan.decisions),
                     _plan=plan)


def format_fas_tiling(t: FasTiling, max_tasks: int = 4) -> str:
    """A short listing: the route, the decisions, and the first tasks of each core."""
    head = (f"FlashAttentionScore tiling on {t.platform} ({t.arch}): template {t.template}"
            f"{f' (prio {t.priority})' if t.priority is not None else ''}, key {t.tiling_key}")
    lines = [head, f"  layout {t.layout} {t.dtype}, B {t.b} N1 {t.n1} N2 {t.n2} D {t.d} Dv {t.dv}; "
             f"s1_base {t.s1_base} s2_base {t.s2_base} n_ratio {t.n_ratio}; sparse {t.sparse_type}"]
    lines += [f"  - {d}" for d in t.decisions]
    if t._plan is not None and t._plan.total > _LIST_LIMIT:
        lines.append(f"  tasks not listed: {t._plan.total} S1 blocks (split over {t.split_unit.upper()})")
    elif t._plan is not None and t._plan.total:
        lines.append(f"  cores: {t.core_num} AIC with work (split over {t.split_unit.upper()}), "
                     f"{sum(len(c) for c in t.core_tasks)} tasks")
        for c, tasks in enumerate(t.core_tasks):
            shown = ", ".join(f"(b{x.b} n{x.n1} m{x.m_start}+{x.m_rows} s2[{x.s2_lo},{x.s2_hi}))"
                              for x in tasks[:max_tasks])
            more = f" ... +{len(tasks) - max_tasks}" if len(tasks) > max_tasks else ""
            lines.append(f"    core {c}: {len(tasks)} tasks {shown}{more}")
    return "\n".join(lines)

