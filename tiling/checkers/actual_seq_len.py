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


def _check_list(name: str, t, b: int, layout: str, limit: int, of: str, monotone: bool) -> None:
    """Count and values of one list: TND/NTD -> exactly B, cumulative (non-decreasing when ``monotone``);
    otherwise 1 or >= B elements, the first B each in [0, ``limit``] (S of ``of``)."""
    tnd = layout in ("TND", "NTD")
    n = _u32(numel(t.shape))
    if tnd and n != b:
        fail(CHECKER, name, n, f"with layout {layout} {name} needs exactly B ({b}) elements")
    if not tnd and n != 1 and n < b:
        fail(CHECKER, name, n, f"{name} needs 1 or at least B ({b}) elements")
    if t.data is None:
        return
    v = _vals(t)
    for k in range(b if tnd else min(n, b)):
        if tnd and monotone and k and _at(v, k) < _at(v, k - 1):
            fail(CHECKER, name, v, f"cumulative {name} must not decrease (element {k})")
        if not tnd and _at(v, k) > limit:
            fail(CHECKER, name, v, f"element {k} ({_at(v, k)}) must not exceed S of {of} ({limit})")
        if _at(v, k) < 0:
            fail(CHECKER, name, v, f"element {k} must not be negative")


def _check_last(name: str, t, layout: str, shape, of: str) -> None:
    """A TND (NTD) list's last element equals T, dim 0 (1) of ``of``."""
    if layout not in ("TND", "NTD"):
        return
    last = _at(_vals(t), _u32(numel(t.shape)) - 1)
    t_dim = dim(shape, 0 if layout == "TND" else 1)
    if last != t_dim:
        fail(CHECKER, name, last, f"the last element must equal T of {of} ({t_dim})")


def single_para(c: CheckContext) -> None:
    i = c.info
    if i.is_max_workspace:
        return
    q = c.t("actual_seq_lengths") if i.actual_seq_q_present else None
    kv = c.t("actual_seq_lengths_kv")
    if q is not None:
        _check_list("actual_seq_lengths", q, i.b_size, i.q_layout, i.s1_size, "query", monotone=True)
    if kv is not None:
        _check_list("actual_seq_lengths_kv", kv, i.b_size, i.q_layout, i.s2_size, "key",
                    monotone=i.kv_storage_mode != "page_attention")
    if q is not None:
        _check_last("actual_seq_lengths", q, i.q_layout, c.p.query.shape, "query")
    if kv is not None and i.kv_storage_mode != "page_attention":
        _check_last("actual_seq_lengths_kv", kv, i.kv_layout, c.p.key.shape, "key")


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
