"""Every tiling op_host emits fits the simulated FIA kernel: row passes, and a sweep of the extreme configurations.

op_host tiles prefills with an M base of 512 rows. The chip keeps such a task's fp32 accumulator in its GM
workspace (``vec2_out``), and so does the simulated kernel (``launch.gm_accumulator``), but some tiles still do
not fit on chip: at a head dim of 512 the 512-row query block alone fills L1 (512 KiB of fp16), and on the 950
the hand-off slots live in UB. ``row_passes.launch_in_row_passes`` then takes each row task in passes of fewer rows
(``row_pass_heights``), each pass writing its rows of the task's flash-decode workspace slot from its own first
row (the task table's last column). Every row's arithmetic is unchanged.

The sweep calls the operator over the tiling's extreme configurations (head dims 64-512, GQA ratios up to 128,
long KV, masks, pse, sink, lse, paged KV with 512-position blocks, both arches) with the launches recorded and
not run: the kernels are traced and pass the budget verifier, or the operator rejects the call (ParamError). A
call that is accepted and does not fit on chip would raise UnsupportedParameterError and fail the sweep.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from cvtile.dsl.jit import record_launches
from cvtile.kernels.fia.api import npu_fused_infer_attention_score
from cvtile.kernels.fia.row_passes import MIN_ROW_PASS, TASK_COLUMNS, row_pass_heights, split_row_passes
from cvtile.tiling.errors import ParamError

A2, A5 = "Ascend910B1", "Ascend950"


def _zeros(shape, dtype):
    return np.zeros(shape, ml_dtypes.bfloat16 if dtype == "bf16" else np.float16)


def _call(target, *, b=1, nq=8, nkv=8, s1=4096, s2=4096, d=128, dtype="fp16", mask=None, pse=False, lse=False,
          paged=0, run=False, seed=0):
    """One BNSD call (zeros, or seeded random values when ``run``); returns (outputs, recorded launches)."""
    rng = np.random.default_rng(seed)
    mk = (lambda *s: rng.standard_normal(s).astype(np.float32).astype(_zeros((), dtype).dtype)) if run else \
        (lambda *s: _zeros(s, dtype))
    kw = dict(num_heads=nq, num_key_value_heads=nkv, input_layout="BNSD", scale=d ** -0.5, softmax_lse_flag=lse,
              target=target)
    q = mk(b, nq, s1, d)
    if paged:
        per = -(-s2 // paged)
        k, v = mk(b * per, paged, nkv * d), mk(b * per, paged, nkv * d)
        kw.update(block_table=np.arange(b * per, dtype=np.int32).reshape(b, per), block_size=paged,
                  actual_seq_lengths_kv=[s2] * b)
    else:
        k, v = mk(b, nkv, s2, d), mk(b, nkv, s2, d)
    if mask == "causal":
        kw.update(atten_mask=np.triu(np.ones((2048, 2048), np.bool_), 1), sparse_mode=3)
    elif mask == "full":
        kw["atten_mask"] = np.zeros((b, 1, s1, s2), np.bool_)
    if pse:
        kw["pse_shift"] = mk(1, nq, s1, s2)
    with record_launches(run=run) as rec:
        res = npu_fused_infer_attention_score(q, k, v, **kw)
    return (q, k, v, kw, res), rec.launches


def _tile_rows(launch) -> int:
    """The M constexpr (tile rows) a recorded launch was compiled with."""
    return dict((part[0], part[1]) for part in launch.kernel.key[1] if len(part) == 2)["M"]


# ---------------------------------------------------------------------------------------------- the row passes


def test_row_pass_heights_halve_to_the_cube_fractal():
    assert list(row_pass_heights(512)) == [512, 256, 128, 64, 32, 16]
    assert list(row_pass_heights(80)) == [80, 48, 32, 16]
    assert list(row_pass_heights(MIN_ROW_PASS)) == [MIN_ROW_PASS]


def test_split_row_passes_keeps_each_task_on_its_core_in_order():
    tasks = np.zeros((3, TASK_COLUMNS), np.int64)
    tasks[:, 0] = (0, 1, 2)          # b
    tasks[:, 2] = (0, 512, 0)        # first row
    tasks[:, 3] = (300, 40, 1)       # rows
    tasks[:, 6] = (-1, 3, -1)        # slot
    ptr = np.array([0, 2, 3])
    table, new_ptr = split_row_passes(tasks, ptr, 128)
    assert new_ptr.tolist() == [0, 4, 5]
    assert table[:, 0].tolist() == [0, 0, 0, 1, 2]
    assert table[:, 2].tolist() == [0, 128, 256, 512, 0]
    assert table[:, 3].tolist() == [128, 128, 44, 40, 1]
    assert table[:, TASK_COLUMNS - 1].tolist() == [0, 128, 256, 0, 0]
    assert table[:, 6].tolist() == [-1, -1, -1, 3, -1]


def test_head_dim_512_prefill_runs_in_row_passes_and_matches_the_golden():
    """B1 N1 S1 512 S2 2048 D 512 on A2: op_host's M base 512 (one 512-row task) does not fit on chip; the
    kernel takes it in row passes, and the tiling splits the KV over cores (flash decode), so the passes write
    their rows of each workspace slot from their own first row."""
    from cvtile.kernels import compare, fia_golden_lowp

    (q, k, v, kw, (out, lse)), launches = _call(A2, nq=1, nkv=1, s1=512, s2=2048, d=512, lse=True, run=True)
    attention = [launch for launch in launches if launch.kernel.name == "fia_attention"]
    assert attention and _tile_rows(attention[0]) < 512
    assert any(launch.kernel.name == "fia_fd_combine" for launch in launches)
    kw = {key: val for key, val in kw.items() if key != "target"}
    g_out, g_lse = fia_golden_lowp(q, k, v, **kw)
    report = compare(out, g_out, "float16")
    assert report.passed, report
    assert compare(lse, g_lse, "float32").passed


# ------------------------------------------------------------------------------ the tiling's extreme configurations

_SHAPES = {   # (b, nq, nkv, s1, s2): prefill at M 512 / S2 512, decode with G 64 and 128, GQA decode with FD
    "prefill": (1, 8, 8, 4096, 4096),
    "decode-g64": (1, 64, 1, 1, 16384),
    "decode-gqa": (4, 32, 8, 1, 8192),
    "decode-g128": (1, 128, 1, 1, 4096),
}
_FEATURES = {"plain": {}, "causal-lse": dict(mask="causal", lse=True), "mask-pse-lse": dict(mask="full", pse=True,
                                                                                          lse=True)}


def _sweep(targets, dims, shapes, features, dtypes=("fp16",), paged=(0,)):
    for target in targets:
        for d in dims:
            for shape in shapes:
                for feat in features:
                    for dtype in dtypes:
                        for block in paged:
                            b, nq, nkv, s1, s2 = _SHAPES[shape]
                            yield pytest.param(target, dict(b=b, nq=nq, nkv=nkv, s1=s1, s2=s2, d=d, dtype=dtype,
                                                            paged=block, **_FEATURES[feat]),
                                               id=f"{target}-D{d}-{shape}-{feat}-{dtype}-pa{block}")


def _fits_or_is_rejected(target, call):
    try:
        _, launches = _call(target, **call)
    except ParamError:
        return
    assert launches


@pytest.mark.parametrize("target, call", list(_sweep((A2, A5), (512,), ("prefill", "decode-g128"), ("mask-pse-lse",))))
def test_the_largest_head_dim_fits_on_chip(target, call):
    _fits_or_is_rejected(target, call)


@pytest.mark.slow
@pytest.mark.parametrize("target, call", list(_sweep((A2, A5), (64, 128, 192, 256, 512), _SHAPES, _FEATURES,
                                                     dtypes=("fp16", "bf16"))))
def test_every_extreme_configuration_fits_on_chip(target, call):
    _fits_or_is_rejected(target, call)


@pytest.mark.slow
@pytest.mark.parametrize("target, call", list(_sweep((A2, A5), (128, 256, 512), ("prefill", "decode-gqa"),
                                                     ("plain", "causal-lse"), paged=(128, 512))))
def test_every_extreme_paged_configuration_fits_on_chip(target, call):
    _fits_or_is_rejected(target, call)
