"""The flash_attn redline train CSVs as FlashAttentionScore calls: read, budget, run, judge.

Model
-----
A row of ``flash_attn_train.csv`` / ``flash_attn_train_tnd.csv`` (the upstream ``flash_attn_ttk`` harness) is
one training forward: q/k/v shapes and dtypes (``tensor_view_shapes`` / ``tensor_dtypes``, the first three
entries), the data range of each input (``input_data_ranges``: uniform), and ``attributes``:
``softmax_scale``, ``mask_mode`` (0 none, 3 right-down causal, 4 a band ``win_left`` / ``win_right`` from the
bottom-right diagonal), ``layout_q`` = ``layout_kv`` = ``layout_out`` (BSND, BNSD or TND with
``cu_seqlens_q_values`` / ``cu_seqlens_kv_values``, cumulative from 0) and ``return_softmax_lse``. Each
row becomes ``npu_fusion_attention`` (sparse mode 3 / 4 with the 2048x2048 template for the masks) and is
judged against the float64 FAS golden (P rounded to the input dtype before P·V) with the row's
``precision_tolerances`` (rtol, atol) under the upstream rule (:func:`cvtile.kernels.precision.compare`).

A row whose matmul work exceeds the machine budget (``max_gflop``, 4·pairs·D·N visible pairs, default 400
GFLOP: the float64 golden runs at ~3.5 GFLOP/s on one core of this class of machine) is *skipped* with its
size in the reason; nothing is run partially. A row that asks for what the operator or the simulator does
not have (mismatched layouts, ``seqused`` lengths that differ from the cumulative ones, a paged cache), or that
FlashAttentionScore's op_host rejects (a ``ParamError``: the harness runs the newer flash_attn operator, whose
rules differ, e.g. right-down causal varlen batches with S1 > S2), is *unsupported* with the reason.

Invariants
----------
* Every row gets exactly one record (passed / failed / unsupported / error / skipped); nothing raises.
* Inputs come from ``numpy.random.default_rng([seed, row index])``: a row's data do not depend on the others.
"""

from __future__ import annotations

import ast
import csv
import time
from pathlib import Path

import numpy as np

from ..tiling.errors import ParamError
from .golden.dtypes import numpy_dtype
from .golden.masks import mask_template
from .precision import compare
from .st_runner import CaseRecord, StResult, check_selected, is_unsupported

__all__ = ["is_redline_csv", "load_redline", "redline_call", "run_redline", "row_gflop", "DEFAULT_MAX_GFLOP"]

DEFAULT_MAX_GFLOP = 400.0
_SPARSE = {0: 0, 3: 3, 4: 4}


class RedlineUnsupported(NotImplementedError):
    """A row the FAS simulator cannot take as written (the reason names the column)."""


def is_redline_csv(path) -> bool:
    """A redline CSV (columns ``testcase_name``, ``api_name``, ``tensor_view_shapes``)."""
    try:
        with open(path, newline="") as f:
            head = f.readline()
    except OSError:
        return False
    return head.startswith("testcase_name,api_name,tensor_view_shapes")


def load_redline(path) -> list[dict]:
    """The rows, each with its shapes, dtypes, ranges, attributes and tolerance parsed."""
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            tol = ast.literal_eval(r["precision_tolerances"] or "None")
            rows.append({"name": r["testcase_name"], "api": r["api_name"],
                         "shapes": ast.literal_eval(r["tensor_view_shapes"]),
                         "dtypes": ast.literal_eval(r["tensor_dtypes"]),
                         "ranges": ast.literal_eval(r["input_data_ranges"]),
                         "attrs": ast.literal_eval(r["attributes"]),
                         "tol": tuple(tol[0]) if tol else None})
    return rows


def _lengths(row: dict):
    a = row["attrs"]
    lay = a["layout_q"]
    if lay == "TND":
        cq, ck = list(a["cu_seqlens_q_values"]), list(a["cu_seqlens_kv_values"])
        lq, lk = np.diff(cq), np.diff(ck)
        for name, used, lens in (("seqused_q_values", a.get("seqused_q_values"), lq),
                                 ("seqused_kv_values", a.get("seqused_kv_values"), lk)):
            if used is not None and list(used) != list(lens):
                raise RedlineUnsupported(f"{name} {list(used)[:6]}... differ from the cumulative lengths: "
                                         "FlashAttentionScore TND takes no per-batch used lengths")
        return cq, ck, lq, lk
    q, k = row["shapes"][0], row["shapes"][1]
    s_axis = 1 if lay == "BSND" else 2
    return None, None, [q[s_axis]] * q[0], [k[s_axis]] * k[0]


def row_gflop(row: dict) -> float:
    """The row's matmul work in GFLOP: 4·D·N·(visible pairs), the causal modes counted by their triangle."""
    a = row["attrs"]
    q = row["shapes"][0]
    lay = a["layout_q"]
    n, d = (q[1], q[2]) if lay == "TND" else ((q[2], q[3]) if lay == "BSND" else (q[1], q[3]))
    _, _, lq, lk = _lengths(row)
    pairs = 0
    for s1, s2 in zip(lq, lk):
        s1, s2 = int(s1), int(s2)
        if a["mask_mode"] == 3:
            # j - i <= s2 - s1: row i sees min(s2, s2 - s1 + i + 1) keys
            i = np.arange(s1)
            pairs += int(np.clip(s2 - s1 + i + 1, 0, s2).sum())
        else:
            pairs += s1 * s2
    return 4.0 * d * n * pairs / 1e9


def redline_call(row: dict, rng: np.random.Generator):
    """(query, key, value, npu_fusion_attention keywords, (rtol, atol), dtype) of a row."""
    a = row["attrs"]
    lay = a["layout_q"]
    if not (lay == a["layout_kv"] == a["layout_out"]) or lay not in ("BSND", "BNSD", "TND"):
        raise RedlineUnsupported(f"layouts q/kv/out {lay}/{a['layout_kv']}/{a['layout_out']}: FlashAttentionScore "
                                 "takes one layout, BSND, BNSD or TND (a paged cache is an inference feature)")
    if a["mask_mode"] not in _SPARSE:
        raise RedlineUnsupported(f"mask_mode {a['mask_mode']}")
    cq, ck, _, _ = _lengths(row)
    dtype = row["dtypes"][0]
    arrays = []
    for i in range(3):
        lo, hi = row["ranges"][i]
        arrays.append(rng.uniform(lo, hi, row["shapes"][i]).astype(numpy_dtype(dtype)))
    q = arrays[0]
    n = q.shape[1] if lay == "TND" else (q.shape[2] if lay == "BSND" else q.shape[1])
    kw = {"head_num": int(n), "input_layout": lay, "scale": float(a["softmax_scale"])}
    mode = _SPARSE[a["mask_mode"]]
    if mode:
        kw.update(atten_mask=mask_template(), sparse_mode=mode)
        if mode == 4:
            kw.update(pre_tockens=int(a["win_left"]), next_tockens=int(a["win_right"]))
    if lay == "TND":
        kw.update(actual_seq_qlen=np.asarray(cq[1:], np.int64), actual_seq_kvlen=np.asarray(ck[1:], np.int64))
    return arrays[0], arrays[1], arrays[2], kw, row["tol"], dtype


def run_redline(path, *, max_gflop: float = DEFAULT_MAX_GFLOP, seed: int = 0, select=None, progress=None,
                target: str | None = None) -> StResult:
    """Run the rows of a redline train CSV through ``npu_fusion_attention`` (see the module docstring)."""
    from .fas.api import npu_fusion_attention
    from .fas.host import prepare_call
    from .golden.fas import fas_golden

    records = []
    rows = load_redline(path)
    wanted = None if select is None else {str(s) for s in select}
    if wanted is not None:
        check_selected(wanted, {row["name"] for row in rows}, path)
    for idx, row in enumerate(rows):
        if wanted is not None and row["name"] not in wanted:
            continue
        t0 = time.perf_counter()
        rec = CaseRecord(idx, row["name"], "error")
        try:
            work = row_gflop(row)
            if work > max_gflop:
                rec.status, rec.reason = "skipped", f"{work:.0f} GFLOP of matmul work exceeds the budget " \
                                                    f"({max_gflop:.0f} GFLOP)"
            else:
                q, k, v, kw, tol, dtype = redline_call(row, np.random.default_rng([int(seed), idx]))
                extra = {"target": target} if target else {}
                out = npu_fusion_attention(q, k, v, **kw, **extra)[0]
                golden = fas_golden(prepare_call(q, k, v, **kw), q, k, v, p_dtype=dtype)[0]
                rtol, atol = tol if tol else (None, None)
                rep = compare(out, golden, dtype, rtol=rtol, atol=atol, name="attention_out")
                rec.reports["attention_out"] = rep.to_dict()
                rec.out = rec.reports["attention_out"]
                rec.status = "passed" if rep.passed else "failed"
                rec.reason = "" if rep.passed else str(rep)
        except ParamError as exc:
            rec.status = "unsupported"
            rec.reason = f"FlashAttentionScore's op_host rejects the row (the flash_attn harness runs its own " \
                         f"operator): {exc}"
        except Exception as exc:  # noqa: BLE001 - every failure is a record
            unsupported = isinstance(exc, RedlineUnsupported) or is_unsupported(exc)
            rec.status = "unsupported" if unsupported else "error"
            rec.reason = f"{type(exc).__name__}: {exc}"
        rec.seconds = round(time.perf_counter() - t0, 3)
        records.append(rec)
        if progress is not None:
            progress(rec)
    return StResult(str(Path(path)), records, seed)
