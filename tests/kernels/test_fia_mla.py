"""MLA (query_rope / key_rope with D 512 + rope 64, one KV head) on the FiaTilingNonQuantMla template, and the NZ
paged caches (``golden.nz``, ``kernels.fia.nz_cache``), on the simulated FIA kernel against the golden.

Default tier: one kernel run (the smallest MLA decode: G 8, one batch, a paged NZ cache, which also reads NZ in
the kernel), the NZ rules as typed errors and the NZ layout itself (no compile). Slow: dense and BnNBsD MLA with
lse and flash decode, TND and multi-token BNSD MLA, an NZ cache without rope (GQA, D 128)."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl.ascendc as A
from cvtile.dsl.jit import record_launches
from cvtile.kernels import UnsupportedParameterError, compare, npu_fused_infer_attention_score as fia
from cvtile.kernels.fia import api
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.kernels.golden.nz import from_nz, nz_fraction, to_nz
from cvtile.kernels.golden.rope import join_rope
from cvtile.tiling.errors import ParamError

D, DR = 512, 64


def _rand(rng, shape, dtype=np.float16):
    return rng.uniform(-1, 1, shape).astype(dtype)


def _paged_mla(seed=0, n=8, lengths=(300,), bs=128, nz=True, **extra):
    """A paged MLA decode (BSND query, one KV head): the caches in BnNBsD, or NZ."""
    rng = np.random.default_rng(seed)
    b = len(lengths)
    per = -(-max(lengths) // bs)
    blocks = b * per
    table = rng.permutation(blocks).astype(np.int32).reshape(b, per)
    key, rope = _rand(rng, (blocks, 1, bs, D)), _rand(rng, (blocks, 1, bs, DR))
    conv = to_nz if nz else (lambda x: x)
    kw = dict(query=_rand(rng, (b, 1, n, D)), key=conv(key), value=conv(key), query_rope=_rand(rng, (b, 1, n, DR)),
              key_rope=conv(rope), num_heads=n, num_key_value_heads=1, input_layout="BSND", scale=0.04,
              block_table=table, block_size=bs, actual_seq_lengths_kv=list(lengths))
    kw.update(extra)
    return kw


def _tiling(kw):
    seen = {}
    orig = api.prepare_fia

    def spy(*a, **k):
        seen["tiling"] = orig(*a, **k)[1]   # (arrays, tiling[, call signature])
        raise _Stop
    api.prepare_fia = spy
    try:
        with pytest.raises(_Stop):
            fia(**kw)
    finally:
        api.prepare_fia = orig
    return seen["tiling"]


class _Stop(Exception):
    pass


def _check(kw):
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16")
    assert rep.passed, str(rep)
    if g_lse is not None:
        assert compare(lse, g_lse, "float16").passed
    return out, g_out


@pytest.fixture(scope="module")
def nz_decode():
    """The smallest MLA decode (G 8 query heads on one KV head, KV 300 in NZ blocks of 128, block table
    shuffled): its call, result, golden and launches."""
    kw = _paged_mla()
    with record_launches() as rec:
        out, g_out = _check(kw)
    return kw, out, g_out, rec.launches


def test_mla_decode_with_an_nz_cache_on_the_mla_template(nz_decode):
    """It tiles to FiaTilingNonQuantMla (S2 base from the MLA rule, a multiple of the block size); the kernel
    accumulates q·k over D 512 + rope 64 and reads V (D 512) and K from the NZ blocks in place; the result
    matches the golden under the fp16 tolerance and differs from the rope-less one."""
    kw, out, g_out, _ = nz_decode
    t = _tiling(kw)
    assert (t.template, t.s2_base % 128) == ("FiaTilingNonQuantMla", 0)
    no_rope = fia_golden_lowp(**dict(kw, query_rope=None, key_rope=None))[0]
    assert np.abs(g_out - no_rope).max() > 1e-3


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the Ascend C checks need a C++17 g++)")
def test_mla_nz_decode_lowers_and_runs_on_the_twin(nz_decode, tmp_path):
    """The Ascend C backend copies the NZ cache's fractals into L1 as they are (DataCopy of 32-byte blocks, one
    call per paged row; it used to refuse the read because the columns are not contiguous): both arches'
    syntax checks pass and the A2/A3 twin's output matches the simulator's."""
    launches = [A.Launch.of(r) for r in nz_decode[3]]
    res = A.emit(str(tmp_path), launches, goldens="as_run", atol=1e-3, rtol=1e-3)
    src = (tmp_path / "op_kernel" / "fia_attention_kernel.cpp").read_text()
    assert "DataCopyParams(" in src and "NZ window" in src
    A.check_project(str(tmp_path), res["kernels"])
    report = A.run_project(str(tmp_path), A.arch_of(launches[0].kernel.platform))
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report


# ---------------------------------------------------------------- NZ layout (no compile)

def test_nz_layout_round_trip_and_element_address():
    """to_nz / from_nz are inverses; element (row s, column d) of block blk, head n sits at
    [blk, n, d // d0, s, d % d0] with d0 = 32 bytes (16 fp16, 32 int8); the rope joined to an NZ key is the NZ
    of the joined BnNBsD key."""
    rng = np.random.default_rng(3)
    for dtype, d in ((np.float16, 64), (np.int8, 96)):
        x = rng.integers(-100, 100, (3, 2, 16, d)).astype(dtype)
        nz = to_nz(x)
        d0 = nz_fraction(dtype)
        assert nz.shape == (3, 2, d // d0, 16, d0)
        assert np.array_equal(from_nz(nz), x)
        blk, n, s, c = 2, 1, 5, d - 3
        assert nz[blk, n, c // d0, s, c % d0] == x[blk, n, s, c]
    k, kr = _rand(rng, (2, 1, 16, D)), _rand(rng, (2, 1, 16, DR))
    assert np.array_equal(join_rope(to_nz(k), to_nz(kr), 1, False, "key"),
                          to_nz(join_rope(k, kr, 1, False, "key")))


# ---------------------------------------------------------------- rules (no compile)

def _param_error(kw) -> ParamError:
    with pytest.raises(ParamError) as info:
        fia(**kw)
    return info.value


def test_nz_cache_rules_are_param_errors_naming_the_tensor():
    """op_host's paged-attention and parse checkers (561002) name the tensor of each fp16 NZ mismatch: key NZ
    with value not, an NZ key with a 4-D key_rope, a key_rope block axis other than block_size, fp16 fractals
    of 32 elements."""
    kw = _paged_mla()
    k = kw["key"]
    bad_d0 = k.reshape(k.shape[0], 1, D // 32, 128, 32)
    calls = [("value", dict(value=from_nz(k))), ("key_rope", dict(key_rope=from_nz(kw["key_rope"]))),
             ("key_rope", dict(key_rope=np.ascontiguousarray(kw["key_rope"][:, :, :, :64]))),
             ("key", dict(key=bad_d0, value=bad_d0))]
    for name, over in calls:
        err = _param_error(dict(kw, **over))
        assert err.param == name, (name, str(err))


def test_int8_nz_cache_takes_fractals_of_32():
    """An int8 NZ cache is (blocks, N, D/32, block_size, 32): fractals of 16 are op_host's ParamError (561002,
    ``CheckGqaIOTensor``, with the bf16 query its GQA NZ template takes) naming key (the right layout runs on the
    KV antiquant kernel: test_fia_antiquant's paged tests)."""
    rng = np.random.default_rng(4)
    n, d, bs = 8, 128, 128
    k8 = to_nz(rng.integers(-5, 5, (2, 1, bs, d)).astype(np.int8))
    assert k8.shape == (2, 1, 4, bs, 32)
    kw = dict(query=_rand(rng, (1, 1, n, d)).astype(ml_dtypes.bfloat16), key=k8, value=k8, num_heads=n,
              num_key_value_heads=1, input_layout="BSND", block_table=np.array([[1, 0]], np.int32), block_size=bs,
              actual_seq_lengths_kv=[200], key_antiquant_scale=np.ones((1, d), ml_dtypes.bfloat16),
              value_antiquant_scale=np.ones((1, d), ml_dtypes.bfloat16))
    k16 = k8.reshape(2, 1, 8, bs, 16)
    err = _param_error(dict(kw, key=k16, value=k16))
    assert (err.param, int(err.status)) == ("key", 561002) and "32" in err.rule


# ---------------------------------------------------------------- slow variants

@pytest.mark.slow
def test_mla_bnnbsd_cache_two_batches_with_lse():
    """BnNBsD caches, two batches of unequal KV (one ending mid-block), G 16, softmax_lse."""
    _check(_paged_mla(seed=1, n=16, lengths=(700, 130), nz=False, softmax_lse_flag=True))


@pytest.mark.slow
def test_mla_dense_bsnd_with_flash_decode():
    """Dense BSND MLA, one batch of KV 8192 on G 4: the MLA tiling splits the row over cores (flash decode)."""
    rng = np.random.default_rng(5)
    n, s2 = 4, 8192
    kw = dict(query=_rand(rng, (1, 1, n, D)), key=_rand(rng, (1, s2, 1, D)), value=None,
              query_rope=_rand(rng, (1, 1, n, DR)), key_rope=_rand(rng, (1, s2, 1, DR)), num_heads=n,
              num_key_value_heads=1, input_layout="BSND", scale=0.04, softmax_lse_flag=True)
    kw["value"] = kw["key"]
    t = _tiling(kw)
    assert (t.template, t.s2_base, len(t.fd_tasks)) == ("FiaTilingNonQuantMla", 512, 1) and len(t.cores) > 1
    _check(kw)


@pytest.mark.slow
def test_gqa_nz_cache_without_rope():
    """An NZ cache without rope (D 128, GQA 4): read in place by the GQA kernel."""
    rng = np.random.default_rng(6)
    n, n2, d, bs = 8, 2, 128, 64
    key, val = _rand(rng, (6, n2, bs, d)), _rand(rng, (6, n2, bs, d))
    kw = dict(query=_rand(rng, (2, n, 1, d)), key=to_nz(key), value=to_nz(val), num_heads=n, num_key_value_heads=n2,
              input_layout="BNSD", scale=0.09, block_table=np.array([[5, 0, 3], [1, 4, 2]], np.int32),
              block_size=bs, actual_seq_lengths_kv=[150, 192])
    _check(kw)


@pytest.mark.slow
def test_mla_tnd_with_lse_and_bnsd_multi_token_causal():
    """TND (three batches of 1-3 query tokens, lse) and BNSD with two query tokens and the right-down causal
    mask (sparse_mode 3): both tile to the MLA template (S1 <= 32 with D 512) and match the golden."""
    rng = np.random.default_rng(7)
    n = 16
    tnd = dict(query=_rand(rng, (6, n, D)), key=_rand(rng, (750, 1, D)), query_rope=_rand(rng, (6, n, DR)),
               key_rope=_rand(rng, (750, 1, DR)), num_heads=n, num_key_value_heads=1, input_layout="TND",
               actual_seq_lengths=[1, 3, 6], actual_seq_lengths_kv=[100, 350, 750], scale=0.04,
               softmax_lse_flag=True)
    bnsd = dict(query=_rand(rng, (2, n, 2, D)), key=_rand(rng, (2, 1, 300, D)), query_rope=_rand(rng, (2, n, 2, DR)),
                key_rope=_rand(rng, (2, 1, 300, DR)), num_heads=n, num_key_value_heads=1, input_layout="BNSD",
                sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), bool), 1), scale=0.04)
    for kw in (tnd, bnsd):
        kw["value"] = kw["key"]
        assert _tiling(kw).template == "FiaTilingNonQuantMla"
        _check(kw)
