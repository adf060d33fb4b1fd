"""``cvtile.npu_fused_infer_attention_score``: torch_npu's interface, its outputs, and how it refuses calls.

The signature is pinned against torch_npu's (research notes, torch_npu_api.md §1.1); numeric
correctness is the kernel grid's business (test_fia_kernel_*.py). All calls here are tiny and share
two or three kernel specialisations, so the file runs in seconds once those are compiled.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile import ParamError, UnsupportedParameterError
from cvtile import npu_fused_infer_attention_score as fia
from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.fia.api import SUPPORTED_OPTIONAL_INPUTS, plan_call
from cvtile.tiling import AclnnStatus

INT_MAX = 2147483647
BF16 = ml_dtypes.bfloat16

#: torch_npu.npu_fused_infer_attention_score (V1 API): (name, default) in schema order; all keyword-only
#: after query, key, value (torch_npu_api.md §1.1).
TORCH_NPU_KEYWORDS = [
    ("pse_shift", None), ("atten_mask", None), ("actual_seq_lengths", None), ("actual_seq_lengths_kv", None),
    ("dequant_scale1", None), ("quant_scale1", None), ("dequant_scale2", None), ("quant_scale2", None),
    ("quant_offset2", None), ("antiquant_scale", None), ("antiquant_offset", None), ("key_antiquant_scale", None),
    ("key_antiquant_offset", None), ("value_antiquant_scale", None), ("value_antiquant_offset", None),
    ("block_table", None), ("query_padding_size", None), ("kv_padding_size", None), ("key_shared_prefix", None),
    ("value_shared_prefix", None), ("actual_shared_prefix_len", None), ("query_rope", None), ("key_rope", None),
    ("key_rope_antiquant_scale", None), ("num_heads", 1), ("scale", 1.0), ("pre_tokens", INT_MAX),
    ("next_tokens", INT_MAX), ("input_layout", "BSH"), ("num_key_value_heads", 0), ("sparse_mode", 0),
    ("inner_precise", 0), ("block_size", 0), ("antiquant_mode", 0), ("key_antiquant_mode", 0),
    ("value_antiquant_mode", 0), ("softmax_lse_flag", False),
]
OPTIONAL_TENSORS = [name for name, default in TORCH_NPU_KEYWORDS if default is None]
UNSUPPORTED = [name for name in OPTIONAL_TENSORS if name not in SUPPORTED_OPTIONAL_INPUTS]


def _rand(rng, shape, dtype=np.float16):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


@pytest.fixture
def bnsd():
    """A small valid GQA prefill call (BNSD, fp16, 8 query heads on 2 kv heads, S1 64, S2 512: the shapes of
    the kernel grid's default family, so the kernel specialisation is shared)."""
    rng = np.random.default_rng(7)
    return dict(query=_rand(rng, (2, 8, 64, 64)), key=_rand(rng, (2, 2, 512, 64)), value=_rand(rng, (2, 2, 512, 64)),
                num_heads=8, num_key_value_heads=2, input_layout="BNSD", scale=0.125)


@pytest.fixture
def bsh_bf16():
    """BSH, bf16, 8 query heads on 1 kv head (the grid's lse-off bf16 family)."""
    rng = np.random.default_rng(8)
    return dict(query=_rand(rng, (2, 64, 512), BF16), key=_rand(rng, (2, 512, 64), BF16),
                value=_rand(rng, (2, 512, 64), BF16), num_heads=8, num_key_value_heads=1, input_layout="BSH",
                scale=0.125)


# ---------------------------------------------------------------------------------------------- signature
def test_signature_matches_torch_npu():
    params = list(inspect.signature(fia).parameters.values())
    assert [p.name for p in params[:3]] == ["query", "key", "value"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p.default is inspect.Parameter.empty
               for p in params[:3])
    rest = params[3:]
    assert [(p.name, p.default) for p in rest[:-2]] == TORCH_NPU_KEYWORDS
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest)
    # cvtile's two additions come last, keyword-only: the platform (A2) and the simulator's execution order
    assert [(p.name, p.default) for p in rest[-2:]] == [("target", "Ascend910B1"), ("order", "program")]


def test_reexported_under_torch_npu_name():
    assert cvtile.npu_fused_infer_attention_score is cvtile.kernels.npu_fused_infer_attention_score
    assert issubclass(UnsupportedParameterError, NotImplementedError)
    assert issubclass(ParamError, ValueError)


def test_positional_attributes_are_refused(bnsd):
    q, k, v = bnsd["query"], bnsd["key"], bnsd["value"]
    with pytest.raises(TypeError):
        fia(q, k, v, None)


# ---------------------------------------------------------------------------------------------- outputs
def test_returns_out_and_empty_lse_by_default(bsh_bf16):
    out, lse = fia(**bsh_bf16)
    assert out.shape == bsh_bf16["query"].shape and out.dtype == BF16
    assert isinstance(lse, np.ndarray) and lse.shape == (0,) and lse.dtype == np.float32
    rep = compare(out, fia_golden_lowp(**bsh_bf16)[0], "bfloat16")
    assert rep.passed, str(rep)


def _lse_call(layout: str) -> tuple[dict, tuple]:
    rng = np.random.default_rng(1)
    shapes = {  # (query, key/value, lse), sharing the grid's default specialisations
        "BNSD": ((2, 8, 64, 64), (2, 2, 512, 64), (2, 8, 64, 1)),
        "BSND-decode": ((2, 1, 8, 64), (2, 256, 2, 64), (2, 8, 1, 1)),
        "BSH-decode": ((2, 1, 512), (2, 256, 128), (2, 8, 1, 1)),
        "NTD_TND": ((8, 94, 64), (2, 812, 64), (94, 8, 1)),
    }
    qs, ks, lse_shape = shapes[layout]
    kw = dict(query=_rand(rng, qs), key=_rand(rng, ks), value=_rand(rng, ks), num_heads=8, num_key_value_heads=2,
              input_layout=layout.split("-")[0], softmax_lse_flag=True, scale=0.125)
    if layout == "NTD_TND":
        kw.update(actual_seq_lengths=[64, 64, 94], actual_seq_lengths_kv=[512, 812, 812])
    return kw, lse_shape


@pytest.mark.parametrize("layout", ["BNSD", "BSND-decode", "BSH-decode", "NTD_TND"])
def test_lse_shape_and_dtype(layout):
    kw, lse_shape = _lse_call(layout)
    out, lse = fia(**kw)
    assert lse.shape == lse_shape and lse.dtype == np.float32
    g_out, g_lse = fia_golden_lowp(**kw)
    assert out.shape == g_out.shape
    if layout == "NTD_TND":   # batch 1 has no query rows, batch 2 no kv: its rows are 0 with lse +inf
        assert not out[64:].any() and np.all(lse[64:] == np.inf)
    rep = compare(lse, g_lse, "float16")
    assert rep.passed, str(rep)


def test_bf16_in_bf16_out(bsh_bf16):
    kw = dict(bsh_bf16, actual_seq_lengths=[64, 33], actual_seq_lengths_kv=[512, 0])
    out, _ = fia(**kw)
    assert out.dtype == BF16 and out.shape == kw["query"].shape
    assert not out[1, 33:].astype(np.float32).any() and not out[1].astype(np.float32).any()
    rep = compare(out, fia_golden_lowp(**kw)[0], "bfloat16")
    assert rep.passed, str(rep)


def test_inputs_are_not_modified(bnsd):
    rng = np.random.default_rng(2)
    mask = rng.random((2, 1, 64, 512)) < 0.3
    kw = dict(bnsd, atten_mask=mask, actual_seq_lengths=[64, 40], actual_seq_lengths_kv=[512, 77],
              softmax_lse_flag=True)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else list(v) if isinstance(v, list) else v)
              for k, v in kw.items()}
    out, _ = fia(**kw)
    for k, v in kw.items():
        if isinstance(v, np.ndarray):
            assert np.array_equal(v.view(np.uint8), before[k].view(np.uint8)), k
        else:
            assert v == before[k], k
    assert compare(out, fia_golden_lowp(**kw)[0], "float16").passed


def test_empty_kv_gives_zeros_and_inf_lse(bnsd):
    kw = dict(bnsd, key=bnsd["key"][:, :, :0], value=bnsd["value"][:, :, :0], softmax_lse_flag=True)
    out, lse = fia(**kw)
    assert out.shape == bnsd["query"].shape and not out.any()
    assert lse.shape == (2, 8, 64, 1) and np.all(lse == np.inf)


@pytest.mark.parametrize("lengths", [None, [0, 0, 0, 0]])
def test_empty_kv_on_the_legacy_ifa_route_runs_its_zero_kv_tasks(lengths):
    # MHA decode with D 256 takes the legacy IFA tiling; with G from the heads (not 0) and B*N2 too large for FD
    # it gives every (b, n2) a task, which must see no KV positions (the key's S is 0), not a 1024-position block
    q = np.random.default_rng(0).random((4, 8, 1, 256)).astype(np.float16)
    kv = np.zeros((4, 8, 0, 256), np.float16)
    kw = dict(num_heads=8, input_layout="BNSD", softmax_lse_flag=True, actual_seq_lengths_kv=lengths)
    _, t = plan_call(query=q, key=kv, value=kv, **kw)
    assert t.route == "ifa" and not t.fd and t.kv_seqlens == (0, 0, 0, 0)
    assert sum(len(c.tasks) for c in t.cores) == 32
    out, lse = fia(q, kv, kv, **kw)
    assert out.shape == q.shape and not out.any() and np.all(lse == np.inf)


@pytest.mark.slow
def test_target_keyword(bnsd):
    from cvtile.kernels import mask_template

    kw = dict(bnsd, sparse_mode=3, atten_mask=mask_template(), softmax_lse_flag=True)
    a, lse_a = fia(**kw)
    b, lse_b = fia(**kw, target="Ascend950")
    assert compare(a, b, "float16").passed and compare(lse_a, lse_b, "float32").passed
    with pytest.raises(ValueError, match="Ascend123.*not a known platform"):
        fia(**bnsd, target="Ascend123")


# ---------------------------------------------------------------------------------------------- torch
def test_torch_in_torch_out(bnsd):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(bnsd[n].copy()) for n in ("query", "key", "value"))
    kw = {n: bnsd[n] for n in ("num_heads", "num_key_value_heads", "input_layout", "scale")}
    out, lse = fia(q, k, v, softmax_lse_flag=True, **kw)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16 and tuple(out.shape) == (2, 8, 64, 64)
    assert isinstance(lse, torch.Tensor) and lse.dtype == torch.float32 and tuple(lse.shape) == (2, 8, 64, 1)
    ref, ref_lse = fia(**bnsd, softmax_lse_flag=True)
    assert np.array_equal(out.numpy(), ref) and np.array_equal(lse.numpy(), ref_lse)
    assert np.array_equal(q.numpy(), bnsd["query"])        # not modified


def test_torch_bf16_and_empty_lse(bsh_bf16):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(bsh_bf16[n].astype(np.float32)).to(torch.bfloat16) for n in ("query", "key", "value"))
    kw = {n: bsh_bf16[n] for n in ("num_heads", "num_key_value_heads", "input_layout", "scale")}
    out, lse = fia(q, k, v, **kw)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert isinstance(lse, torch.Tensor) and tuple(lse.shape) == (0,)
    ref, _ = fia(**bsh_bf16)
    assert np.array_equal(out.float().numpy(), ref.astype(np.float32))


# ---------------------------------------------------------------------------------------------- refusals
def _expect_param_error(kw, param, status=AclnnStatus.INNER_TILING_ERROR, match=None):
    with pytest.raises(ParamError) as info:
        fia(**kw)
    err = info.value
    assert err.param == param and err.status == status, str(err)
    assert f"aclnn {int(status)}" in str(err) and param in str(err)
    if match:
        assert match in str(err), str(err)
    return err


def test_heads_not_divisible(bnsd):
    rng = np.random.default_rng(0)
    kv = _rand(rng, (2, 3, 128, 64))
    _expect_param_error(dict(bnsd, key=kv, value=kv, num_key_value_heads=3), "num_heads", match="multiple")


@pytest.mark.parametrize("layout", ["XYZ", "BSH_BSND_BNSD", "TND_NTD"])
def test_bad_layout(bnsd, layout):
    kw = dict(bnsd, input_layout=layout)
    if layout == "TND_NTD":
        rng = np.random.default_rng(0)
        kw.update(query=_rand(rng, (32, 8, 64)), key=_rand(rng, (256, 2, 64)), value=_rand(rng, (256, 2, 64)),
                  actual_seq_lengths=[16, 32], actual_seq_lengths_kv=[128, 256])
    _expect_param_error(kw, "input_layout")


def test_query_rank_does_not_fit_layout(bnsd):
    err = _expect_param_error(dict(bnsd, input_layout="BSH"), "query")
    assert "3 dims" in err.rule


def test_head_dim_too_big():
    rng = np.random.default_rng(0)
    q, k = _rand(rng, (1, 4, 4, 1024)), _rand(rng, (1, 4, 8, 1024))
    _expect_param_error(dict(query=q, key=k, value=k, num_heads=4, input_layout="BNSD"), "query", match="512")


@pytest.mark.parametrize("mode", [5, 6, 7, 8, 10])
def test_sparse_mode_out_of_range(bnsd, mode):
    _expect_param_error(dict(bnsd, sparse_mode=mode), "sparse_mode")


def test_sparse_mode_2_needs_the_mask(bnsd):
    _expect_param_error(dict(bnsd, sparse_mode=2), "atten_mask")


@pytest.mark.parametrize("name,values", [("actual_seq_lengths", [65, 64]), ("actual_seq_lengths_kv", [512, 513])])
def test_actual_lengths_longer_than_s(bnsd, name, values):
    _expect_param_error(dict(bnsd, **{name: values}), name, match="must not exceed")


def test_inner_precise_out_of_range(bnsd):
    _expect_param_error(dict(bnsd, inner_precise=7), "inner_precise")


def test_missing_query_is_a_null_parameter(bnsd):
    _expect_param_error(dict(bnsd, query=None), "query", status=AclnnStatus.PARAM_NULLPTR)


# ---------------------------------------------------------------------------------------------- unsupported
def _unsupported_call(name: str) -> dict:
    """A call the tiling accepts (on Ascend910B1) that uses the feature of ``name``."""
    z = np.zeros
    b, n, s1, s2, d = 2, 8, 16, 256, 64
    kw = dict(query=z((b, n, s1, d), np.float16), key=z((b, n, s2, d), np.float16),
              value=z((b, n, s2, d), np.float16), num_heads=n, input_layout="BNSD")
    i8 = dict(key=z((b, n, s2, d), np.int8), value=z((b, n, s2, d), np.int8))
    prefix = dict(query=z((1, n, s1, d), np.float16), key=z((1, n, s2, d), np.float16),
                  value=z((1, n, s2, d), np.float16), key_shared_prefix=z((1, n, 64, d), np.float16),
                  value_shared_prefix=z((1, n, 64, d), np.float16))
    per_head = dict(query=z((b, n, 1, d), np.float16), **i8, key_antiquant_scale=z((n, 1, d), np.float16),
                    value_antiquant_scale=z((n, 1, d), np.float16))
    mla = dict(query=z((b, 1, 32, 512), BF16), key=z((b, 256, 1, 512), BF16), value=z((b, 256, 1, 512), BF16),
               query_rope=z((b, 1, 32, 64), BF16), key_rope=z((b, 256, 1, 64), BF16), num_heads=32,
               num_key_value_heads=1, input_layout="BSND")
    calls = {
        "pse_shift": dict(pse_shift=z((b, n, s1, s2), np.float16)),
        "quant_scale2": dict(quant_scale2=np.ones(1, np.float32)),
        "quant_offset2": dict(quant_scale2=np.ones(1, np.float32), quant_offset2=np.zeros(1, np.float32)),
        "antiquant_scale": dict(**i8, antiquant_scale=z((2, n, 1, d), np.float16)),
        "antiquant_offset": dict(**i8, antiquant_scale=z((2, n, 1, d), np.float16),
                                 antiquant_offset=z((2, n, 1, d), np.float16)),
        "key_antiquant_scale": per_head, "value_antiquant_scale": per_head,
        "key_antiquant_offset": dict(per_head, key_antiquant_offset=z((n, 1, d), np.float16),
                                     value_antiquant_offset=z((n, 1, d), np.float16)),
        "value_antiquant_offset": dict(per_head, key_antiquant_offset=z((n, 1, d), np.float16),
                                       value_antiquant_offset=z((n, 1, d), np.float16)),
        "block_table": dict(key=z((4, 128, n * d), np.float16), value=z((4, 128, n * d), np.float16),
                            block_table=np.array([[0, 1], [2, 3]], np.int32), block_size=128,
                            actual_seq_lengths_kv=[256, 200]),
        "query_padding_size": dict(query_padding_size=np.array([2], np.int64), actual_seq_lengths=[10, 12]),
        "kv_padding_size": dict(kv_padding_size=np.array([2], np.int64), actual_seq_lengths_kv=[100, 120]),
        "key_shared_prefix": prefix, "value_shared_prefix": prefix,
        "actual_shared_prefix_len": dict(prefix, actual_shared_prefix_len=[32]),
        "query_rope": mla, "key_rope": mla,
        "key_rope_antiquant_scale": dict(mla, key_rope_antiquant_scale=np.ones((1, 64), np.float32)),
    }
    kw.update(calls[name])
    return kw


def test_every_unmodelled_optional_input_has_a_call():
    """Each optional input the simulator does not model has a valid call in ``_unsupported_call`` (the list
    shrinks as features land; the supported ones are the kernel grid's business)."""
    assert {"atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv"} <= set(SUPPORTED_OPTIONAL_INPUTS)
    for name in UNSUPPORTED:
        assert name in _unsupported_call(name), name


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_unsupported_parameter_is_named(name):
    kw = _unsupported_call(name)
    with pytest.raises(UnsupportedParameterError) as info:
        fia(**kw)
    err = info.value
    # the first unmodelled input is err.param; the message names every one given
    assert name in str(err), str(err)
    assert err.param in UNSUPPORTED and err.reason and err.to_dict()["param"] == err.param


def test_quantised_kv_on_the_prefill_route(bnsd):
    int8_kv = dict(bnsd, key=bnsd["key"].astype(np.int8), value=bnsd["value"].astype(np.int8))
    # without a dequant scale op_host itself refuses int8 key/value (the PFA tiling's antiquant check) ...
    with pytest.raises(ParamError, match="antiquant_scale") as err:
        fia(**int8_kv)
    assert err.value.status == 561002
    # ... with one, the call is valid: this prefill tiles to the PFA route, whose KvAntiquant path dequantises
    # (test_fia_pfa_antiquant) ...
    out, _ = fia(**dict(int8_kv, antiquant_scale=np.ones((2, 2, 1, 64), np.float16)))
    assert out.shape == bnsd["query"].shape and np.isfinite(out.astype(np.float32)).all()
    # ... but not an int4 cache there, which the simulator names
    with pytest.raises(UnsupportedParameterError, match="int4 cache on the A2/A3 PromptFlashAttention") as err:
        fia(**dict(int8_kv, key=np.zeros((2, 2, 512, 8), np.int32), value=np.zeros((2, 2, 512, 8), np.int32),
                   antiquant_scale=np.ones((2, 2, 1, 64), np.float16)))
    assert err.value.param == "key"


def _tnd_split_fuse_call():
    rng = np.random.default_rng(3)
    return dict(query=_rand(rng, (48, 8, 64)), key=_rand(rng, (300, 2, 64)), value=_rand(rng, (300, 2, 64)),
                actual_seq_lengths=[24, 48], actual_seq_lengths_kv=[100, 300], num_heads=8, num_key_value_heads=2,
                input_layout="TND", scale=0.125)


def test_regression_fai_route_returned_zeros():
    """arch22 TND GQA with sparse 0/3/4 and inner_precise 0 routes to the split-fuse (FAI) tiling: while its
    core split was not mirrored the API returned an all-zero output. Now the call is either refused as
    unsupported or planned with core work for every batch that has rows and keys."""
    kw = _tnd_split_fuse_call()
    try:
        _, tiling = plan_call(**kw)
    except UnsupportedParameterError as err:
        assert err.param == "input_layout", str(err)
        return
    assert tiling.cores and {t.b for c in tiling.cores for t in c.tasks} == {0, 1}, tiling.explain()


@pytest.mark.slow
def test_regression_fai_route_matches_the_golden():
    """The numeric half of the FAI regression: never silent zeros, whatever the route."""
    kw = _tnd_split_fuse_call()
    try:
        out, _ = fia(**kw)
    except UnsupportedParameterError as err:
        assert err.param == "input_layout", str(err)
        return
    assert out.any()
    rep = compare(out, fia_golden_lowp(**kw)[0], "float16")
    assert rep.passed, str(rep)


def test_regression_bad_layout_was_a_bare_value_error(bnsd):
    """An unknown input_layout (or a query whose rank does not fit it) used to escape as a ValueError from the
    API's output-shape helper; it is the operator's ParamError naming the parameter."""
    with pytest.raises(ParamError) as info:
        fia(**dict(bnsd, input_layout="XYZ"))
    assert info.value.param == "input_layout"


def test_regression_paged_value_head_dim():
    """With block_table the value cache is (blocks, block_size, H): the API read D from its last axis as if it
    were BNSD, inferred a wrong attention_out and failed the tiling with a ParamError on attention_out."""
    kw = _unsupported_call("block_table")
    try:
        _, tiling = plan_call(**kw)
    except UnsupportedParameterError as err:   # paged attention not simulated
        assert err.param == "block_table", str(err)
        return
    assert tiling.value_head_dim == 64 and tiling.head_dim == 64


def test_regression_post_quant_output_dtype():
    """With quant_scale2 torch_npu infers an int8 attention_out; the API used to describe it with the query's
    dtype, and the legacy IFA checker refused the call (ParamError on quant_scale2) (st cases 231/232). Now the
    call runs and returns the int8 output."""
    z = np.zeros
    kw = dict(query=z((2, 1, 2048), np.float16), key=z((2, 256, 2048), np.float16),
              value=z((2, 256, 2048), np.float16), num_heads=8, input_layout="BSH",
              quant_scale2=np.ones(1, np.float32))
    out, _ = fia(**kw)
    assert out.dtype == np.int8 and out.shape == (2, 1, 2048) and not out.any()


def test_regression_legacy_decode_with_template_mask_was_a_bare_value_error():
    """Decode (S1 = 1) on the arch22 legacy IFA route with sparse 3 and the 2048x2048 template: the tiling accepts
    it, the mask reading is not modelled, so the API says so by name instead of raising a bare ValueError."""
    rng = np.random.default_rng(0)
    q = _rand(rng, (2, 8, 1, 64))
    k = _rand(rng, (2, 2, 300, 64))
    with pytest.raises(UnsupportedParameterError) as info:
        fia(q, k, k, atten_mask=np.triu(np.ones((2048, 2048), bool), 1), num_heads=8, num_key_value_heads=2,
            input_layout="BNSD", scale=0.1, sparse_mode=3)
    assert info.value.param == "atten_mask"


@pytest.mark.parametrize("layout, qshape, cache, heads, kv_heads, want", [
    ("BNSD", (1, 4, 0, 64), (2, 128, 2 * 64), 4, 2, (1, 4, 0, 64)),      # BnBsH cache, N2 = 2
    ("BSH", (1, 0, 256), (2, 2, 128, 128), 2, 2, (1, 0, 256)),          # BnNBsD cache
])
def test_regression_empty_output_shape_of_a_paged_call(layout, qshape, cache, heads, kv_heads, want):
    """A call with no query rows returns zeros without launching; that path computed attention_out's shape
    without the paged flag, reading D from the cache as if it were the query layout ((1,4,0,128) and
    (1,0,128) for these two calls)."""
    z = np.zeros
    out, _ = fia(z(qshape, np.float16), z(cache, np.float16), z(cache, np.float16), num_heads=heads,
                 num_key_value_heads=kv_heads, input_layout=layout, block_table=np.array([[0, 1]], np.int32),
                 block_size=128, actual_seq_lengths_kv=[200], scale=0.125)
    assert out.shape == want and not out.any()
