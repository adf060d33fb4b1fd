"""The cost model: its table, its schedule's invariants, what it says bounds a kernel, and its outputs.

The kernels here are small DSL kernels whose character is known by construction (a matmul loop with
nothing else is cube work; a long elementwise chain on a tile already in UB is vector work; a copy of
a large tensor is GM traffic; a one-element kernel is launch overhead), plus the FIA kernels on the
``cvtile run`` default cases and every example.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.cases import DEFAULT_CASES, make_inputs
from cvtile.dsl.ir import walk
from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.cost import fia_cost, useful_flops
from cvtile.sim.cost import ModelError, estimate, estimate_calls, write_chrome_trace
from cvtile.sim.cost.plots import roofline_png, timeline_png
from cvtile.tiling.platform import cost_table, get_platform, platform_names

ROOT = Path(__file__).resolve().parents[2]


@ct.jit
def matmul_loop(a, b, out, K: ct.constexpr, STEPS: ct.constexpr):
    with ct.cube():
        a1 = ct.load(a[0:256, 0:K])
        b1 = ct.load(b[0:K, 0:128])
        c = ct.mma(a1, b1)
        for _ in range(STEPS):
            c = ct.mma(a1, b1, acc=c)                   # 256x64 @ 64x128: its L1->L0 moves are shorter than it
        ct.store(out[0:256, 0:128], c)                  # L0C -> GM through the fixpipe (casts to fp16)


@ct.jit
def vector_chain(x, out, STEPS: ct.constexpr):
    with ct.vector():
        t = ct.load(x[0:64, 0:256])
        for _ in range(STEPS):
            t = ct.exp(t * 0.5) - t
        ct.store(out[0:64, 0:256], t)


@ct.jit
def copy_rows(x, out, N: ct.constexpr, BLOCK: ct.constexpr):
    for r0 in range(ct.block_idx() * BLOCK, N, ct.block_num() * BLOCK):
        n = min(BLOCK, N - r0)
        with ct.vector():
            ct.store(out[ct.ds(r0, BLOCK, valid=n), 0:256], ct.load(x[ct.ds(r0, BLOCK, valid=n), 0:256]))


def _matmul(steps=64, grid=1, target="Ascend910B2"):
    a = np.zeros((256, 64), np.float16)
    b = np.zeros((64, 128), np.float16)
    out = np.zeros((256, 128), np.float16)
    return matmul_loop.on(target).cost(grid, a, b, out, K=64, STEPS=steps)


def _example(name):
    spec = importlib.util.spec_from_file_location(f"cost_{name}", ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ the table


def test_every_cost_entry_has_a_value_a_unit_and_a_source():
    names = {get_platform(p).cost_table for p in platform_names()}
    assert names == {"dav_c220", "dav_c310"}
    keys = None
    for name in names:
        table = cost_table(name)
        for e in table.entries.values():
            assert e.unit and len(e.source) > 10, e
        keys = keys or set(table.entries)
        assert set(table.entries) == keys, f"{name} lacks or adds entries: {set(table.entries) ^ keys}"


def test_the_measured_chips_are_in_the_platform_table():
    b2, b3 = get_platform("Ascend910B2"), get_platform("Ascend910B3")
    assert (b2.aic, b2.aiv, b2.clock_mhz, b2.hbm_gbytes_per_s) == (24, 48, 1800, 1600)
    assert (b3.aic, b3.aiv, b3.clock_mhz) == (20, 40, 1800)


def test_a_cost_entry_read_twice_is_its_tables_value():
    """An entry's value is kept as an attribute once read: the same value as the table's entry, every time."""
    table = cost_table("dav_c220")
    want = table.entries["scalar_op_cycles"].value
    assert table.scalar_op_cycles == want and table.scalar_op_cycles == want


def test_a_missing_cost_entry_is_an_error_naming_it():
    with pytest.raises(AttributeError, match="no entry 'no_such_rate'"):
        cost_table("dav_c220").no_such_rate


# ------------------------------------------------------------------ the schedule


def test_the_estimate_is_deterministic():
    a, b = _matmul(), _matmul()
    assert a.block_cycles == b.block_cycles and a.estimated_us == b.estimated_us


def test_a_matmul_loop_is_cube_bound_and_scales_with_its_work():
    short, long = _matmul(steps=16), _matmul(steps=64)
    assert long.bound == "cube"
    assert long.busy["aic"]["M"] > 0.8
    # 256x64x128 fp16 = 16*4*8 fractals per mma at one cycle each plus the head
    per_mma = (long.compute_cycles - short.compute_cycles) / 48
    table = get_platform("Ascend910B2").cost
    assert per_mma == pytest.approx(16 * 4 * 8 + table.mma_head_cycles, rel=0.02)


def test_a_vector_chain_is_vector_bound():
    x = np.zeros((64, 256), np.float32)
    lc = vector_chain.cost(1, x, np.zeros_like(x), STEPS=40)
    assert lc.bound == "vector" and lc.busy["aiv"]["V"] > 0.8


def test_a_large_copy_is_memory_bound_and_a_tiny_kernel_launch_bound():
    big = np.zeros((1 << 16, 256), np.float16)
    lc = copy_rows.cost(48, big, np.zeros_like(big), N=1 << 16, BLOCK=64)
    assert lc.bound == "memory"
    tiny = np.zeros((8, 256), np.float16)
    assert copy_rows.cost(1, tiny, np.zeros_like(tiny), N=8, BLOCK=8).bound == "launch"


def test_blocks_beyond_the_cores_run_in_waves():
    one, two = _matmul(grid=24), _matmul(grid=48)
    assert (one.waves, two.waves, two.cores) == (1, 2, 24)
    table = get_platform("Ascend910B2").cost
    assert two.compute_cycles == pytest.approx(2 * one.compute_cycles, rel=1e-9)
    assert two.cycles - one.cycles == pytest.approx(one.compute_cycles, rel=1e-9)
    assert one.launch_cycles == table.launch_cycles


def test_replayed_loops_time_exactly_as_interpreted_ones():
    """Loop replay (loop_memo) is off while spans are recorded: both runs must agree."""
    spec = DEFAULT_CASES[1]
    q, k, v, kw = make_inputs(spec, 0)
    fast = fia_cost(q, k, v, target=spec.target, record="none", **kw)
    full = fia_cost(q, k, v, target=spec.target, record="all", **kw)
    for a, b in zip(fast.launches, full.launches):
        assert a.block_cycles == pytest.approx(b.block_cycles, rel=1e-9)


def test_a_timed_block_leaves_no_reference_cycle(monkeypatch):
    """The functions interpreting a program name each other (a cycle) and hold its clock, value table and the
    launch's memos: they are unlinked when the program ends, so reference counting frees all of it when the launch
    is timed, with the cyclic collector paused as ``estimate`` pauses it."""
    import gc
    import weakref

    import cvtile.sim.cost.schedule as schedule

    made: list = []

    class Tracked(schedule.CoreClock):
        def __init__(self, *a):
            super().__init__(*a)
            made.append(weakref.ref(self))

    monkeypatch.setattr(schedule, "CoreClock", Tracked)
    was = gc.isenabled()
    gc.disable()
    try:
        _matmul(grid=2)
        alive = [r for r in made if r() is not None]
    finally:
        if was:
            gc.enable()
    assert made and not alive


@pytest.mark.parametrize("record", ["none", "critical"])
def test_a_dropped_report_leaves_no_cyclic_garbage(record):
    """Nothing an estimate makes is a reference cycle (the interpreters' and the prepass builders' functions, the
    generated functions and their globals, the launch's steps): a report, once dropped, is freed by reference
    counting, nothing left for a collection of the whole heap. (A replayed step's chunks and spans, made while a
    critical block's spans are recorded, do name each other; this call replays none there.)"""
    import gc

    from .test_group_memo import GQA

    qs, ks, kdt = GQA["args"]
    k = np.zeros(ks, kdt)

    def call():
        return fia_cost(np.zeros(qs, np.float16), k, k.copy(), target="Ascend910B1", record=record, **GQA["kw"])

    call()                      # the kernels compiled (their caches live on)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        rep = call()
        assert rep.estimated_us > 0
        del rep
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was:
            gc.enable()
    assert not left


def test_a_dropped_flag_is_a_deadlock_the_model_reports():
    mod = _example("03_flash_attention")
    S, D = 128, 64
    q = np.zeros((S, D), np.float16)
    ck = mod.flash_attention.compile(q, q, q, q, 0.125, S=S, D=D, BM=64, BN=64)
    broken = copy.copy(ck)
    final = copy.deepcopy(ck.compilation.final)
    aiv = final.programs()["aiv"]
    for block in [aiv]:
        for i, op in enumerate(block.ops):
            if op.kind == "flag_set":
                del block.ops[i]
                break
    broken.compilation = copy.copy(ck.compilation)
    broken.compilation.final = final
    with pytest.raises(ModelError, match="deadlock"):
        estimate(broken, 1, [q, q, q, q, 0.125])


# ------------------------------------------------------------------ the operators and examples


@pytest.fixture(scope="module")
def default_reports():
    out = {}
    for spec in DEFAULT_CASES:
        q, k, v, kw = make_inputs(spec, 0)
        out[spec.name] = fia_cost(q, k, v, target=spec.target, **kw)
    return out


def test_the_default_cases_have_estimates_with_every_figure(default_reports):
    decode = default_reports["gqa-decode-flash-decode"]
    assert [lc.kernel for lc in decode.launches] == ["fia_attention", "fia_fd_combine"]
    assert decode.bound == "memory"      # a decode streams the KV cache
    for rep in default_reports.values():
        d = rep.to_dict()
        assert d["estimated_us"] > 0 and d["bound"] in ("cube", "vector", "memory", "sync", "scalar", "launch")
        assert all(0 <= f <= 1.0 + 1e-9 for c in d["busy"].values() for f in c.values())
        assert d["launches"][0]["critical_path_top"]


def test_the_decode_estimate_is_near_its_kv_streaming_floor(default_reports):
    spec = DEFAULT_CASES[0]
    kv_bytes = 2 * spec.batch * spec.num_kv_heads * spec.kv_seqlen * spec.head_dim * 2
    floor_us = kv_bytes / (get_platform(spec.target).hbm_gbytes_per_s * 1e3)
    assert floor_us < default_reports[spec.name].estimated_us < 1.5 * floor_us


@pytest.mark.parametrize("name", ["01_vector_add", "02_softmax_rows", "03_flash_attention",
                                  "05_cube_vector_subblocks"])
def test_every_example_kernel_has_an_estimate(name):
    mod = _example(name)
    with record_launches(run=False) as rec:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            mod.main()
    assert rec.launches
    rep = estimate_calls(rec.launches)
    assert rep.estimated_us > 0


def test_useful_flops_counts_both_matmuls_over_the_actual_lengths():
    q = np.zeros((2, 4, 8, 64), np.float16)
    k = np.zeros((2, 4, 32, 64), np.float16)
    assert useful_flops(q, k, k, input_layout="BNSD", num_heads=4) == 2 * 4 * 2 * 8 * 32 * 128
    assert useful_flops(q, k, k, input_layout="BNSD", num_heads=4, actual_seq_lengths_kv=[32, 16]) == \
        2 * 4 * 8 * 48 * 128
    assert useful_flops(q, k, k, input_layout="BNSD", num_heads=4, sparse_mode=3) == 0.0


def test_fas_visible_pairs_count_a_long_prefill_row_block_by_row_block():
    """The FAS flop count built each batch's whole (S1, S2) visibility matrix: ``cvtile cost --op fas`` of an
    8192 x 262144 causal prefill needed tens of GB for it. ``visible_pairs`` counts a block of rows at a time
    and gives the matrix's count."""
    from cvtile.kernels.fas.host import prepare_call

    rng = np.random.default_rng(3)
    q = np.zeros((2, 2, 300, 64), np.float16)
    k = np.zeros((2, 2, 20000, 64), np.float16)
    mask = rng.integers(0, 2, (2, 1, 300, 20000)).astype(bool)
    for kw in (dict(sparse_mode=0), dict(sparse_mode=4, pre_tockens=500, next_tockens=7000, atten_mask=np.triu(
            np.ones((2048, 2048), bool), 1)), dict(sparse_mode=0, atten_mask=mask)):
        call = prepare_call(q, k, k, head_num=2, input_layout="BNSD", **kw)
        for b in range(2):
            assert call.visible_pairs(b, 1) == int(np.count_nonzero(call.visible(b, 1))), kw


def test_cost_of_an_int4_cache_runs(capsys):
    """``cvtile cost --kv-dtype int4`` failed with "dtype 'int4': no numpy equivalent": its stand-in is the
    packed int32 cache the API takes."""
    from cvtile.cli import main

    assert main(["cost", "--batch", "2", "--kv-seqlen", "4096", "--kv-dtype", "int4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["estimated_us"] > 0


# ------------------------------------------------------------------ outputs


def test_the_chrome_trace_is_valid_and_names_ops_lines_and_flags(default_reports, tmp_path):
    path = write_chrome_trace(default_reports["gqa-decode-flash-decode"], tmp_path / "t.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all({"ts", "dur", "pid", "tid", "name"} <= set(e) for e in spans)
    assert any(e["name"] == "mma" and e["args"]["line"].startswith("kernel.py:") for e in spans)
    starts = {e["id"] for e in events if e["ph"] == "s"}
    ends = {e["id"] for e in events if e["ph"] == "f"}
    assert starts and starts == ends
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"aic MTE2", "aic M", "aiv0 V"} <= names


def test_the_pngs_are_written(default_reports, tmp_path):
    rep = default_reports["gqa-decode-flash-decode"]
    plat = get_platform(DEFAULT_CASES[0].target)
    for path in (timeline_png(rep, tmp_path / "timeline.png"),
                 roofline_png(rep, plat, tmp_path / "roofline.png", sum(lc.flops for lc in rep.launches))):
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_tflops_are_reported_only_for_an_unmasked_call(default_reports):
    decode = default_reports["gqa-decode-flash-decode"].to_dict()["launches"][0]
    assert decode["tflops"] is not None and decode["tflops"] > 0
    assert not math.isnan(decode["tflops"])


def test_a_chunk_loops_next_load_overlaps_this_chunks_vector_work():
    """The loaded and stored tiles of a row-chunk loop alternate two copies (plan_memory), so the events let
    chunk k+1's load (MTE2) run while chunk k is computed (V) and chunk k's store (MTE3) drain while k+1 is:
    the schedule overlaps them, as the chip's double-buffered queues do."""
    softmax_rows = _example("02_softmax_rows").softmax_rows   # rows of 8192 columns: chunked
    x = np.zeros((32, 8192), np.float16)
    ck = softmax_rows.compile(x, np.zeros_like(x), R=32, C=8192, BR=32)
    assert any(op.attrs.get("chunk") for op in walk(ck.compilation.final.body))
    lc = estimate(ck, 1, [x, np.zeros_like(x)], record="all")
    spans = [s for _, _, ss in lc.recorded for s in ss if s.role == "aiv0"] or \
        [s for _, _, ss in lc.recorded for s in ss]
    loads = sorted((s for s in spans if s.op is not None and s.op.kind == "load"), key=lambda s: s.start)
    exps = sorted((s for s in spans if s.op is not None and s.op.kind == "ewise" and s.op.attrs["op"] == "exp"),
                  key=lambda s: s.start)
    widen = sorted((s for s in spans if s.op is not None and s.op.kind == "cast" and s.op.attrs["to"] == "float32"),
                   key=lambda s: s.start)    # each chunk's first vector op
    stores = sorted((s for s in spans if s.op is not None and s.op.kind == "store"), key=lambda s: s.start)
    assert len(loads) >= 8 and len(loads) == len(exps) == len(widen) == len(stores)
    assert all(loads[k + 1].start < exps[k].end for k in range(1, len(loads) - 1))
    assert all(stores[k].end > widen[k + 1].start for k in range(1, len(stores) - 1))


@ct.jit
def big_product(a, b, out):
    with ct.cube():
        a1 = ct.load(a[0:512, 0:128])
        b1 = ct.load(b[0:512, 0:128])
        ct.store(out[0:512, 0:512], ct.mma(a1, b1, trans_b=True))   # 1 MB of fp32: more than the two L0C pieces


def test_a_streamed_out_mma_drains_each_piece_while_the_next_is_computed():
    """A result only stored and larger than the mma's two L0C pieces is computed piece by piece at its store,
    each piece Fixpiped out when done (the plan's ``streamed_out``, which the Ascend C lowering emits so): the
    FIX drain starts after the first piece's Mmad and ends after the last one, never before."""
    a = np.zeros((512, 128), np.float16)
    out = np.zeros((512, 512), np.float32)
    ck = big_product.compile(a, a, out)
    final = ck.compilation.final
    mma = next(op for op in walk(final.programs()["aic"]) if op.kind == "mma")
    assert final.memory.streamed_out[mma.results[0].id] == (128, 128)
    lc = estimate(ck, 1, [a, a, out], record="all")
    spans = [s for _, _, ss in lc.recorded for s in ss if s.role == "aic"]
    m = next(s for s in spans if s.pipe == "M")
    fix = next(s for s in spans if s.pipe == "FIX")
    pieces = 16                                                       # (512 / 128) x (512 / 128)
    assert m.start < fix.start < m.end                                # overlapped, after the first piece
    assert fix.start >= m.start + (m.end - m.start) / pieces - 1
    assert fix.end >= m.end
    # the drain dominates: the kernel ends about one drain after the first Mmad piece, not after M + drain
    assert fix.end < m.end + (fix.end - fix.start)


# ------------------------------------------------------------------ st corpus calls that deadlocked


def test_cost_model_times_a_shared_prefix_decode_with_pse_without_deadlock():
    """The GQA kernel's KV step straddling the shared prefix (prefix V in one arm, own V in the other) with a
    pse too large for UB whole: chunk_rows chunked V1 and hoisted both arms' P hand-offs (V1C2, V1C2_2) onto
    the chunk loop unconditionally, so the AIVs waited for a credit the AIC never gave (7 st corpus calls)."""
    q = np.zeros((1, 1, 1, 64), np.float16)
    k = np.zeros((1, 1, 1024, 64), np.float16)
    prefix = np.zeros((1, 1, 256, 64), np.float16)
    rep = fia_cost(q, k, k, target="Ascend910B1", num_heads=1, input_layout="BNSD", scale=0.125,
                   key_shared_prefix=prefix, value_shared_prefix=prefix, actual_shared_prefix_len=[200],
                   actual_seq_lengths_kv=[100], pse_shift=np.zeros((1, 1, 1, 1280), np.float16))
    assert rep.estimated_us > 0


def test_cost_model_times_an_antiquant_decode_with_pse_without_deadlock():
    """The antiquant kernel's V2 (P's digits to the cube) and V3 (the product back) in one chunked pass: the
    chunk loop waited for the product before handing over the digits (5 st corpus calls)."""
    q = np.zeros((1, 8, 1, 128), np.float16)
    k = np.zeros((1, 1, 4096, 128), np.int8)
    scale = np.ones((1, 128), np.float16)
    rep = fia_cost(q, k, k, target="Ascend910B1", num_heads=8, num_key_value_heads=1, input_layout="BNSD",
                   scale=0.125, key_antiquant_scale=scale, value_antiquant_scale=scale,
                   pse_shift=np.zeros((1, 8, 1, 4096), np.float16))
    assert rep.estimated_us > 0
