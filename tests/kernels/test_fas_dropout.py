"""FlashAttentionScore's dropout mask (``cvtile.kernels.fas.dropout``): Philox against Random123's published
known answers, the explicit bit mask's layout and checks, the in-kernel generator's counter layout and keep
rate, and the ``numels`` torch_npu returns. Pure numpy, well under a second."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.fas.dropout import (effective_keep_prob, generate_keep_mask, dropout_numels, keep_threshold_uint8,
                                        mask_numels, min_mask_bytes, next_generator_offset, pack_drop_mask, philox4x32,
                                        torch_npu_mask_bytes, unpack_drop_mask)
from cvtile.tiling.errors import ParamError

# Random123 tests/kat_vectors, "philox4x32 <rounds>" lines: counter words, key words, output words.
_KAT = {
    10: [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
         ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
          (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))],
    7: [((0, 0, 0, 0), (0, 0), (0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48)),
        ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662)),
        ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
         (0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a))],
}


@pytest.mark.parametrize("rounds,case", [(r, i) for r in (10, 7) for i in range(3)])
def test_philox_known_answers(rounds, case):
    ctr, key, want = _KAT[rounds][case]
    got = philox4x32([np.uint32(c) for c in ctr], key, rounds)
    assert got.shape == (4,) and got.dtype == np.uint32
    assert [int(w) for w in got] == list(want)


def test_philox_vectorised_matches_one_counter_at_a_time():
    rng = np.random.default_rng(0)
    ctr = rng.integers(0, 1 << 32, size=(4, 5, 3), dtype=np.uint64).astype(np.uint32)
    key = (0x12345678, 0x9abcdef0)
    got = philox4x32(tuple(ctr), key, 10)
    for idx in np.ndindex(5, 3):
        one = philox4x32(tuple(ctr[(slice(None),) + idx]), key, 10)
        assert np.array_equal(got[(slice(None),) + idx], one)


def test_bit_layout_is_a_flat_lsb_first_stream_without_row_padding():
    b, n, s1, s2 = 1, 2, 3, 5                      # S2 % 8 != 0: rows start mid-byte
    keep = np.zeros((b, n, s1, s2), bool)
    keep[0, 0, 0, 0] = True                        # score 0  -> byte 0 bit 0
    keep[0, 0, 1, 4] = True                        # score 9  -> byte 1 bit 1
    keep[0, 1, 2, 4] = True                        # score 29 -> byte 3 bit 5
    packed = pack_drop_mask(keep)
    assert packed.dtype == np.uint8 and packed.shape == (min_mask_bytes(30),) == (4,)
    assert packed.tolist() == [1, 2, 0, 32]
    assert np.array_equal(unpack_drop_mask(packed, keep.shape), keep)


@pytest.mark.parametrize("shape", [(2, 3, 7, 13), (1, 1, 1, 1), (2, 2, 16, 24)])
def test_pack_unpack_round_trip_and_any_mask_shape(shape):
    rng = np.random.default_rng(1)
    keep = rng.uniform(size=shape) < 0.7
    packed = pack_drop_mask(keep)
    assert np.array_equal(unpack_drop_mask(packed, shape), keep)
    numels = int(np.prod(shape))
    # torch_npu's allocation (128-bit aligned, + 32 spare bytes) reads the same: surplus bytes are ignored
    big = np.concatenate([pack_drop_mask(keep, align_bits=128), np.full(32, 255, np.uint8)])
    assert big.size == torch_npu_mask_bytes(numels) + 32
    assert np.array_equal(unpack_drop_mask(big, shape), keep)
    if shape[-1] % 8 == 0:                          # the documented [B, N, S1, S2/8] shape is the same stream
        doc = packed.reshape(shape[0], shape[1], shape[2], shape[3] // 8)
        assert np.array_equal(unpack_drop_mask(doc, shape), keep)


def test_tnd_batches_are_back_to_back_blocks():
    rng = np.random.default_rng(2)
    n, qlen, kvlen = 2, np.array([3, 0, 5]), np.array([7, 4, 2])
    shape = (3, n, 5, 7)
    keep = rng.uniform(size=shape) < 0.5
    packed = pack_drop_mask(keep, qlen=qlen, kvlen=kvlen)
    numels = mask_numels(shape, qlen=qlen, kvlen=kvlen)
    assert numels == n * (3 * 7 + 0 + 5 * 2) == 62 and packed.size == min_mask_bytes(numels)
    bits = np.unpackbits(packed, bitorder="little")[:numels].astype(bool)
    assert np.array_equal(bits[:42], keep[0, :, :3, :7].reshape(-1))
    assert np.array_equal(bits[42:], keep[2, :, :5, :2].reshape(-1))
    back = unpack_drop_mask(packed, shape, qlen=qlen, kvlen=kvlen)
    want = np.zeros(shape, bool)
    want[0, :, :3, :7] = keep[0, :, :3, :7]
    want[2, :, :5, :2] = keep[2, :, :5, :2]
    assert np.array_equal(back, want)


@pytest.mark.parametrize("mask,what", [(np.zeros(8, np.float16), "dtype float16"),
                                       (np.zeros(8, bool), "dtype bool"),
                                       (np.zeros(7, np.uint8), "7 bytes")])
def test_a_bad_mask_is_refused_with_161002_naming_the_parameter(mask, what):
    with pytest.raises(ParamError) as e:
        unpack_drop_mask(mask, (1, 1, 8, 8))         # 64 scores need 8 bytes
    assert e.value.status == 161002 and e.value.param == "dropout_mask" and what in str(e.value.value)
    with pytest.raises(ParamError) as e:
        unpack_drop_mask(mask, (1, 1, 8, 8), param="drop_mask")
    assert e.value.param == "drop_mask"


def test_generated_mask_is_deterministic_and_keeps_at_the_threshold_rate():
    shape = (2, 3, 64, 80)
    a = generate_keep_mask(7, 0, 0.9, shape)
    assert a.dtype == np.bool_ and a.shape == shape
    assert np.array_equal(a, generate_keep_mask(7, 0, 0.9, shape))
    assert keep_threshold_uint8(0.9) == 229           # int(0.9f * 255) = int(229.5)
    for kp in (0.9, 0.5, 0.1):
        for source in ("kernel", "gen_mask"):
            m = generate_keep_mask(123, 48, kp, shape, source=source)
            p, cnt = effective_keep_prob(kp, source), m.size
            sigma = np.sqrt(cnt * p * (1 - p))
            assert abs(m.sum() - cnt * p) < 6 * sigma, (kp, source)
    assert effective_keep_prob(0.9) == 230 / 256


def test_keep_prob_one_keeps_everything():
    for source in ("kernel", "gen_mask"):
        assert generate_keep_mask(1, 2, 1.0, (1, 2, 9, 10), source=source).all()


def test_seeds_and_offsets_change_the_mask():
    shape = (1, 2, 32, 48)
    base = generate_keep_mask(5, 0, 0.5, shape)
    assert not np.array_equal(base, generate_keep_mask(6, 0, 0.5, shape))
    assert not np.array_equal(base, generate_keep_mask(5, 16, 0.5, shape))
    g = generate_keep_mask(5, 0, 0.5, shape, source="gen_mask")
    assert not np.array_equal(g, generate_keep_mask(5, 12, 0.5, shape, source="gen_mask"))


def test_kernel_counter_is_the_score_offset_over_16():
    """The in-kernel counter is ceil((position + offset) / 16): offsets 1..16 draw alike, and offset 16 is
    the offset-0 draw moved 16 scores along the (16-aligned) row stream."""
    shape = (1, 2, 8, 48)                                   # S2 a multiple of 16: rows are whole groups
    m0 = generate_keep_mask(9, 0, 0.5, shape)
    assert np.array_equal(generate_keep_mask(9, 1, 0.5, shape), generate_keep_mask(9, 16, 0.5, shape))
    m16 = generate_keep_mask(9, 16, 0.5, shape)
    s0, s16 = m0.reshape(-1), m16.reshape(-1)
    assert np.array_equal(s16[:-16], s0[16:])
    # a row of 40 scores still takes 3 counters (S2 aligned to 16): row 1 starts at counter 3
    r = generate_keep_mask(9, 0, 0.5, (1, 1, 2, 40))
    wide = generate_keep_mask(9, 0, 0.5, (1, 1, 2, 48))
    assert np.array_equal(r[0, 0, :, :40], wide[0, 0, :, :40])


def test_kernel_mask_from_philox7_bytes():
    """Score (0, 0, 0, j) is byte j % 4 of Philox4x32-7 word (j % 16) // 4 at counter (j // 16, 0, 0, 0)."""
    seed, kp = 0x0000000500000003, 0.6
    m = generate_keep_mask(seed, 0, kp, (1, 1, 1, 32))
    thr = keep_threshold_uint8(kp)
    for j in range(32):
        w = philox4x32((np.uint32(j // 16), np.uint32(0), np.uint32(0), np.uint32(0)), (3, 5), 7)
        byte = (int(w[(j % 16) // 4]) >> (8 * (j % 4))) & 0xFF
        assert m[0, 0, 0, j] == (byte <= thr)


def test_gen_mask_source_follows_the_flat_stream():
    """StatelessDropOutGenMask: score k uses word k % 4 of Philox4x32-10 at counter (k // 4, 0, offset)."""
    seed, off, kp = 11, 24, 0.7
    shape = (1, 1, 3, 5)
    m = generate_keep_mask(seed, off, kp, shape, source="gen_mask").reshape(-1)
    p = np.float32(1.0 - float(np.float32(1.0) - np.float32(kp)))
    for k in range(15):
        w = philox4x32((np.uint32(k // 4), np.uint32(0), np.uint32(off), np.uint32(0)), (seed, 0), 10)
        u = np.float32(w[k % 4]) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)
        assert m[k] == (u < p)


def test_tnd_generation_uses_per_batch_aligned_offsets():
    qlen, kvlen = np.array([3, 2]), np.array([20, 5])
    shape = (2, 2, 3, 20)
    m = generate_keep_mask(4, 0, 0.5, shape, qlen=qlen, kvlen=kvlen)
    assert not m[1, :, 2:, :].any() and not m[1, :, :, 5:].any()
    # batch 0 alone is the batch-layout draw of its (3, 20) block
    assert np.array_equal(m[0], generate_keep_mask(4, 0, 0.5, (1, 2, 3, 20))[0])
    # batch 1 starts after N1 * 3 rows of ceil16(20) = 32 scores: 2 * 3 * 2 = 12 counters = offset 192
    assert np.array_equal(m[1, :, :2, :5], generate_keep_mask(4, 192, 0.5, (1, 2, 2, 5))[0])


def test_numels_and_generator_offset():
    assert dropout_numels(2, 4, 33, 47) == 2 * 4 * 33 * 47
    assert dropout_numels(3, 2, 5, 7, qlen=[3, 0, 5], kvlen=[7, 4, 2]) == 2 * (21 + 10)

    class Call:                                          # the FasCall fields dropout_numels reads
        n1, qlen, kvlen = 4, np.array([10, 6]), np.array([12, 3])

    assert dropout_numels(Call()) == 4 * (120 + 18)
    assert next_generator_offset(0) == 12 and next_generator_offset(12, round_up_to_4=False) == 22


def test_bad_generation_arguments_are_refused():
    with pytest.raises(ParamError) as e:
        generate_keep_mask(0, 0, 0.0, (1, 1, 4, 4))
    assert e.value.param == "keep_prob" and e.value.status == 161002
    with pytest.raises(ParamError) as e:
        generate_keep_mask(1.5, 0, 0.5, (1, 1, 4, 4))
    assert e.value.param == "seed"
    with pytest.raises(ParamError) as e:
        generate_keep_mask(0, 0, 0.5, (1, 1, 4))
    assert e.value.param == "shape"
    with pytest.raises(ValueError):
        generate_keep_mask(0, 0, 0.5, (1, 1, 4, 4), source="dsa")
