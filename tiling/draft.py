"""A mutable draft of a ``FiaTiling`` that the per-template planners fill, one recorded decision at a time.

Model
-----
Planners call ``draft.decide(what, value, rule)`` for every choice they make (the
rule names the op_host rule), set the block sizes, the core work, the FD plan,
the workspace and the key, and ``draft.finish()`` builds the frozen result.
Keeping the record and the value in one call is what makes ``explain()`` complete.

Invariants
----------
* ``finish()`` sets ``fd`` from ``fd_tasks`` (never independently).
* ``block_dim`` (the launch op_host sets with ``SetBlockDim``) is ``used_cores`` unless a planner
  sets it; the two differ where op_host launches cores that get no work.
"""

from __future__ import annotations

from .result import Decision, FiaTiling
from .view import TilingView
from .workspace import Workspace

__all__ = ["Draft"]


class Draft:
    def __init__(self, view: TilingView, platform_name: str, q_lens: tuple, kv_lens: tuple,
                 overrides: dict | None = None):
        self.view = view
        #: plan-search overrides of op_host's choices (``m_base``, ``s2_base``, ``cores``, ``kv_splits``); only
        #: the planners that read them accept them (``plan_overrides.OVERRIDE_KEYS``; ``tile_view`` refuses the
        #: others)
        self.overrides = dict(overrides or {})
        self.platform = platform_name
        self.q_lens = tuple(q_lens)
        self.kv_lens = tuple(kv_lens)
        self.decisions: list[Decision] = []
        self.m_base = 0
        self.s2_base = 0
        self.m_order = "S1G" if view.s1_major else "GS1"
        self.used_cores = 0
        self.block_dim: int | None = None
        self.cores: tuple = ()
        self.fd_tasks: tuple = ()
        self.fd_vector_work: tuple = ()
        self.workspace: Workspace | None = None
        self.tiling_key = 0
        self.key_fields: dict = {}
        self.extras: dict = {}
        self.template = view.template
        self.route = view.route

    def decide(self, what: str, value, rule: str):
        self.decisions.append(Decision(what, value, rule))
        return value

    def finish(self) -> FiaTiling:
        v = self.view
        ws = self.workspace
        return FiaTiling(
            arch=v.arch, platform=self.platform, route=self.route, template=self.template,
            tiling_key=int(self.tiling_key), key_fields=dict(self.key_fields), layout=v.input_layout,
            batch=v.batch, num_heads=v.n1, num_kv_heads=v.n2, group=v.g, head_dim=v.qk_dim, value_head_dim=v.v_dim,
            q_seqlens=self.q_lens, kv_seqlens=self.kv_lens, m_base=self.m_base, s2_base=self.s2_base,
            m_order=self.m_order, used_cores=self.used_cores,
            block_dim=self.used_cores if self.block_dim is None else self.block_dim, cores=tuple(self.cores), fd=bool(self.fd_tasks),
            fd_tasks=tuple(self.fd_tasks), fd_vector_work=tuple(self.fd_vector_work),
            workspace_bytes=ws.total if ws else 0, workspace_layout=ws.layout if ws else {},
            decisions=list(self.decisions), extras=dict(self.extras))
