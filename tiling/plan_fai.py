"""Planner of the arch22 TND split-fuse route ("FAI", op_host ``FAInferTiling``): its work as RowTasks.

Model
-----
A TND call that ``RouteToFia`` turns away for the split-fuse shape (see
:func:`.route.fai_shape`) is tiled by ``TilingProcess4SplitFuse``: the context
(per-batch lengths, mask type, two flags), then ``FAInferTiling::DoTiling``
(block tiles, one of three core splits, workspace), then the key. The rules live
in :mod:`.fai_split`; this module reads the problem, takes the decisions, and
expresses the chosen split in the simulator's contract (:mod:`.result`).

Context (``ConvertContextToParamsFAI``):

* lengths: batch = elements of ``actual_seq_lengths``; query lengths de-cumulated,
  KV lengths de-cumulated unless the cache is paged (then the list is per batch).
  Without values in both lists the call is a *tiling sink*: no split on the host,
  every cube core launched, the largest FD areas reserved;
* mask type: a valid pse_shift (4-D, B or 1 batches, N heads, at least the
  longest query / KV) makes it ``FULL_MASK``; else sparse 4 -> ``SWA_MASK``,
  sparse 3 -> ``MASK_SPEC`` (right-down causal), sparse 0 -> ``NO_MASK``;
* flash decode: paged cache, mask neither full nor band, no learnable sink,
  inner_precise != 1, longest query <= 16 with ``longest query * G <= 128``, every
  query non-empty, longest KV >= 1024, and few (batch, kv head) units:
  ``B*N2 <= 0.8 * cube cores`` with longest KV >= ``512 * cube cores``, or
  ``B*N2 <= 0.4 * cube cores``;
* decoding: paged cache with block size 128, every query exactly one token, no
  mask, ``B >= cube cores``, no lse output, no sink, inner_precise 0, G <= 128.
  Flash decode wins when both hold (they cannot: one needs few units, the other
  many batches).

Mapping to the RowTask contract
-------------------------------
Rows use the G-major fold (``m_order`` "GS1": row = g * q_b + s), although the layout
is TND: an upstream task is a run of heads times a run of tokens where either the
head run is one head or the token run is the whole query, so its rows are one
contiguous run ``[g0 * q_b + s0, + g_len * s_len)`` in that fold (in the token-major
fold they would not be). ``m_base`` is 128 (no task holds more rows), ``s2_base``
512 (the KV step, from position 0).

* regular: task ``i`` -> one RowTask on core ``i mod cores`` over the KV blocks the
  kernel walks for it (mask-limited); exact;
* decoding: one upstream task covers several kv heads of one batch; it becomes one
  RowTask per kv head, in head order, on the task's core (the same rows, the same
  KV blocks; the chip stacks the heads' rows in one matmul, the simulator runs them
  one after another);
* flash decode: every row a core's cursor range covers is a RowTask over the KV
  blocks the kernel walks (the last piece of a row clipped to the mask as the
  kernel clips it); a row split over several cores is an ``FdTask`` (upstream
  ``splitNode``), its pieces numbered in core order (= KV order), slots allotted
  in node order. The combine's work is exact per vector core: node ``k``'s two
  halves are processes ``2k`` and ``2k + 1`` and process ``p`` runs on vector
  ``p mod (2 * launched cores)``; a half is the node's first (second) half of
  heads for a one-token node, else the first (second) half of tokens of every head,
  so one vector may get several row runs of a task. When the walk runs out of cores
  before the end (its head-block charge counts ``head tile`` heads even for a group's
  shorter last block, e.g. S1 5 with G 25: tile 24, blocks of 24 and 1 heads), some
  rows have KV blocks on no core upstream; the planner then records the ranges and
  the uncovered rows and gives no core work (``extras["row_tasks"]`` says why), as
  the simulator cannot reproduce an undefined result.

Plan search (:mod:`.plan_overrides`): ``cores`` replaces the cube core count (``aicNum``) the whole
tiling works with: the flash-decode and decoding flags, the split (regular round-robin, decoding, or the
flash-decode walk, whose split rows follow from the count), the launch and the workspace. The block tiles
(128 query rows, 512 KV positions) are the kernel's constants, not tiling fields, so they are not searched.
A tiling sink refuses overrides.

What is not mirrored: the partial results upstream are (O, lse) per row and the
combine's arithmetic is its own; the simulator stores (O, max, sum) per piece and
merges with its combine kernel (the same mathematics). ``m_fd_base`` stays 8: it is
only the simulated combine's rows per step.

Invariants
----------
* ``q_seqlens`` / ``kv_seqlens`` are per batch; every KV block the kernel walks is in
  exactly one RowTask; ``fd`` iff flash decode produced split rows.
"""

from __future__ import annotations

from .draft import Draft
from .fai_split import (KV_STACK, MASK_CAUSAL, MASK_FULL, MASK_NAMES, MASK_NONE, MASK_SWA, Q_TILE_CEIL,
                        FaiBatch, batch_tiles, combine_rows, decode_split, fd_core_ranges, fd_kv_blocks, fd_pieces,
                        fd_split_nodes, regular_kv_blocks, regular_tasks)
from .plan_overrides import forced, refuse_overrides
from .platform import Platform
from .result import CoreWork, FdTask, FdVectorWork, RowTask
from .tiling_key import decode_fai, encode_fai
from .workspace import LIBAPI_WORKSPACE, Workspace

__all__ = ["plan_fai", "fai_lengths", "fai_mask_type", "fai_flags"]

INT_MAX = 2147483647
WS_BLOCK = Q_TILE_CEIL * KV_STACK          # elements of one staging block (WORKSPACE_BLOCK_SIZE_DB)
PRE_LAUNCH = 3
_MASK_KEY = {MASK_NONE: 0, MASK_CAUSAL: 3, MASK_SWA: 5, MASK_FULL: 6}


def _clamp(x: int) -> int:
    return max(-INT_MAX, min(INT_MAX, int(x)))


def fai_lengths(v) -> tuple[tuple, tuple] | None:
    """Per-batch (query lengths, KV lengths) as the split-fuse context reads them, None for a tiling sink."""
    if v.actual_q is None or v.actual_kv is None:
        return None
    aq, akv = [int(x) for x in v.actual_q], [int(x) for x in v.actual_kv]
    batch = len(aq)
    at = lambda xs, i: xs[i] if 0 <= i < len(xs) else 0  # noqa: E731
    q = tuple(aq[b] - (aq[b - 1] if b else 0) for b in range(batch))
    kv = tuple(at(akv, b) - (at(akv, b - 1) if (b and not v.paged) else 0) for b in range(batch))
    return q, kv


def fai_mask_type(v, q: tuple, kv: tuple) -> tuple[int, str]:
    sparse = v.sparse_mode
    plain = MASK_SWA if sparse == 4 else (MASK_CAUSAL if sparse == 3 else MASK_NONE)
    why = {MASK_SWA: "sparse 4: band", MASK_CAUSAL: "sparse 3: right-down causal", MASK_NONE: "sparse 0: no mask"}
    if not v.pse_shape:
        return plain, why[plain]
    s = v.pse_shape
    ok = (len(s) == 4 and s[0] in (1, len(q)) and s[1] == v.n1 and s[2] >= max(q, default=0)
          and s[3] >= max(kv, default=0))
    if ok:
        return MASK_FULL, f"pse_shift {tuple(s)} fits (B|1, N, >= max S1, >= max S2): full mask"
    return plain, f"pse_shift {tuple(s)} does not fit (B|1, N, S1, S2): ignored with a warning; {why[plain]}"


def fai_flags(v, q: tuple, kv: tuple, mask_type: int, aic: int) -> tuple[bool, str, bool, str]:
    """(flash decode, why, decoding, why) of ``ComputeSeqLenAndDecodeFlagsForFAI``."""
    batch = len(q)
    g = v.n1 // v.n2 if v.n2 else 0
    max_q, min_q, max_kv = max(q, default=0), min(q, default=0), max(kv, default=0)
    units = batch * v.n2
    long_seq = units <= 0.8 * aic and max_kv >= aic * 512
    short_seq = units <= 0.4 * aic and max_kv >= 1024
    fd_checks = [
        (v.paged, "paged cache"), (mask_type not in (MASK_FULL, MASK_SWA), "mask neither full nor band"),
        (not v.sink, "no learnable sink"), (v.inner_precise != 1, "inner_precise != 1"),
        (max_q * g <= 128, f"max S1 * G = {max_q * g} <= 128"), (max_q <= 16, f"max S1 {max_q} <= 16"),
        (max_kv >= 1024, f"max S2 {max_kv} >= 1024"), (min_q > 0, f"min S1 {min_q} > 0"),
        (long_seq or short_seq, f"B*N2 = {units} <= 0.8*{aic} with max S2 >= {aic * 512}, or <= 0.4*{aic}"),
    ]
    fd = all(ok for ok, _ in fd_checks)
    fd_why = ("all of: " + ", ".join(t for _, t in fd_checks)) if fd else \
        "not " + "; not ".join(t for ok, t in fd_checks if not ok)
    dec_checks = [
        (v.paged, "paged cache"), (max_q == 1 and min_q == 1, "every query one token"),
        (mask_type == MASK_NONE, "no mask"), (batch >= aic, f"B = {batch} >= {aic} cube cores"),
        (v.block_size == 128, f"block size {v.block_size} == 128"), (not v.lse, "no lse output"),
        (not v.sink, "no learnable sink"), (v.inner_precise == 0, "inner_precise 0"), (g <= 128, f"G = {g} <= 128"),
    ]
    dec = all(ok for ok, _ in dec_checks)
    dec_why = ("all of: " + ", ".join(t for _, t in dec_checks)) if dec else \
        "not " + "; not ".join(t for ok, t in dec_checks if not ok)
    return fd, fd_why + " (ComputeSeqLenAndDecodeFlagsForFAI)", dec, dec_why + " (ComputeSeqLenAndDecodeFlagsForFAI)"


def _rows(bt: FaiBatch, g0: int, g_len: int, s0: int, s_len: int) -> tuple[int, int]:
    """(first row, rows) of heads [g0, g0+g_len) x tokens [s0, s0+s_len) in the G-major fold of the batch."""
    if not (g_len == 1 or (s0 == 0 and s_len == bt.q)):
        raise AssertionError(f"split-fuse task heads {g0}+{g_len} x tokens {s0}+{s_len} of a {bt.q}-token batch "
                             "is not one run of rows in the G-major fold")
    return g0 * bt.q + s0, g_len * s_len


def plan_fai(d: Draft, plat: Platform) -> None:
    v = d.view
    if v.num_kv_heads_attr == 0:
        d.decide("kv_heads", v.n2, "num_key_value_heads 0: the split-fuse context divides by the raw attribute "
                                   "(no defined result upstream); cvtile takes N2 = N (MHA), as the checkers do")
    d.m_order = d.decide("m_order", "GS1", "split-fuse tasks are a head run x a token run with one head or every "
                                           "token, contiguous only in the G-major fold (row = g * S1_b + s)")
    d.m_base = d.decide("m_base", Q_TILE_CEIL, "a task holds at most 128 query rows: "
                                               "head tile floor(floor(128/S1_b)/2)*2 clamped to [1, G] times a "
                                               "token tile of 128 (GetQNBlockTile, GetQSBlockTile)")
    d.s2_base = d.decide("s2_base", KV_STACK, "KV walked in steps of 512 positions from position 0 "
                                              "(GetKSBlockTile = MAX_KV_STACK_LEN)")
    lens = fai_lengths(v)
    if lens is None:
        _tiling_sink(d, plat)
        return
    cores = _fai_cores(d, plat)
    q, kv = lens
    d.q_lens, d.kv_lens = q, kv
    negative = [f"{side} of batch {b} is {n}" for side, lst in (("query", q), ("KV", kv)) for b, n in enumerate(lst)
                if n < 0]
    d.decide("seq_lengths", {"q": list(q), "kv": list(kv)},
             "per batch: query list de-cumulated (TND), KV list " +
             ("taken per batch (paged cache)" if v.paged else "de-cumulated") +
             (f"; the cumulative lengths decrease ({', '.join(negative)}): this route does not check it and its "
              "tiling takes the difference as uint32; the API refuses the call (161002)" if negative else ""))
    mask_type, mwhy = fai_mask_type(v, q, kv)
    d.decide("mask_type", MASK_NAMES[mask_type], mwhy + " (SetMaskTypeForFAI)")
    fd, fd_why, dec, dec_why = fai_flags(v, q, kv, mask_type, cores)
    d.decide("flash_decode_flag", fd, fd_why)
    d.decide("decoding_flag", dec, dec_why)
    g, n2 = v.g, v.n2
    batches = [batch_tiles(a, b, g, n2) for a, b in zip(q, kv)]
    d.decide("block_tiles", [(bt.qn_tile, bt.qs_num, bt.ks_num) for bt in batches],
             "per batch (query heads per task, token blocks of 128, KV blocks of 512); a batch has "
             "N2*ceil(G/head tile)*token blocks tasks (FillSplitCoreTilingData)")
    lse_elems = o_elems = 0
    if fd:
        lse_elems, o_elems = _flash_decode(d, cores, batches, mask_type)
    elif dec:
        _decoding(d, cores, batches)
    else:
        _regular(d, cores, batches, mask_type)
    _workspace(d, cores, lse_elems * 4, o_elems * 4, sink=False)
    _key(d, mask_type, fd, dec)


# ------------------------------------------------------------------------------------------------ the three splits
def _regular(d: Draft, cores: int, batches: list, mask_type: int) -> None:
    v = d.view
    tasks = regular_tasks(batches, v.g)
    per_core: list = [[] for _ in range(cores)]
    rules = set()
    pre, nxt = _clamp(v.pre_tokens_attr), _clamp(v.next_tokens_attr)
    for i, t in enumerate(tasks):
        bt = batches[t.b]
        lo, hi, why = regular_kv_blocks(bt, t, mask_type, v.sparse_mode, pre, nxt)
        rules.add(why)
        if hi <= lo or t.s_len <= 0:
            continue
        m0, rows = _rows(bt, t.g0, t.g_len, t.s0, t.s_len)
        per_core[i % cores].append(RowTask(t.b, t.n2, m0, rows, lo, hi))
    d.cores = tuple(CoreWork(c, tuple(ts), 0) for c, ts in enumerate(per_core))
    d.used_cores = d.decide("used_cores", cores, "every cube core is launched (SetBlockDim(aicNum)); the kernel "
                                                 "hands task i to core i mod cores")
    d.decide("core_split", {"total_tasks": len(tasks), "first_batch_tasks": batches[0].tasks if batches else 0},
             "regular split-fuse: tasks numbered batch by batch, token block major, head block minor, "
             "round-robin over the cores (FillSplitCoreTilingData + kernel task loop); KV per task: "
             + "; ".join(sorted(rules)))
    d.decide("flash_decode", False, "no flash-decode flag: no row is split")


def _decoding(d: Draft, cores: int, batches: list) -> None:
    v = d.view
    sp = decode_split(len(batches), v.n2, v.g, cores)
    core_work = []
    for c, items in enumerate(sp.per_core):
        tasks = []
        for b, n_first, count in items:
            bt = batches[b]
            for n in range(n_first, n_first + count):
                if bt.ks_num and bt.q:
                    tasks.append(RowTask(b, n, 0, v.g * bt.q, 0, bt.ks_num))
        core_work.append(CoreWork(c, tuple(tasks), 0))
    d.cores = tuple(core_work)
    d.used_cores = d.decide("used_cores", cores, "every cube core is launched (SetBlockDim(aicNum))")
    d.decide("core_split", {"kv_heads_per_task": sp.kv_tile, "tasks_per_batch": sp.tasks_per_batch,
                            "total_tasks": sp.total_tasks, "main_tasks": sp.main_tasks, "tail_tasks": sp.tail_tasks,
                            "tail_start": (sp.tail_start_batch, sp.tail_start_n2), "tail_kv_tile": sp.tail_kv_tile},
             f"decoding split: tasks of {sp.kv_tile} kv heads (128 // G clamped to [1, N2]) round-robin over "
             f"{cores} cores; a last round of at most {cores // 2} tasks is re-cut into one kv head per task "
             "(SplitCoreDecodeBS1GN2). Each multi-head task becomes one RowTask per kv head on its core")
    d.decide("flash_decode", False, "decoding split: no row is split")


def _flash_decode(d: Draft, cores: int, batches: list, mask_type: int) -> tuple[int, int]:
    v = d.view
    ranges = fd_core_ranges(batches, v.n1, cores)
    pieces = fd_pieces(batches, ranges, cores)
    nodes, lse_elems, o_elems = fd_split_nodes(batches, pieces, v.g, v.v_dim, cores)
    launched = ranges.need_core_num or cores
    if ranges.overrun:
        note = ("the walk ended the last row exactly at a core's end, so needCoreNum stays 0 (all cores launched) and "
                "upstream goes on with a cursor past the last batch, reading beyond the length lists; cvtile leaves "
                f"cores {ranges.filled}.. idle (all work is already assigned)")
        d.extras["fai_fd_overrun"] = note
        d.decide("fd_walk_overrun", True, note + " (fillCoreInfoForFlashDecode)")
    missing = _unassigned(batches, pieces, launched, mask_type)
    d.decide("core_split", {"total_units": ranges.total_units, "units_per_core": ranges.per_core_units,
                            "starts": [list(s) for s in ranges.starts[:launched]],
                            "ends": [list(e) for e in ranges.ends[:launched]]},
             "flash-decode split: each core takes ceil(sum_b N1*S1_b*S2_b / cores) row-position units from a "
             "cursor over (batch, head block, token block, KV block), a KV block at a time inside a row, whole "
             "batches / head blocks / token blocks when they fit (fillCoreInfoForFlashDecode, Consume*)")
    if missing:
        note = ("the walk charges every head block a full head tile, also a group's shorter last block, so it ran "
                f"out of cores and left {len(missing)} row(s) with KV blocks on no core "
                f"(first: batch {missing[0][0]}, head block {missing[0][1]}, KV blocks {missing[0][3]}..); upstream "
                "those rows get no (or a partial) result")
        d.decide("fd_walk_incomplete", missing[:8], note + " (fillCoreInfoForFlashDecode)")
        d.extras["row_tasks"] = "split-fuse flash decode " + note + ": not expressible as RowTasks covering every block"
        d.used_cores = d.decide("used_cores", launched, "needCoreNum 0: every cube core launched")
        d.decide("flash_decode", False, "split-fuse flash decode left work unassigned: no core work is given "
                                        "(the workspace still holds upstream's FD areas)")
        return lse_elems, o_elems
    node_index = {(x.b, x.head_block, x.s_idx): i for i, x in enumerate(nodes)}
    combined = min(len(nodes), cores)
    if len(nodes) > combined:
        raise AssertionError("split-fuse flash decode produced more split rows than cores")
    fd_tasks, slot = [], 0
    for x in nodes:
        bt = batches[x.b]
        n2, g0 = divmod(x.head_start, v.g)
        m0, rows = _rows(bt, g0, x.head_end - x.head_start, x.q_start, x.q_end - x.q_start)
        fd_tasks.append(FdTask(x.b, n2, m0, rows, x.splits, slot))
        slot += x.splits
    per_core: list = [[] for _ in range(launched)]
    seen: dict = {}
    for pc in pieces:
        if pc.core >= launched:
            continue
        bt = batches[pc.b]
        hi = fd_kv_blocks(bt, pc.s_idx, mask_type) if pc.k_hi == bt.ks_num else pc.k_hi
        key = (pc.b, pc.head_block, pc.s_idx)
        t = node_index.get(key, -1) if pc.split else -1
        if hi <= pc.k_lo:
            if t >= 0:
                raise AssertionError(f"split-fuse FD piece {pc} walks no KV block")
            continue
        n2, gi = divmod(pc.head_block, bt.qn_per_group)
        g0 = gi * bt.qn_tile
        s0 = pc.s_idx * bt.qs_tile
        m0, rows = _rows(bt, g0, min(bt.qn_tile, v.g - g0), s0, min(bt.qs_tile, bt.q - s0))
        piece = 0
        if t >= 0:
            piece = seen.get(t, 0)
            seen[t] = piece + 1
        per_core[pc.core].append(RowTask(pc.b, n2, m0, rows, pc.k_lo, hi, t, piece))
    d.cores = tuple(CoreWork(c, tuple(ts), 0) for c, ts in enumerate(per_core))
    d.fd_tasks = tuple(fd_tasks)
    vectors = 2 * launched
    work: dict = {}
    for p in range(2 * combined):
        k, half = divmod(p, 2)
        items = [(k, r0, n) for r0, n in combine_rows(nodes[k], half)]
        work.setdefault(p % vectors, []).extend(items)
    d.fd_vector_work = tuple(FdVectorWork(vec, tuple(items)) for vec, items in sorted(work.items()))
    d.used_cores = d.decide("used_cores", launched,
                            f"flash decode launches needCoreNum = {ranges.need_core_num} cores"
                            + ("" if ranges.need_core_num else f" (0: all {cores})") + " (TilingProcess4SplitFuse)")
    if fd_tasks:
        d.decide("flash_decode", True, f"{len(fd_tasks)} row(s) split over cores, up to "
                                       f"{max(t.splits for t in fd_tasks)} pieces; combine: node k's halves are "
                                       f"processes 2k, 2k+1 on vector p mod {vectors} (ProcessCoreSplitInfo, "
                                       "CombineScale)")
    else:
        d.decide("flash_decode", False, "flash-decode split left no row split across cores (nothing to combine)")
    return lse_elems, o_elems


def _unassigned(batches: list, pieces: list, launched: int, mask_type: int) -> list:
    """Rows (batch, head block, token block, first uncovered KV block) whose kernel KV range no launched core
    walks completely."""
    covered: dict = {}
    for pc in pieces:
        if pc.core < launched:
            bt = batches[pc.b]
            hi = fd_kv_blocks(bt, pc.s_idx, mask_type) if pc.k_hi == bt.ks_num else pc.k_hi
            covered.setdefault((pc.b, pc.head_block, pc.s_idx), set()).update(range(pc.k_lo, hi))
    out = []
    for b, bt in enumerate(batches):
        for hb in range(bt.qn_num):
            for s in range(bt.qs_num):
                need = set(range(fd_kv_blocks(bt, s, mask_type)))
                gap = sorted(need - covered.get((b, hb, s), set()))
                if gap:
                    out.append((b, hb, s, gap[0]))
    return out


def _fai_cores(d: Draft, plat: Platform) -> int:
    """The cube cores the split-fuse tiling works over and launches (``aicNum``), or the plan search's
    ``cores``."""
    n = forced(d, "cores", hi=plat.aic, rule=f"the platform's {plat.aic} cube cores")
    if n is None:
        return plat.aic
    return d.decide("split_cores", n, f"plan search: {n} of the {plat.aic} cube cores in place of aicNum (the "
                                      "flags, the split and the launch follow from that count)")


def _tiling_sink(d: Draft, plat: Platform) -> None:
    refuse_overrides(d, "a tiling sink has no host split (the kernel splits at run time)")
    v = d.view
    cores = plat.aic
    d.used_cores = d.decide("used_cores", cores, "tiling sink (length lists without values): no host split, "
                                                 "every cube core launched; the kernel splits at run time")
    d.decide("flash_decode", False, "tiling sink: the flags are not computed on the host")
    d.extras["tiling_sink"] = True
    mask_type, mwhy = fai_mask_type(v, (), ())
    d.decide("mask_type", MASK_NAMES[mask_type], mwhy + " (SetMaskTypeForFAI)")
    lse = 2 * cores * Q_TILE_CEIL * 4 * v.n1
    o = 2 * cores * Q_TILE_CEIL * v.v_dim * 4 * v.n1
    _workspace(d, cores, lse, o, sink=True)
    _key(d, mask_type, False, False)


# ------------------------------------------------------------------------------------------------ workspace, key
def _workspace(d: Draft, cores: int, lse_bytes: int, o_bytes: int, *, sink: bool) -> None:
    blk = cores * WS_BLOCK
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ws.add("fd_row_lse", lse_bytes).add("fd_partial_out", o_bytes)
    ws.add("mm1_scores", blk * 4 * PRE_LAUNCH).add("vec1_probs", blk * 2 * PRE_LAUNCH)
    ws.add("mm2_out", blk * 4 * PRE_LAUNCH).add("vec2_update", blk * 4 * PRE_LAUNCH)
    ws.add("reserve", blk * (4 * 3 * 4 - (4 + 2 + 4 + 4) * PRE_LAUNCH))
    d.workspace = ws
    fd_part = ("tiling-sink FD areas 2*cores*128*N*(1 + Dv) fp32" if sink else
               "FD partial lse and O of the split rows" if (lse_bytes or o_bytes) else "no FD areas")
    d.decide("workspace_bytes", ws.total,
             f"16 MiB + cores*128*512*48 B (3 stages of S fp32, P fp16, O fp32, O update fp32 = 42 B per element, "
             f"48 allocated) + {fd_part} (TilingProcess4SplitFuse, FillWorkSpaceTilingData)")


def _key(d: Draft, mask_type: int, fd: bool, dec: bool) -> None:
    v = d.view
    nz = v.paged and v.key_cache_rank == 5 and v.qk_dim % 16 == 0
    fd_key = v.paged and mask_type != MASK_SWA and not v.sink and v.inner_precise != 1 and fd
    fields = {"mode": 1 if fd_key else (2 if dec else 0), "mask": _MASK_KEY[mask_type], "kv_nz": int(nz),
              "dtype": 2 if v.q_dtype == "bfloat16" else 1, "lse": int(v.lse),
              "inner_low_prec": int(v.inner_precise == 1), "q_layout": 2 if v.input_layout == "TND" else 0,
              "paged": int(v.paged), "sink": int(v.sink)}
    key = encode_fai(fields)
    d.tiling_key = d.decide("tiling_key", key, "FAInferTiling::GetTilingKey: 5*10^18 + FD 10^17 | decoding 2*10^17 "
                                               "+ sink 10^8 + paged 10^7 + TND 2*10^5 + inner_precise 1 10^4 + "
                                               "lse 10^3 + fp16 100 | bf16 200 + NZ 10 + mask (causal 3, band 5, "
                                               "full 6)")
    d.key_fields = decode_fai(key)
