"""Regression: the Ascend C lowering copied a chunk of an (M, 1) column into its full tile with ``Muls`` at any row.

chunk_rows assembles a row-chunked pass's per-row columns (here the per-token antiquant's ``qsum[:, None]``)
from their chunks (``insert_rows``). A column's rows are not whole 32-byte blocks, so the chunk was copied by the
count form of ``Muls``, which needs its destination on a 32-byte block; the second 4-row chunk of an fp32 column
lands 16 bytes in, and the twin stopped ("Muls: dst starts at UB byte ..., which is not 32-byte aligned"; FIA st
case 268: a decode of 11 query heads per KV head, per-token int8 KV antiquant with offsets, 6 rows per AIV in
chunks of 4). The copy now checks the landing row at run time and stores the chunk's elements one by one
where it is not on a block. Found by ``benchmarks/ascendc_coverage.py --twin``.
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
def test_a_column_chunk_landing_off_a_block_is_copied_by_elements(tmp_path):
    from cvtile.kernels.precision import MAX_FAIL_RATIO, twin_tolerance

    rng = np.random.default_rng(0)
    n, s2, d = 11, 1024, 128
    q = rng.uniform(-1, 1, (1, 1, n * d)).astype(ml_dtypes.bfloat16)
    k = rng.integers(-100, 100, (1, s2, d)).astype(np.int8)
    v = rng.integers(-100, 100, (1, s2, d)).astype(np.int8)
    scale = lambda: rng.uniform(0.001, 0.01, (1, 1, s2)).astype(np.float32)     # noqa: E731
    offset = lambda: rng.uniform(-2, 2, (1, 1, s2)).astype(np.float32)          # noqa: E731
    with record_launches() as rec:
        npu_fused_infer_attention_score(q, k, v, num_heads=n, num_key_value_heads=1, input_layout="BSH",
                                        scale=d ** -0.5, key_antiquant_mode=1, value_antiquant_mode=1,
                                        key_antiquant_scale=scale(), key_antiquant_offset=offset(),
                                        value_antiquant_scale=scale(), value_antiquant_offset=offset(),
                                        actual_seq_lengths_kv=[s2])
    chosen = [A.Launch.of(r) for r in rec.launches if r.kernel.name == "fia_antiquant"]
    assert chosen, [r.kernel.name for r in rec.launches]
    res = A.emit(str(tmp_path), chosen, tolerance=twin_tolerance(q.dtype), max_fail_ratio=MAX_FAIL_RATIO,
                 goldens="as_run")      # the recorded run's results: no pipelined compile
    A.check_project(str(tmp_path), res["kernels"])
    kernel = next((tmp_path / "op_kernel").glob("fia_antiquant_kernel.cpp")).read_text()
    assert "* 4) % 32 == 0) {" in kernel      # the runtime check of a 4-byte column's landing row
    report = A.run_project(str(tmp_path), "arch22")
    lines = [ln for ln in report.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("PASS") for ln in lines), report
