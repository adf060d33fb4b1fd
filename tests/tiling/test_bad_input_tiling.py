"""Bad input at the tiling mirror (issue 12, item 1): each test names the input, says whether op_host rejects
it or handles it (and how), and where that rule lives in op_host.

op_host files named below: ``fused_infer_attention_score_tiling_info_parser.cpp`` (FiaInfoParser),
``fused_infer_attention_score_tiling_check_feature.cpp`` / ``..._check_single_para.cpp`` (FiaTilingCheck), all
under attention/fused_infer_attention_score/op_host/arch32, and ``fused_infer_attention_score_tiling.cpp``
(the arch22 legacy entry) one directory up.
"""

from __future__ import annotations

import math

import pytest

from cvtile.tiling import AclnnStatus
from cvtile.tiling.errors import ParamError
from cvtile.tiling.layouts import INPUT_LAYOUTS
from cvtile.tiling.params import FiaParams, TensorMeta, host_list_values

T = TensorMeta
INT_MAX = 2147483647
PARAM_INVALID = int(AclnnStatus.PARAM_INVALID)
TILING_ERROR = int(AclnnStatus.INNER_TILING_ERROR)

#: arch22 legacy-IFA-class decode (BNSD, S1 1, D == Dv) through the new framework (GQA, D 128)
DECODE = dict(query=(2, 8, 1, 128), attention_out=(2, 8, 1, 128))


# ------------------------------------------------------------------------------ Python types (the binding)
@pytest.mark.parametrize("bad", [[None], [50.7], [64, "64"]], ids=["None", "float", "str-element"])
def test_actual_seq_lengths_kv_non_int_elements_are_a_param_error(bad):
    """Binding rule (torch_npu's int[]): FiaParams.from_api no longer crashes in int() (was a TypeError) nor
    truncates 50.7 to 50; it raises ParamError 161002 naming the parameter and the element."""
    tensors = dict(query=T((1, 4, 16, 64), "float16"), key=T((1, 4, 128, 64), "float16"),
                   value=T((1, 4, 128, 64), "float16"), actual_seq_lengths_kv=bad)
    with pytest.raises(ParamError) as exc:
        FiaParams.from_api(tensors, dict(num_heads=4, input_layout="BNSD"))
    err = exc.value
    assert err.param == "actual_seq_lengths_kv" and int(err.status) == PARAM_INVALID and err.checker == "binding"
    assert "list of ints" in err.rule and repr(bad[-1]) in err.rule


def test_actual_seq_lengths_kv_string_is_a_param_error():
    """Binding rule: "100" was iterated as the characters 1, 0, 0; a string is not an int[]."""
    with pytest.raises(ParamError) as exc:
        host_list_values("actual_seq_lengths_kv", "100")
    assert exc.value.param == "actual_seq_lengths_kv" and "not str" in exc.value.rule


# ------------------------------------------------------------------------------------- misleading messages
@pytest.mark.parametrize("arch", ["arch22", "arch35"])
def test_wrong_layout_string_lists_the_valid_layouts(verdict_kit, arch):
    """op_host rejects it (CheckSingleParaLayout lists the valid ones; on arch22 the legacy entry's output-
    layout lookup fails first); the error now lists every valid input_layout either way."""
    err = verdict_kit.reject(arch, input_layout="XYZ")
    assert err.param == "input_layout" and int(err.status) == TILING_ERROR
    assert all(layout in err.rule for layout in INPUT_LAYOUTS), err.rule


def test_sparse_3_without_mask_says_the_2048_template_is_expected(verdict_kit):
    """op_host rejects it (FiaTilingCheck::CheckFeatureMask: a sparse mode other than 0 needs atten_mask); the
    error now says which mask: the compressed 2048x2048 template."""
    err = verdict_kit.expect("arch22", "gqa", "atten_mask", TILING_ERROR, "2048x2048", "mask", sparse_mode=3)
    assert "triu(ones(2048, 2048), 1)" in err.rule and "mask_template()" in err.rule


def test_sparse_3_without_mask_on_the_split_fuse_route_says_the_template_is_expected(verdict_kit):
    """The arch22 TND split-fuse route rejects it too (CheckFAIMask in fused_infer_attention_score_tiling.cpp)."""
    err = verdict_kit.reject("arch22", "tnd", sparse_mode=3)
    assert err.param == "sparse_mode" and err.checker == "legacy_fai" and "2048x2048" in err.rule


# ------------------------------------------------------------------------ accepted the way op_host does
def test_pre_tokens_minus_2_pow_40_with_sparse_0_and_a_mask_is_clamped_and_accepted(verdict_kit):
    """op_host handles it: FiaInfoParser::GetPreNextToken clamps pre/next tokens to [-INT_MAX, INT_MAX], then
    CheckTokens passes (-next_tokens = -INT_MAX is not above pre_tokens = -INT_MAX). Every row's band is empty."""
    info = verdict_kit.accept("arch22", "gqa", pre_tokens=-2 ** 40, atten_mask=T((2, 1, 128, 256), "bool"))
    assert info.pre_token == -INT_MAX and info.next_token == INT_MAX


@pytest.mark.parametrize("lens", [[-1, -1], [5, 5]], ids=["-1", "5"])
def test_decode_actual_seq_lengths_out_of_range_are_ignored_on_arch22_and_rejected_on_arch35(verdict_kit, lens):
    """arch22 handles it: the legacy IFA decode class (FiaInfoParser::GetLegacyIfaFlag: BSH/BSND/BNSD, S1 1,
    D == Dv, no rope) drops actual_seq_lengths in GetUpdateInfo, so the query length stays 1. arch35 has no
    such class: CheckFeatureActualSeqLensQData rejects an element outside [0, S1]."""
    info = verdict_kit.accept("arch22", "gqa", actual_seq_lengths=lens, **DECODE)
    assert info.is_legacy_ifa and not info.actual_seq_q_present
    err = verdict_kit.reject("arch35", "gqa", actual_seq_lengths=lens, **DECODE)
    assert err.param == "actual_seq_lengths" and err.checker == "actual_seq_len"


@pytest.mark.parametrize("sparse", [1, 2, 7])
def test_decode_sparse_mode_without_mask_is_ignored_on_arch22(verdict_kit, sparse):
    """arch22 handles it: GetUpdateInfo forces sparse_mode 0 (and pre/next INT_MAX) for the legacy IFA decode
    class before any sparse-mode check, so 1/2 without a mask (and even 7) run as no mask. Off that class
    (prefill) CheckSingleParaSparseMode / CheckFeatureMask reject them."""
    verdict_kit.accept("arch22", "gqa", sparse_mode=sparse, **DECODE)
    err = verdict_kit.reject("arch22", "gqa", sparse_mode=sparse)
    assert err.checker == "mask"


def test_kv_length_list_longer_than_b_uses_the_first_b(verdict_kit):
    """op_host handles it: CheckFeatureActualSeqLensKvData checks and keeps min(size, B) elements (and the
    existence rule takes 1 or >= B elements); the extra ones are never read."""
    info = verdict_kit.accept("arch22", "gqa", actual_seq_lengths_kv=[200, 100, 9999])
    assert info.b_size == 2


@pytest.mark.parametrize("scale", [math.nan, math.inf])
def test_scale_nan_or_inf_is_accepted_as_op_host_does(verdict_kit, scale):
    """op_host accepts it: FiaTilingCheck::CheckSingleParaScaleValue has no rule (scale is a float attribute
    passed to the kernel as is), so the chip computes with it (NaN outputs; see tests/kernels)."""
    verdict_kit.accept("arch22", "gqa", scale=scale)
    verdict_kit.accept("arch35", "gqa", scale=scale)
