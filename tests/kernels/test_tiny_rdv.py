"""The tiny_rdv model cases (``tiny_rdv/*.json``): the reader, and the cases through the simulated operator.

The reader builds each file's call the way the upstream tiny_rdv harness does (see
``cvtile.kernels.tiny_rdv``); the runner is the st runner (``run_st_corpus`` / ``cvtile cases``), with
torch_npu's V1 ``npu_fused_infer_attention_score`` as the API.

Tiers: the reader on every file and the cases refused before any kernel runs (default); the small cases
through the simulator (``slow``: each costs a numba compile of 15-30 s cold); the whole folder through
``cvtile cases`` (``corpus``: about 8 minutes on 2 cores). Measured 2026-12-01: 20 cases, 17 passed,
3 unsupported (MLA rope; an NZ paged cache with D 80; D 259 on Ascend950, whose simulated tiles do not fit
UB), 0 failed, 0 errors; 2026-12-04: the MLA case (NZ, block size 512) and the NZ D 80 case pass (19), and
D 259 on Ascend950 runs in row passes (``fia.row_passes.launch_in_row_passes``): 20 of 20.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from cvtile.cli import main
from cvtile.kernels.st_runner import default_api, load_api, load_cases, run_case, run_st_corpus
from cvtile.kernels.tiny_rdv import TARGETS, TinyRdvCase, is_tiny_rdv_path, load_tiny_rdv
from cvtile.kernels import fia_golden_lowp, npu_fused_infer_attention_score

#: the counts of the corpus run (the ratchet: passed may only go up, failed and errors stay 0)
PASSED_FLOOR = 20
#: small cases for the slow tier: one per storage mode / layout / head-dim kind, each under ~40 s cold
SMALL = (
    "aclnnFusedInferAttentionScoreV2_pfa_lama2-70b_gqa_unequal_qkvunalign_sparse_000013",   # BSND GQA mask
    "aclnnFusedInferAttentionScoreV2_pfa_llama2-70b_pa_0006",                                # BNSD pa_bnbd
    "aclnnFusedInferAttentionScoreV3_IFA_XY_FP16_1_10_1020_120_BNSD_CON_pre1",               # decode D 120
    "aclnnFusedInferAttentionScoreVX_FIA_CON_FP16_4_8_1024_15_bsh_preto1_nxtto1024_pre0_000004",  # 950, D 15/80
    "aclnnFusedInferAttentionScoreVX_FIA_redline4_PA_FP16_1_4_1024_80_nz_actkv_pre1",        # pa_nz, D 80
)
SUMMARY = re.compile(r"^cases: (\d+) run, (\d+) passed, (\d+) failed, (\d+) unsupported, (\d+) errors$")


@pytest.fixture(scope="module")
def rdv_dir(cases_dir):
    path = cases_dir / "tiny_rdv"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


@pytest.fixture(scope="module")
def rdv_cases(rdv_dir):
    return load_tiny_rdv(rdv_dir)


def _shape(layout: str, b: int, n: int, s: int, d: int) -> tuple:
    return {"BSH": (b, s, n * d), "BSND": (b, s, n, d), "BNSD": (b, n, s, d)}[layout]


# ------------------------------------------------------------------------------------------------ reader
def test_folder_and_files_are_recognised(rdv_dir, rdv_cases):
    assert is_tiny_rdv_path(rdv_dir)
    files = sorted(rdv_dir.glob("*.json"))
    assert len(rdv_cases) == len(files) == 20
    assert all(is_tiny_rdv_path(f) for f in files)
    assert [c.name for c in load_cases(files[0])] == [rdv_cases[0].name]
    assert default_api(rdv_dir).endswith(":npu_fused_infer_attention_score")
    assert load_api(default_api(rdv_dir)) is npu_fused_infer_attention_score


#: input elements above which the default tier only parses a file (three cases of 70-134 M elements take
#: seconds to draw; the corpus tier builds and runs them)
READER_ELEMENTS = 20_000_000


def test_every_file_parses_into_a_typed_case(rdv_cases):
    for c in rdv_cases:
        assert c.kv_storage_mode in ("continue", "pa_bbh", "pa_bnbd", "pa_nz") and c.q_dtype == "float16", c.name
        assert c.query_layout in ("BSH", "BSND", "BNSD") and c.elements() > 0
        assert (c.block_size > 0) == c.paged and ("block_table" in c.features()) == c.paged
        assert len(c.kv_lens()) == c.b and max(c.kv_lens()) <= c.s2
        assert ("atten_mask" in c.features()) == c.enable_mask and c.id == c.name


def test_reader_builds_every_file_as_the_harness_does(rdv_cases):
    for c in rdv_cases:
        if c.elements() > READER_ELEMENTS:
            continue
        kw = c.make_inputs(np.random.default_rng(0))
        n1 = c.n2 * c.g
        assert kw["num_heads"] == n1 and kw["num_key_value_heads"] == c.n2, c.name
        assert kw["scale"] == pytest.approx(1 / math.sqrt(c.qk_d)) and kw["input_layout"] == c.input_layout
        assert kw["softmax_lse_flag"] is c.enable_softmax_lse and kw["inner_precise"] == c.inner_precise
        assert kw["target"] in TARGETS
        qlay = c.query_layout
        q = kw["query"]
        assert q.shape == _shape(qlay, c.b, n1, c.s1, c.qk_d) and q.dtype == np.float16, c.name
        assert np.abs(q.astype(np.float32)).max() <= 10
        if c.act_seq_lens_kv:
            assert kw["actual_seq_lengths_kv"] == list(c.act_seq_lens_kv)
        else:
            assert "actual_seq_lengths_kv" not in kw
        if c.rope_d:
            assert kw["query_rope"].shape == _shape(qlay, c.b, n1, c.s1, c.rope_d)
        if not c.paged:
            assert kw["key"].shape == _shape(qlay, c.b, c.n2, c.s2, c.qk_d), c.name
            assert kw["value"].shape == _shape(qlay, c.b, c.n2, c.s2, c.v_d), c.name
            assert "block_table" not in kw
            continue
        table = kw["block_table"]
        lens = c.kv_lens()
        assert table.dtype == np.int32 and table.shape == (c.b, math.ceil(max(lens) / c.block_size)), c.name
        need = [math.ceil(n / c.block_size) for n in lens]
        used = np.concatenate([table[b, :n] for b, n in enumerate(need)])
        assert sorted(used.tolist()) == list(range(sum(need)))   # one permutation of all needed blocks
        assert all((table[b, n:] == -1).all() for b, n in enumerate(need))
        bs, blocks = c.block_size, sum(need)
        want = {"pa_bbh": (blocks, bs, c.n2 * c.qk_d), "pa_bnbd": (blocks, c.n2, bs, c.qk_d),
                "pa_nz": (blocks, c.n2, c.qk_d // 16, bs, 16)}[c.kv_storage_mode]
        assert kw["key"].shape == want, c.name


def test_paged_caches_hold_the_contiguous_kv_through_the_table():
    base = dict(name="x", input_layout="BNSD", b=2, n2=2, g=2, s1=1, s2=40, qk_d=32, v_d=32, block_size=16,
                act_seq_lens_kv=(40, 20))
    ref = TinyRdvCase(**base).make_inputs(np.random.default_rng(3))["key"]       # contiguous BNSD
    for mode in ("pa_bbh", "pa_bnbd", "pa_nz"):
        kw = TinyRdvCase(**base, kv_storage_mode=mode).make_inputs(np.random.default_rng(3))
        table, cache = kw["block_table"], kw["key"]
        if mode == "pa_bbh":
            cache = cache.reshape(cache.shape[0], 16, 2, 32).transpose(0, 2, 1, 3)
        elif mode == "pa_nz":
            cache = cache.transpose(0, 1, 3, 2, 4).reshape(cache.shape[0], 2, 16, 32)
        for b, n in enumerate((40, 20)):
            for j in range(math.ceil(n / 16)):
                rows = ref[b, :, j * 16:min(n, (j + 1) * 16)]
                assert np.array_equal(cache[table[b, j], :, :rows.shape[1]], rows), (mode, b, j)


def test_masks_follow_the_sparse_mode():
    base = dict(name="m", input_layout="BNSD", b=2, n2=1, g=1, s1=20, s2=30, qk_d=16, v_d=16, enable_mask=True)
    m = TinyRdvCase(**base, pre_tokens=3, next_tokens=5).mask(np.random.default_rng(0))
    assert m.shape == (2, 20, 30) and m.dtype == np.bool_
    d = np.arange(30)[None, :] - np.arange(20)[:, None]
    assert m[:, (d > 5) | (d < -3)].all()                   # the band is always masked outside
    inside = m[:, (d <= 5) & (d >= -3)]
    assert 0.2 < inside.mean() < 0.8                         # inside: random, about half
    assert TinyRdvCase(**base, sparse_mode=3).mask(np.random.default_rng(0)).shape == (2048, 2048)


def test_a_call_a2_rejects_runs_on_950(rdv_cases):
    by_name = {c.name: c for c in rdv_cases}
    c = by_name["aclnnFusedInferAttentionScoreVX_FIA_CON_FP16_4_8_1024_15_bsh_preto1_nxtto1024_pre0_000004"]
    assert c.make_inputs(np.random.default_rng(0))["target"] == "Ascend950"     # D 15 < Dv 80: 950 only
    c = by_name["aclnnFusedInferAttentionScoreV3_IFA_XY_FP16_1_10_1020_120_BNSD_CON_pre1"]
    assert c.make_inputs(np.random.default_rng(0))["target"] == "Ascend910B1"


def test_unbuildable_fields_are_unsupported_by_name():
    c = TinyRdvCase(name="i8", input_layout="BNSD", b=1, n2=1, g=1, s1=1, s2=16, qk_d=16, v_d=16, kv_dtype="int8")
    r = run_case(c, npu_fused_infer_attention_score)
    assert r.status == "unsupported" and "kv_dtype" in r.reason


# ------------------------------------------------------------------------------------------------ runs
def test_cli_runs_a_tiny_rdv_file(rdv_dir, capsys):
    """Also the regression of 'D 259 on Ascend950 does not fit UB': op_host's 128-row tasks of D 259 run in row
    passes (refused as unsupported before)."""
    path = rdv_dir / "aclnnFusedInferAttentionScoreV2_PFA_default_CON_FP16_2_2_128_128_259_4.json"
    assert main(["cases", str(path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "cases: 1 run, 1 passed, 0 failed, 0 unsupported, 0 errors"
    assert lines[-2].startswith("golden: lowp (")


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_small_case_passes(rdv_dir, name):
    res = run_st_corpus(rdv_dir, npu_fused_infer_attention_score, golden=fia_golden_lowp, select=[name])
    (r,) = res.records
    assert r.status == "passed", f"{r.status}: {r.reason}"
    assert r.out and r.out["passed"]


@pytest.mark.corpus
def test_whole_folder_through_the_cli(rdv_dir, capsys):
    code = main(["cases", str(rdv_dir)])
    out = capsys.readouterr().out.strip().splitlines()
    m = SUMMARY.match(out[-1])
    assert m, out[-1]
    run, passed, failed, unsupported, errors = map(int, m.groups())
    assert (run, failed, errors) == (20, 0, 0) and passed >= PASSED_FLOOR, "\n".join(out)
    assert code == 0
    assert out[-2].startswith("golden: lowp (")
    assert len(out) == 2, "\n".join(out)   # only the golden line and the summary: no case refused
