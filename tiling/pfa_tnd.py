"""The legacy PFA route's split for the TND-like layouts (``TND``, ``NTD_TND``) on arch22.

Model
-----
With a TND-like layout op_host's legacy PFA tiling (``PromptFlashAttentionTiling::RunBigKernelTilingWithParams``)
leaves the sOuter / sInner planner of the other layouts and takes a branch of its own, with its own block
sizes, units and core split:

* **S1 block** (``MatchTemplate``): 512 query rows when the value head dim is at most 128, else 256; never
  more than the longest query length aligned up to 16 (``alignedS1``). The S2 step is 128 KV positions (at
  most the longest KV aligned up to 16) times ``nRatio``: 4 (8 for a value head dim above 128), at most the
  number of 128-position blocks.
* **G fold** (the ``gBaseSize`` / ``gOuterSize`` choice): when every batch has exactly one query token,
  G <= 16, and the call has neither a rope tensor nor the LSE output, the whole group of a kv head is one
  unit (its G rows together); otherwise each query head is a unit of its own.
* **Units** (``SetMultiCoreParamsTND``): ``sum_b ceil(q_b / S1 block) * N2 * gOuter``, the query lengths
  read as op_host reads a cumulative list (the first entry, then the differences); ordered batch, then
  (kv head, group), then S1 block. The split runs over cube cores (``isSameAB``): ``min(units, AIC)`` of
  them, two vector slices each, so the launch is ``CalcTschNumBlocks(2 * min(units, AIC), AIC, AIV)``.
* **Runs** (``SetSparseParamsTND``): each cube core (at most 24, ``MAX_AIC_NUM``) takes one contiguous run
  of units, chosen by the varlen even / greedy / ``BalanceLoad`` algorithm over the loads of
  ``InitSparseValidArrayTND``: the KV positions a unit sees (its batch's KV length; with right-down causal,
  ``S1 block * (j + 1) + kv_b - q_b`` clipped to [0, kv_b]) on the 1024 / ``COF`` scale.

* **Key** (the end of the branch in ``RunBigKernelTilingWithParams``, plus FIA's ``10^18`` in
  ``TilingProcess4PFA``): ``4 * 10^18`` + the template (3 for a value head dim <= 128 without a mask tensor,
  2 with one; 1 and 0 above 128) + the query layout's distance from ``TND`` in op_host's layout enum times
  ``10^5`` (NTD_TND: 2) + the paged cache (``BBH`` / ``BNBD`` 1, ``NZ`` 2) times ``10^7``
  (:func:`.tiling_key.encode_pfa_tnd`).
* **Workspace** (the same function): per cube core, three score tiles of a whole S2 step (``nRatio *
  gBase * S1 block * S2 block``, ``SetTensorSizeParams``' ``bmm1ResUbSize`` times ``nRatio``) and four
  output tiles (``S1 block * align16(query D)``), in the softmax dtype: 4 bytes, 2 for an fp16 query in
  high-performance mode (odd ``inner_precise`` other than 4, not forced to high precision by a pse
  tensor) or an int8 query (the ``softmaxDataTypeSize`` choice of the parameter checks); times the AIC
  count, plus the 16 MiB reserve (:func:`.workspace.pfa_tnd_workspace`).

Unlike the rest of the legacy PFA route, the branch's key and workspace are mirrored.

Invariants
----------
* Every unit with KV is in exactly one task of one core; a task has at most ``S1 block * gBaseSize`` rows.
* ``block_dim`` depends on the unit count only, never on the loads.
"""

from __future__ import annotations

from .block_grid import BlockGrid, GridSpec, SPARSE_RIGHT_DOWN
from .draft import Draft
from .fas_sparse import align_up, cdiv, varlen_load
from .fas_split import varlen_starts
from .platform import Platform, tsch_num_blocks
from .result import CoreWork, RowTask
from .tiling_key import decode_pfa_tnd, encode_pfa_tnd
from .workspace import pfa_tnd_workspace

__all__ = ["tnd_like", "tnd_s1_block", "tnd_s2_step", "tnd_s2_block", "tnd_n_ratio", "tnd_g_fold", "tnd_units",
           "tnd_block_dim", "tnd_loads", "tnd_softmax_bytes", "tnd_key_fields", "plan_pfa_tnd"]

#: the most cube cores the split gives runs to (``MAX_AIC_NUM``)
MAX_AIC_RUNS = 24
#: the largest group folded into one unit (``G_SIZE_THRESHOLD``)
G_FOLD_MAX = 16


def tnd_like(v) -> bool:
    """The layouts that take the TND branch (``InputLayoutIsTNDLike``): ``TND`` and ``NTD_TND``."""
    return v.input_layout in ("TND", "NTD_TND")


def tnd_s1_block(v_dim: int, max_q: int) -> int:
    """``MatchTemplate``: 512 query rows for a value head dim <= 128, else 256, capped at the longest query
    aligned up to 16."""
    return min(512 if v_dim <= 128 else 256, align_up(max_q, 16))


def tnd_s2_block(max_kv: int) -> int:
    """The S2 basic block of ``MatchTemplate``: 128 KV positions, at most the longest KV aligned up to 16."""
    return min(128, align_up(max_kv, 16))


def tnd_n_ratio(v_dim: int, max_kv: int) -> int:
    """``nRatio``: 4 S2 blocks a step for a value head dim <= 128, else 8, at most the number of blocks
    (``MatchTemplate`` and the clip after it; 0 without KV)."""
    return min(4 if v_dim <= 128 else 8, cdiv(max_kv, tnd_s2_block(max_kv)))


def tnd_s2_step(v_dim: int, max_kv: int) -> int:
    """The KV positions of one S2 step: the S2 basic block times ``nRatio``."""
    return tnd_s2_block(max_kv) * tnd_n_ratio(v_dim, max_kv)


def tnd_g_fold(q_lens: tuple, g: int, rope: bool, lse: bool) -> int:
    """The rows of G one unit holds (``gBaseSize``): all G when every batch has one query token, G <= 16 and
    there is no rope tensor and no LSE output; else 1 (each head its own unit)."""
    return g if all(q == 1 for q in q_lens) and g <= G_FOLD_MAX and not rope and not lse else 1


def tnd_softmax_bytes(q_dtype: str, inner_precise: int, pse: bool) -> int:
    """``softmaxDataTypeSize`` on A2/A3: 2 for an int8 query, or an fp16 one in high-performance mode (bit 0 of
    ``inner_precise``, 4 being approximate; a pse tensor forces an fp16 query to high precision); else 4."""
    fast = inner_precise != 4 and inner_precise & 1 == 1 and not (pse and q_dtype == "float16")
    return 2 if q_dtype == "int8" or (q_dtype == "float16" and fast) else 4


#: op_host's layout enum distance of the TND-like query layouts from ``TND`` (the key's 10^5 digit)
_LAYOUT_FROM_TND = {"TND": 0, "NTD_TND": 2}
#: the paged caches' digit of the key (``KVCACHE_ND_TILING_KEY`` / ``KVCACHE_NZ_TILING_KEY``)
_PAGED_CACHE = {"BnBsH": 1, "BnNBsD": 1, "NZ": 2}


def tnd_key_fields(v_dim: int, mask: bool, input_layout: str, paged_cache: str | None) -> dict:
    """The digits of the branch's key (:func:`.tiling_key.encode_pfa_tnd`): template ``(2 if v_dim <= 128 else
    0) + (0 if mask else 1)``, the layout digit, and the paged cache digit (``paged_cache``: its layout, or None)."""
    return {"template": (2 if v_dim <= 128 else 0) + (0 if mask else 1),
            "q_layout": _LAYOUT_FROM_TND[input_layout],
            "kv_cache": _PAGED_CACHE.get(paged_cache, 0) if paged_cache else 0}


def tnd_units(q_lens: tuple, s1_block: int, n2: int, g_outer: int) -> int:
    """``SetMultiCoreParamsTND``'s ``totalSize``: the S1 blocks of every batch, times N2 and the G units."""
    return sum(cdiv(q, s1_block) for q in q_lens) * n2 * g_outer


def tnd_block_dim(units: int, plat: Platform) -> tuple[int, int]:
    """(cube cores split over, launch): ``min(units, AIC)`` cube cores, each two vector slices, launched as
    ``CalcTschNumBlocks(2 * cores, AIC, AIV)`` (``SetMultiCoreParamsTND`` with ``isSameAB``)."""
    cores = min(units, plat.aic)
    return cores, tsch_num_blocks(2 * cores, plat.aic, plat.aiv)


def tnd_loads(q_lens: tuple, kv_lens: tuple, s1_block: int, n2g: int, right_down: bool) -> list[int]:
    """``InitSparseValidArrayTND``: one load per unit (batch, kv head and group, S1 block), each a query row
    (the real S1 size is not weighed) times the KV positions it sees (``GetS2RealSize``) on the varlen scale."""
    out = []
    for q, kv in zip(q_lens, kv_lens):
        row = []
        for j in range(cdiv(q, s1_block)):
            seen = max(s1_block * (j + 1) + kv - q, 0) if right_down else kv
            row.append(varlen_load(min(seen, kv)))
        out.extend(row * n2g)
    return out


def _runs(loads: list, units: int, cores: int) -> list[tuple[int, int]]:
    """Each cube core's contiguous run of units (``SetSparseStartIdxTND``)."""
    if not units:
        return []
    workers = min(cores, MAX_AIC_RUNS)
    starts = varlen_starts(loads, units, workers, cdiv(units, cores))
    return [(s, starts[w + 1] if w + 1 < workers else units) for w, s in enumerate(starts)]


def plan_pfa_tnd(d: Draft, plat: Platform) -> None:
    """The TND branch of the legacy PFA tiling (see the module doc): block sizes, runs, RowTasks, launch."""
    v = d.view
    q, kv = d.q_lens, d.kv_lens
    s1_block = d.decide("s1_block", tnd_s1_block(v.v_dim, max(q, default=0)),
                        "TND-like layout: 512 rows (256 for Dv > 128), at most the longest query aligned to 16 "
                        "(PromptFlashAttentionTiling::MatchTemplate)")
    g_base = d.decide("g_fold", tnd_g_fold(q, v.g, v.rope_mode == "split", v.lse),
                      "G rows per unit: all of G when every query length is 1, G <= 16, no rope and no LSE, else "
                      "1 (the gBaseSize choice of the TND branch)")
    g_outer = v.g // g_base
    d.m_base = d.decide("m_base", max(s1_block * g_base, 1), f"S1 block {s1_block} x {g_base} rows of G")
    d.s2_base = d.decide("s2_base", max(tnd_s2_step(v.v_dim, max(kv, default=0)), 1),
                         "128 KV positions (at most the longest KV aligned to 16) x nRatio (4, 8 for Dv > 128, at "
                         "most the block count) (MatchTemplate)")
    d.m_order = "GS1"
    units = tnd_units(q, s1_block, v.n2, g_outer)
    cores, launch = tnd_block_dim(units, plat)
    loads = tnd_loads(q, kv, s1_block, v.n2 * g_outer, v.sparse_mode == SPARSE_RIGHT_DOWN)
    grid = BlockGrid(GridSpec(v.batch, v.n2, g_base, q, kv, d.m_base, d.s2_base, False, v.mask, v.sparse_mode,
                              v.pre_tokens, v.next_tokens))
    d.cores = tuple(CoreWork(c, tuple(_tasks(d, grid, lo, hi, s1_block, g_outer)), sum(loads[lo:hi]))
                    for c, (lo, hi) in enumerate(_runs(loads, units, cores)))
    d.used_cores = d.decide("used_cores", sum(1 for c in d.cores if c.tasks),
                            f"{units} units (S1 blocks x N2 {v.n2} x {g_outer} G units) in contiguous runs over "
                            f"{cores} cube cores, balanced by load (PromptFlashAttentionTiling::SetSparseParamsTND)")
    d.block_dim = d.decide("block_dim", launch, f"CalcTschNumBlocks(2 * {cores}, {plat.aic}, {plat.aiv}): two "
                                                "vector slices per cube core (SetMultiCoreParamsTND, isSameAB)")
    _key_and_workspace(d, plat, s1_block, g_base)


def _key_and_workspace(d: Draft, plat: Platform, s1_block: int, g_base: int) -> None:
    v = d.view
    max_kv = max(d.kv_lens, default=0)
    fields = tnd_key_fields(v.v_dim, v.mask, v.input_layout, v.kv_layout if v.paged else None)
    d.tiling_key = d.decide("tiling_key", encode_pfa_tnd(fields),
                            "4 * 10^18 + template (Dv <= 128: 3, 2 with a mask; else 1, 0) + layout - TND at 10^5 "
                            "+ paged cache at 10^7 (RunBigKernelTilingWithParams, TND branch; FIA's TilingProcess4PFA "
                            "adds 10^18)")
    d.key_fields = decode_pfa_tnd(d.tiling_key)
    sm = d.decide("softmax_bytes", tnd_softmax_bytes(v.q_dtype, v.inner_precise, v.pse),
                  "softmax dtype: 2 bytes for an int8 query or an fp16 one in high-performance mode, else 4")
    d.workspace = pfa_tnd_workspace(aic=plat.aic, s1_block=s1_block, s2_block=tnd_s2_block(max_kv),
                                    n_ratio=tnd_n_ratio(v.v_dim, max_kv), g_base=g_base,
                                    d_aligned=align_up(v.qk_dim, 16), softmax_bytes=sm)
    d.decide("workspace_bytes", d.workspace.total, "16 MiB + AIC * (3 score tiles of a whole S2 step + 4 output "
                                                   "tiles of S1 block x align16(D)) in the softmax dtype "
                                                   "(RunBigKernelTilingWithParams, TND branch)")


def _tasks(d: Draft, grid: BlockGrid, lo: int, hi: int, s1_block: int, g_outer: int):
    """The RowTasks of units [lo, hi): unit (b, k, j) is rows ``(k % gOuter) * q_b + j * m_base`` of kv head
    ``k // gOuter`` (the G-major fold), against the S2 blocks its mask leaves."""
    n2g = d.view.n2 * g_outer
    i = 0
    for b, q in enumerate(d.q_lens):
        per = cdiv(q, s1_block)
        for u in range(max(lo - i, 0), min(hi - i, per * n2g)):
            k, j = divmod(u, per)
            r = grid.row(b, j)
            if r.blocks:
                yield RowTask(b, k // g_outer, (k % g_outer) * q + j * d.m_base, grid.row_rows(b, j), r.s2_start,
                              r.s2_end)
        i += per * n2g
