"""int4 KV antiquant: the cache as int4 values or packed 8 per int32 (op_api's view), the MSD kernel with int4
digits against the float64 golden.

The int4 cache's values reach the antiquant kernel as int8 values in [-8, 7]; the kernel splits the query and P
into four int4 digits (range 7.49, base 14.98, the IFA kernel's constants) and the tiling is op_host's int4 one
(IFATiling, msdIterNum 4). The default tier holds the packing, the constants, the golden and the tiling (dense,
paged and NZ caches); the kernel runs compile the antiquant kernel (about a minute each) and are in the slow
tier.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.kernels.errors import UnsupportedParameterError
from cvtile.kernels.fia.api import npu_fused_infer_attention_score as fia, plan_call
from cvtile.kernels.fia.launch import msd_constants, msd_digit_count
from cvtile.kernels.golden.fia import fia_golden
from cvtile.kernels.golden.int4 import int4_kv, pack_int4, unpack_int32
from cvtile.tiling.errors import ParamError


def _int4_call(rng, b=2, n=8, n2=2, s2=300, d=64):
    """(BNSD decode query, int4 values of key and value (int8), keywords)."""
    q = rng.uniform(-1, 1, (b, n, 1, d)).astype(np.float16)
    k = rng.integers(-8, 8, (b, n2, s2, d)).astype(np.int8)
    v = rng.integers(-8, 8, (b, n2, s2, d)).astype(np.int8)
    return q, k, v, dict(num_heads=n, num_key_value_heads=n2, input_layout="BNSD", scale=d ** -0.5)


def _per_channel(rng, n2=2, d=64):
    return dict(antiquant_scale=rng.uniform(0.05, 0.3, (2, n2, 1, d)).astype(np.float16),
                antiquant_offset=rng.uniform(-2, 2, (2, n2, 1, d)).astype(np.float16))


# ------------------------------------------------------------------ the cache's forms (default tier)

def test_int32_packing_round_trips_low_nibble_first():
    rng = np.random.default_rng(0)
    x = rng.integers(-8, 8, (3, 5, 64)).astype(np.int8)
    packed = pack_int4(x)
    assert packed.dtype == np.int32 and packed.shape == (3, 5, 8)
    assert np.array_equal(unpack_int32(packed), x)
    first = packed.reshape(-1)[:1].view(np.uint8)[0]    # values 0 and 1 of the first row share its first byte
    assert first & 0xF == x.reshape(-1)[0] & 0xF and first >> 4 == x.reshape(-1)[1] & 0xF
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        pack_int4(np.array([8] * 8))
    with pytest.raises(ValueError, match="multiple of 8"):
        pack_int4(np.zeros(12, np.int8))


def test_op_api_views_int32_pairs_only():
    """Both key and value int32 (or both int4): their int4 values; anything else passes through unchanged."""
    rng = np.random.default_rng(1)
    x = rng.integers(-8, 8, (2, 16)).astype(np.int8)
    k, v, int4 = int4_kv(pack_int4(x), pack_int4(x))
    assert int4 and np.array_equal(k, x) and np.array_equal(v, x)
    k, v, int4 = int4_kv(x.astype(ml_dtypes.int4), x.astype(ml_dtypes.int4))
    assert int4 and k.dtype == np.int8 and np.array_equal(k, x)
    packed = pack_int4(x)
    k, v, int4 = int4_kv(packed, x)
    assert not int4 and k is packed


def test_msd_constants_are_the_chips_fp32_steps():
    """Each weight an fp32 division of the previous (the kernel's scalar loop), which for int4's base differs
    from rounding the real 1/14.98**2 once; int8 keeps 3 digits at high precision, int4 always 4."""
    f = np.float32
    r, e, w1, w2, w3, rinv = msd_constants(True)
    assert (r, e) == (float(f(7.49)), float(f(14.98)))
    assert w2 == float((f(1) / f(14.98)) / f(14.98)) != float(f(1 / 14.98 / 14.98))
    assert w3 == float(f(w2) / f(14.98)) and rinv == float(f(1) / f(7.49))
    assert msd_constants(False)[:2] == (127.0, 254.0)
    assert [msd_digit_count(p, False) for p in (0, 1)] == [3, 2]
    assert [msd_digit_count(p, True) for p in (0, 1)] == [4, 4]


def test_golden_reads_every_form_alike():
    rng = np.random.default_rng(2)
    q, k, v, kw = _int4_call(rng)
    aq = _per_channel(rng)
    want, _ = fia_golden(q, k, v, **kw, **aq)
    for kk, vv in ((pack_int4(k), pack_int4(v)), (k.astype(ml_dtypes.int4), v.astype(ml_dtypes.int4))):
        got, _ = fia_golden(q, kk, vv, **kw, **aq)
        assert np.array_equal(got, want)


def test_the_tiling_sees_an_int4_cache_of_the_real_head_dim():
    """op_host gets int4 key/value of D columns (not int32 of D/8): the legacy IFA route, the int4 dtype code in
    the tiling key, and the simulator the int8 values."""
    rng = np.random.default_rng(3)
    q, k, v, kw = _int4_call(rng)
    arrays, tiling = plan_call(**dict(query=q, key=pack_int4(k), value=pack_int4(v), **kw, **_per_channel(rng)))
    assert tiling.route == "ifa"
    assert arrays["key"].dtype == np.int8 and arrays["key"].shape == k.shape
    assert arrays["_antiquant"].int4
    int8_arrays, int8_tiling = plan_call(**dict(query=q, key=k, value=v, **kw, **_per_channel(rng)))
    assert not int8_arrays["_antiquant"].int4
    assert tiling.tiling_key != int8_tiling.tiling_key


def _int4_nz_call(rng):
    """A BSH decode over an int4 NZ paged cache (blocks, N2, D/64, block_size, 64), packed 8 per int32, with the
    BnNBsD cache (blocks, N2, block_size, D) it holds; op_host takes a paged int4 cache with a BSH/BSND query."""
    b, n, n2, d, bs, s2 = 2, 8, 2, 128, 128, 256
    q = rng.uniform(-1, 1, (b, 1, n * d)).astype(np.float16)
    blocks = b * s2 // bs
    k, v = (rng.integers(-8, 8, (blocks, n2, bs, d)).astype(np.int8) for _ in range(2))
    nz = [x.reshape(blocks, n2, bs, d // 64, 64).transpose(0, 1, 3, 2, 4) for x in (k, v)]
    table = rng.permutation(blocks).reshape(b, s2 // bs).astype(np.int32)
    kw = dict(num_heads=n, num_key_value_heads=n2, input_layout="BSH", scale=d ** -0.5, block_table=table,
              block_size=bs, actual_seq_lengths_kv=[256, 177], **_per_channel(rng, n2, d))
    return q, [pack_int4(x) for x in nz], [pack_int4(x) for x in (k, v)], kw


def test_an_int4_nz_cache_is_op_hosts_error_and_its_golden_reads_the_blocks_it_holds():
    """op_host's GQA template with an NZ cache takes a bf16 query and an int8 cache only (``CheckGqaIOTensor``,
    checked against the op_host oracle): an int4 NZ cache is its error. The golden still reads the blocks an NZ
    cache holds."""
    q, (knz, vnz), (kb, vb), kw = _int4_nz_call(np.random.default_rng(4))
    with pytest.raises(ParamError) as err:
        plan_call(query=q, key=knz, value=vnz, **kw)
    assert err.value.param in ("query", "key") and "NZ" in err.value.rule
    assert np.array_equal(fia_golden(q, knz, vnz, **kw)[0], fia_golden(q, kb, vb, **kw)[0])


# ------------------------------------------------------------------ the kernel (slow tier)

@pytest.mark.slow
def test_int4_per_channel_with_offset_and_lse_matches_the_golden_in_both_forms(judge_fia):
    rng = np.random.default_rng(5)
    q, k, v, kw = _int4_call(rng)
    aq = _per_channel(rng)
    packed = judge_fia(q, pack_int4(k), pack_int4(v), softmax_lse_flag=True, **kw, **aq)
    typed = judge_fia(q, k.astype(ml_dtypes.int4), v.astype(ml_dtypes.int4), softmax_lse_flag=True, **kw, **aq)
    assert np.array_equal(packed, typed)


@pytest.mark.slow
def test_int4_per_token_paged_bnbsh_matches_the_golden(judge_fia):
    """Mode 1 (one scale and offset per KV position) on a BnBsH paged int4 cache (H/8 int32 columns); op_host
    takes a paged int4 cache with a BSH/BSND query only."""
    rng = np.random.default_rng(6)
    b, n, n2, d, bs, s2 = 2, 8, 2, 64, 128, 256
    q = rng.uniform(-1, 1, (b, 1, n * d)).astype(np.float16)
    blocks = b * s2 // bs
    k = rng.integers(-8, 8, (blocks, bs, n2 * d)).astype(np.int8)
    v = rng.integers(-8, 8, (blocks, bs, n2 * d)).astype(np.int8)
    table = rng.permutation(blocks).reshape(b, s2 // bs).astype(np.int32)
    sc = rng.uniform(0.05, 0.3, (2, b, s2)).astype(np.float32)
    of = rng.uniform(-2, 2, (2, b, s2)).astype(np.float32)
    judge_fia(q, pack_int4(k), pack_int4(v), num_heads=n, num_key_value_heads=n2, input_layout="BSH",
           scale=d ** -0.5, block_table=table, block_size=bs, actual_seq_lengths_kv=[256, 200],
           antiquant_scale=sc, antiquant_offset=of, antiquant_mode=1)
