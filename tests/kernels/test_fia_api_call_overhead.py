"""The FIA API's per-call memos (issue 12: the API's fixed cost per call).

``tiling_memo`` keeps ``tile_fia``'s answer per whole parameter record: a repeated call signature is checked
and tiled once, a call that differs in anything the tiling reads is tiled afresh, a rejected call is never
kept, and every caller gets a tiling of its own. The dtype-name memos answer by the dtype object's identity.
No test here times anything.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile import ParamError
from cvtile.kernels.fia import tiling_memo
from cvtile.kernels.fia.api import plan_call
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
