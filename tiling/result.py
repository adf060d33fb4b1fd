"""The tiling result: what op_host decided for one FusedInferAttentionScore call, and why.

Model
-----
``FiaTiling`` is the host side's whole answer: the route and template, the tiling
key (and its decoded fields), the block sizes, the split of the work over the AI
cores, the flash-decode (FD) plan, the workspace layout, and the list of
``Decision`` records that ``explain()`` prints. The simulator's FIA kernels are
driven by exactly this object: ``core_tasks`` is the per-core work list the
kernel walks, ``fd_tasks`` and ``fd_vector_work`` drive the FD combine kernel.

Work is counted in blocks. A *row* is one block of query rows of one (batch b, kv
head n2): M = S1*G query rows (the G query heads of a kv head folded into the
rows) cut into blocks of ``m_base`` rows. A row's KV range is cut into S2
blocks of ``s2_base`` positions; masks may restrict a row to a sub-range of its
blocks. (The arch22 TND split-fuse route's rows are runs of at most ``m_base`` rows
that need not start at a multiple of ``m_base``, see :mod:`.plan_fai`; a row is
identified by its ``(b, n2, m_start)``.) A core owns a contiguous run of the rows-and-blocks order; a row whose
blocks are split across cores is an FD task: each piece writes a partial result
(O normalised by its own sum, the row max, the row sum) into the workspace and
the combine merges them.

Invariants (tests check them)
-----------------------------
* every active (row block, S2 block) appears in exactly one ``RowTask`` of one core;
* ``RowTask.fd_task < 0`` iff the row is not split; for a split row with k
  pieces, ``fd_piece`` runs 0..k-1 in KV order and ``fd_tasks[t].splits == k``;
* ``fd`` is True iff ``fd_tasks`` is non-empty.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Decision", "RowTask", "CoreWork", "FdTask", "FdVectorWork", "FiaTiling"]


@dataclass(frozen=True)
class Decision:
    """One tiling decision: what was decided, the value, and the rule (with its op_host source) that made it."""

    what: str
    value: Any
    rule: str

    def __str__(self) -> str:
        return f"{self.what} = {self.value}  ({self.rule})"


@dataclass(frozen=True)
class RowTask:
    """A run of S2 blocks [s2_lo, s2_hi) of the query rows [m_start, m_start + m_rows) of (b, n2).

    Rows are counted in the folded M space of one kv head: M = S1 * G rows, in
    the order ``FiaTiling.m_order`` names ("GS1": row = g * S1 + s1, the BNSD
    order; "S1G": row = s1 * G + g, the BSH/BSND/TND order). S2 blocks are
    ``FiaTiling.s2_base`` KV positions each, counted from KV position 0; a task with ``kv_start >= 0`` (a
    flash-decode part of the legacy IFA route, which starts and ends anywhere in the KV) instead covers the KV
    positions [kv_start, kv_end) in blocks counted from kv_start (s2_lo 0), its last block partial.
    """

    b: int
    n2: int
    m_start: int
    m_rows: int
    s2_lo: int
    s2_hi: int
    fd_task: int = -1     # index into FiaTiling.fd_tasks, -1 when the row is not split
    fd_piece: int = 0     # which piece of the split row this is (0..splits-1, in KV order)
    kv_start: int = -1    # first KV position of a part that starts anywhere (-1: the blocks count from 0)
    kv_end: int = -1      # the part's end position (with kv_start)

    def first_position(self, s2_base: int) -> int:
        """The KV position of the task's first block."""
        return self.kv_start if self.kv_start >= 0 else self.s2_lo * s2_base

    def block_position(self, j: int, s2_base: int) -> int:
        """The first KV position of the task's block j (s2_lo <= j < s2_hi)."""
        return self.first_position(s2_base) + (j - self.s2_lo) * s2_base


@dataclass(frozen=True)
class CoreWork:
    """What one AI core (AIC + its AIVs) computes, in order."""

    core: int
    tasks: tuple[RowTask, ...]
    cost: int = 0          # the split_core cost of this core's blocks


@dataclass(frozen=True)
class FdTask:
    """A row block split across cores: its pieces' partials are merged by the FD combine."""

    b: int
    n2: int
    m_start: int
    m_rows: int            # valid rows in this M block
    splits: int            # number of pieces (KV splits)
    workspace_slot: int    # first partial slot of this task in the FD workspace; pieces use slot..slot+splits-1


@dataclass(frozen=True)
class FdVectorWork:
    """The rows of FD tasks one vector core merges: (task index, first row, row count) triples."""

    vector: int
    pieces: tuple[tuple[int, int, int], ...]


@dataclass
class FiaTiling:
    arch: str
    platform: str
    route: str                     # e.g. "fia", "ifa", "pfa", "fai", "empty"
    template: str                  # e.g. "FiaTilingNonQuant"
    tiling_key: int
    key_fields: dict
    # problem as the tiling sees it
    layout: str
    batch: int
    num_heads: int
    num_kv_heads: int
    group: int                     # G = num_heads // num_kv_heads
    head_dim: int
    value_head_dim: int
    q_seqlens: tuple[int, ...]     # per batch, after broadcast / de-cumulation
    kv_seqlens: tuple[int, ...]
    # block sizes
    m_base: int
    s2_base: int
    m_order: str = "GS1"           # row order of the folded M space: "GS1" (BNSD) or "S1G" (BSH/BSND/TND)
    m_fd_base: int = 8
    # core split
    used_cores: int = 0            # cores that get work (the legacy IFA route's perf modes 0/1: vector cores)
    #: core groups op_host launches (SetBlockDim): >= used_cores, or >= used_cores / cv_ratio where the work units
    #: are vector cores (the legacy IFA route's perf modes 0 and 1: each AIV a unit of its own)
    block_dim: int = 0
    cores: tuple[CoreWork, ...] = ()
    # flash decode
    fd: bool = False
    fd_tasks: tuple[FdTask, ...] = ()
    fd_vector_work: tuple[FdVectorWork, ...] = ()
    # workspace (bytes)
    workspace_bytes: int = 0
    workspace_layout: dict = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    extras: dict = field(default_factory=dict)

    # --------------------------------------------------------------- access
    def core_tasks(self) -> list[tuple[RowTask, ...]]:
        return [c.tasks for c in self.cores]

    @property
    def kv_splits(self) -> int:
        """The largest number of KV splits of any FD task (0 without FD)."""
        return max((t.splits for t in self.fd_tasks), default=0)

    def decision(self, what: str) -> Decision | None:
        for d in self.decisions:
            if d.what == what:
                return d
        return None

    def explain(self) -> str:
        lines = [f"FusedInferAttentionScore tiling on {self.platform} ({self.arch})"]
        for d in self.decisions:
            lines.append(f"  - {d}")
        return "\n".join(lines)

    def summary(self) -> dict:
        return {"route": self.route, "template": self.template, "tiling_key": self.tiling_key,
                "m_base": self.m_base, "s2_base": self.s2_base, "used_cores": self.used_cores,
                "block_dim": self.block_dim, "fd": self.fd, "fd_tasks": len(self.fd_tasks), "kv_splits": self.kv_splits,
                "workspace_bytes": self.workspace_bytes}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["decisions"] = [{"what": x.what, "value": _plain(x.value), "rule": x.rule} for x in self.decisions]
        return _plain(d)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "item"):
        return v.item()
    return repr(v)
