"""The weighted (N, B, S1-block) core split of the arch35 catch-all template (op_host ``SplitNBSeq``).

Model
-----
Work rows are ``(b, head, s_outer_index)`` in that loop order, ``head`` running over
the kv heads when G is merged into S1 (``gs_merge``) and over the query heads
otherwise; a row is ``M = sOuter * 2`` query rows. Each row's weight is the number
of S2 blocks (``sInner`` positions) its mask window touches, counted the op_host
way from left-up normalised tokens: per row the window is
``[-ceil(pre / sInner), ceil(next / sInner)]`` in block units (clipped to the batch's
block count), then pre decreases and next increases by M for the next row. Rows
made entirely invalid by the window are removed first (``FixParamWithRowInvalid``).
A system prefix is counted as its own block range.

The target is ``total weight / cube cores``; walking the rows in order, a new core
starts when a row's weight minus the remaining share of the current core exceeds
that share (``weight - dif > dif`` with ``dif = target * (core + 1) - assigned``), never
before the first row. Used cores = last core index + 1.

Invariants
----------
* Each core's rows are a contiguous run of the row order; every row belongs to one core.
* ``row_windows`` gives each row's task range over the concatenated ``[prefix | KV]`` sequence: the S2
  blocks holding a key some row of the block sees (all blocks when G is folded into the rows, where a
  per-row window does not exist), and, separately, the weight op_host counts from its block-index window.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RowWindow", "left_up_tokens", "fix_row_invalid", "row_windows", "split_nbseq", "NbseqPlan",
           "antiquant_rows", "antiquant_target_weight", "cut_block_estimate"]

INT_MAX = 2147483647


@dataclass(frozen=True)
class RowWindow:
    b: int
    head: int
    index: int            # s_outer index within the (batch, head)
    row_start: int        # first query row (in the batch's valid rows, after removing leading invalid rows)
    rows: int
    s2_lo: int            # S2 block range [lo, hi) over the concatenated [prefix | KV] positions
    s2_hi: int
    weight: int           # blocks op_host counts (prefix and KV blocks counted separately)


@dataclass
class NbseqPlan:
    used_cores: int
    core_rows: list       # per core: list of RowWindow
    total_weight: int


def left_up_tokens(*, sparse_mode: int, pre: int, nxt: int, q_len: int, kv_len: int, g: int = 1,
                   rope_split_512: bool = False, opt_layout: bool = True) -> tuple[int, int]:
    """(pre, next) normalised to the left-up corner (op_host ``GetPreNextTokensLeftUp``)."""
    if rope_split_512 and not opt_layout:
        return INT_MAX, INT_MAX
    if sparse_mode == 3:
        return INT_MAX, (kv_len * g - q_len) if rope_split_512 else (kv_len - q_len)
    if sparse_mode == 4:
        if rope_split_512:
            return pre * g - kv_len * g + q_len, nxt * g + kv_len * g - q_len
        return pre - kv_len + q_len, nxt + kv_len - q_len
    if rope_split_512:
        return pre * g, nxt * g
    return pre, nxt


def fix_row_invalid(q_len: int, kv_len: int, pre: int, nxt: int, *, g: int = 1,
                    mla_512: bool = False) -> tuple[int, int, int, int, bool]:
    """Drop rows no key can see: (q_len, pre, next, leading rows dropped, any dropped)."""
    lead = min(-nxt if nxt < 0 else 0, q_len)
    kv = kv_len * g if mla_512 else kv_len
    tail = q_len - kv - pre if q_len > kv + pre else 0
    tail = min(tail, q_len)
    invalid = lead > 0 or tail > 0
    nxt += lead
    pre -= lead
    q_len -= lead
    q_len -= tail
    return q_len, pre, nxt, lead, invalid


def _ceil_div_signed(x: int, d: int) -> int:
    return (x + d - 1) // d if x > 0 else -((-x) // d)


def _inner_blocks(start: int, end: int, total: int) -> tuple[int, int]:
    """Block range [lo, hi) of the inclusive window [start, end] clipped to [0, total) (``GetActualInnerBlockNums``)."""
    if end < 0:
        return 0, 0
    lo = max(start, 0)
    hi = min(end + 1, total)
    if lo >= hi:
        return 0, 0
    return lo, hi


def _task_range(p: int, n: int, rows: int, s_inner: int, total_blocks: int) -> tuple[int, int]:
    """S2 blocks holding a key some row of the block sees: keys [-p, rows - 1 + n] (left-up tokens at the block)."""
    total = total_blocks * s_inner
    first, last = -p, rows - 1 + n
    if last < 0 or first >= total or last < first:
        return 0, 0
    first, last = max(first, 0), min(last, total - 1)
    return first // s_inner, min(last // s_inner + 1, total_blocks)


def row_windows(*, batch: int, heads: int, q_lens, kv_lens, m: int, s_inner: int, mask: bool, sparse_mode: int,
                pre: int, nxt: int, prefix: int = 0, g: int = 1, mla_512: bool = False, rope_split_512: bool = False,
                opt_layout: bool = True, merged_rows: bool = False) -> list:
    out = []
    for b in range(batch):
        q, kv = q_lens[b], kv_lens[b]
        p0, n0 = left_up_tokens(sparse_mode=sparse_mode, pre=pre, nxt=nxt, q_len=q, kv_len=kv + prefix, g=g,
                                rope_split_512=rope_split_512, opt_layout=opt_layout)
        q_fixed, p0, n0, lead, _ = fix_row_invalid(q, kv + prefix, p0, n0, g=g, mla_512=mla_512)
        outer = (q_fixed + m - 1) // m if q_fixed > 0 else 0
        inner = (kv + s_inner - 1) // s_inner
        inner_prefix = (prefix + s_inner - 1) // s_inner
        for h in range(heads):
            p, n = p0, n0
            for i in range(outer):
                rows = min(m, q_fixed - i * m)
                total_blocks = (kv + prefix + s_inner - 1) // s_inner
                if mask:
                    lo_t = -_ceil_div_signed(p + prefix, s_inner)
                    hi_t = _ceil_div_signed(n - prefix, s_inner)
                    wlo, whi = _inner_blocks(lo_t, hi_t, inner)
                    plo, phi = _inner_blocks(-_ceil_div_signed(p, s_inner), _ceil_div_signed(n, s_inner), inner_prefix)
                    weight = (whi - wlo) + (phi - plo)
                    if merged_rows:     # rows fold G heads: the token window is not per row, keep every block
                        lo, hi = 0, total_blocks
                    else:
                        lo, hi = _task_range(p, n, rows, s_inner, total_blocks)
                else:
                    lo, hi = 0, total_blocks
                    weight = inner + inner_prefix
                out.append(RowWindow(b, h, i, lead + i * m, rows, lo, hi, weight))
                p -= m
                n += m
    return out


def split_nbseq(rows: list, cores: int, *, total: int | None = None, integer_share: bool = False) -> NbseqPlan:
    """The greedy cut; ``total`` overrides the weight the target is computed from (the antiquant path estimates it),
    ``integer_share`` truncates each core's cumulative share to an integer (the antiquant path does)."""
    total = sum(r.weight for r in rows) if total is None else total
    target = total / cores if cores else 0.0
    assigned = 0
    core = 0
    core_rows: list = [[]]
    for r in rows:
        share = target * (core + 1)
        dif = (int(share) if integer_share else share) - assigned
        if r.weight - dif > dif and core_rows[core]:
            core += 1
            core_rows.append([])
        core_rows[core].append(r)
        assigned += r.weight
    return NbseqPlan(core + 1, core_rows, total)


# ------------------------------------------------------------------------------------------------ antiquant path
def _cdiv(a: int, b: int) -> int:
    """C division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _series(an: int, d: int) -> int:
    if d == 0:
        return 0
    return (an % d + an) * (an // d + 1) // 2 if an > 0 else 0


def cut_block_estimate(kv_span: int, q_span: int, s_inner: int, s_outer: int, token: int) -> int:
    """Blocks a token line cuts off a (q_span x kv_span) rectangle, by the arithmetic-series estimate of op_host."""
    block_token = (token + s_inner - 1) // s_inner * s_inner if token > 0 else _cdiv(token, s_inner) * s_inner
    tol = s_outer // s_inner if s_outer > s_inner else 1
    small = s_inner
    n = _series(_cdiv(kv_span - block_token, small) - tol, tol)
    n -= _series(_cdiv(-block_token, small) - tol, tol)
    n -= _series(_cdiv(kv_span - q_span - block_token, small) - tol, tol)
    n += _series(_cdiv(-block_token - q_span, small) - tol, tol)
    return n


def _antiquant_tokens(sparse_mode: int, pre: int, nxt: int, q: int, kv: int) -> tuple[int, int]:
    if sparse_mode == 3:
        return pre, kv - q
    if sparse_mode == 4:
        return pre - kv + q, nxt + kv - q
    return pre, nxt


def antiquant_rows(*, batch: int, heads: int, q_lens, kv_lens, s_outer: int, s_inner: int, mask: bool,
                   sparse_mode: int, pre: int, nxt: int, prefix: int = 0, merged_rows: bool = False) -> list:
    """Rows of the antiquant split (``ComputeDequantSplitNBSeq``): sOuter rows per row, tokens stepped by sOuter.

    As op_host does, the row count per batch comes from one invalid-row fix, while each head re-derives its
    tokens from the query length the previous head's fix left behind.
    """
    out = []
    inner_prefix = (prefix + s_inner - 1) // s_inner
    for b in range(batch):
        q, kv = q_lens[b], kv_lens[b]
        p0, n0 = _antiquant_tokens(sparse_mode, pre, nxt, q, kv + prefix)
        q_once, p_geo0, n_geo0, lead, _ = fix_row_invalid(q, kv + prefix, p0, n0)
        outer = (q_once + s_outer - 1) // s_outer if q_once > 0 else 0
        inner = (kv + s_inner - 1) // s_inner
        total_blocks = (kv + prefix + s_inner - 1) // s_inner
        q_cur = q
        for h in range(heads):
            p, n = _antiquant_tokens(sparse_mode, pre, nxt, q_cur, kv + prefix)
            q_cur, p, n, _, _ = fix_row_invalid(q_cur, kv + prefix, p, n)
            p_geo, n_geo = p_geo0, n_geo0
            for i in range(outer):
                rows = min(s_outer, q_once - i * s_outer)
                wlo, whi = _inner_blocks(-_ceil_div_signed(p + prefix, s_inner), _ceil_div_signed(n - prefix, s_inner),
                                         inner)
                plo, phi = _inner_blocks(-_ceil_div_signed(p, s_inner), _ceil_div_signed(n, s_inner), inner_prefix)
                if mask:            # the task range follows the batch's geometry, the weight op_host's tokens
                    lo, hi = (0, total_blocks) if merged_rows else _task_range(p_geo, n_geo, rows, s_inner,
                                                                                total_blocks)
                else:
                    lo, hi = 0, total_blocks
                out.append(RowWindow(b, h, i, lead + i * s_outer, rows, lo, hi, (whi - wlo) + (phi - plo)))
                p -= s_outer
                n += s_outer
                p_geo -= s_outer
                n_geo += s_outer
    return out


def antiquant_target_weight(*, batch: int, heads: int, q_lens, kv_lens, s_outer: int, s_inner: int,
                            s_inner_config: int, mask: bool, sparse_mode: int, pre: int, nxt: int,
                            prefix: int = 0) -> int:
    """The total weight the antiquant split aims at (``GetAntiQuantCalcBlockNumsOneHead`` x heads)."""
    inner_prefix = (prefix + s_inner - 1) // s_inner
    total = 0
    for b in range(batch):
        q, kv = q_lens[b], kv_lens[b]
        p, n = _antiquant_tokens(sparse_mode, pre, nxt, q, kv + prefix)
        q_fixed, p, n, _, _ = fix_row_invalid(q, kv + prefix, p, n)
        outer = (q_fixed + s_outer - 1) // s_outer
        inner = (kv + s_inner - 1) // s_inner
        if not mask:
            total += (inner + inner_prefix) * outer
            continue
        q_span = outer * s_outer
        kv_span = inner * s_inner_config
        blocks = inner * outer
        blocks -= cut_block_estimate(kv_span, q_span, s_inner_config, s_outer, n - prefix)
        blocks -= cut_block_estimate(kv_span, q_span, s_inner_config, s_outer, kv_span - q_span + p + prefix)
        pspan = inner_prefix * s_inner_config
        blocks += inner_prefix * outer
        blocks -= cut_block_estimate(pspan, q_span, s_inner_config, s_outer, n)
        blocks -= cut_block_estimate(pspan, q_span, s_inner_config, s_outer, pspan - q_span + p)
        total += blocks
    return total * heads
