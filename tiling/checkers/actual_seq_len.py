"""FIA checker family "actual_seq_len": actual_seq_lengths (query) and actual_seq_lengths_kv.

Rules (op_host actual-seq-len checker)
--------------------------------------
The tiling sink (a list given without values) skips every single-parameter rule.

single_para
  * query list: TND/NTD -> exactly B elements, non-decreasing, non-negative, the last equal to T of query;
    other layouts -> 1 or >= B elements, each in [0, S of query] (the first B are checked).
  * kv list: TND/NTD query -> exactly B elements, non-negative and (without a paged cache) non-decreasing, the
    last equal to T of key for a TND/NTD cache; other layouts -> 1 or >= B elements, each in [0, S of key].
existence
  * TND/NTD query needs actual_seq_lengths; TND/NTD kv and paged caches need actual_seq_lengths_kv.
cross_feature
  * full-quant decode MLA: actual_seq_lengths only with TND/NTD.
"""

from __future__ import annotations

from ..layouts import dim, numel
from .base import CheckContext, fail

CHECKER = "actual_seq_len"


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _vals(t) -> list[int]:
    return list(t.data or ())


def _at(vals: list[int], i: int) -> int:
    return vals[i] if 0 <= i < len(vals) else 0


def single_para(c: CheckContext) -> None:
    i = c.info
    if i.is_max_workspace:
        return
    q = c.t("actual_seq_lengths") if i.actual_seq_q_present else None
    kv = c.t("actual_seq_lengths_kv")
    tnd = i.q_layout in ("TND", "NTD")
    b = i.b_size
    if q is not None:
        n = _u32(numel(q.shape))
        if tnd and n != b:
            fail(CHECKER, "actual_seq_lengths", n, f"with layout {i.q_layout} actual_seq_lengths needs exactly B ({b}) "
                 "elements")
        if not tnd and n != 1 and n < b:
            fail(CHECKER, "actual_seq_lengths", n, f"actual_seq_lengths needs 1 or at least B ({b}) elements")
        if q.data is not None:
            v = _vals(q)
            if tnd:
                for k in range(b):
                    if k and _at(v, k) < _at(v, k - 1):
                        fail(CHECKER, "actual_seq_lengths", v,
                             f"cumulative actual_seq_lengths must not decrease (element {k})")
                    if _at(v, k) < 0:
                        fail(CHECKER, "actual_seq_lengths", v, f"element {k} must not be negative")
            else:
                for k in range(min(n, b)):
                    if _at(v, k) > i.s1_size:
                        fail(CHECKER, "actual_seq_lengths", v,
                             f"element {k} ({_at(v, k)}) must not exceed S of query ({i.s1_size})")
                    if _at(v, k) < 0:
                        fail(CHECKER, "actual_seq_lengths", v, f"element {k} must not be negative")
    if kv is not None:
        n = _u32(numel(kv.shape))
        if tnd and n != b:
            fail(CHECKER, "actual_seq_lengths_kv", n, f"with layout {i.q_layout} actual_seq_lengths_kv needs exactly "
                 f"B ({b}) elements")
        if not tnd and n != 1 and n < b:
            fail(CHECKER, "actual_seq_lengths_kv", n, f"actual_seq_lengths_kv needs 1 or at least B ({b}) elements")
        if kv.data is not None:
            v = _vals(kv)
            if tnd:
                for k in range(b):
                    if k and i.kv_storage_mode != "page_attention" and _at(v, k) < _at(v, k - 1):
                        fail(CHECKER, "actual_seq_lengths_kv", v,
                             f"cumulative actual_seq_lengths_kv must not decrease (element {k})")
                    if _at(v, k) < 0:
                        fail(CHECKER, "actual_seq_lengths_kv", v, f"element {k} must not be negative")
            else:
                for k in range(min(n, b)):
                    if _at(v, k) > i.s2_size:
                        fail(CHECKER, "actual_seq_lengths_kv", v,
                             f"element {k} ({_at(v, k)}) must not exceed S of key ({i.s2_size})")
                    if _at(v, k) < 0:
                        fail(CHECKER, "actual_seq_lengths_kv", v, f"element {k} must not be negative")
    if q is not None:
        last = _at(_vals(q), _u32(numel(q.shape)) - 1)
        qs = c.p.query.shape
        if i.q_layout == "TND" and last != dim(qs, 0):
            fail(CHECKER, "actual_seq_lengths", last, f"the last element must equal T of query ({dim(qs, 0)})")
        if i.q_layout == "NTD" and last != dim(qs, 1):
            fail(CHECKER, "actual_seq_lengths", last, f"the last element must equal T of query ({dim(qs, 1)})")
    if kv is not None and i.kv_storage_mode != "page_attention":
        last = _at(_vals(kv), _u32(numel(kv.shape)) - 1)
        ks = c.p.key.shape
        if i.kv_layout == "TND" and last != dim(ks, 0):
            fail(CHECKER, "actual_seq_lengths_kv", last, f"the last element must equal T of key ({dim(ks, 0)})")
        if i.kv_layout == "NTD" and last != dim(ks, 1):
            fail(CHECKER, "actual_seq_lengths_kv", last, f"the last element must equal T of key ({dim(ks, 1)})")


def existence(c: CheckContext) -> None:
    i = c.info
    if i.q_layout in ("TND", "NTD") and not i.actual_seq_q_present:
        fail(CHECKER, "actual_seq_lengths", None, f"layout {i.q_layout} needs actual_seq_lengths")
    if i.kv_layout in ("TND", "NTD") and not i.actual_seq_kv_present:
        fail(CHECKER, "actual_seq_lengths_kv", None, f"layout {i.kv_layout} needs actual_seq_lengths_kv")
    if i.kv_storage_mode == "page_attention" and not i.actual_seq_kv_present:
        fail(CHECKER, "actual_seq_lengths_kv", None, "paged attention needs actual_seq_lengths_kv")


def cross_feature(c: CheckContext) -> None:
    i = c.info
    if c.full_quant and i.mla_mode == "split_d512" and i.actual_seq_q_present and i.q_layout not in ("TND", "NTD"):
        fail(CHECKER, "actual_seq_lengths", None, "full-quant decode MLA takes actual_seq_lengths only with TND/NTD")
