"""The block grid that both core splitters walk: rows of M, S2 blocks, mask ranges and block costs.

Model
-----
For every batch ``b`` the query rows of one kv head are folded into ``M = S1_b * G``
rows and cut into *row blocks* of ``m_base`` rows (the last one may be a tail);
the KV positions ``[0, S2_b)`` (``S2_b`` includes a system prefix) are cut into
*S2 blocks* of ``s2_base`` positions. Every ``(b, n2)`` pair has the same rows, so
the grid is computed once per batch.

A mask limits the S2 blocks one row block touches. Both op_host splitters
(``split_core`` for arch22, ``split_core_v2`` for arch35) normalise the sparse
mode's tokens to the left-up corner and clip the row's token window to the KV
range (``s2_range``):

* no mask: every row sees ``[0, ceil(S2/s2_base))``;
* sparse 2 (left-up causal) keeps next = the next_tokens attribute;
  sparse 3 (right-down) and 9 (tree) use next = S2 - S1; sparse 4 (band)
  uses pre = S1 - S2 + pre_tokens and next = S2 - S1 + next_tokens;
  sparse 0/1 use the attributes as given;
* the first and last query token of a row block are found in the fold order:
  S1-major (``S1G``, BSH/BSND/TND) divides the row index by G; G-major
  (``GS1``, BNSD) takes it modulo S1 when the block stays inside one head and
  falls back to the whole sequence when it crosses heads.

The cost of one block is ``6 * ceil(m / 16) + 10 * ceil(s2 / 64)`` (``m`` rows,
``s2`` positions), with separate costs for a tail row block and a tail S2 block.

Invariants
----------
* ``row(b, m)`` is pure: the same ``(b, m)`` always gives the same range and costs.
* A row with no valid token has ``blocks == 0`` and cost 0; an empty batch
  (S1 or S2 of 0) has no blocks at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["SPARSE_DEFAULT", "SPARSE_ALL", "SPARSE_LEFT_UP", "SPARSE_RIGHT_DOWN", "SPARSE_BAND", "SPARSE_TREE",
           "block_cost", "per_batch_lengths", "GridSpec", "RowInfo", "BlockGrid"]

SPARSE_DEFAULT, SPARSE_ALL, SPARSE_LEFT_UP, SPARSE_RIGHT_DOWN, SPARSE_BAND, SPARSE_TREE = 0, 1, 2, 3, 4, 9


def block_cost(m_rows: int, s2_len: int) -> int:
    """The split-core cost model of one block: 6 per 16 rows plus 10 per 64 KV positions (both rounded up)."""
    return 6 * ((m_rows + 15) >> 4) + 10 * ((s2_len + 63) >> 6)


def per_batch_lengths(batch: int, default: int, actual: tuple[int, ...] | None, *, cumulative: bool = False,
                      prefix: int = 0) -> tuple[int, ...]:
    """Per-batch sequence lengths the way op_host reads them.

    ``actual`` empty/None: every batch has ``default``. One element: broadcast.
    Otherwise element ``b`` (or the difference of consecutive elements when
    ``cumulative``, the TND/NTD convention). ``prefix`` (a system prefix) is added.
    """
    if not actual:
        return tuple(prefix + default for _ in range(batch))
    if len(actual) == 1:
        return tuple(prefix + int(actual[0]) for _ in range(batch))
    out = []
    for b in range(batch):
        v = int(actual[b]) if b < len(actual) else 0
        if cumulative and b > 0:
            v -= int(actual[b - 1]) if b - 1 < len(actual) else 0
        out.append(prefix + v)
    return tuple(out)


@dataclass(frozen=True)
class GridSpec:
    """Everything the splitters need to know about the problem (op_host's ``BaseInfo`` + ``SplitParam``)."""

    batch: int
    n2: int
    g: int
    q_lens: tuple[int, ...]        # S1 per batch
    kv_lens: tuple[int, ...]       # S2 per batch, system prefix included
    m_base: int
    s2_base: int
    s1_major: bool = True          # fold order S1G (BSH/BSND/TND) vs GS1 (BNSD)
    mask: bool = False
    sparse_mode: int = 0
    pre_tokens: int = 2147483647
    next_tokens: int = 2147483647
    fd_row_piece: int = 8          # rows per FD combine piece (gS1BaseSizeOfFd)

    def __post_init__(self):
        if self.m_base <= 0 or self.s2_base <= 0:
            raise ValueError(f"block sizes must be positive (m_base={self.m_base}, s2_base={self.s2_base})")
        if len(self.q_lens) != self.batch or len(self.kv_lens) != self.batch:
            raise ValueError("q_lens and kv_lens need one entry per batch")


@dataclass(frozen=True)
class RowInfo:
    """One row block of one batch: its S2 block range and costs."""

    s2_start: int
    s2_end: int
    blocks: int
    cost: int
    normal_block_cost: int
    last_block_cost: int


def _left_up_tokens(spec: GridSpec, s1: int, s2: int) -> tuple[int, int]:
    mode = spec.sparse_mode
    pre = s1 - s2 + spec.pre_tokens if mode == SPARSE_BAND else spec.pre_tokens
    if mode in (SPARSE_RIGHT_DOWN, SPARSE_TREE):
        nxt = s2 - s1
    elif mode == SPARSE_BAND:
        nxt = s2 - s1 + spec.next_tokens
    else:
        nxt = spec.next_tokens
    return pre, nxt


class BlockGrid:
    """Rows, S2 ranges and costs of a :class:`GridSpec` (op_host ``CalcSplitInfo`` / ``CalcCostInfo``)."""

    def __init__(self, spec: GridSpec):
        self.spec = spec
        g, mb, sb = spec.g, spec.m_base, spec.s2_base
        self.m_blocks = tuple((s1 * g + mb - 1) // mb for s1 in spec.q_lens)
        self.m_tail = tuple((s1 * g) % mb for s1 in spec.q_lens)
        self.s2_blocks = tuple((s2 + sb - 1) // sb for s2 in spec.kv_lens)
        self.s2_tail = tuple(s2 % sb for s2 in spec.kv_lens)
        self.all_empty = not any(m and s for m, s in zip(self.m_blocks, self.s2_blocks))
        self._tokens = tuple(_left_up_tokens(spec, s1, s2) for s1, s2 in zip(spec.q_lens, spec.kv_lens))
        self._cost_table = tuple(self._type_costs(b) for b in range(spec.batch))
        self.row = lru_cache(maxsize=None)(self._row)
        # per-batch totals (one (b, n2) unit)
        self.unit_cost: list[int] = []
        self.unit_blocks: list[int] = []
        self.unit_last_block_cost: list[int] = []
        self.max_row_cost = 0
        for b in range(spec.batch):
            cost = blocks = last = 0
            if spec.q_lens[b] and spec.kv_lens[b]:
                for m in range(self.m_blocks[b]):
                    r = self.row(b, m)
                    cost += r.cost
                    blocks += r.blocks
                    self.max_row_cost = max(self.max_row_cost, r.cost)
                    if r.blocks:
                        last = r.last_block_cost
            self.unit_cost.append(cost)
            self.unit_blocks.append(blocks)
            self.unit_last_block_cost.append(last)
        self.total_cost = 0 if self.all_empty else sum(c * spec.n2 for c in self.unit_cost)
        self.total_blocks = 0 if self.all_empty else sum(k * spec.n2 for k in self.unit_blocks)

    # ------------------------------------------------------------------ helpers
    def _type_costs(self, b: int) -> tuple[tuple[int, int], tuple[int, int]]:
        mb, sb = self.spec.m_base, self.spec.s2_base
        mt, st = self.m_tail[b], self.s2_tail[b]
        nn = block_cost(mb, sb)
        tn = block_cost(mt, sb) if mt else 0
        nt = block_cost(mb, st) if st else 0
        tt = block_cost(mt, st) if (mt and st) else 0
        return (nn, nt), (tn, tt)           # [m-type][s2-type], 0 = normal, 1 = tail

    def s2_range(self, b: int, m: int) -> tuple[int, int]:
        """The S2 block range [start, end) of row block ``m`` of batch ``b`` (op_host ``CalcS2Range``)."""
        spec = self.spec
        s1, s2 = spec.q_lens[b], spec.kv_lens[b]
        if s1 == 0 or s2 == 0:
            return 0, 0
        sb = spec.s2_base
        if not spec.mask:
            return 0, (s2 + sb - 1) // sb
        first = m * spec.m_base
        last = min(first + spec.m_base, s1 * spec.g) - 1
        if spec.s1_major:
            t_first, t_last = first // spec.g, last // spec.g
        elif first // s1 == last // s1:
            t_first, t_last = first % s1, last % s1
        else:
            t_first, t_last = 0, s1
        pre, nxt = self._tokens[b]
        k_first = t_first - pre
        k_last = t_last + nxt
        if k_first >= s2 or k_last < 0 or k_last < k_first:
            return 0, 0
        k_first = min(max(k_first, 0), s2 - 1)
        k_last = min(max(k_last, 0), s2 - 1)
        return k_first // sb, k_last // sb + 1

    def _row(self, b: int, m: int) -> RowInfo:
        start, end = self.s2_range(b, m)
        if start >= end:
            return RowInfo(start, end, 0, 0, 0, 0)
        blocks = end - start
        tail_s2 = 1 if (self.s2_tail[b] and end == self.s2_blocks[b]) else 0
        normal_s2 = blocks - tail_s2
        if self.m_blocks[b] == 0:
            return RowInfo(start, end, blocks, 0, 0, 0)
        mtype = 1 if (m == self.m_blocks[b] - 1 and self.m_tail[b]) else 0
        costs = self._cost_table[b][mtype]
        cost = costs[0] * normal_s2 + costs[1] * tail_s2
        last = costs[1] if tail_s2 else costs[0]
        return RowInfo(start, end, blocks, cost, costs[0], last)

    # ------------------------------------------------------------------ geometry
    def row_rows(self, b: int, m: int) -> int:
        """Valid query rows in row block ``m`` of batch ``b``."""
        total = self.spec.q_lens[b] * self.spec.g
        return max(0, min(self.spec.m_base, total - m * self.spec.m_base))

    def fd_pieces(self, b: int, m: int) -> tuple[int, int]:
        """(piece count, last piece rows) of an FD combine over row block ``m`` (8-row pieces)."""
        rows = self.row_rows(b, m) if m < self.m_blocks[b] else self.spec.m_base
        p = self.spec.fd_row_piece
        n = (rows + p - 1) // p
        return n, rows - p * (n - 1)
