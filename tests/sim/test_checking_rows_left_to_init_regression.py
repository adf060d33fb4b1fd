"""Regression: checking mode reported the rows FIA leaves to the output init as holes.

A call whose actual query lengths (or left padding) leave rows of the output uncomputed relies on the init: the
API fills the output before its launches, as the chip's output init does, and the kernels write the computed rows
only. Checking mode judged ``out`` a pure output with holes: ``WriteOnceError: 3072 of 4096 elements of out are
never written`` for a prefill with actual_seq_lengths [16] of 64 (met on st case 14 of ``fia_v4.json``, a query
of 2048 rows with actual length 512, running the corpus under ``checked_launches``), a false report on a correct
kernel. The FIA launch now tells the session which outputs the host filled for rows it leaves to the init
(``checking.note_host_initialised``; also for a batch with no KV, which is not computed: st case 237); such
outputs are judged for double writes, not holes. A call that
computes every row is judged for holes as before (the seeded ``holes_in_a_pure_output`` bug still is).
"""

from __future__ import annotations

import numpy as np

import cvtile
from cvtile.sim.checking import CheckMode, checked_launches


def _call(actual_q: int):
    rng = np.random.default_rng(0)
    q, k, v = (rng.uniform(-1, 1, (1, 64, 64)).astype(np.float16) for _ in range(3))
    return cvtile.npu_fused_infer_attention_score(q, k, v, num_heads=1, input_layout="BSH", scale=0.125,
                                                  actual_seq_lengths=[actual_q], actual_seq_lengths_kv=[64])[0]


def test_rows_past_the_actual_query_length_are_not_holes():
    with checked_launches(CheckMode()) as session:
        out = np.asarray(_call(16), np.float32)
    assert session.initialised, "the launch did not tell the session about the rows it leaves to the init"
    assert not out[0, 16:].any()          # the init's zeros, untouched
    assert out[0, :16].any()


def test_a_call_that_computes_every_row_is_still_judged_for_holes():
    with checked_launches(CheckMode()) as session:
        _call(64)
    assert session.initialised == [] and session.outputs   # judged (no holes: every row written)


def test_a_batch_without_kv_keeps_the_init_and_is_not_a_hole():
    """st case 237: a batch of actual KV length 0 is not computed; its rows keep the init (zeros)."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, (2, 4, 1, 64)).astype(np.float16)
    k, v = (rng.uniform(-1, 1, (2, 4, 128, 64)).astype(np.float16) for _ in range(2))
    with checked_launches(CheckMode()) as session:
        out = np.asarray(cvtile.npu_fused_infer_attention_score(
            q, k, v, num_heads=4, input_layout="BNSD", scale=0.125, actual_seq_lengths_kv=[100, 0])[0], np.float32)
    assert session.initialised
    assert not out[1].any() and out[0].any()
