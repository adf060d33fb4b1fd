"""The FIA API's per-call memos (issue 12: the API's fixed cost per call).

``tiling_memo`` keeps ``tile_fia``'s answer per whole parameter record: a repeated call signature is checked
and tiled once, a call that differs in anything the tiling reads is tiled afresh, a rejected call is never
kept, and every caller gets a tiling of its own. The call memo answers a repeated plain call (its signature:
``call_signature``) without building the record or running the checks, and ``run_fia``'s launch plans keep a
plain call's tables and kernel specialisation; a call that differs after a hit is answered afresh. The
dtype-name memos answer by the dtype object's identity. No test here times anything.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile import ParamError
from cvtile.kernels.fia import tiling_memo
from cvtile.kernels.fia.api import _V1_TENSORS, plan_call
from cvtile.kernels.golden import dtypes as golden_dtypes, mask_template
from cvtile.tiling.fia import tile_fia
from cvtile.tiling.params import FiaParams, TensorMeta, canonical_dtype


def _call(**over):
    rng = np.random.default_rng(3)
    kw = dict(query=rng.standard_normal((2, 8, 64, 64)).astype(np.float16),
              key=rng.standard_normal((2, 2, 512, 64)).astype(np.float16),
              value=rng.standard_normal((2, 2, 512, 64)).astype(np.float16),
              num_heads=8, num_key_value_heads=2, input_layout="BNSD", scale=0.125)
    kw.update(over)
    return kw


@pytest.fixture
def memo():
    tiling_memo.clear()
    yield tiling_memo
    tiling_memo.clear()


def test_a_repeated_call_is_tiled_once_and_each_caller_gets_its_own_tiling(memo):
    _, first = plan_call(**_call())
    _, second = plan_call(**_call())
    assert memo.STATS == {"hits": 1, "misses": 1}
    assert second is not first and second.to_dict() == first.to_dict()
    # a caller that edits its tiling changes nobody else's
    first.extras["split_ends"].append("edited")
    first.extras["legacy_ifa"] = "edited"
    first.decisions.clear()
    first.key_fields["edited"] = 1
    first.workspace_layout["edited"] = (0, 0)
    _, third = plan_call(**_call())
    assert third.to_dict() == second.to_dict()


CHANGES = {
    "actual_seq_lengths_kv": dict(actual_seq_lengths_kv=[512, 100]),
    "actual_seq_lengths": dict(actual_seq_lengths=[64, 17]),
    "sparse_mode": dict(sparse_mode=3, atten_mask=mask_template()),
    "num_heads": dict(num_heads=4, num_key_value_heads=1,
                      query=np.zeros((2, 4, 64, 64), np.float16), key=np.zeros((2, 1, 512, 64), np.float16),
                      value=np.zeros((2, 1, 512, 64), np.float16)),
    "shape": dict(query=np.zeros((2, 8, 80, 64), np.float16)),
    "dtype": dict(query=np.zeros((2, 8, 64, 64), ml_dtypes.bfloat16),
                  key=np.zeros((2, 2, 512, 64), ml_dtypes.bfloat16),
                  value=np.zeros((2, 2, 512, 64), ml_dtypes.bfloat16)),
    "softmax_lse_flag": dict(softmax_lse_flag=True),
    "target": dict(target="Ascend910B2"),
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_changed_argument_gives_a_fresh_tiling_not_a_stale_one(memo, name):
    plan_call(**_call())
    changed = _call(**CHANGES[name])
    _, got = plan_call(**changed)
    assert memo.STATS["misses"] == 2
    # what the memo returned is what tile_fia says of the changed call
    calls = []
    real = memo.tile_fia

    def counting(params, target, overrides=None):
        calls.append(params)
        return real(params, target, overrides)

    try:
        memo.tile_fia = counting
        memo.clear()
        _, fresh = plan_call(**changed)
    finally:
        memo.tile_fia = real
    assert len(calls) == 1 and got.to_dict() == fresh.to_dict()
    assert got.to_dict() == tile_fia(calls[0], changed.get("target", "Ascend910B1")).to_dict()


def test_a_rejected_call_is_checked_every_time_and_never_kept(memo):
    for _ in range(2):
        with pytest.raises(ParamError) as err:
            plan_call(**_call(sparse_mode=2))
        assert err.value.param == "atten_mask"
    assert memo.STATS == {"hits": 0, "misses": 2} and not memo._MEMO


def _params(**attrs) -> FiaParams:
    q = TensorMeta((1, 2, 16, 64), "float16")
    kv = TensorMeta((1, 2, 32, 64), "float16")
    base = dict(num_heads=2, input_layout="BNSD", scale=0.125)
    base.update(attrs)
    return FiaParams(query=q, key=kv, value=kv, key_list=(kv,), value_list=(kv,),
                     attention_out=TensorMeta((1, 2, 16, 64), "float16"), **base)


@pytest.mark.parametrize("a, b", [(dict(scale=0.0), dict(scale=-0.0)), (dict(scale=1), dict(scale=1.0)),
                                  (dict(softmax_lse_flag=False), dict(softmax_lse_flag=0))])
def test_equal_attributes_of_another_type_or_sign_are_different_calls(memo, a, b):
    assert _params(**a) == _params(**b)    # the record alone cannot tell them apart
    memo.memo_tile_fia(_params(**a), "Ascend910B1")
    memo.memo_tile_fia(_params(**b), "Ascend910B1")
    memo.memo_tile_fia(_params(**a), "Ascend910B1")
    assert memo.STATS == {"hits": 1, "misses": 2}


def test_a_nan_scale_is_tiled_every_time(memo):
    for _ in range(2):
        memo.memo_tile_fia(_params(scale=float("nan")), "Ascend910B1")
    assert memo.STATS["hits"] == 0


def test_plan_search_overrides_are_not_memoised(memo, monkeypatch):
    seen = []
    monkeypatch.setattr(memo, "tile_fia", lambda params, target, overrides=None: seen.append(overrides))
    for _ in range(2):
        memo.memo_tile_fia(_params(), "Ascend910B1", {"cores": 4})
    assert seen == [{"cores": 4}] * 2 and memo.STATS == {"hits": 0, "misses": 0}


def test_the_memo_is_bounded(memo, monkeypatch):
    monkeypatch.setattr(memo, "SIZE", 3)
    for n in range(1, 6):
        memo.memo_tile_fia(_params(num_heads=2, scale=0.1 * n), "Ascend910B1")
    assert len(memo._MEMO) == 3


def test_a_memoised_call_computes_what_a_fresh_one_does(memo):
    """Same shapes, other data and other lengths: the second and third calls run on memoised tilings and give
    bitwise what they give with the memo empty."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 1, 16, 64)).astype(np.float16)
    kv = [rng.standard_normal((1, 1, 16, 64)).astype(np.float16) for _ in range(4)]
    kw = dict(num_heads=1, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    runs = [dict(key=kv[0], value=kv[1]), dict(key=kv[2], value=kv[3]), dict(key=kv[0], value=kv[1])]
    warm = [cvtile.npu_fused_infer_attention_score(q, **r, **kw) for r in runs]
    assert memo.STATS["hits"] >= 2
    for r, (out, lse) in zip(runs, warm):
        memo.clear()
        fresh_out, fresh_lse = cvtile.npu_fused_infer_attention_score(q, **r, **kw)
        assert np.array_equal(out.view(np.uint16), fresh_out.view(np.uint16))
        assert np.array_equal(lse.view(np.uint32), fresh_lse.view(np.uint32))


@pytest.mark.parametrize("namer", [canonical_dtype, golden_dtypes.canonical_dtype], ids=["tiling", "golden"])
def test_the_dtype_names_are_the_unmemoised_names(namer):
    for dt in (np.float16, ml_dtypes.bfloat16, np.float32, np.int8, np.int32, np.uint8, np.bool_,
               ml_dtypes.float8_e4m3fn, ">f2", "<f2"):
        d = np.dtype(dt)
        want = namer.__wrapped__(d)
        assert namer(d) == want and namer(d) == want            # first answer, memoised answer
        assert namer(np.dtype(d.str if d.kind != "V" else dt)) == want
    assert namer("fp16") == namer.__wrapped__("fp16") == "float16"


@pytest.mark.parametrize("spans, rows, want", [
    ([(0, 8)], 8, True), ([(0, 4), (4, 8)], 8, True), ([(4, 8), (0, 4)], 8, True), ([(0, 6), (2, 9)], 8, True),
    ([(0, 4), (5, 8)], 8, False), ([(0, 7)], 8, False), ([(1, 8)], 8, False), ([(-2, 8)], 8, False),
    ([(0, 0)], 0, True)])
def test_row_runs_cover_their_rows(spans, rows, want):
    from cvtile.kernels.fia.launch import _covers

    assert _covers(spans, rows) is want


def test_rows_the_band_sees_but_no_task_holds_are_still_refused():
    """``_check_band_rows_covered`` skips its arrays for a (batch, kv head) whose tasks hold every row; a row
    left out of every task that the band lets see KV still raises."""
    from types import SimpleNamespace

    from cvtile import UnsupportedParameterError
    from cvtile.kernels.fia.launch import _check_band_rows_covered
    from cvtile.tiling.result import RowTask

    tiling = SimpleNamespace(m_order="GS1")
    qlen, kvlen = np.array([4]), np.array([4])
    pre, nxt = np.array([1 << 30]), np.array([0])       # causal: row i sees KV 0..i
    whole = [RowTask(0, 0, 0, 4, 0, 1), RowTask(0, 0, 4, 4, 0, 1)]
    _check_band_rows_covered(whole, tiling, qlen, kvlen, pre, nxt, 2, 3)
    holed = [RowTask(0, 0, 0, 4, 0, 1), RowTask(0, 0, 5, 3, 0, 1)]
    with pytest.raises(UnsupportedParameterError, match="folded row 4 "):
        _check_band_rows_covered(holed, tiling, qlen, kvlen, pre, nxt, 2, 3)
    # a row no KV position is visible to may be left out
    _check_band_rows_covered(holed, tiling, qlen, kvlen, np.array([-1]), np.array([-1]), 2, 3)


def test_callers_on_several_threads_share_the_memo_safely(memo, monkeypatch):
    """Hits reorder the memo and misses evict from it: callers on four threads, over a memo smaller than their
    signatures, each get the tiling of their own call."""
    import threading

    monkeypatch.setattr(memo, "SIZE", 2)
    calls = [_params(scale=0.1 * n) for n in range(1, 5)]
    want = [tile_fia(p, "Ascend910B1").to_dict() for p in calls]
    errors = []

    def caller():
        try:
            for i in range(40):
                got = memo.memo_tile_fia(calls[i % 4], "Ascend910B1")
                assert got.to_dict() == want[i % 4]
        except BaseException as e:   # reported below
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(memo._MEMO) <= 2


@pytest.mark.parametrize("entry", ["api", "plan_call"])
def test_the_binding_is_still_checked_once_whichever_way_the_call_comes_in(entry):
    """``simulate_fia`` checks the binding and tells ``prepare_fia`` so; ``plan_call`` (``prepare_fia`` alone)
    still checks it itself: both refuse a float ``num_heads`` as the binding does."""
    kw = _call(num_heads=8.0)
    with pytest.raises(ParamError) as err:
        if entry == "api":
            cvtile.npu_fused_infer_attention_score(**kw)
        else:
            plan_call(**kw)
    assert err.value.param == "num_heads" and err.value.checker == "binding"


# --- the call memo (``tiling_memo.call_signature``) and the launch plans (``launch.run_fia``'s ``plan_key``) ---

def _small(seed: int = 11, s1: int = 16, s2: int = 16):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (1, 1, s1, 64)).astype(np.float16), rng.uniform(-1, 1, (1, 1, s2, 64)).astype(np.float16),
            rng.uniform(-1, 1, (1, 1, s2, 64)).astype(np.float16))


def _bits(res) -> list:
    return [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in res]


_MASK = np.random.default_rng(12).random((2, 1, 16, 16)) < 0.3
#: call sequences whose later calls reuse the first's call memo entry and launch plan, or differ from it only in
#: what neither holds (a mask's values) or in what their keys hold (the host lists' values)
AFTER_A_HIT = {
    "mask_values": [dict(atten_mask=_MASK[0:1]), dict(atten_mask=_MASK[0:1]), dict(atten_mask=_MASK[1:2])],
    "actual_seq_lengths_kv": [dict(actual_seq_lengths_kv=[16]), dict(actual_seq_lengths_kv=[16]),
                              dict(actual_seq_lengths_kv=[9])],
    "causal_lengths": [dict(sparse_mode=3, atten_mask=mask_template(), actual_seq_lengths=[16]),
                       dict(sparse_mode=3, atten_mask=mask_template(), actual_seq_lengths=[16]),
                       dict(sparse_mode=3, atten_mask=mask_template(), actual_seq_lengths=[5])],
}


@pytest.mark.parametrize("name", list(AFTER_A_HIT))
def test_a_call_changed_after_a_memo_hit_computes_what_a_fresh_one_does(memo, name):
    """The risk: a call memo entry or launch plan (tables, band, kernel specialisation) kept by one call answers a
    later call it does not fit. A repeated call is answered from both; a call differing in a mask's values (which
    neither keeps) or in its actual lengths (which both key on) gives bitwise what it gives with the memos empty."""
    q, k, v = _small()
    kw = dict(num_heads=1, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)
    warm = [_bits(cvtile.npu_fused_infer_attention_score(q, k, v, **kw, **c)) for c in AFTER_A_HIT[name]]
    assert memo.STATS["hits"] >= 1 and any("tables" in plan for plan in memo._PLANS.values())
    for c, got in zip(AFTER_A_HIT[name], warm):
        memo.clear()
        assert got == _bits(cvtile.npu_fused_infer_attention_score(q, k, v, **kw, **c))


def test_a_launch_plan_shares_only_tables_its_kernel_never_stores_into(memo):
    """The risk: a launch plan hands its task table, row pointers and band to every call with its key; a kernel
    that stored into one would change the next call's. The plan keeps a specialisation only when its runtime
    arguments are the call's and it stores into none of them (``_reusable``); FIA's attention kernel stores only
    into the output, lse and workspaces."""
    from cvtile.kernels.fia.launch import _PLAN_TABLES

    q, k, v = _small()
    for _ in range(2):
        cvtile.npu_fused_infer_attention_score(q, k, v, num_heads=1, input_layout="BNSD", scale=0.125,
                                               softmax_lse_flag=True)
    (plan,) = memo._PLANS.values()
    kept = [c for tag, c in plan.items() if isinstance(tag, tuple)]
    assert kept and "tables" in plan
    for compiled in kept:
        stored = compiled.runner("numba", "program").stored_params
        assert "out" in stored and _PLAN_TABLES.isdisjoint(stored)


def _signature(**over):
    kw = _call(**over)
    q, k, v = kw.pop("query"), kw.pop("key"), kw.pop("value")
    optional = {name: kw.pop(name) for name in list(kw) if name in _V1_TENSORS}
    attrs = {"sparse_mode": 0, **kw}
    return tiling_memo.call_signature(q, k, v, optional, attrs, "Ascend910B1")


def test_the_call_memo_describes_only_calls_whose_checks_read_no_tensor_contents():
    """The risk: a call answered from memory whose checks or launch read something the signature leaves out.
    Tensor lists, torch tensors, inputs outside ``CALL_INPUTS`` (a quant scale, a block table, padding sizes),
    the tree mask, dtype and plan-search overrides are not described; what is described differs whenever a
    host list's values, a mask's shape or an array's strides do."""
    z = np.zeros((2, 2, 512, 64), np.float16)
    assert _signature() is not None
    for over in (dict(key=[z[:1], z[1:]], value=[z[:1], z[1:]]), dict(pse_shift=np.zeros((2, 8, 64, 512), np.float16)),
                 dict(block_table=np.zeros((2, 4), np.int32)), dict(query_padding_size=np.array([1])),
                 dict(sparse_mode=9, atten_mask=np.zeros((2, 64, 64), np.bool_))):
        assert _signature(**over) is None, over
    assert tiling_memo.call_signature(*(_call()[n] for n in ("query", "key", "value")), {}, {}, "Ascend910B1",
                                      dtypes={"key": "hifloat8"}) is None
    assert tiling_memo.call_signature(*(_call()[n] for n in ("query", "key", "value")), {}, {}, "Ascend910B1",
                                      overrides={"cores": 4}) is None
    seen = {_signature(actual_seq_lengths_kv=[512, 100]), _signature(actual_seq_lengths_kv=[512, 101]),
            _signature(actual_seq_lengths_kv=np.array([512, 100])), _signature(atten_mask=np.zeros((64, 512), bool)),
            _signature(atten_mask=np.zeros((1, 64, 512), bool)), _signature(query=np.zeros((2, 8, 64, 128), np.float16)[..., ::2]),
            _signature()}
    assert len(seen) == 7


def test_a_call_whose_checks_rewrite_its_arrays_is_never_answered_from_memory(memo, monkeypatch):
    """The risk: the call memo hands back the arrays as given where ``prepare_fia``'s checks would have replaced
    one (an int4 cache unpacked, a rope joined). Such a call is checked every time."""
    from cvtile.kernels.fia import api

    real, runs = api.join_rope_call, []

    def rewriting(arrays, attrs):
        runs.append(1)
        arrays["query"] = arrays["query"].copy()
        return real(arrays, attrs)

    monkeypatch.setattr(api, "join_rope_call", rewriting)
    for _ in range(2):
        plan_call(**_call())
    assert len(runs) == 2 and not memo._CALLS
