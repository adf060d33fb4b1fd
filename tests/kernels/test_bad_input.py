"""Bad input at the operator API (issue 12, item 1): every one a typed error, or handled as the real operator.

Each test names the input and says which: *binding* (a Python type torch_npu's binding refuses: ParamError
161002, checker "binding"), *op_host rejects* (ParamError with op_host's rule), or *handled* (accepted, and
the simulator computes what the chip does). op_host files: ``.../fused_infer_attention_score/op_host/arch32/
fused_infer_attention_score_tiling_{info_parser,check_feature,check_single_para}.cpp``,
``.../fused_infer_attention_score/op_host/fused_infer_attention_score_tiling.cpp`` (arch22 legacy entry);
kernel rules: ``attention/incre_flash_attention/op_kernel/arch32/*.h``.

Rejections are raised before any kernel runs (fast). The few accepted-and-run calls use the kernel grid's
shape families (prefill BNSD B2 N8/2 S1 64 S2 512 D64, decode BSND B2 N8/2 S2 256) so they share its
compiled specialisations.
"""

from __future__ import annotations

import numpy as np
import pytest

from cvtile import ParamError, UnsupportedParameterError
from cvtile import npu_fused_infer_attention_score as fia
from cvtile import npu_fused_infer_attention_score_v2 as fia_v2
from cvtile.kernels import compare, fia_golden_lowp, mask_template
from cvtile.kernels.fia.api import plan_call
from cvtile.kernels.golden import LSE_EMPTY, LSE_EMPTY_LEGACY_DECODE, empty_row_lse, fia_golden
from cvtile.tiling import AclnnStatus
from cvtile.tiling.layouts import INPUT_LAYOUTS

PARAM_INVALID = AclnnStatus.PARAM_INVALID
INT_MAX = 2147483647


def _rand(rng, shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


@pytest.fixture
def prefill():
    """Prefill BNSD fp16, GQA 4 (the kernel grid's arch22 prefill family)."""
    rng = np.random.default_rng(12)
    return dict(query=_rand(rng, (2, 8, 64, 64)), key=_rand(rng, (2, 2, 512, 64)), value=_rand(rng, (2, 2, 512, 64)),
                num_heads=8, num_key_value_heads=2, input_layout="BNSD", scale=0.125, softmax_lse_flag=True)


@pytest.fixture
def decode():
    """Decode BSND fp16, GQA 4, S2 256 (the grid's arch22 legacy IFA decode family)."""
    rng = np.random.default_rng(13)
    return dict(query=_rand(rng, (2, 1, 8, 64)), key=_rand(rng, (2, 256, 2, 64)), value=_rand(rng, (2, 256, 2, 64)),
                num_heads=8, num_key_value_heads=2, input_layout="BSND", scale=0.125, softmax_lse_flag=True)


@pytest.fixture
def tnd():
    rng = np.random.default_rng(14)
    return dict(query=_rand(rng, (150, 4, 64)), key=_rand(rng, (150, 4, 64)), value=_rand(rng, (150, 4, 64)),
                num_heads=4, input_layout="TND")


def _raises(kw, param: str, fragment: str, status=None, cls=ParamError):
    with pytest.raises(cls) as exc:
        fia(**kw)
    err = exc.value
    assert err.param == param, str(err)
    assert fragment in str(err), str(err)
    if status is not None:
        assert err.status == status, str(err)
    return err


def _against_golden(kw, golden=fia_golden_lowp):
    out, lse = fia(**kw)
    g_out, g_lse = golden(**kw)
    assert compare(out, g_out, "float16").passed, compare(out, g_out, "float16")
    assert compare(lse, g_lse, "float16").passed, compare(lse, g_lse, "float16")
    return out, lse


# ------------------------------------------------------------------------------------ crashes -> typed errors
def test_num_heads_float_is_a_param_error(prefill):
    """Binding (torch_npu: int num_heads); was a TypeError deep in tiling/info.py."""
    _raises(dict(prefill, num_heads=4.0), "num_heads", "must be an int", PARAM_INVALID)


def test_actual_seq_lengths_kv_none_element_is_a_param_error(prefill):
    """Binding (int[]); was a TypeError in tiling/params.py."""
    _raises(dict(prefill, actual_seq_lengths_kv=[None]), "actual_seq_lengths_kv", "element 0 is None",
            PARAM_INVALID)


def test_input_layout_none_is_a_param_error_listing_the_layouts(prefill):
    """Binding (str input_layout); was an AttributeError in tiling/checkers/legacy.py."""
    err = _raises(dict(prefill, input_layout=None), "input_layout", "must be a string", PARAM_INVALID)
    assert all(layout in err.rule for layout in INPUT_LAYOUTS)


def test_a_0d_query_says_it_reads_as_absent(prefill):
    """op_host reads a rank-0 tensor as an absent one; a numpy scalar query was reported as ``query=None``."""
    err = _raises(dict(prefill, query=np.float16(1)), "query", "(a 0-D tensor reads as absent)",
                  AclnnStatus.PARAM_NULLPTR)
    assert "0-D float16" in str(err)
    assert "reads as absent" not in str(_raises(dict(prefill, query=None), "query", "query is required"))


# ------------------------------------------------------------------------ silent accepts: Python types
def test_actual_seq_lengths_kv_string_is_a_param_error(prefill):
    """Binding: "100" was read as the characters 1, 0, 0."""
    _raises(dict(prefill, actual_seq_lengths_kv="100"), "actual_seq_lengths_kv", "not str", PARAM_INVALID)


def test_softmax_lse_flag_string_is_a_param_error(prefill):
    """Binding (bool softmax_lse_flag): "no" was truthy, so the lse was returned."""
    _raises(dict(prefill, softmax_lse_flag="no"), "softmax_lse_flag", "must be a bool", PARAM_INVALID)


def test_scale_string_is_a_param_error(prefill):
    """Binding (float scale): "0.125" was converted by float() at launch."""
    _raises(dict(prefill, scale="0.125"), "scale", "must be a float", PARAM_INVALID)


def test_kv_length_float_is_a_param_error(prefill):
    """Binding (int[]): 50.7 was truncated to 50."""
    _raises(dict(prefill, actual_seq_lengths_kv=[50.7, 64]), "actual_seq_lengths_kv", "50.7", PARAM_INVALID)


def test_v2_names_the_v2_keyword_in_binding_errors(prefill):
    kw = {k: v for k, v in prefill.items() if k not in ("num_heads", "scale", "softmax_lse_flag")}
    with pytest.raises(ParamError) as exc:
        fia_v2(**kw, num_query_heads=8, softmax_scale="0.125")
    assert exc.value.param == "softmax_scale" and exc.value.status == PARAM_INVALID


# -------------------------------------------------------------------- silent accepts: op_host's rules
@pytest.mark.parametrize("which", ["actual_seq_lengths", "actual_seq_lengths_kv"])
def test_tnd_decreasing_cumulative_lengths_are_rejected(tnd, which):
    """Rejected. op_host's FIA framework rejects a decreasing cumulative list (check_feature.cpp,
    CheckFeatureActualSeqLensQData / ...KvData); this call goes to the arch22 split-fuse route, whose
    CheckFAIAvailability (fused_infer_attention_score_tiling.cpp) does not look and whose tiling takes the
    difference as uint32 (a batch of ~4e9 rows), so cvtile refuses it with the framework's rule."""
    lens = {"actual_seq_lengths": [100, 150], "actual_seq_lengths_kv": [100, 150]}
    lens[which] = [100, 50]
    _raises(dict(tnd, **lens), which, "must not decrease", PARAM_INVALID)


def test_regression_negative_num_key_value_heads_on_an_empty_tnd_call_is_rejected():
    """Found by the simulated fuzz tier: an all-empty TND call with num_key_value_heads=-1 went through (op_host's
    arch22 split-fuse route tiles it: the oracle returns SUCCESS with 4294967295 heads in the tiling data) and
    returned empty outputs, while the golden raised an untyped ValueError. The framework's checks and the other
    routes refuse a negative count; cvtile refuses it on every route, naming the parameter."""
    z = np.zeros((0, 1, 16), np.float16)
    kw = dict(query=z, key=z, value=z, num_heads=1, num_key_value_heads=-1, input_layout="TND", scale=1.0,
              actual_seq_lengths=[0], actual_seq_lengths_kv=[0])
    _raises(kw, "num_key_value_heads", "must not be negative", PARAM_INVALID)


def test_kv_length_list_longer_than_b_uses_the_first_b(prefill):
    """Handled as op_host: CheckFeatureActualSeqLensKvData reads min(size, B) elements; the rest is unused."""
    _, tiling = plan_call(**dict(prefill, actual_seq_lengths_kv=[300, 512, 7]))
    assert tiling.kv_seqlens == (300, 512)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_scale_nan_or_inf_runs_as_the_chip_does(prefill):
    """Handled as op_host: CheckSingleParaScaleValue has no rule, the kernel multiplies by the scale as given.
    NaN gives NaN everywhere; inf gives NaN where the golden does (inf - inf in the softmax)."""
    out, lse = fia(**dict(prefill, scale=float("nan")))
    assert np.isnan(out.astype(np.float32)).all() and np.isnan(lse).all()
    kw = dict(prefill, scale=float("inf"))
    out, _ = fia(**kw)
    g_out, _ = fia_golden(**kw)
    assert (np.isnan(out.astype(np.float32)) == np.isnan(g_out)).all()


def test_kv_padding_beyond_s2_and_query_padding_minus_3_run_as_the_kernel_does(prefill):
    """Handled as the kernel: op_host checks only the padding tensors' shapes (CheckSingleParaKvPaddingSize,
    CheckFeatureLeftPadding); the kernel clamps a negative padding to 0 and gives a batch whose padded block
    starts before 0 an all-zero output (ComputeKVPaddingBeginOffset -> InitAllZeroOutput, incre_flash_attention
    op_kernel). So kv_padding_size 600 > S2 empties every batch, query_padding_size -3 is padding 0."""
    kw = dict(prefill, actual_seq_lengths=[64, 40], actual_seq_lengths_kv=[300, 512],
              kv_padding_size=np.array([600], np.int64))
    out, lse = _against_golden(kw)
    assert not out.any() and (lse == LSE_EMPTY).all()
    kw = dict(prefill, actual_seq_lengths=[64, 40], query_padding_size=np.array([-3], np.int64))
    out, _ = _against_golden(kw)
    same, _ = fia(**dict(kw, query_padding_size=np.array([0], np.int64)))
    assert np.array_equal(out, same)


def test_pre_tokens_minus_2_pow_40_with_sparse_0_and_a_mask_masks_every_row(prefill):
    """Handled as op_host: GetPreNextToken clamps pre_tokens to -INT_MAX and CheckTokens accepts; the band
    -pre <= j - i is then empty, so every row is fully masked: output 0, lse +inf."""
    kw = dict(prefill, pre_tokens=-2 ** 40, atten_mask=np.zeros((2, 1, 64, 512), np.bool_))
    out, lse = _against_golden(kw)
    assert not out.any() and (lse == np.inf).all()


@pytest.mark.parametrize("extra", [dict(actual_seq_lengths=[-1, -1]), dict(actual_seq_lengths=[5, 5]),
                                   dict(sparse_mode=1), dict(sparse_mode=2), dict(sparse_mode=7)],
                         ids=["q-len-1", "q-len5", "sparse1", "sparse2", "sparse7"])
def test_decode_ignores_query_lengths_and_sparse_mode_as_op_host(decode, extra):
    """Handled as op_host on arch22: the legacy IFA decode class (GetLegacyIfaFlag) drops actual_seq_lengths
    and forces sparse_mode 0 in GetUpdateInfo, so decode with actual_seq_lengths [-1] or [5], or sparse 1/2
    (or 7) without a mask, computes exactly the plain decode. (sparse 7 used to raise
    UnsupportedParameterError on atten_mask; arch35 rejects these: tests/tiling/test_bad_input_tiling.py.)"""
    plain, plain_lse = fia(**decode)
    out, lse = fia(**dict(decode, **extra))
    assert np.array_equal(out, plain) and np.array_equal(lse, plain_lse)
    g_out, _ = fia_golden_lowp(**dict(decode, **extra))
    assert compare(out, g_out, "float16").passed


# --------------------------------------------------------------------------------- misleading messages
def test_wrong_query_dtype_blames_query_not_attention_out(decode):
    """op_host rejects an fp32 query on the decode route (its output would be fp32); the error named
    attention_out, which the user never passed."""
    kw = dict(decode, query=decode["query"].astype(np.float32))
    err = _raises(kw, "query", "float32")
    assert "attention_out takes the query's dtype" in err.rule


@pytest.mark.parametrize("heads", [4, 16])
def test_num_heads_mismatch_blames_num_heads(prefill, heads):
    """op_host rejects it (the inferred attention_out disagrees with query); the error named attention_out."""
    err = _raises(dict(prefill, num_heads=heads), "num_heads", "must equal the N axis of query")
    assert "(8)" in err.rule


def test_python_list_query_says_it_must_be_an_array(prefill):
    """Binding: a nested list is not a tensor (it said "tensor lists are not simulated")."""
    err = _raises(dict(prefill, query=prefill["query"].tolist()), "query", "must be an array/tensor",
                  PARAM_INVALID)
    assert "tensor lists" not in str(err)


def test_key_tensor_list_element_of_batch_2_is_refused_by_name(prefill):
    """A tensor list holds one batch-1 tensor per batch (aclnn doc; op_host does not look): a list of the whole
    batched key is refused naming the element, not concatenated."""
    k, v = prefill["key"], prefill["value"]
    err = _raises(dict(prefill, key=[k, k], value=[v, v]), "key[0]", "batch 1", PARAM_INVALID)
    assert str(tuple(k.shape)) in str(err)


def test_sparse_mode_7_on_prefill_lists_the_supported_modes(prefill):
    """op_host rejects it (CheckSingleParaSparseMode); a ParamError on sparse_mode, not atten_mask."""
    _raises(dict(prefill, sparse_mode=7, atten_mask=mask_template()), "sparse_mode", "0, 1, 2, 3, 4")


def test_sparse_3_without_mask_says_the_template_is_expected(prefill):
    err = _raises(dict(prefill, sparse_mode=3), "atten_mask", "2048x2048")
    assert "mask_template()" in err.rule


# ---------------------------------------------------------------------------------- empty-row lse
@pytest.mark.parametrize("target,legacy", [("Ascend910B1", True), ("Ascend950", False)])
def test_empty_row_lse_agrees_between_api_and_golden_per_route(decode, target, legacy):
    """One definition (golden.fia.empty_row_lse): rows without kv get -3.4e38 on the arch22 legacy decode
    route and +inf elsewhere; an empty key/value tensor gets +inf on every route (the empty-tensor template).
    The API (no kernel: no core has work) and the golden with the same target agree."""
    kw = dict(decode, actual_seq_lengths_kv=[0, 0], target=target)
    _, lse = fia(**kw)
    _, g_lse = fia_golden(**kw)
    want = LSE_EMPTY_LEGACY_DECODE if legacy else LSE_EMPTY
    assert empty_row_lse(legacy_decode=legacy, kv_empty=False) == want
    assert (lse == np.float32(want)).all() and (g_lse == want).all()
    empty = dict(decode, key=decode["key"][:, :0], value=decode["value"][:, :0], target=target)
    _, lse = fia(**empty)
    _, g_lse = fia_golden(**empty)
    assert (lse == np.inf).all() and (g_lse == np.inf).all()


@pytest.mark.parametrize("target", ["Ascend910B1", "Ascend950"])
def test_a_fully_masked_row_on_the_legacy_decode_route_has_lse_inf_regression(decode, target):
    """Found by the fuzz tier (seed 20261209): a decode on the arch22 legacy decode route whose only key is
    masked got the lse -3.4e38 (the route's init value for rows without KV) from the kernel, where the golden
    gives +inf (the FIA kernels' AdjustSoftMaxRes value for a fully masked row). Batch 0 is masked whole, batch 1
    has no KV: +inf and the route's init value, in the kernel and in the golden."""
    mask = np.zeros((2, 1, 256), bool)
    mask[0] = True
    kw = dict(decode, atten_mask=mask, actual_seq_lengths_kv=[256, 0], target=target)
    _, lse = fia(**kw)
    _, g_lse = fia_golden(**kw)
    init = LSE_EMPTY_LEGACY_DECODE if target == "Ascend910B1" else LSE_EMPTY
    assert (lse[0] == np.inf).all() and (g_lse[0] == np.inf).all()
    assert (lse[1] == np.float32(init)).all() and (g_lse[1] == init).all()


def test_regression_arch35_gqa_decode_rows_the_split_skips_under_a_causal_band_are_refused():
    """Found by the simulated fuzz tier: on Ascend950, a GQA decode (G = 2, one query position, one KV position)
    with sparse_mode 3 returned zeros for head 0 where the golden (and the band the kernel applies) lets it see
    KV position 0: the arch35 split skips the rows it finds without KV counting the folded G x S1 rows as query
    positions, and the kernel writes only its tasks' rows. The call is refused, naming sparse_mode; the same
    call with two KV positions (every row covered) still runs and matches the golden."""
    rng = np.random.default_rng(21)
    q = rng.standard_normal((1, 1, 32)).astype(np.float16)
    kw = dict(num_heads=2, num_key_value_heads=1, input_layout="BSH", scale=1.0, sparse_mode=3,
              atten_mask=mask_template(), target="Ascend950")
    k1 = rng.standard_normal((1, 1, 16)).astype(np.float16)
    with pytest.raises(UnsupportedParameterError) as exc:
        fia(q, k1, k1, **kw)
    assert exc.value.param == "sparse_mode" and "skip" in str(exc.value)
    k2 = rng.standard_normal((1, 2, 16)).astype(np.float16)
    out, _ = fia(q, k2, k2, **kw)
    g_out, _ = fia_golden_lowp(q, k2, k2, **kw)
    assert compare(out, g_out, "float16").passed


@pytest.mark.parametrize("what", ["empty_key_blocks", "table_past_the_cache"])
def test_regression_a_paged_cache_the_chip_would_read_outside_is_refused(what):
    """Found by the fuzz tier (seed 20261211): a paged int8 decode whose key was (1, 0, 16), one block of no
    positions, beside a value of (1, 128, 16) with block_size 128. op_host reads the block size from the
    attribute and never the table, so it accepts the call; the chip would read 128 positions a block, outside
    the key. The kernel stopped at its bounds check with a SimulationError. The API now refuses a cache whose
    blocks are not block_size long, and a table entry a batch reads that names a block the cache does not hold,
    by name."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 1, 16)).astype(np.float16)
    v = rng.integers(-128, 128, (1, 128, 16)).astype(np.int8)
    k = np.zeros((1, 0, 16), np.int8) if what == "empty_key_blocks" else v.copy()
    table = np.array([[0 if what == "empty_key_blocks" else 3]], np.int32)
    kw = dict(num_heads=1, num_key_value_heads=1, input_layout="BSH", scale=1.0, block_table=table,
              block_size=128, actual_seq_lengths_kv=[1], antiquant_scale=np.full((2, 16), 0.01, np.float16))
    with pytest.raises(UnsupportedParameterError) as exc:
        fia(q, k, v, **kw)
    assert exc.value.param == ("key" if what == "empty_key_blocks" else "block_table")
    assert "outside" in str(exc.value)
