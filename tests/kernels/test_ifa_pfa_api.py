"""The legacy IFA / PFA APIs: torch_npu's names and defaults, the FIA call they map to, the IFA V3 constraints.

* ``npu_incre_flash_attention`` / ``npu_prompt_flash_attention`` have torch_npu's keywords, order and
  defaults (research notes §1.3-1.4) and return bitwise the ``attention_out`` of the FIA call they map to,
  which agrees with the golden within the dtype's tolerance;
* ``incre_flash_attention_v3`` has the seed document's parameters in its order, and every constraint of
  the seed raises ``ParamError`` with its aclnn status, naming the aclnn parameter; KV antiquant and post
  quant run the FIA kernels they map to.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import cvtile
from cvtile import (ParamError, UnsupportedParameterError, incre_flash_attention_v3, npu_fused_infer_attention_score,
                    npu_incre_flash_attention, npu_prompt_flash_attention)
from cvtile.kernels import compare, fia_golden_lowp
from cvtile.kernels.fia.api_ifa import ifa_to_fia
from cvtile.kernels.fia.api_pfa import pfa_to_fia

INT_MAX = 2147483647
NULL, INVALID, TILING = 161001, 161002, 561002

#: torch_npu.npu_incre_flash_attention's keywords and defaults (research notes §1.3)
IFA_DOC = dict(padding_mask=None, atten_mask=None, pse_shift=None, actual_seq_lengths=None, antiquant_scale=None,
               antiquant_offset=None, block_table=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None,
               quant_scale2=None, quant_offset2=None, kv_padding_size=None, num_heads=1, scale_value=1.0,
               input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1)
#: torch_npu.npu_prompt_flash_attention's keywords and defaults (research notes §1.4)
PFA_DOC = dict(pse_shift=None, padding_mask=None, atten_mask=None, actual_seq_lengths=None, deq_scale1=None,
               quant_scale1=None, deq_scale2=None, quant_scale2=None, quant_offset2=None, num_heads=1,
               scale_value=1.0, pre_tokens=INT_MAX, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
               actual_seq_lengths_kv=None, sparse_mode=0)
#: aclnnIncreFlashAttentionV3GetWorkspaceSize's parameters, in order (seed document)
V3_DOC = ["query", "key", "value", "pseShift", "attenMask", "actualSeqLengths", "dequantScale1", "quantScale1",
          "dequantScale2", "quantScale2", "quantOffset2", "antiquantScale", "antiquantOffset", "blocktable",
          "numHeads", "scaleValue", "inputLayout", "numKeyValueHeads", "blockSize", "innerPrecise", "attentionOut"]


def _keywords(fn) -> dict:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY and n not in ("target", "order")}


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.itemsize == 2 else np.uint32)


def _r(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float16)


# ----------------------------------------------------------------------------------------------- defaults
def test_signatures_match_torch_npu_and_the_seed():
    assert list(inspect.signature(npu_incre_flash_attention).parameters)[:3] == ["query", "key", "value"]
    assert _keywords(npu_incre_flash_attention) == IFA_DOC
    assert list(_keywords(npu_incre_flash_attention)) == list(IFA_DOC)
    assert _keywords(npu_prompt_flash_attention) == PFA_DOC
    assert list(_keywords(npu_prompt_flash_attention)) == list(PFA_DOC)
    params = [n for n, p in inspect.signature(incre_flash_attention_v3).parameters.items()
              if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert params == V3_DOC
    for name in ("npu_incre_flash_attention", "npu_prompt_flash_attention", "incre_flash_attention_v3"):
        assert name in cvtile.__all__ and getattr(cvtile, name) is not None


def test_mappings_rename_and_fix_what_the_legacy_ops_do_not_expose():
    kw = ifa_to_fia(dict(IFA_DOC, query=1, key=2, value=3, actual_seq_lengths=[5], padding_mask=None))
    assert kw["actual_seq_lengths_kv"] == [5] and "actual_seq_lengths" not in kw and kw["scale"] == 1.0
    assert kw["inner_precise"] == 1 and kw["softmax_lse_flag"] is False and kw["next_tokens"] == INT_MAX
    kw = pfa_to_fia(dict(PFA_DOC, query=1, key=2, value=3))
    assert kw["next_tokens"] == 0 and kw["scale"] == 1.0 and kw["softmax_lse_flag"] is False
    assert "deq_scale1" not in kw and "padding_mask" not in kw


# ----------------------------------------------------------------------------------------------- numbers
@pytest.fixture(scope="module")
def decode():
    rng = np.random.default_rng(7)
    q, k, v = _r(rng, 2, 1, 4 * 64), _r(rng, 2, 300, 2 * 64), _r(rng, 2, 300, 2 * 64)
    return dict(query=q, key=k, value=v, num_heads=4, num_key_value_heads=2, scale_value=0.125,
                actual_seq_lengths=[300, 170])


def test_ifa_is_bitwise_its_fia_call_and_within_tolerance(decode):
    out = npu_incre_flash_attention(**decode)
    fia_kw = ifa_to_fia(decode)
    ref, lse = npu_fused_infer_attention_score(**fia_kw)
    assert out.shape == decode["query"].shape and out.dtype == np.float16
    assert np.array_equal(_bits(out), _bits(ref)) and lse.shape == (0,)
    g, _ = fia_golden_lowp(**fia_kw)
    assert compare(out, g, "float16").passed
    # the aclnn V3 entry: the same numbers, key/value as one-tensor lists, the result written into attentionOut
    dst = np.zeros_like(out)
    out3 = incre_flash_attention_v3(decode["query"], [decode["key"]], [decode["value"]], actualSeqLengths=[300, 170],
                                    numHeads=4, scaleValue=0.125, numKeyValueHeads=2, attentionOut=dst)
    assert np.array_equal(_bits(out3), _bits(out)) and np.array_equal(_bits(dst), _bits(out))


def test_pfa_is_bitwise_its_fia_call_and_within_tolerance():
    rng = np.random.default_rng(8)
    q, k, v = _r(rng, 1, 2, 96, 64), _r(rng, 1, 2, 200, 64), _r(rng, 1, 2, 200, 64)
    mask = rng.random((1, 96, 200)) < 0.3
    call = dict(query=q, key=k, value=v, atten_mask=mask, num_heads=2, scale_value=0.125, input_layout="BNSD",
                pre_tokens=150)
    out = npu_prompt_flash_attention(**call)            # next_tokens defaults to 0: the band ends at j = i
    fia_kw = pfa_to_fia(dict(PFA_DOC, **call))
    assert fia_kw["next_tokens"] == 0
    ref, _ = npu_fused_infer_attention_score(**fia_kw)
    assert np.array_equal(_bits(out), _bits(ref))
    g, _ = fia_golden_lowp(**fia_kw)
    assert compare(out, g, "float16").passed
    open_band, _ = npu_fused_infer_attention_score(**dict(fia_kw, next_tokens=INT_MAX))
    assert not np.array_equal(_bits(out), _bits(open_band))   # the default 0 matters


# ----------------------------------------------------------------------------------------------- V3 constraints
def _v3_call(**changes):
    """A valid small V3 call (BNSD decode, B 2, N 4 / 2 kv heads, S 64, D 32) with ``changes`` applied."""
    z = np.zeros
    call = dict(query=z((2, 4, 1, 32), np.float16), key=[z((2, 2, 64, 32), np.float16)],
                value=[z((2, 2, 64, 32), np.float16)], numHeads=4, scaleValue=0.125, inputLayout="BNSD",
                numKeyValueHeads=2, blockSize=0, innerPrecise=1)
    call.update(changes)
    return call


def _paged(**changes):
    z = np.zeros
    cache = z((4, 2, 16, 32), np.float16)
    paged = dict(key=[cache], value=[cache.copy()], blocktable=np.array([[0, 1], [2, 3]], np.int32), blockSize=16,
                 actualSeqLengths=[32, 20])
    return _v3_call(**{**paged, **changes})


def _int8_kv(**changes):
    kv = np.zeros((2, 2, 64, 32), np.int8)
    return _v3_call(key=[kv], value=[kv.copy()], **changes)


Z = np.zeros
#: (id, the call, aclnn status, the parameter the error names)
V3_VIOLATIONS = [
    ("null query", _v3_call(query=None), NULL, "query"),
    ("fp32 query", _v3_call(query=Z((2, 4, 1, 32), np.float32)), INVALID, "query"),
    ("key/value dtypes differ", _v3_call(value=[Z((2, 2, 64, 32), np.int8)]), INVALID, "value"),
    ("layout TND", _v3_call(inputLayout="TND"), INVALID, "inputLayout"),
    ("pse dtype", _v3_call(pseShift=Z((2, 4, 1, 64), np.float32)), INVALID, "pseShift"),
    ("int8 mask holding 2", _v3_call(attenMask=np.full((2, 1, 1, 64), 2, np.int8)), INVALID, "attenMask"),
    ("float mask", _v3_call(attenMask=Z((2, 1, 1, 64), np.float16)), INVALID, "attenMask"),
    ("fp32 out", _v3_call(attentionOut=Z((2, 4, 1, 32), "float32")), INVALID, "attentionOut"),
    ("bf16 out for an fp16 query", _v3_call(attentionOut=Z((2, 4, 1, 32), "bfloat16")), INVALID, "attentionOut"),
    ("B > 65536", _v3_call(query=Z((65537, 4, 1, 32), np.float16)), TILING, "query"),
    ("N > 256", _v3_call(query=Z((2, 257, 1, 32), np.float16), numHeads=257, numKeyValueHeads=1), TILING,
     "numHeads"),
    ("D > 512", _v3_call(query=Z((2, 4, 1, 520), np.float16)), TILING, "query"),
    ("query S 2", _v3_call(query=Z((2, 4, 2, 32), np.float16)), TILING, "query"),
    ("numHeads != N", _v3_call(numHeads=8), TILING, "numHeads"),
    ("kv heads do not divide", _v3_call(numKeyValueHeads=3), TILING, "numKeyValueHeads"),
    ("kv heads != key N", _v3_call(numKeyValueHeads=1), TILING, "numKeyValueHeads"),
    ("attentionOut shape", _v3_call(attentionOut=Z((2, 4, 1, 16), np.float16)), TILING, "attentionOut"),
    ("innerPrecise 2", _v3_call(innerPrecise=2), TILING, "innerPrecise"),
    ("int8 out without quantScale2", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8)), TILING, "quantScale2"),
    ("int8 out with dequantScale1", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8), quantScale2=Z(1, np.float32),
                                             dequantScale1=Z(1, np.float32)), TILING, "dequantScale1"),
    ("int8 out with quantScale1", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8), quantScale2=Z(1, np.float32),
                                           quantScale1=Z(1, np.float32)), TILING, "quantScale1"),
    ("int8 out with dequantScale2", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8), quantScale2=Z(1, np.float32),
                                             dequantScale2=Z(1, np.float32)), TILING, "dequantScale2"),
    ("quantScale2 for an fp16 out", _v3_call(attentionOut=Z((2, 4, 1, 32), np.float16), quantScale2=Z(1, np.float32)),
     TILING, "quantScale2"),
    ("quantOffset2 shape", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8), quantScale2=Z(1, np.float32),
                                    quantOffset2=Z(2, np.float32)), TILING, "quantOffset2"),
    ("quantScale2 per-channel size", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8),
                                              quantScale2=Z(7, np.float32)), TILING, "quantScale2"),
    ("bf16 quantScale2 with fp16 query", _v3_call(attentionOut=Z((2, 4, 1, 32), np.int8),
                                                  quantScale2=Z(1, "bfloat16")), INVALID, "quantScale2"),
    ("int8 kv without antiquant", _int8_kv(), TILING, "antiquantScale"),
    ("antiquant shape", _int8_kv(antiquantScale=Z((2, 3), np.float16)), TILING, "antiquantScale"),
    ("antiquant dtype", _int8_kv(antiquantScale=Z((2,), np.float32)), INVALID, "antiquantScale"),
    ("antiquant offset shape", _int8_kv(antiquantScale=Z((2, 2, 1, 32), np.float16),
                                        antiquantOffset=Z((2,), np.float16)), TILING, "antiquantOffset"),
    ("blockSize 0 with blocktable", _paged(blockSize=0), TILING, "blockSize"),
    ("blockSize not 16-aligned", _paged(blockSize=24), TILING, "blockSize"),
    ("blockSize > 512", _paged(blockSize=1024), TILING, "blockSize"),
    ("paged without lengths", _paged(actualSeqLengths=None), TILING, "actualSeqLengths"),
    ("blocktable rows != B", _paged(blocktable=np.array([[0, 1]], np.int32)), TILING, "blocktable"),
    ("blocktable too few columns", _paged(actualSeqLengths=[40, 20]), TILING, "blocktable"),
    ("blocktable dtype", _paged(blocktable=np.array([[0, 1], [2, 3]], np.int64)), INVALID, "blocktable"),
    ("cache too small", _paged(key=[Z((3, 2, 16, 32), np.float16)], value=[Z((3, 2, 16, 32), np.float16)]),
     TILING, "key"),
    ("4-D cache with BSND", _paged(query=Z((2, 1, 4, 32), np.float16), inputLayout="BSND"), TILING, "key"),
]


@pytest.mark.parametrize("call,status,param", [c[1:] for c in V3_VIOLATIONS], ids=[c[0] for c in V3_VIOLATIONS])
def test_v3_constraint_raises_with_its_status_naming_the_parameter(call, status, param):
    with pytest.raises(ParamError) as info:
        incre_flash_attention_v3(**call)
    err = info.value
    assert (int(err.status), err.param) == (status, param), str(err)
    assert f"{param}=" in str(err) and err.rule


def _antiquant_case(rng, layout: str, per_channel: bool, offset: bool):
    """An int8-cache decode call (B 2, N 4 / 2 kv heads, S 300, D 64) with IFA's antiquant tensors of the
    layout's per-channel shape ((2, N, 1, D), (2, N, D), (2, H)) or per tensor (2,)."""
    b, n, n2, s, d = 2, 4, 2, 300, 64
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(np.float16)
    k = rng.integers(-128, 128, (b, n2, s, d)).astype(np.int8)
    v = rng.integers(-128, 128, (b, n2, s, d)).astype(np.int8)
    shape = {"BNSD": (2, n2, 1, d), "BSND": (2, n2, d), "BSH": (2, n2 * d)}[layout] if per_channel else (2,)
    if layout != "BNSD":
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
        if layout == "BSH":
            q, k, v = (t.reshape(t.shape[0], t.shape[1], -1) for t in (q, k, v))
    aq = dict(antiquant_scale=(rng.uniform(0.5, 1.5, shape) / 128).astype(np.float16))
    if offset:
        aq["antiquant_offset"] = rng.uniform(-3, 3, shape).astype(np.float16)
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout=layout, **aq)


@pytest.mark.slow
@pytest.mark.parametrize("layout,per_channel,offset", [
    ("BSH", True, True), ("BNSD", False, True), ("BNSD", True, True), ("BSND", True, False)])
def test_ifa_antiquant_runs_the_fia_call_it_maps_to(layout, per_channel, offset):
    """An int8 cache with IFA's antiquant_scale/offset: bitwise FIA's antiquant mode 0, within the golden's
    tolerance."""
    q, k, v, kw = _antiquant_case(np.random.default_rng(11), layout, per_channel, offset)
    out = npu_incre_flash_attention(q, k, v, scale_value=0.125, **kw)
    ref, _ = npu_fused_infer_attention_score(q, k, v, scale=0.125, inner_precise=1, **kw)
    assert np.array_equal(_bits(out), _bits(ref))
    gold, _ = fia_golden_lowp(q, k, v, scale=0.125, inner_precise=1, **kw)
    rep = compare(out, gold, "float16")
    assert rep.passed, str(rep)


@pytest.mark.slow
def test_v3_antiquant_takes_the_aclnn_names():
    q, k, v, kw = _antiquant_case(np.random.default_rng(12), "BNSD", True, True)
    out = incre_flash_attention_v3(query=q, key=[k], value=[v], antiquantScale=kw["antiquant_scale"],
                                   antiquantOffset=kw["antiquant_offset"], numHeads=4, numKeyValueHeads=2,
                                   scaleValue=0.125, inputLayout="BNSD", innerPrecise=1)
    ref = npu_incre_flash_attention(q, k, v, scale_value=0.125, **kw)
    out = out[0] if isinstance(out, tuple) else out
    assert np.array_equal(_bits(out), _bits(ref))


def test_ifa_antiquant_on_a_paged_int8_cache():
    """A (blocks, block_size, H) int8 cache (block_size a multiple of 32) with per-channel antiquant."""
    rng = np.random.default_rng(13)
    q, k, v, kw = _antiquant_case(rng, "BSH", True, True)
    bs, lens = 64, [300, 170]
    table = np.array([[0, 1, 2, 3, 4], [5, 6, 7, -1, -1]], np.int32)
    kc, vc = np.zeros((8, bs, k.shape[2]), np.int8), np.zeros((8, bs, v.shape[2]), np.int8)
    for b in range(2):
        for j in range(-(-lens[b] // bs)):
            n = min(bs, lens[b] - j * bs)
            kc[table[b, j], :n], vc[table[b, j], :n] = k[b, j * bs:j * bs + n], v[b, j * bs:j * bs + n]
    out = npu_incre_flash_attention(q, kc, vc, block_table=table, block_size=bs, actual_seq_lengths=lens,
                                    scale_value=0.125, **kw)
    gold, _ = fia_golden_lowp(q, k, v, actual_seq_lengths_kv=lens, scale=0.125, inner_precise=1, **kw)
    rep = compare(out, gold, "float16")
    assert rep.passed, str(rep)


def test_v3_post_quant_returns_the_int8_output():
    """quantScale2 (per tensor) with an int8 attentionOut: the IFA V3 call runs the FIA kernel's post-quant."""
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, (2, 4, 1, 32)).astype(np.float16)
    k = rng.uniform(-1, 1, (2, 2, 64, 32)).astype(np.float16)
    v = rng.uniform(-1, 1, (2, 2, 64, 32)).astype(np.float16)
    out = incre_flash_attention_v3(**_v3_call(query=q, key=[k], value=[v], attentionOut=Z((2, 4, 1, 32), np.int8),
                                              quantScale2=np.array([100.0], np.float32)))
    from cvtile.kernels.golden.fia import fia_golden_lowp

    gold, _ = fia_golden_lowp(q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BNSD", scale=0.125,
                              inner_precise=1, quant_scale2=np.array([100.0], np.float32))
    out = out[0] if isinstance(out, tuple) else out
    assert out.dtype == np.int8 and np.count_nonzero(out != gold) <= 1


def test_torch_level_errors_use_the_torch_npu_names(decode):
    with pytest.raises(UnsupportedParameterError) as info:
        npu_incre_flash_attention(**decode, padding_mask=np.zeros((2, 300), np.float16))
    assert info.value.param == "padding_mask"
    with pytest.raises(ParamError) as info:       # FIA's kv-length check, under IFA's name for the KV lengths
        npu_incre_flash_attention(**dict(decode, actual_seq_lengths=[300, 400]))
    assert info.value.param == "actual_seq_lengths"
    with pytest.raises(ParamError) as info:
        npu_incre_flash_attention(**dict(decode, scale_value="big"))
    assert info.value.param == "scale_value" and int(info.value.status) == INVALID
    with pytest.raises(ParamError) as info:
        npu_incre_flash_attention(**dict(decode, query=np.zeros((2, 3, 256), np.float16)))
    assert info.value.param == "query" and "S axis" in info.value.rule


def test_pfa_rules_and_refusals():
    rng = np.random.default_rng(9)
    q, k = _r(rng, 1, 16, 64), _r(rng, 1, 32, 64)
    for changes, param, exc in [(dict(input_layout="TND"), "input_layout", ParamError),
                                (dict(sparse_mode=5), "sparse_mode", ParamError),
                                (dict(padding_mask=np.zeros((1, 32))), "padding_mask", UnsupportedParameterError),
                                (dict(deq_scale1=np.ones(1, np.float32)), "deq_scale1", UnsupportedParameterError),
                                (dict(scale_value="x"), "scale_value", ParamError)]:
        with pytest.raises(exc) as info:
            npu_prompt_flash_attention(q, k, k, num_heads=1, **changes)
        assert info.value.param == param, (changes, str(info.value))
