"""The arch22 TND split-fuse ("FAI") tiling: block tiles, the three core splits, FD, workspace, key.

The property test tiles many TND calls that route to split-fuse and checks, independently of the planner,
that the RowTasks compute every query row against every KV block holding a key the row may see (the mask
semantics of sparse 0/3/4 written out here), that each row's result is written once (one unsplit task or
one FD task), the contract of ``result.py`` (``validate.assert_valid``), per-batch lengths, the key's
fields and that flash decode happens exactly where the split-fuse flag rule says. The hand-made cases pin
the exact core assignment of each split against values worked out from the upstream rules.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvtile.tiling import FiaParams, TensorMeta
from cvtile.tiling.fia import format_tiling, tile_fia
from cvtile.tiling.platform import get_platform
from cvtile.tiling.tiling_key import decode_fai, decode_key
from cvtile.tiling.validate import assert_valid

T = TensorMeta
INT_MAX = 2147483647
MASK = T((2048, 2048), "bool")


def _cum(xs):
    out, acc = [], 0
    for x in xs:
        acc += x
        out.append(acc)
    return out


def tnd(q_lens, kv_lens, *, n=8, nkv=2, d=64, dtype="float16", sparse=0, pre=INT_MAX, nxt=INT_MAX, lse=False,
        paged_bs=0, inner_precise=0, sink=False, pse=None, kv_heads_attr=None):
    """A TND FusedInferAttentionScore call (cumulative query lengths; KV cumulative, or per batch when paged)."""
    tq = max(sum(q_lens), 1)
    tensors = {"query": T((tq, n, d), dtype), "attention_out": T((tq, n, d), dtype),
               "actual_seq_lengths": _cum(q_lens)}
    if paged_bs:
        blocks = [max(1, -(-k // paged_bs)) for k in kv_lens]
        cache = T((sum(blocks), paged_bs, nkv * d), dtype)
        tensors.update(key=cache, value=cache, block_table=T((len(kv_lens), max(blocks)), "int32"),
                       actual_seq_lengths_kv=list(kv_lens))
    else:
        tk = max(sum(kv_lens), 1)
        tensors.update(key=T((tk, nkv, d), dtype), value=T((tk, nkv, d), dtype),
                       actual_seq_lengths_kv=_cum(kv_lens))
    if sparse in (3, 4):
        tensors["atten_mask"] = MASK
    if lse:
        tensors["softmax_lse"] = T((tq, n, 1), "float32")
    if sink:
        tensors["learnable_sink"] = T((n,), dtype)
    if pse is not None:
        tensors["pse_shift"] = T(pse, dtype)
    attrs = dict(num_heads=n, num_key_value_heads=nkv if kv_heads_attr is None else kv_heads_attr,
                 input_layout="TND", scale=d ** -0.5, sparse_mode=sparse, pre_tokens=pre, next_tokens=nxt,
                 softmax_lse_flag=lse, inner_precise=inner_precise, block_size=paged_bs)
    return FiaParams.from_api(tensors, attrs)


# ------------------------------------------------------------------------------------------------ oracles
def visible(s, q, kv, sparse, pre, nxt):
    """Inclusive KV position range query token s of a (q, kv) batch may see (right-down origin for 3/4)."""
    if kv == 0:
        return None
    lo, hi = 0, kv - 1
    if sparse == 3:
        hi = min(hi, s + kv - q)
    elif sparse == 4:
        lo, hi = max(lo, s + kv - q - pre), min(hi, s + kv - q + nxt)
    return (lo, hi) if lo <= hi else None


def check_semantics(t, q_lens, kv_lens, sparse, pre, nxt):
    """Every (row, KV block with a visible key) computed exactly once; every row with a key written once."""
    assert t.m_order == "GS1" and t.s2_base == 512 and t.m_base == 128
    assert_valid(t)
    blocks, writers = Counter(), Counter()
    for c in t.cores:
        for x in c.tasks:
            assert x.m_rows <= 128
            for r in range(x.m_start, x.m_start + x.m_rows):
                if x.fd_task < 0:
                    writers[(x.b, x.n2, r)] += 1
                for j in range(x.s2_lo, x.s2_hi):
                    blocks[(x.b, x.n2, r, j)] += 1
    for ft in t.fd_tasks:
        for r in range(ft.m_start, ft.m_start + ft.m_rows):
            writers[(ft.b, ft.n2, r)] += 1
    assert max(blocks.values(), default=1) == 1, "a (row, KV block) computed twice"
    g = t.group
    for b, (q, kv) in enumerate(zip(q_lens, kv_lens)):
        for n2 in range(t.num_kv_heads):
            for r in range(q * g):
                s = r % q                       # G-major fold: row = g * q + s
                win = visible(s, q, kv, sparse, pre, nxt)
                if win is None:
                    continue
                assert writers[(b, n2, r)] == 1, (b, n2, r, writers[(b, n2, r)])
                for j in range(win[0] // 512, win[1] // 512 + 1):
                    assert blocks[(b, n2, r, j)] == 1, f"batch {b} head {n2} row {r} misses KV block {j}"


def fd_rule(q_lens, kv_lens, *, paged, sparse, g, units, aic, sink=False, inner_precise=0, pse=False):
    mq, kvmax = max(q_lens), max(kv_lens)
    many_short = units <= 0.4 * aic and kvmax >= 1024
    long = units <= 0.8 * aic and kvmax >= 512 * aic
    return (paged and sparse != 4 and not pse and not sink and inner_precise != 1 and mq * g <= 128 and mq <= 16
            and kvmax >= 1024 and min(q_lens) > 0 and (many_short or long))


# ------------------------------------------------------------------------------------------------ property
@st.composite
def fai_calls(draw):
    target = draw(st.sampled_from(["Ascend910B1", "Ascend910B3"]))
    nkv = draw(st.sampled_from([1, 2, 3]))
    g = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 25]))
    d = draw(st.sampled_from([64, 96, 128]))
    b = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["decode", "short", "prefill", "mixed"]))
    qmax = {"decode": 1, "short": 16, "prefill": 300, "mixed": 200}[kind]
    qmin = {"decode": 1, "short": 1, "prefill": 0, "mixed": 0}[kind]
    q = draw(st.lists(st.integers(qmin, qmax), min_size=b, max_size=b))
    kv = draw(st.lists(st.one_of(st.integers(0, 3000), st.sampled_from([0, 512, 1024, 6000, 13000])),
                       min_size=b, max_size=b))
    sparse = draw(st.sampled_from([0, 3, 4]))
    pre = nxt = INT_MAX
    if sparse == 4:
        pre = draw(st.one_of(st.just(INT_MAX), st.integers(-100, 3000)))
        nxt = draw(st.one_of(st.just(INT_MAX), st.integers(max(-pre, -100) if pre < INT_MAX else -100, 3000)))
        if pre < 0 and nxt < 0:
            nxt = 0
    paged_bs = draw(st.sampled_from([0, 0, 128, 16, 256]))
    return dict(target=target, q=q, kv=kv, n=nkv * g, nkv=nkv, d=d, sparse=sparse, pre=pre, nxt=nxt,
                paged_bs=paged_bs, dtype=draw(st.sampled_from(["float16", "bfloat16"])), lse=draw(st.booleans()))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fai_calls())
def test_split_fuse_tasks_cover_every_visible_block_once(c):
    if sum(c["q"]) == 0 or sum(c["kv"]) == 0:
        return
    p = tnd(c["q"], c["kv"], n=c["n"], nkv=c["nkv"], d=c["d"], dtype=c["dtype"], sparse=c["sparse"], pre=c["pre"],
            nxt=c["nxt"], lse=c["lse"], paged_bs=c["paged_bs"])
    t = tile_fia(p, c["target"])
    assert t.route == "fai", (t.route, t.template)
    assert t.q_seqlens == tuple(c["q"]) and t.kv_seqlens == tuple(c["kv"])     # per batch, not cumulative
    assert t.batch == len(c["q"])
    aic = get_platform(c["target"]).aic
    if t.decision("fd_walk_incomplete") is not None:     # upstream leaves rows unassigned: no core work
        assert not t.cores and "row_tasks" in t.extras
    else:
        check_semantics(t, c["q"], c["kv"], c["sparse"], c["pre"], c["nxt"])
    flag = fd_rule(c["q"], c["kv"], paged=bool(c["paged_bs"]), sparse=c["sparse"], g=c["n"] // c["nkv"],
                   units=len(c["q"]) * c["nkv"], aic=aic)
    assert t.decision("flash_decode_flag").value == flag
    k = decode_fai(t.tiling_key)
    assert k == t.key_fields and decode_key(t.tiling_key, "arch22") == k
    assert k["fd"] == flag and k["paged"] == bool(c["paged_bs"]) and k["lse"] == int(c["lse"])
    assert k["dtype"] == (2 if c["dtype"] == "bfloat16" else 1) and k["q_layout"] == 2
    assert k["mask"] == {0: 0, 3: 3, 4: 5}[c["sparse"]]
    if t.fd:
        assert flag and t.used_cores <= aic and len(t.fd_vector_work) <= 2 * t.used_cores
    elif not flag:
        assert t.used_cores == aic and len(t.cores) == aic
    for dec in t.decisions:
        assert dec.rule and dec.what
    for what in ("template", "m_order", "m_base", "s2_base", "mask_type", "flash_decode_flag", "decoding_flag",
                 "block_tiles", "used_cores", "core_split", "flash_decode", "workspace_bytes", "tiling_key"):
        assert t.decision(what) is not None, what


# ------------------------------------------------------------------------------------------------ regular split
def test_regular_round_robin_of_head_blocks():
    """B=3, S1=32, G=4, N2=2: one task per (batch, kv head) holding all 4 heads x 32 tokens = 128 rows; task i
    on core i."""
    t = tile_fia(tnd([32, 32, 32], [64, 64, 64]), "Ascend910B1")
    assert t.tiling_key == 5000000000000200100 and t.used_cores == 24
    got = [(c.core, x.b, x.n2, x.m_start, x.m_rows, x.s2_lo, x.s2_hi) for c in t.cores for x in c.tasks]
    assert got == [(i, i // 2, i % 2, 0, 128, 0, 1) for i in range(6)]
    assert "round-robin" in t.decision("core_split").rule


def test_long_prefill_tasks_are_one_head_by_128_tokens():
    """S1 300 > 64: head tile 1, token blocks of 128 (the last of 44); tasks token-block major, head minor."""
    t = tile_fia(tnd([300], [900], n=2, nkv=1), "Ascend910B1")
    assert t.decision("block_tiles").value == [(1, 3, 2)]
    order = [(x.n2, x.m_start, x.m_rows) for c in sorted(t.cores, key=lambda c: c.core) for x in c.tasks]
    # task i = (token block i // 2, head i % 2): rows g * 300 + s0
    assert order == [(0, 0, 128), (0, 300, 128), (0, 128, 128), (0, 428, 128), (0, 256, 44), (0, 556, 44)]


def test_head_tile_for_short_queries():
    """S1 24: floor(128/24) = 5 -> 4 heads per task; G 8 -> 2 head blocks per kv head of 96 rows."""
    t = tile_fia(tnd([24], [100], n=8, nkv=1), "Ascend910B1")
    assert t.decision("block_tiles").value == [(4, 1, 1)]
    rows = [(x.m_start, x.m_rows) for c in t.cores for x in c.tasks]
    assert rows == [(0, 96), (96, 96)]


def test_causal_blocks_stop_at_the_diagonal():
    """sparse 3, S1 300, S2 1500 (offset 1200): token block k walks ceil(min(1500, 128(k+1) + 1200) / 512)."""
    t = tile_fia(tnd([300], [1500], n=1, nkv=1, sparse=3), "Ascend910B1")
    got = sorted((x.m_start, x.s2_hi) for c in t.cores for x in c.tasks)
    assert got == [(0, 3), (128, 3), (256, 3)]
    t = tile_fia(tnd([1100], [1100], n=1, nkv=1, sparse=3), "Ascend910B1")
    got = sorted((x.m_start, x.s2_lo, x.s2_hi) for c in t.cores for x in c.tasks)
    assert [hi for _, _, hi in got] == [1, 1, 1, 1, 2, 2, 2, 2, 3]
    assert t.key_fields["mask"] == 3 and t.decision("mask_type").value == "MASK_SPEC"


def test_band_window_from_the_pre_and_next_tokens():
    """sparse 4, S1 = S2 = 2000, pre 300, next 0: block range of token block k is
    [max(0, 128k - 300) // 512, ceil(min(2000, roundup(128k + 128, 512)) / 512))."""
    t = tile_fia(tnd([2000], [2000], n=1, nkv=1, sparse=4, pre=300, nxt=0), "Ascend910B1")
    got = sorted((x.m_start, x.s2_lo, x.s2_hi) for c in t.cores for x in c.tasks)
    want = []
    for k in range(16):
        s0, size = 128 * k, min(128, 2000 - 128 * k)
        end = -(-(s0 + size) // 512) * 512
        want.append((s0, max(0, s0 - 300) // 512, -(-min(2000, end) // 512)))
    assert got == want
    assert t.key_fields["mask"] == 5


def test_rows_of_empty_batches_get_no_task():
    t = tile_fia(tnd([0, 40, 40], [500, 0, 700]), "Ascend910B1")
    assert {x.b for c in t.cores for x in c.tasks} == {2}
    check_semantics(t, [0, 40, 40], [500, 0, 700], 0, INT_MAX, INT_MAX)


# ------------------------------------------------------------------------------------------------ decoding split
def test_decoding_split_recuts_a_short_last_round():
    """25 one-token batches on 24 cores, N2 2, G 8: tasks of 2 kv heads (128 // 8 = 16, capped at N2); 25 tasks
    leave a last round of 1 <= 12, re-cut into single kv heads: batch 24's heads go to cores 0 and 1."""
    b = 25
    t = tile_fia(tnd([1] * b, [2000] * b, n=16, nkv=2, paged_bs=128), "Ascend910B1")
    assert t.decision("decoding_flag").value is True and t.decision("flash_decode_flag").value is False
    assert t.tiling_key == 5200000000010200100 and t.key_fields["decoding"]
    cs = t.decision("core_split").value
    assert (cs["kv_heads_per_task"], cs["total_tasks"], cs["main_tasks"], cs["tail_tasks"], cs["tail_kv_tile"]) == \
        (2, 25, 24, 2, 1)
    per_core = {c.core: [(x.b, x.n2) for x in c.tasks] for c in t.cores}
    assert per_core[0] == [(0, 0), (0, 1), (24, 0)] and per_core[1] == [(1, 0), (1, 1), (24, 1)]
    assert per_core[5] == [(5, 0), (5, 1)]
    check_semantics(t, [1] * b, [2000] * b, 0, INT_MAX, INT_MAX)


def test_decoding_split_without_recut():
    """37 batches, N2 1: 37 tasks, a last round of 13 > 12 keeps the round-robin over all tasks."""
    b = 37
    t = tile_fia(tnd([1] * b, [600] * b, n=4, nkv=1, paged_bs=128), "Ascend910B1")
    cs = t.decision("core_split").value
    assert cs["tail_kv_tile"] == 0 and cs["tail_tasks"] == 13
    assert [x.b for x in t.cores[3].tasks] == [3, 27]


def test_decoding_needs_enough_batches_and_no_lse():
    assert tile_fia(tnd([1] * 23, [600] * 23, n=4, nkv=1, paged_bs=128), "Ascend910B1") \
        .decision("decoding_flag").value is False
    t = tile_fia(tnd([1] * 30, [600] * 30, n=4, nkv=1, paged_bs=128, lse=True), "Ascend910B1")
    assert t.decision("decoding_flag").value is False and "no lse output" in t.decision("decoding_flag").rule


# ------------------------------------------------------------------------------------------------ flash decode
def test_flash_decode_cuts_rows_block_by_block():
    """B 2, S1 4, G 4, N2 2, paged KV (3000, 1500): 144000 units over 24 cores = 6000 per core; a row block is
    16 rows x 512 = 8192 units, so each core takes one KV block: 18 cores, 4 split rows of 6, 6, 3, 3 pieces."""
    t = tile_fia(tnd([4, 4], [3000, 1500], n=8, nkv=2, d=128, paged_bs=128), "Ascend910B1")
    assert t.tiling_key == 5100000000010200100 and t.key_fields["fd"]
    assert t.used_cores == 18 and t.fd
    assert [(f.b, f.n2, f.m_start, f.m_rows, f.splits, f.workspace_slot) for f in t.fd_tasks] == \
        [(0, 0, 0, 16, 6, 0), (0, 1, 0, 16, 6, 6), (1, 0, 0, 16, 3, 12), (1, 1, 0, 16, 3, 15)]
    first = [(c.tasks[0].b, c.tasks[0].n2, c.tasks[0].s2_lo, c.tasks[0].fd_piece) for c in t.cores]
    assert first[:7] == [(0, 0, j, j) for j in range(6)] + [(0, 1, 0, 0)]
    # combine: node k's halves run on vectors 2k and 2k+1; 4 tokens -> the first 2 / last 2 tokens of each head
    assert t.fd_vector_work[0].pieces == ((0, 0, 2), (0, 4, 2), (0, 8, 2), (0, 12, 2))
    assert t.fd_vector_work[1].pieces == ((0, 2, 2), (0, 6, 2), (0, 10, 2), (0, 14, 2))
    assert t.workspace_layout["fd_row_lse"][1] == 4 * (16 * 6 + 16 * 6 + 16 * 3 + 16 * 3)
    assert t.workspace_layout["fd_partial_out"][1] == 128 * t.workspace_layout["fd_row_lse"][1]
    check_semantics(t, [4, 4], [3000, 1500], 0, INT_MAX, INT_MAX)


def test_flash_decode_one_token_combine_halves_the_heads():
    t = tile_fia(tnd([1], [5000], n=8, nkv=1, paged_bs=128, lse=True), "Ascend910B1")
    assert t.fd and t.fd_tasks[0].m_rows == 8
    assert t.fd_vector_work[0].pieces == ((0, 0, 4),) and t.fd_vector_work[1].pieces == ((0, 4, 4),)
    assert t.tiling_key == 5100000000010201100


@pytest.mark.parametrize("units, kv, fd", [
    (9, 4096, True),            # B*N2 9 <= 0.4*24
    (10, 4096, False),          # 10 > 9.6 and max S2 < 512*24
    (10, 12288, True),          # 10 <= 19.2 and max S2 >= 12288
    (20, 12288, False),         # 20 > 19.2
])
def test_flash_decode_unit_thresholds(units, kv, fd):
    t = tile_fia(tnd([2] * units, [kv] * units, n=4, nkv=1, paged_bs=128), "Ascend910B1")
    assert t.decision("flash_decode_flag").value is fd
    assert t.key_fields["fd"] is fd


@pytest.mark.parametrize("change, why", [
    (dict(paged_bs=0), "paged cache"),
    (dict(sparse=4, pre=100, nxt=0), "mask neither full nor band"),
    (dict(q=[17, 2]), "max S1 17 <= 16"),
    (dict(n=80, nkv=1, q=[2, 2]), "max S1 * G = 160 <= 128"),
    (dict(kv=[1000, 1023]), "max S2 1023 >= 1024"),
    (dict(q=[0, 4]), "min S1 0 > 0"),
])
def test_flash_decode_refusals_name_the_rule(change, why):
    kw = dict(q=[4, 4], kv=[3000, 1500], n=8, nkv=2, paged_bs=128)
    kw.update(change)
    q, kv = kw.pop("q"), kw.pop("kv")
    t = tile_fia(tnd(q, kv, **kw), "Ascend910B1")
    dec = t.decision("flash_decode_flag")
    assert dec.value is False and why in dec.rule
    assert not t.fd and not t.key_fields["fd"]
    check_semantics(t, q, kv, kw.get("sparse", 0), kw.get("pre", INT_MAX), kw.get("nxt", INT_MAX))


def test_flash_decode_with_causal_mask_walks_every_block():
    """q <= 16 means the causal limit (128 + S2 - S1) never cuts the KV range: pieces keep their blocks."""
    t = tile_fia(tnd([3, 5], [2100, 4000], n=4, nkv=1, sparse=3, paged_bs=128), "Ascend910B1")
    assert t.fd and t.key_fields["mask"] == 3
    check_semantics(t, [3, 5], [2100, 4000], 3, INT_MAX, INT_MAX)


# ------------------------------------------------------------------------------------------------ sink, keys, misc
def test_tiling_sink_launches_every_core_without_tasks():
    p = tnd([4, 4], [64, 64])
    p = p.with_(actual_seq_lengths=T((2,), "int64"), actual_seq_lengths_kv=T((2,), "int64"))
    t = tile_fia(p, "Ascend910B1")
    assert t.extras.get("tiling_sink") and not t.cores and t.used_cores == 24
    assert t.workspace_layout["fd_row_lse"][1] == 2 * 24 * 128 * 4 * 8
    assert t.workspace_layout["fd_partial_out"][1] == 2 * 24 * 128 * 64 * 4 * 8


@pytest.mark.parametrize("kw, key", [
    (dict(), 5000000000000200100),
    (dict(sparse=3), 5000000000000200103),
    (dict(dtype="bfloat16", lse=True), 5000000000000201200),
    (dict(n=8, nkv=8, inner_precise=1), 5000000000000210100),
    (dict(sparse=4, pre=64, nxt=0, paged_bs=128), 5000000000010200105),
    (dict(sink=True, sparse=3), 5000000000100200103),
])
def test_keys_of_registered_split_fuse_variants(kw, key):
    t = tile_fia(tnd([40, 20], [300, 100], **kw), "Ascend910B1")
    assert t.route == "fai" and t.tiling_key == key, format_tiling(t)


def test_workspace_of_the_regular_split():
    t = tile_fia(tnd([40, 20], [300, 100]), "Ascend910B3")
    assert t.workspace_bytes == 16 * 1024 * 1024 + 20 * 128 * 512 * 48
    assert "fd_row_lse" not in t.workspace_layout


def test_zero_kv_heads_attribute_is_mha_with_a_note():
    t = tile_fia(tnd([40, 20], [300, 100], n=4, nkv=4, kv_heads_attr=0), "Ascend910B1")
    assert t.num_kv_heads == 4 and t.group == 1
    assert "raw attribute" in t.decision("kv_heads").rule
    check_semantics(t, [40, 20], [300, 100], 0, INT_MAX, INT_MAX)


def test_flash_decode_walk_that_runs_out_of_cores_gives_no_core_work():
    """S1 5 with G 25: head tile floor(25 / 2) * 2 = 24, so a group is a 24-head and a 1-head block, and the walk
    charges both 24 heads. With a second batch it runs out of cores before the end: upstream some rows get no
    (or a partial) result. The planner records the split and the uncovered rows and gives no core work."""
    t = tile_fia(tnd([5, 3], [5000, 9000], n=50, nkv=2, paged_bs=128), "Ascend910B1")
    assert t.decision("block_tiles").value[0][0] == 24
    assert t.decision("fd_walk_incomplete").value == [(1, 0, 0, 12), (1, 1, 0, 0)]
    assert not t.cores and not t.fd and "row_tasks" in t.extras
    assert t.key_fields["fd"]                        # the flag (and the key) are upstream's
    assert len(t.decision("core_split").value["ends"]) == 24
    assert_valid(t)
    # one batch alone fits: every row is covered
    t = tile_fia(tnd([5], [5000], n=25, nkv=1, paged_bs=128), "Ascend910B1")
    assert t.fd and t.decision("fd_walk_incomplete") is None
    check_semantics(t, [5], [5000], 0, INT_MAX, INT_MAX)


def test_flash_decode_walk_past_the_end_leaves_later_cores_idle():
    """The walk ends the last row exactly at a core's end (needCoreNum stays 0): all cores are launched, the
    cores after it idle, and the decision says why."""
    t = tile_fia(tnd([2, 2], [6000, 1024], n=12, nkv=3, d=96, sparse=3, lse=True, paged_bs=256), "Ascend910B3")
    assert t.decision("fd_walk_overrun").value is True and t.used_cores == 20
    assert all(not c.tasks for c in t.cores[14:])
    check_semantics(t, [2, 2], [6000, 1024], 3, INT_MAX, INT_MAX)
