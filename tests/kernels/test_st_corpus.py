"""The FIA st corpus (``st/fia_v4.json``, upstream ATK system tests) through the simulated operator.

The corpus describes aclnnFusedInferAttentionScoreV4 calls: torch_npu's V1 keywords plus
``query_quant_mode`` and ``learnable_sink``, exactly the parameter set of
``cvtile.kernels.fia.api.fused_infer_attention_score_v4`` (what ``cvtile cases`` runs).

Outputs are judged as the upstream st harness judges them (``fia_golden_st``, ``--golden st``): the
BSH/BSND/BNSD cases (``standard`` "default") against the executor's fp32 golden with the upstream tolerance
classes (NaN equals NaN), the TND cases (``cv_fused_double_benchmark``) by the double benchmark against an
online-softmax benchmark (:func:`cvtile.kernels.precision.compare_double_benchmark`).

The whole corpus runs in the default tier (CI), in ``SHARDS`` contiguous shards of the file (the corpus is
ordered by feature set, so cases that share kernel specialisations mostly share a shard); ``tests/conftest.py``
hands out each shard as a work unit of its own (``SHARDED``), so both xdist workers run the corpus from the
start of the tier beside the other files. It fits since the simulator's kernels compile through the direct
compiler (``cvtile.sim.direct``, 2026-12-07: an FIA attention kernel about 2.8 s, the KV antiquant kernel about
6 s, against 11 and 13 to 35 s through numba's pipeline); before, CI ran a feature cover of 11 cases and the
corpus was a tier of its own (``docs/compile_time.md``). ``cvtile cases .../st/fia_v4.json --golden st`` is the
same run as one command.

The ratchet: ``passed`` may only go up; the known failures and errors are listed with their causes and may
only go away.
"""

from __future__ import annotations

import re

import pytest

from cvtile.kernels import run_st_corpus
from cvtile.kernels.st_runner import feature_cover
from cvtile.kernels.golden import fia_golden_st
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.fia.api import fused_infer_attention_score_v4 as v4_api

#: passed cases: 78 measured on 2026-11-29 (123 cases: 78 passed, 4 failed, 40 unsupported, 1 error (70, unsupported
#: since)) against the P-rounded float64 golden; under the st harness' judgement (2026-12-02) cases 201, 204 and
#: 367 pass and 8 fails (measured on those four, on the FAST pair and on TND cases 300, 304, 319, 337, 346, all
#: passing; the other cases were not re-run under it). 32 passed before paged KV, pse_shift, left padding and the
#: TND split-fuse route were simulated, 62 before TND routes, learnable_sink and the P-rounded golden.
#: On 2026-12-04 (measured on those cases): the full-quant cases 44 and 45, case 70 (MLA: D 512 + rope 64,
#: paged BSH), 217 and 219 (legacy IFA KV parts that are not whole S2 blocks), 206, 212, 215, 273 and 299 (a
#: shared prefix with the IFA flash-decode split, or whose score block did not fit L0C).
#: The whole file on 2026-12-04 (``cvtile cases st/fia_v4.json --golden st``, after KV antiquant on paged caches
#: and modes 4/5): 123 run, 123 passed, 0 failed, 0 unsupported, 0 errors, case 8 included (below). On
#: 2026-12-05, on an AVX2-only host, the same code gives 122: case 8's tie goes the other way (below), so the
#: floor counts it out. On 2026-12-06 (an AVX-512 host, after this stop's compile and call-memo changes): 123 of
#: 123 again, case 8 included.
#: the corpus has no unsupported case and no error: every case passes but the known failures (a floor of
#: 123 - 1; each shard holds its share of it)
PASSED_FLOOR = 122
#: known failures (case id -> cause); a case may leave this list, none may join it
KNOWN_FAILED = {
    # decode D 128 with scale 1.0 on [-2, 2] data: scores reach |43|, softmax rows are peaked. One P (0.450561)
    # sits on an fp16 rounding midpoint: the st executor's fp32 numpy exp rounds it up, the simulated chip's exp
    # down (as the float64 golden does, against which the case passes). One fp16 ulp of P (2**-12) times a V of
    # ~2 over a row sum of 1.5 moves 5 of 384 outputs of magnitude ~0.004 by 7 % (1.3 % > 0.5 % of the fp16
    # class). Rounding-tie noise of the case, not of the kernel.
    # Which way the tie goes depends on the last bits of the fp32 score q.k, i.e. on the accumulation order of
    # the simulated matmul (vectorised with reassociation: its lanes follow the host's SIMD width, and the
    # cube's own order is not modelled bit for bit). It passed on 2026-12-04's host and fails on an AVX2-only
    # host (2026-12-05: re-run on the commit that measured 123, it fails there too), so PASSED_FLOOR does not count it.
    8: "an fp16 rounding tie of one P flips between the fp32 golden and the chip (5/384 outputs outside fp16)",
    # (201, 204: +-3.39e38 inputs overflow the fp32 scores to inf and the rows to NaN, on the chip and in the st
    # executor's fp32 golden alike; 367: bf16 multi-block P rounding, within the double benchmark's ratios of the
    # online-softmax benchmark. All three left on 2026-12-02 with the st judgement.)
}
#: known errors (case id -> cause)
KNOWN_ERRORS: dict = {
    # (70, "st reader does not page key_rope with key/value") left on 2026-11-29: the reader pages it now and
    # the case passes (MLA).
}
#: the corpus is run in this many contiguous shards (each one xdist work unit, ``tests/conftest.py``)
SHARDS = 8

SUMMARY = re.compile(r"^cases: (\d+) run, (\d+) passed, (\d+) failed, (\d+) unsupported, (\d+) errors(, (\d+) skipped)?$")


@pytest.fixture(scope="module")
def fia_path(corpus_file):
    return corpus_file("st/fia_v4.json")


def _check_summary(res):
    line = res.summary_line()
    m = SUMMARY.match(line)
    assert m, line
    run, passed, failed, unsupported, errors = (int(g) for g in m.groups()[:5])
    assert (run, passed, failed, unsupported, errors) == (
        res.run, res.count("passed"), res.count("failed"), res.count("unsupported"), res.count("error"))
    assert run == passed + failed + unsupported + errors
    return line


def _why(records):
    return "\n".join(f"{r.id}: {r.status}: {r.reason[:300]}" for r in records)


def test_v4_query_quant_mode_is_refused_by_name(fia_path):
    """Forced onto a float case, query_quant_mode is op_host's rejection (its route does not dequantise the
    query: an error record with the aclnn status) or, where op_host lets it through, cvtile's refusal."""
    res = run_st_corpus(fia_path, lambda **kw: v4_api(**dict(kw, query_quant_mode=3)), select=["3"])
    rec = res.records[0]
    assert "query_quant_mode" in rec.reason
    assert rec.status == "unsupported" or (rec.status == "error" and "aclnn" in rec.reason), rec.reason


def _feature_cover(path):
    """The st ids of ``st_runner.feature_cover``: every optional input once, each in its cheapest case."""
    cases = load_st_cases(path)
    return [str(cases[i].id) for i in feature_cover(path)]


def _check_ratchet(res, floor):
    line = _check_summary(res)
    print(line)
    failed = {r.id: r for r in res.by_status("failed")}
    errors = {r.id: r for r in res.by_status("error")}
    assert set(failed) <= set(KNOWN_FAILED), "new failures:\n" + _why(r for i, r in failed.items()
                                                                      if i not in KNOWN_FAILED)
    assert set(errors) <= set(KNOWN_ERRORS), "new errors:\n" + _why(r for i, r in errors.items()
                                                                    if i not in KNOWN_ERRORS)
    assert res.count("passed") >= floor, line
    # every unsupported case names the parameter the simulator does not model
    for r in res.by_status("unsupported"):
        assert r.reason.startswith(("unsupported parameter ", "golden: ")), (r.id, r.reason)
    # the learnable-sink cases run
    assert all(r.status == "passed" for r in res.records if "learnable_sink" in r.features)


def test_feature_cover_gives_every_optional_input_in_few_cases(fia_path):
    ids = _feature_cover(fia_path)
    cases = load_st_cases(fia_path)
    chosen = [c for c in cases if str(c.id) in ids]
    assert {f for c in chosen for f in c.features()} == {f for c in cases for f in c.features()}
    assert any(not c.features() for c in chosen)
    assert len(ids) <= 12 < len({tuple(sorted(c.features())) for c in cases})
    # the rarest input comes in one of its cheapest cases (the first pick of the greedy cover)
    rarest = min({f for c in cases for f in c.features()},
                 key=lambda f: (sum(f in c.features() for c in cases), f))
    assert min(c.elements() for c in chosen if rarest in c.features()) == \
        min(c.elements() for c in cases if rarest in c.features())


def shard_ids(path, shard: int) -> list[str]:
    """The st ids of shard ``shard`` of ``SHARDS``: a contiguous run of the file's cases."""
    cases = load_st_cases(path)
    n = len(cases)
    return [str(c.id) for c in cases[shard * n // SHARDS:(shard + 1) * n // SHARDS]]


def test_shards_cover_the_corpus_once(fia_path):
    ids = [i for k in range(SHARDS) for i in shard_ids(fia_path, k)]
    assert sorted(ids) == sorted(str(c.id) for c in load_st_cases(fia_path))
    assert len(ids) == len(set(ids))
    assert PASSED_FLOOR == len(ids) - len(KNOWN_FAILED) - len(KNOWN_ERRORS)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_st_corpus_shard(fia_path, shard):
    """One shard of the whole corpus: each of its cases passes, but a known failure may fail and a known
    error may err (and may not do anything else); no case is unsupported."""
    ids = shard_ids(fia_path, shard)
    res = run_st_corpus(fia_path, v4_api, golden=fia_golden_st, select=ids)
    _check_ratchet(res, sum(1 for i in ids if int(i) not in KNOWN_FAILED and int(i) not in KNOWN_ERRORS))
    assert res.run == len(ids) and not res.count("unsupported"), _why(r for r in res.records if r.status != "passed")
