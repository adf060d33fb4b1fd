"""Regression: the Ascend C lowering of a row-chunked pass copied a rank-1 tail chunk whole into its full tile.

chunk_rows assembles each per-row state of a chunked vector pass (the running max, sum, rescale factor) from
its chunks (``insert_rows``). The lowering copied a rank-1 chunk's capacity, not its valid rows: the tail chunk
of an AIV's rows (16 of capacity at row 16 of a 24-row tile) wrote 8 elements past the full tile, into the
next buffer in UB, and the first rows of the output came out wrong on the twin (FIA st case 319, TND on the
split-fuse route, S1 = 38, G = 5: 10,240 of 48,640 outputs; reduced here to one head, S1 = 48, two chunks of 16
and 8 rows per AIV: rows 0-7 and 24-31 wrong). The simulator was right: it copies the valid rows. Found by
``benchmarks/ascendc_coverage.py --twin``.
"""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from cvtile.dsl import ascendc as A
from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.api import npu_fused_infer_attention_score


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH (the twin needs a C++17 g++)")
def test_a_tail_chunk_of_row_state_is_copied_by_its_valid_rows(tmp_path):
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    rng = np.random.default_rng(0)
    s1, s2, d = 48, 16, 128
    q = rng.uniform(-1, 1, (s1, 1, d)).astype(ml_dtypes.bfloat16)
    k = rng.uniform(-1, 1, (s2, 1, d)).astype(ml_dtypes.bfloat16)
    v = rng.uniform(-1, 1, (s2, 1, d)).astype(ml_dtypes.bfloat16)
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, num_heads=1, num_key_value_heads=1, input_layout="TND",
                                        scale=d ** -0.5, actual_seq_lengths=[s1], actual_seq_lengths_kv=[s2])
    (launch,) = rec.launches
    res = A.emit(str(tmp_path), [A.Launch.of(launch)], tolerance=twin_tolerance(q.dtype),
                 max_fail_ratio=MAX_FAIL_RATIO, goldens="as_run")      # the recorded run's: no pipelined compile
    A.check_project(str(tmp_path), res["kernels"])
    kernel = next((tmp_path / "op_kernel").glob("*_kernel.cpp")).read_text()
    assert "row chunks" in launch.kernel.ir_after("chunk_rows") and "Muls(" in kernel
    report = A.run_project(str(tmp_path), "arch22")
    assert "PASS: out bitwise equal" in report, report
