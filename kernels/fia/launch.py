"""Host side of the simulated FusedInferAttentionScore: from arrays and a tiling to kernel launches.

Model
-----
``run_fia`` is what the operator's host code does after tiling: it lays the
user's tensors out as the kernel reads them (views only, no copies: BSH is
viewed as BSND, NTD/NBSD are permuted inside the kernel; the one copy is a
key/value tensor list, see below), turns the tiling's
per-core row tasks and flash-decode tasks into the integer tables the
kernels read, normalises the mask (sparse modes 2/3/4 and pre/next tokens to
one left-up band per batch; an explicit mask to [Bm, S1, S2]; the tree mask of
sparse 9 to [B, W, W] trees and the right-down band), allocates the
output (zero-filled, as the chip initialises it; a zero-stride stand-in when the launches are only recorded for
the cost model, ``dsl.jit.output_array``) and the FD workspace, and
launches ``fia_attention`` (for an int8 or int4 key/value cache ``fia_antiquant``, the A2/A3 MSD kernel, or on
Ascend950 ``fia_dequant``, which dequantises K/V before the cube and also takes FP8, HiFloat8 and MXFP4 caches,
and with SUB runs the A2/A3 PromptFlashAttention route's KvAntiquant path;
``fia_fullquant`` for full int8 quantisation, ``fia_mla_quant`` for the A2/A3 MLA FA quant, ``fia_fullquant_gqa``
for Ascend950's FP8 full quant, ``fia_fullquant_mx`` for its MXFP8 full quant, ``fia_mla_fullquant`` for its MLA
full quant) on ``used_cores`` cores, then
``fia_fd_combine`` on the vector cores that the tiling's SplitFD gave work.

Key/value tensor lists (one tensor per batch) are laid into one GM arena and read per batch from its offset
(``kv_list``: how, and what is refused). A paged cache is passed as it is, BnBsH, BnNBsD or NZ (5-D, read in
place by the kernel, CACHE "NZ"; ``nz_cache`` checks it).

Invariants
----------
* The kernels see exactly the tiling's block sizes and core split: every
  ``RowTask`` becomes one row of the task table of its core, in order. The
  one exception is a variant with block skipping (``hooks`` with a
  mask_mod): each task's S2 run becomes its list of non-empty blocks and the
  tasks, still in order, are re-cut over the same cores by remaining work
  (``variants.block_map``).
* Tensors are passed without copies when they are contiguous (a tensor list is copied once, into its arena).
* A kernel whose tiles for op_host's M rows do not fit on chip takes each task's rows in passes of fewer rows
  (``row_passes``): the non-quant, dequant, MSD, FP8 GQA and MXFP8 kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...dsl.jit import output_array
from ...tiling.platform import get_platform
from ...tiling.result import FiaTiling
from ...sim.checking import note_host_initialised
from ...sim.storage import gather_bytes
from ..golden.dtypes import BFLOAT16, canonical_dtype
from ..golden.layouts import parse_layout
from ..errors import UnsupportedParameterError
from ..golden.masks import INT_MAX, MaskEngine
from ..golden.fia import LSE_EMPTY, empty_row_lse
from ..golden.hifloat8 import HIF8_TABLE, HIFLOAT8
from .kernel import fia_attention, fia_fd_combine
from .kernel_antiquant import fia_antiquant
from .kernel_dequant import fia_dequant
from .kernel_fullquant import fia_fullquant
from .kernel_fullquant_gqa import fia_fullquant_gqa
from .kernel_fullquant_mx import fia_fullquant_mx
from .kernel_mla_fullquant import fia_mla_fullquant
from .kernel_mla_quant import fia_mla_quant
from .mla_quant import MlaQuantSpec
from .kv_list import check_list_launch, list_arena, total_size
from .prefix_fd import prefix_fd_tiling
from .row_passes import TASK_COLUMNS, launch_in_row_passes, split_row_passes
from .tiling_memo import launch_plan

__all__ = ["run_fia", "FiaRun", "kernel_layout", "effective_lengths", "counts_own_kv", "msd_digit_count",
           "msd_constants", "PFA_MSD_DIGITS"]
_BAND_CLAMP = 1 << 30

#: user layout -> the kernel's view layout
_KERNEL_LAYOUT = {"BSH": "BSND", "BSND": "BSND", "BNSD": "BNSD", "TND": "TND", "NTD": "NTD", "NBSD": "NBSD"}


def kernel_layout(layout: str) -> str:
    return _KERNEL_LAYOUT[layout]


@dataclass
class FiaRun:
    """What one simulated call launched (for reports and tests)."""

    attention_cores: int
    combine_vectors: int
    tasks: int
    fd_tasks: int
    block_map: object = None     # variants.BlockMap when a mask_mod's blocks were skipped


def _as_heads(x: np.ndarray, layout: str, heads: int) -> np.ndarray:
    """A zero-copy view of a user tensor in the kernel's layout (BSH -> BSND)."""
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, heads, h // heads)
    return x


def run_fia(query, key, value, *, tiling: FiaTiling, scale: float, input_layout: str, num_heads: int,
            num_key_value_heads: int, atten_mask=None, sparse_mode: int = 0, pre_tokens: int = INT_MAX,
            next_tokens: int = INT_MAX, softmax_lse_flag: bool = False, out_dtype=None, legacy_route: bool = False,
            pse_shift=None, learnable_sink=None, block_table=None, query_padding_size=None, kv_padding_size=None,
            hooks=None, quant_scale2=None, quant_offset2=None, key_shared_prefix=None, value_shared_prefix=None,
            shared_prefix_len: int = 0, antiquant=None, inner_precise: int = 0, serial: bool = False,
            order: str = "program", fullquant=None, fullquant_gqa=None, fullquant_mx=None, plan_key=None):
    """Run the simulated kernels; returns (attention_out, softmax_lse or None, FiaRun).

    ``plan_key``: a hashable key that determines the tiling and every argument of this call but the contents of
    its arrays (``simulate_fia`` passes its call memo signature and the order for a plain call). The call's
    band, task tables and the attention kernel's specialisation are then kept per key (``tiling_memo.launch_plan``)
    and reused by the next call with that key: only its arrays, output and workspaces are new. It is ignored
    for a call with a paged cache, a tensor list, a shared prefix, left padding, hooks or a quantised path, whose
    host data the key need not determine.

    ``quant_scale2`` / ``quant_offset2``: post-quant to an int8 output, one value each (per tensor) or one per
    output channel (N1 * DV values, in (N1, DV) order). ``key/value_shared_prefix``: the system prefix in the
    query's layout with batch 1, of which every batch attends to the first ``shared_prefix_len`` positions
    before its own KV (the tiling's KV lengths include them, except IFATiling's and the arch35 catch-all's,
    which count the own KV: the launch adds them there).

    ``hooks``: a ``variants.Hooks`` (score_mod / mask_mod compiled into the kernel's V1, block skipping by the
    host's block map); None runs the operator as it is.

    ``antiquant``: a ``golden.antiquant.AntiquantSpec`` for an int8 (or int4, unpacked to int8 values: its
    ``int4``) key/value cache: the call runs ``fia_antiquant`` (MSD with ``msd_digit_count`` digits) instead of
    ``fia_attention``; on arch35 ``fia_dequant``, which also takes an FP8 cache (as it is: ``float8_e4m3fn``
    codes), a HiFloat8 (uint8 codes, the spec's ``cache``) or an FP4 one (widened on the host,
    ``float_cache_widened``).

    ``fullquant``: a ``fullquant.FullQuantSpec`` for int8 query, key and value: the call runs ``fia_fullquant``
    (the output is fp16 unless post-quantised); an ``mla_quant.MlaQuantSpec`` (MLA FA quant on A2/A3, the
    int8 query with its rope and scales) runs ``fia_mla_quant`` (a bf16 output), on an arch35 tiling (Ascend950's
    MLA full quant, ``mla_fullquant``; the FP8 query and cache widened to fp16 as ``fullquant_gqa``'s, int8 ones
    as they are, the kernel's QUANT) ``fia_mla_fullquant`` (a bf16 output). ``fullquant_gqa``: a
    ``fullquant_gqa.FullQuantGqaSpec`` for Ascend950's FP8 full quant (FP8 query, paged key/value): the call runs
    ``fia_fullquant_gqa`` on the FP8 tensors widened to fp16 (``float_cache_widened``), its output ``out_dtype``
    (fp16 or bf16). ``fullquant_mx``: a ``fullquant_mx.FullQuantMxSpec`` for Ascend950's MXFP8 full quant: the
    call runs ``fia_fullquant_mx`` on the spec's fp32 tensors (FP8 values times their E8M0 group scales), its
    output ``out_dtype``."""
    lay = parse_layout(input_layout)
    plain = (block_table is None and not isinstance(key, (list, tuple)) and key_shared_prefix is None
             and query_padding_size is None and kv_padding_size is None and hooks is None and antiquant is None
             and fullquant is None and fullquant_gqa is None and fullquant_mx is None)
    plan = launch_plan(plan_key) if plan_key is not None and plain else None
    n1, n2 = num_heads, (num_key_value_heads or num_heads)
    g = n1 // n2
    q = _as_heads(query, lay.qkv, n1)
    d = q.shape[-1]
    list_off = None
    if block_table is not None:   # a paged cache: (blocks, block_size, N2*D), (blocks, N2, block_size, D) or NZ
        cache = {3: "BnBsH", 4: "BnNBsD", 5: "NZ"}[key.ndim]
        k, v = key, value
        dv = value.shape[-1] // n2 if cache == "BnBsH" else (value.shape[2] * value.shape[4] if cache == "NZ"
                                                              else value.shape[-1])
        bt = np.ascontiguousarray(block_table)
    elif isinstance(key, (list, tuple)):   # a tensor list: one (1, S_b, ...) tensor per batch (kv_list)
        check_list_launch(lay.token, lay.qkv, query_padding_size, kv_padding_size)
        cache = "list"
        k, v, list_off = list_arena(key, value, lambda t: _as_heads(t, lay.qkv, n2), 2 if lay.qkv == "BNSD" else 1)
        dv = v.shape[-1]
        bt = np.zeros((1, 1), np.int32)
    else:
        cache = "dense"
        k = _as_heads(key, lay.qkv, n2)
        v = _as_heads(value, lay.qkv, n2)
        dv = v.shape[-1]
        bt = np.zeros((1, 1), np.int32)
    b = tiling.batch
    qlen, kvlen = effective_lengths(tiling)
    prefix = key_shared_prefix is not None
    steps, s2_tile = {}, tiling.s2_base   # block sizes other than the tiling's (prefix_fd), the kernel's S2 tile
    if prefix:
        if block_table is not None or lay.token or query_padding_size is not None or kv_padding_size is not None:
            raise UnsupportedParameterError("key_shared_prefix", f"tensor {tuple(key_shared_prefix.shape)}",
                                            "a shared prefix is simulated with dense BSH/BSND/BNSD key/value and "
                                            "no left padding")
        kp = _as_heads(key_shared_prefix, lay.qkv, n2)
        vp = _as_heads(value_shared_prefix, lay.qkv, n2)
        if tiling.route == "ifa":
            # IFATiling counts each batch's own KV; its kernel runs the prefix as a pass of its own before it,
            # which the kernel here does as the first blocks of every row (the rows span the prefix as well), or
            # with flash decode as piece 0 of every split row (prefix_fd)
            if tiling.fd_tasks:
                tiling, steps, pstep = prefix_fd_tiling(tiling, int(shared_prefix_len),
                                                        kp.shape[2] if lay.qkv == "BNSD" else kp.shape[1], kvlen)
                s2_tile = max(s2_tile, pstep)
        if counts_own_kv(tiling):   # the row tasks' S2 blocks span the prefix and the own KV
            kvlen = kvlen + int(shared_prefix_len)
    else:
        kp, vp = np.zeros((1, 1, 1, 1), query.dtype), np.zeros((1, 1, 1, 1), query.dtype)
    skip = np.zeros(b, dtype=bool)   # batches the kernel does not compute (left padding overflow)
    if lay.token:  # batches sit one after the other along T: the row/KV starts are the cumulative offsets
        qoff = np.concatenate([[0], np.cumsum(qlen)[:-1]]).astype(np.int64)
        kvoff = np.concatenate([[0], np.cumsum(kvlen)[:-1]]).astype(np.int64)
        if block_table is not None:
            kvoff[:] = 0
    else:
        qoff = np.zeros(b, np.int64)
        kvoff = np.zeros(b, np.int64)
        if query_padding_size is not None or kv_padding_size is not None:
            qoff, kvoff, qlen, kvlen, skip = _left_padding(q, k, lay.qkv, qlen, kvlen, query_padding_size,
                                                           kv_padding_size)
        if list_off is not None:   # each batch's tensor starts at its offset in the list's arena
            kvoff = kvoff + list_off

    # output in the output layout, zero-filled as the chip's init does
    out_shape = _out_shape(query.shape, lay.qkv, lay.out, n1, dv)
    postq, qs2, qo2 = _post_quant_args(quant_scale2, quant_offset2, n1, dv)
    if postq:
        out_dtype = np.int8
    elif isinstance(fullquant, MlaQuantSpec):
        out_dtype = BFLOAT16
    elif fullquant is not None:
        out_dtype = np.float16
    out = output_array(out_shape, out_dtype if out_dtype is not None else query.dtype)
    out_k = _as_heads(out, lay.out, n1)
    # the lse rows start at the route's init value (the legacy decode route's -3.4e38 for rows it does not compute,
    # e.g. a batch without KV); a row the kernels compute without a visible key (fully masked) gets +inf, the FIA
    # kernels' AdjustSoftMaxRes value, on every route (the kernels' EMPTY_LSE)
    empty_lse = empty_row_lse(legacy_decode=legacy_route, kv_empty=total_size(key) == 0 or total_size(value) == 0)
    if lay.token:
        lse = output_array((query.shape[0] if lay.qkv == "TND" else query.shape[1], n1, 1), np.float32, empty_lse)
    else:
        s1_full = q.shape[2] if lay.qkv == "BNSD" else q.shape[1]
        lse = output_array((b, n1, s1_full, 1), np.float32, empty_lse)

    # rows no batch computes (past a batch's actual query length, left padding, a batch skipped or with no KV)
    # keep the init's fill, as the chip's output init leaves them: checking mode judges those outputs for double
    # writes, not holes
    rows = (query.shape[0] if lay.qkv == "TND" else query.shape[1]) if lay.token else \
        b * (q.shape[2] if lay.qkv == "BNSD" else q.shape[1])
    if int(np.sum(qlen)) < rows or skip.any() or (np.asarray(kvlen) == 0).any():
        note_host_initialised(out, lse)

    # masks: one left-up band per batch and/or an explicit [Bm, S1, S2] mask
    decode = (not lay.token) and max(tiling.q_seqlens or [0]) <= 1 and \
        (q.shape[2] if lay.qkv == "BNSD" else q.shape[1]) == 1
    try:
        engine = MaskEngine(sparse_mode=sparse_mode, atten_mask=atten_mask, pre_tokens=pre_tokens,
                            next_tokens=next_tokens, batch=b, decode=decode, legacy_decode=legacy_route,
                            token_layout=lay.token,
                            left_padding=query_padding_size is not None or kv_padding_size is not None,
                            q_lengths=qlen)
    except ValueError as exc:   # a mask the tiling accepts but whose reading the simulator does not model
        raise UnsupportedParameterError("atten_mask", atten_mask, f"{exc} (sparse_mode {sparse_mode}, "
                                        f"{'decode' if decode else 'prefill'}): this mask reading is not "
                                        "simulated") from None
    use_mask = "tree" if engine.mode == "tree" else engine.mode in ("full", "default")   # the kernel's MASK
    mask = np.ascontiguousarray(engine.tree if use_mask == "tree" else engine.user) if use_mask else \
        np.zeros((1, 1, 1), np.uint8)
    if mask.dtype == np.bool_:
        mask = mask.view(np.uint8)
    if use_mask == "tree" and antiquant is not None:
        raise UnsupportedParameterError("sparse_mode", 9, "the tree mask with KV antiquant is not simulated")

    tables = plan.get("tables") if plan is not None else None
    if tables is None:
        band, pre, nxt = _band(engine, qlen, kvlen, pre_tokens, next_tokens)
        tables = (band, pre, nxt, *_task_tables(tiling, qlen, kvlen, skip, prefix, steps, band, pre, nxt, g,
                                                 sparse_mode, hooks))
    band, pre, nxt, cores, rows, ptr, tasks, m_cap, hook_args, block_map, height = tables
    nslots = sum(ft.splits for ft in tiling.fd_tasks)
    ws_o = output_array((max(1, nslots), m_cap, dv), np.float32)
    ws_ml = output_array((max(1, nslots), 2, m_cap), np.float32)
    p_dtype = _p_dtype(query.dtype)
    lse_arg = lse
    pse = pse_shift if pse_shift is not None else np.zeros((1, 1, 1, 1), query.dtype)
    sink = np.ascontiguousarray(learnable_sink).reshape(-1) if learnable_sink is not None else \
        np.zeros(n1, np.float32)

    ncores = len(cores)
    plat = kernel_platform(tiling)
    # the vector dequantises K/V to the query's dtype: Ascend950's kernel, and A2/A3 PromptFlashAttention's
    # KvAntiquant path (the spec's rounding: its blocks staged in sub-blocks through the core's GM workspaces)
    pfa_dequant = antiquant is not None and tiling.arch != "arch35" and antiquant.rounding is not None
    if rows and antiquant is not None and (tiling.arch == "arch35" or pfa_dequant):
        _check_dequant_call(antiquant, lay.token, learnable_sink, hooks, cache)
        # an FP8 cache reaches the kernel as it is (the language reads float8_e4m3fn); HiF8 and FP4 widened
        widened = [x if canonical_dtype(x.dtype) == "float8_e4m3fn" else
                   float_cache_widened(x, q.dtype, antiquant.cache) for x in (k, v, kp, vp)]
        staged = [output_array((ncores, s2_tile if prefix or pfa_dequant else 1, c), q.dtype) for c in (d, dv)]

        def attend_dequant(tab, tab_ptr, height):   # in row passes when op_host's M rows do not fit on chip
            fia_dequant.on(plat)[ncores](
                q, *widened[:2], out_k, lse_arg, mask, pse, bt, ws_o, ws_ml, tab, tab_ptr, qlen, kvlen, qoff, kvoff,
                pre, nxt, *_antiquant_tables(antiquant), qs2, qo2, *staged, *widened[2:],
                int(shared_prefix_len) if prefix else 0,
                _own_params_start(antiquant, k, lay.qkv) if prefix else 0, np.float32(scale), CACHE=cache,
                LAYOUT=kernel_layout(lay.qkv), OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, G=g,
                M=height, PSE=pse_shift is not None, PSE_ONE_ROW=pse_shift is not None and pse.shape[2] == 1,
                S2=s2_tile, D=d, DV=dv, BAND=band, MASK=use_mask, LSE=bool(softmax_lse_flag),
                FD=bool(tiling.fd_tasks), P_DTYPE=p_dtype, EMPTY_LSE=LSE_EMPTY, PER_TOKEN=antiquant.per_token,
                PER_HEAD=antiquant.per_token and antiquant.key_scale.shape[1] > 1, PAGED_PARAMS=antiquant.paged,
                OFFSET=antiquant.has_offset, **_group_consts(antiquant), **_post_quant_consts(postq, quant_offset2),
                **({"PREFIX": True} if prefix else {}), **({"SUB": PFA_DEQUANT_ROWS} if pfa_dequant else {}),
                serial=serial, order=order)
        launch_in_row_passes(attend_dequant, tasks, ptr, m_cap)
    elif rows and antiquant is not None:
        _check_antiquant_call(antiquant, lay.token, learnable_sink, hooks)
        # the A2/A3 MSD kernels: IFATiling's decode template, or PromptFlashAttention's MSD path (its own
        # constants and digit count); op_host's M rows in row passes when they do not fit on chip
        pfa_msd = tiling.route == "pfa"
        iters = PFA_MSD_DIGITS if pfa_msd else msd_digit_count(inner_precise, antiquant.int4)

        def attend_msd(tab, tab_ptr, height):
            fia_antiquant.on(plat)[ncores](
                q, k, v, out_k, lse_arg, mask, pse, bt, ws_o, ws_ml, tab, tab_ptr, qlen, kvlen, qoff, kvoff, pre,
                nxt, *_antiquant_tables(antiquant), qs2, qo2, *_msd_workspaces(ncores, iters * height, d, s2_tile, dv),
                kp, vp, int(shared_prefix_len) if prefix else 0, np.float32(scale), CACHE=cache,
                LAYOUT=kernel_layout(lay.qkv), OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, G=g,
                M=height, PSE=pse_shift is not None, PSE_ONE_ROW=pse_shift is not None and pse.shape[2] == 1,
                S2=s2_tile, D=d, DV=dv, BAND=band, MASK=use_mask, LSE=bool(softmax_lse_flag),
                FD=bool(tiling.fd_tasks), EMPTY_LSE=LSE_EMPTY, PER_TOKEN=antiquant.per_token,
                PER_HEAD=antiquant.per_token and antiquant.key_scale.shape[1] > 1, PAGED_PARAMS=antiquant.paged,
                OFFSET=antiquant.has_offset, ITER=iters, MSD=msd_constants(antiquant.int4, pfa=pfa_msd),
                **_post_quant_consts(postq, quant_offset2), **({"PREFIX": True} if prefix else {}), serial=serial,
                order=order)
        launch_in_row_passes(attend_msd, tasks, ptr, m_cap)
    elif rows and isinstance(fullquant, MlaQuantSpec) and tiling.arch != "arch35":
        fia_mla_quant.on(plat)[ncores](
            q, _as_heads(fullquant.query_rope, lay.qkv, n1), fullquant.query_scale, k, fullquant.key_rope, v, out_k,
            lse_arg, mask, bt, ws_o, ws_ml, tasks, ptr, qlen, kvlen, qoff, kvoff, pre, nxt, qs2, qo2,
            fullquant.key_scale, fullquant.scale, fullquant.value_scale, LAYOUT=kernel_layout(lay.qkv),
            OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, TOKEN=lay.token, G=g, M=m_cap, S2=s2_tile, D=d,
            DR=fullquant.query_rope.shape[-1] // (n1 if lay.qkv == "BSH" else 1), DV=dv, BAND=band, MASK=use_mask,
            LSE=bool(softmax_lse_flag), FD=bool(tiling.fd_tasks), EMPTY_LSE=LSE_EMPTY, serial=serial,
            order=order)
    elif rows and isinstance(fullquant, MlaQuantSpec) and tiling.arch == "arch35":
        _refuse_hooks(hooks, "MLA full quant")
        fia_mla_fullquant.on(plat)[ncores](
            float_cache_widened(q, np.float16), _as_heads(fullquant.query_rope, lay.qkv, n1), fullquant.query_scale,
            float_cache_widened(k, np.float16),
            fullquant.key_rope if cache != "dense" else _as_heads(fullquant.key_rope, lay.qkv, n2), out_k, lse_arg,
            mask, bt, tasks, ptr, qlen, kvlen, qoff, kvoff, pre, nxt, fullquant.key_scale, fullquant.scale,
            fullquant.value_scale, QUANT="int8" if canonical_dtype(q.dtype) == "int8" else "fp8", CACHE=cache,
            LAYOUT=kernel_layout(lay.qkv), OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order,
            TOKEN=lay.token, G=g, M=m_cap, S2=tiling.s2_base, D=d,
            DR=fullquant.query_rope.shape[-1] // (n1 if lay.qkv == "BSH" else 1), DV=dv, BAND=band, MASK=use_mask,
            LSE=bool(softmax_lse_flag), EMPTY_LSE=LSE_EMPTY, serial=serial, order=order)
    elif rows and fullquant_mx is not None:
        _refuse_hooks(hooks, "MXFP8")
        widened = (_as_heads(fullquant_mx.query, lay.qkv, n1), *(x if cache != "dense" else
                                                                  _as_heads(x, lay.qkv, n2)
                                                                  for x in (fullquant_mx.key, fullquant_mx.value)))
        mx_cache = "BnNBsD" if cache == "NZ" else cache   # the host turned a PA_NZ cache into BnNBsD

        rope = fullquant_mx.query_rope is not None
        ropes = (fullquant_mx.query_rope, fullquant_mx.key_rope) if rope else (np.zeros((1, 1, 1), BFLOAT16),) * 2

        def attend_mx(tab, tab_ptr, height):   # as the FP8 GQA kernel: row passes of 64
            fia_fullquant_mx.on(plat)[ncores](
                *widened, *ropes, out_k, lse_arg, mask, bt, ws_o, ws_ml, tab, tab_ptr, qlen, kvlen, qoff, kvoff, pre,
                nxt, np.float32(scale), fullquant_mx.ln_p, CACHE=mx_cache, LAYOUT=kernel_layout(lay.qkv),
                OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, TOKEN=lay.token, G=g, M=height,
                S2=tiling.s2_base, D=d, DV=dv, DR=ropes[0].shape[-1] if rope else 0, BAND=band, MASK=use_mask,
                LSE=bool(softmax_lse_flag), FD=bool(tiling.fd_tasks), ROPE=rope, EMPTY_LSE=LSE_EMPTY,
                serial=serial, order=order)
        launch_in_row_passes(attend_mx, tasks, ptr, m_cap)
    elif rows and fullquant_gqa is not None:
        _refuse_hooks(hooks, "FP8 GQA")
        f16 = [float_cache_widened(x, np.float16) for x in (q, k, v)]

        def attend_fp8(tab, tab_ptr, height):   # the chip's two vector cores take 64 of the 128 rows each
            fia_fullquant_gqa.on(plat)[ncores](
                *f16, out_k, lse_arg, mask, bt, tab, tab_ptr, qlen, kvlen, qoff, kvoff, pre, nxt,
                fullquant_gqa.deq_q, fullquant_gqa.deq_k, fullquant_gqa.deq_v, np.float32(scale), fullquant_gqa.ln_p,
                CACHE=cache, LAYOUT=kernel_layout(lay.qkv), OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order,
                TOKEN=lay.token, G=g, M=height, S2=tiling.s2_base, D=d, DV=dv, BAND=band, MASK=use_mask,
                LSE=bool(softmax_lse_flag), EMPTY_LSE=LSE_EMPTY, serial=serial, order=order)
        launch_in_row_passes(attend_fp8, tasks, ptr, m_cap)
    elif rows and fullquant is not None:
        fia_fullquant.on(plat)[ncores](
            q, k, v, out_k, lse_arg, mask, pse, ws_o, ws_ml, tasks, ptr, qlen, kvlen, qoff, kvoff, pre, nxt, qs2, qo2,
            fullquant.scale_half, fullquant.deq1, fullquant.qs1_half, fullquant.deq2, LAYOUT=kernel_layout(lay.qkv),
            OUT_LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, G=g, M=m_cap, PSE=pse_shift is not None,
            PSE_ONE_ROW=pse_shift is not None and pse.shape[2] == 1, S2=tiling.s2_base, D=d, DV=dv, BAND=band,
            MASK=use_mask, LSE=bool(softmax_lse_flag), EMPTY_LSE=LSE_EMPTY,
            **_post_quant_consts(postq, quant_offset2), serial=serial, order=order)
    elif rows:
        def attend(tab, tab_ptr, height):
            gm_acc = gm_accumulator(plat, height, dv)
            ws_acc = output_array((ncores, height, dv) if gm_acc else (1, 1, 1), np.float32)
            args = (q, k, v, out_k, lse_arg, mask, pse, sink, bt, ws_o, ws_ml, ws_acc, tab, tab_ptr, qlen, kvlen, qoff,
                    kvoff, pre, nxt, *hook_args["tensors"], qs2, qo2, kp, vp, int(shared_prefix_len) if prefix else 0,
                    np.float32(scale))
            compiled = plan.get(("attention", height)) if plan is not None else None
            if compiled is not None:   # this plan's specialisation: the same constexprs and argument types
                return compiled.launch(ncores, [a for a in args if a is not None], serial=serial, order=order)
            kernel = fia_attention.on(plat)
            kernel[ncores]   # the grid's checks
            compiled, runtime = kernel.specialise(args, dict(
                CACHE=cache, LAYOUT=kernel_layout(lay.qkv), OUT_LAYOUT=kernel_layout(lay.out),
                ORDER=tiling.m_order, TOKEN=lay.token, G=g, M=height, PSE=pse_shift is not None,
                PSE_ONE_ROW=pse_shift is not None and pse.shape[2] == 1, SINK=learnable_sink is not None,
                S2=s2_tile, D=d, DV=dv, BAND=band, MASK=use_mask, LSE=bool(softmax_lse_flag),
                FD=bool(tiling.fd_tasks), P_DTYPE=p_dtype, EMPTY_LSE=LSE_EMPTY, **hook_args["consts"],
                **_post_quant_consts(postq, quant_offset2), **({"PREFIX": True} if prefix else {}),
                **({"GM_ACC": True} if gm_acc else {})))
            compiled.launch(ncores, runtime, serial=serial, order=order)
            if plan is not None and _reusable(compiled, order, args, runtime):
                plan[("attention", height)] = compiled
        launch_in_row_passes(attend, tasks, ptr, height)
    nvec = 0
    if tiling.fd_tasks:
        fd_tab = np.array([(ft.b, ft.n2, ft.m_start, ft.m_rows, ft.splits, ft.workspace_slot)
                           for ft in tiling.fd_tasks], dtype=np.int64)
        vw = [w for w in tiling.fd_vector_work if w.pieces]
        work = np.array([p for w in vw for p in w.pieces], dtype=np.int64).reshape(-1, 3)
        wptr = np.zeros(len(vw) + 1, dtype=np.int64)
        wptr[1:] = np.cumsum([len(w.pieces) for w in vw])
        r_cap = tiling.m_fd_base
        nvec = len(vw)
        fia_fd_combine.on(plat)[nvec](out_k, lse_arg, sink, ws_o, ws_ml, fd_tab, work, wptr, qlen, qoff,
                             qs2, qo2, LAYOUT=kernel_layout(lay.out), ORDER=tiling.m_order, TOKEN=lay.token, G=g,
                             R=r_cap, DV=dv, LSE=bool(softmax_lse_flag), SINK=learnable_sink is not None,
                             EMPTY_LSE=LSE_EMPTY, **_post_quant_consts(postq, quant_offset2),
                             **_combine_rounding(fullquant_mx, out.dtype), serial=serial, order=order)
    if plan is not None and any(isinstance(tag, tuple) for tag in plan):   # its launches could reuse the tables
        plan["tables"] = tables
    run = FiaRun(ncores, nvec, len(rows), len(tiling.fd_tasks), block_map)
    return out, (lse if softmax_lse_flag else None), run


#: the rows A2/A3 PromptFlashAttention's KvAntiquant path dequantises at a time (``kernel_dequant.pfa_step``'s SUB).
#: op_host sizes its kvAntiquantSInnerSize by a UB-fit loop cvtile does not mirror; the values do not depend on it
#: (the dequantisation is elementwise), only the work per sub-block does
PFA_DEQUANT_ROWS = 128


def _combine_rounding(fullquant_mx, out_dtype) -> dict:
    """The flash-decode combine's output rounding: the Ascend950 full-quant combine
    (``FiaBlockVecFlashDecodeFullQuant``) casts an fp16 output half away from zero (CAST_ROUND) and a bf16 one to
    even; the other combines round to even (the kernel's default)."""
    if fullquant_mx is not None and np.dtype(out_dtype) == np.float16:
        return {"ROUND": "round"}
    return {}


#: the kernel parameters ``run_fia`` hands from a launch plan's tables to every call with its key (none of them
#: may be one the kernel stores into)
_PLAN_TABLES = frozenset(("tasks", "task_ptr", "pre", "nxt"))


def _reusable(compiled, order: str, args: tuple, runtime: list) -> bool:
    """Whether a launch plan may keep ``compiled`` (the attention kernel's specialisation of ``args``) and launch
    it with ``args`` of a later call directly: its runtime arguments are ``args`` without the Nones, in order,
    and it stores into none of the plan's shared tables."""
    return (len(runtime) == sum(a is not None for a in args)
            and all(x is y for x, y in zip(runtime, (a for a in args if a is not None)))
            and _PLAN_TABLES.isdisjoint(compiled.runner("numba", order).stored_params))


def _task_tables(tiling: FiaTiling, qlen, kvlen, skip, prefix: bool, steps: dict, band: bool, pre, nxt, g: int,
                 sparse_mode, hooks) -> tuple:
    """``(cores, rows, ptr, tasks, m_cap, hook_args, block_map, height)``: each core's computed row tasks, the
    task table the kernels read and its per-core pointers, the tile rows, the hooks' arguments (``_hook_arguments``)
    and the row height of the launch. A batch the chip skips, or whose KV left-padding block overflows, computes
    nothing: its rows keep the zero output and the initial lse."""
    legacy = bool(tiling.extras.get("legacy_ifa"))

    def computed(t) -> bool:   # (the legacy decode route leaves a batch without KV at the lse's init value)
        return not skip[t.b] and (kvlen[t.b] > 0 or (t.s2_lo >= t.s2_hi and not legacy))

    cores = [tuple(t for t in c.tasks if computed(t)) for c in tiling.cores]
    rows = [t for c in cores for t in c]
    ptr = np.zeros(len(cores) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(c) for c in cores])
    slots = {i: ft.workspace_slot for i, ft in enumerate(tiling.fd_tasks)}
    tasks = np.zeros((max(1, len(rows)), TASK_COLUMNS), dtype=np.int64)
    for i, t in enumerate(rows):
        slot = slots[t.fd_task] + t.fd_piece if t.fd_task >= 0 else -1
        hi = -(-int(kvlen[t.b]) // tiling.s2_base) if prefix and tiling.route == "ifa" and t.kv_start < 0 \
            else t.s2_hi
        # the blocks' first KV position, the end they stop at (a legacy IFA FD part starts anywhere) and size
        span = (t.kv_start, t.kv_end) if t.kv_start >= 0 else (0, int(kvlen[t.b]))
        tasks[i] = (t.b, t.n2, t.m_start, t.m_rows, t.s2_lo, hi, slot, *span, steps.get(t, tiling.s2_base), 0)
    if band:
        _check_band_rows_covered(rows, tiling, qlen, kvlen, pre, nxt, g, sparse_mode)
    m_cap = m_capacity(tiling, rows)
    hook_args, block_map, tasks, ptr, height = _hook_arguments(hooks, rows, tasks, ptr, tiling, qlen, kvlen, g,
                                                               m_cap)
    return cores, rows, ptr, tasks, m_cap, hook_args, block_map, height


def kernel_platform(tiling: FiaTiling):
    """The platform the call's kernels compile for: the tiling's, with the plan search's preload depth when it
    overrides the platform's (``tile_fia``; a platform record of its own name, so its kernels cache apart)."""
    plat = get_platform(tiling.platform)
    depth = tiling.extras.get("preload_depth")
    if depth is None or depth == plat.preload_depth:
        return plat
    return replace(plat, name=f"{plat.name}+preload{depth}", preload_depth=depth)


def msd_digit_count(inner_precise: int, int4: bool = False) -> int:
    """The MSD digits of IFATiling's antiquant kernel (its ``msdIterNum``): 4 for an int4 cache; for int8, 3 with
    inner_precise 0 (high precision), else 2. PromptFlashAttention's MSD path takes ``PFA_MSD_DIGITS``."""
    if int4:
        return 4
    return 3 if int(inner_precise) == 0 else 2


#: the MSD digits of A2/A3 PromptFlashAttention's MSD path (its ``msdIterNum``: 2 whatever inner_precise says,
#: the kernel's MSD_ON template)
PFA_MSD_DIGITS = 2


def msd_constants(int4: bool, pfa: bool = False) -> tuple:
    """The antiquant kernel's MSD constants ``(R, E, W1, W2, W3, 1/R)`` as the chip holds them in fp32: the first
    digit's range R and the digit base E (int8: 127 and 254; int4: 7.49 and 14.98, the IFA kernel's
    ``antiqCoeff1`` / ``antiquantPreExpandCoeff``; ``pfa``, PromptFlashAttention's MSD path: 127.49 and 254.98,
    its ``msdAntiqCoeff1`` / ``msdAntiqExpandCoeff``), the weights of digits 1-3 (W1 = 1/E, then each the
    previous divided by E, every step an fp32 division as the kernel's scalar loop does it) and 1/R (an fp32
    division). Plain Python floats, each exactly an fp32 value."""
    f = np.float32
    if pfa and int4:
        raise ValueError("PromptFlashAttention's MSD path takes an int8 cache only")
    r, e = (f(7.49), f(14.98)) if int4 else (f(127.49), f(254.98)) if pfa else (f(127.0), f(254.0))
    w1 = f(1.0) / e
    w2 = w1 / e
    w3 = w2 / e
    return tuple(float(x) for x in (r, e, w1, w2, w3, f(1.0) / r))


def _msd_workspaces(cores: int, rows: int, d: int, s2: int, dv: int) -> tuple:
    """Each core's GM workspaces of the MSD hand-offs: the query's and P's stacked int8 digits, and the int32
    products of the two matmuls (the chip's queryPreProcessResGm, vec1ResGm, mm1ResGm, mm2ResGm)."""
    return (output_array((cores, rows, d), np.int8), output_array((cores, rows, s2), np.int8),
            output_array((cores, rows, s2), np.int32), output_array((cores, rows, dv), np.int32))


def _antiquant_tables(spec) -> tuple:
    """(key scale, key offset, value scale, value offset) kernel arguments; an absent offset is a placeholder."""
    def table(x, like):
        return np.ascontiguousarray(x) if x is not None else np.zeros((1,) * like.ndim, np.float32)
    return (table(spec.key_scale, spec.key_scale), table(spec.key_offset, spec.key_scale),
            table(spec.value_scale, spec.value_scale), table(spec.value_offset, spec.value_scale))


def _check_antiquant_call(spec, token, sink, hooks):
    """What the antiquant kernel does not model, refused naming the parameter."""
    refused = (("input_layout", token, "the TND/NTD layouts"),
               ("learnable_sink", sink is not None, "a learnable sink"),
               ("hooks", hooks is not None and hooks.active, "a score_mod / mask_mod"))
    for name, given, what in refused:
        if given:
            raise UnsupportedParameterError(name, "given", f"KV antiquant (mode {spec.mode}) with {what} is not "
                                            "simulated: the antiquant kernel takes BSH/BSND/BNSD key/value, dense "
                                            "or paged")


def float_cache_widened(x: np.ndarray, dtype, cache: str | None = None) -> np.ndarray:
    """An FP8 (float8_e4m3fn) cache as the query's dtype, an FP4 (float4_e2m1) one as bf16, a HiFloat8 one (uint8
    codes, ``cache`` "hifloat8") as the query's dtype: the dequant's first step (exact: every e4m3fn and every
    HiF8 value is an fp16 and a bf16 value, every e2m1 one a bf16 value; the 950 casts FP4 to bf16 whatever the
    query's dtype, and HiF8 as its int8 path does, straight to fp16 or through fp16 to bf16); any other cache
    unchanged. The simulated kernel then reads 16-bit K/V where the chip reads 8- or 4-bit ones (the values, and
    so the results, are the same). Widened through a table of the 8-bit patterns (``storage.gather_bytes``; the
    HiF8 one is ``golden.hifloat8.HIF8_TABLE``, which the golden reads too; ml_dtypes' element-wise cast is about
    twenty times slower)."""
    kind = canonical_dtype(x.dtype)
    if cache == HIFLOAT8 and kind == "uint8":
        table = HIF8_TABLE.astype(dtype)
    elif kind in ("float8_e4m3fn", "float4_e2m1"):
        table = np.arange(256, dtype=np.uint8).view(x.dtype).astype(dtype if kind == "float8_e4m3fn" else BFLOAT16)
    else:
        return x
    return gather_bytes(table, x).reshape(x.shape)


def _check_dequant_call(spec, token, sink, hooks, cache: str):
    """What the Ascend950 dequant kernel does not model (beyond the MSD kernel's refusals), refused by name."""
    _check_antiquant_call(spec, token, sink, hooks)
    if cache not in ("dense", "list", "BnBsH", "BnNBsD", "NZ"):
        raise UnsupportedParameterError("key", "given", f"KV antiquant on Ascend950 with a {cache} key/value cache "
                                        "is not simulated: its dequant kernel takes dense, tensor-list or "
                                        "BnBsH/BnNBsD/NZ paged key/value")


def _group_consts(spec) -> dict:
    """GROUP (mode 6) and GROUP_NZ (its scales in an NZ cache's order) constexprs of the dequant kernel."""
    if not spec.per_group:
        return {}
    return {"GROUP": True, **({"GROUP_NZ": True} if spec.group_nz else {})}


def _own_params_start(spec, k: np.ndarray, layout: str) -> int:
    """Where the per-token parameters of a batch's own KV start with a shared prefix on Ascend950: S' - S of the
    key (``kernel_dequant``: the prefix's positions read [0, plen), the own KV's the table's last S of key
    entries); 0 for the other kinds, which read no position."""
    if not spec.per_token:
        return 0
    return int(spec.key_scale.shape[-1]) - int(k.shape[2] if layout == "BNSD" else k.shape[1])


def _hook_arguments(hooks, rows, tasks: np.ndarray, ptr: np.ndarray, tiling: FiaTiling, qlen, kvlen, group: int,
                    m_cap: int):
    """The kernel's hook arguments (captures ``mod0..mod3``, the ``blocks`` table) and constexprs, and the task
    table the kernel runs. With block skipping the row tasks are classified by ``plan_block_map`` (whole, or
    in the two row passes of ``split_row_passes`` it chooses), the tasks' [j0, j1) become runs of the block
    table and the tasks are re-balanced over the cores by their live columns. Returns ``(args, BlockMap |
    None, tasks, ptr, row height)``."""
    none = {"tensors": [None] * 5, "consts": {}}
    if hooks is None or not hooks.active:
        return none, None, tasks, ptr, m_cap
    from ..variants.block_map import balance_tasks, plan_block_map

    caps = [np.ascontiguousarray(c) for c in hooks.captures] + [None] * (4 - len(hooks.captures))
    consts = {"SCORE_MOD": hooks.score_mod, "MASK_MOD": hooks.mask_mod, "NCAP": len(hooks.captures)}
    if not hooks.sparse or not rows:
        return {"tensors": caps + [None], "consts": consts}, None, tasks, ptr, m_cap
    if any(t.kv_start >= 0 for t in rows):
        raise UnsupportedParameterError("hooks", "a mask_mod with block skipping", "the block map classifies blocks "
                                        "from KV position 0; a legacy IFA flash-decode part starting mid-block is "
                                        "not classified")

    bmap = plan_block_map(rows, hooks, m_cap=m_cap, s2_base=tiling.s2_base, qlen=qlen, kvlen=kvlen, group=group,
                          order=tiling.m_order)
    if bmap.height < m_cap:
        tasks, ptr = split_row_passes(tasks, ptr, bmap.height)
    tasks = tasks.copy()
    blocks, bptr = bmap.table()
    tasks[:len(bptr) - 1, 4] = bptr[:-1]
    tasks[:len(bptr) - 1, 5] = bptr[1:]
    live = np.concatenate([[0], np.cumsum(blocks[:, 3])])
    weights = (live[bptr[1:]] - live[bptr[:-1]]) / tiling.s2_base + 1.0    # live blocks' worth, plus the epilogue
    ptr = np.array(balance_tasks(weights, len(ptr) - 1), dtype=np.int64)
    consts["SPARSE"] = True
    return {"tensors": caps + [blocks], "consts": consts}, bmap, tasks, ptr, bmap.height


def _post_quant_args(scale, offset, n1: int, dv: int):
    """(POSTQ, scale, offset) kernel arguments of post-quant: POSTQ 0 none; 1 per tensor (the (1,) tensors); 2
    per channel, the parameters viewed (no copy) as (1, N1, 1, DV). An absent offset is a placeholder."""
    if scale is None:
        return 0, np.zeros(1, np.float32), np.zeros(1, np.float32)
    mode = 1 if scale.size == 1 else 2
    shape = (1,) if mode == 1 else (1, n1, 1, dv)
    qs = np.ascontiguousarray(scale).reshape(shape)
    qo = np.ascontiguousarray(offset).reshape(shape) if offset is not None else np.zeros(shape, qs.dtype)
    return mode, qs, qo


def _post_quant_consts(postq: int, offset) -> dict:
    return {"POSTQ": postq, "QOFF": offset is not None} if postq else {}


def _refuse_hooks(hooks, what: str) -> None:
    """A score_mod / mask_mod with an FP8 full-quant kernel (``what``) is refused by name, not dropped."""
    if hooks is not None and hooks.active:
        raise UnsupportedParameterError("hooks", "given", f"{what} full quant with a score_mod / mask_mod is not "
                                        "simulated")


def counts_own_kv(tiling: FiaTiling) -> bool:
    """Whether the tiling's KV lengths count each batch's own KV without a shared prefix: IFATiling's, the
    legacy PFA route's (KV antiquant on A2/A3) and the arch35 catch-all's; the A2/A3 split-fuse tiling counts
    the prefix in."""
    return tiling.route in ("ifa", "pfa") or (tiling.arch == "arch35"
                                              and tiling.template == "FusedInferAttentionScoreTilingImpl")


def effective_lengths(tiling: FiaTiling) -> tuple[np.ndarray, np.ndarray]:
    """The per-batch query and KV lengths the kernel sees (the tiling's actual lengths; left padding is not
    applied here)."""
    return np.asarray(tiling.q_seqlens, dtype=np.int64), np.asarray(tiling.kv_seqlens, dtype=np.int64)


def _left_padding(q, k, layout: str, qlen, kvlen, query_padding_size, kv_padding_size):
    """Row and KV starts of left-padded batches (the valid block ends ``pad`` before the tensor's end), with
    the batches whose block would start before 0 marked as not computed (as the golden plans them)."""
    from ..golden.batches import plan_batch_layout

    s_axis = 2 if layout == "BNSD" else 1
    plans = plan_batch_layout(batch=len(qlen), s1_full=q.shape[s_axis], kv_capacity=[k.shape[s_axis]] * len(qlen),
                              actual_seq_lengths=list(qlen), actual_seq_lengths_kv=list(kvlen),
                              query_padding_size=query_padding_size, kv_padding_size=kv_padding_size)
    qoff = np.array([p.q0 for p in plans], np.int64)
    kvoff = np.array([p.k0 for p in plans], np.int64)
    new_q = np.array([p.s1 for p in plans], np.int64)
    new_kv = np.array([p.s_kv for p in plans], np.int64)
    skip = np.array([p.s1 == 0 and qlen[i] > 0 for i, p in enumerate(plans)])
    return qoff, kvoff, new_q, new_kv, skip


def m_capacity(tiling: FiaTiling, rows) -> int:
    """Tile rows: the M base, or fewer when no row block can be that tall (min(G*S1, mBase), 16-aligned)."""
    most = max((t.m_rows for t in rows), default=1)
    most = max(most, max((ft.m_rows for ft in tiling.fd_tasks), default=1))
    cap = min(tiling.m_base, -(-most // 16) * 16)
    return max(cap, most)


def gm_accumulator(plat, rows: int, dv: int) -> bool:
    """Whether ``fia_attention`` keeps a row block's fp32 accumulator in its GM workspace (``GM_ACC``): when one
    vector core's half of it (rows / 2 x dv fp32) would take more than a quarter of UB, the score pass beside it
    would run in row chunks too small to pay their instruction heads. op_host reserves the vec2 workspace for
    it (``mm2_out`` / ``vec2_out`` in the tiling's workspace layout)."""
    return -(-rows // 2) * dv * 4 > plat.ub_usable // 4


def _p_dtype(dtype) -> str:
    name = canonical_dtype(dtype)
    return "bfloat16" if "bfloat16" in name else ("float16" if name == "float16" else "float32")


def _out_shape(qshape, qlay: str, olay: str, n1: int, dv: int) -> tuple:
    """The attention_out shape for a query shape and the (input, output) layouts."""
    if qlay == "BSH":
        bb, s, _ = qshape
        dims = {"B": bb, "S": s, "N": n1, "D": dv}
    elif qlay == "BSND":
        bb, s, _, _ = qshape
        dims = {"B": bb, "S": s, "N": n1, "D": dv}
    elif qlay == "BNSD":
        bb, _, s, _ = qshape
        dims = {"B": bb, "S": s, "N": n1, "D": dv}
    elif qlay == "TND":
        t, _, _ = qshape
        dims = {"T": t, "N": n1, "D": dv}
    else:  # NTD
        _, t, _ = qshape
        dims = {"T": t, "N": n1, "D": dv}
    if olay == "BSH":
        return (dims["B"], dims["S"], n1 * dv)
    return tuple(dims[c] for c in olay)


def _check_band_rows_covered(rows, tiling: FiaTiling, qlen, kvlen, pre, nxt, g: int, sparse_mode) -> None:
    """Every query row the band lets see a KV position must be in some row task: the kernel writes only the rows
    of its tasks. The arch35 split skips the rows it finds without KV counting a GQA decode's folded G x S1 rows
    as query positions, while the kernel's band (and the golden) use each row's own position: with G = 2, one
    query position and one KV position, sparse_mode 3 left head 0's row out and its output zero. Such a call
    is refused rather than answered wrong."""
    runs: dict = {}
    for t in rows:
        runs.setdefault((t.b, t.n2), []).append((t.m_start, t.m_start + t.m_rows))
    for (b, n2), spans in runs.items():
        s1, s2 = int(qlen[b]), int(kvlen[b])
        if s1 <= 0 or s2 <= 0 or _covers(spans, g * s1):   # every row in some task: none is lost
            continue
        have = np.zeros(g * max(1, s1), np.bool_)
        for lo, hi in spans:
            have[lo:hi] = True
        r = np.arange(g * s1)
        pos = r % s1 if tiling.m_order == "GS1" else r // g
        sees = np.maximum(0, pos - int(pre[b])) <= np.minimum(s2 - 1, pos + int(nxt[b]))
        lost = np.flatnonzero(sees & ~have[:g * s1])
        if lost.size:
            raise UnsupportedParameterError(
                "sparse_mode", sparse_mode,
                f"batch {b}, kv head {n2}: folded row {lost[0]} (query position {pos[lost[0]]}) sees KV positions "
                f"under the band but the tiling's row tasks skip it (the arch35 split counts a GQA decode's G x S1 "
                f"rows as query positions); this combination is not simulated")


def _covers(spans, rows: int) -> bool:
    """Whether the row runs ``[lo, hi)`` together hold every row of ``[0, rows)`` (False for a run starting
    before row 0, which the caller's array slicing reads differently)."""
    reach = 0
    for lo, hi in sorted(spans):
        if lo < 0 or lo > reach:
            return False
        reach = max(reach, hi)
    return reach >= rows


def _band(engine: MaskEngine, qlen, kvlen, pre_tokens: int, next_tokens: int):
    """Per-batch left-up band (keep iff -pre[b] <= j - i <= nxt[b]) for the engine's mode."""
    nb = len(qlen)
    mode = engine.mode
    if mode == "none" or (mode == "full") or (mode == "default" and (engine.left_padding or (
            pre_tokens >= INT_MAX and next_tokens >= INT_MAX))):
        return False, np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    off = kvlen - qlen
    if mode == "default":
        lo, hi = np.full(nb, -pre_tokens), np.full(nb, next_tokens)
    elif mode == "left_up":
        lo, hi = np.full(nb, -INT_MAX), np.zeros(nb)
    elif mode in ("right_down", "tree"):   # the tree: the chip's blocks end at the right-down diagonal
        lo, hi = np.full(nb, -INT_MAX), off
    else:  # band
        lo, hi = off - pre_tokens, off + next_tokens
    # clipped to +-_BAND_CLAMP (np.minimum / np.maximum: np.clip's own overhead is several microseconds)
    pre = np.minimum(np.maximum(-np.asarray(lo, np.int64), -_BAND_CLAMP), _BAND_CLAMP)
    nxt = np.minimum(np.maximum(np.asarray(hi, np.int64), -_BAND_CLAMP), _BAND_CLAMP)
    return True, pre, nxt
