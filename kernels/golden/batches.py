"""Per-batch row and kv ranges from the actual-length lists, left padding and the shared prefix.

Model
-----
For every batch ``b`` the golden needs: which query rows it computes
(``q0 : q0 + s1``, in the canonical query's S axis, or token axis for TND/NTD),
which kv positions of that batch's own sequence it reads (``k0 : k0 + s_kv``),
and how many shared-prefix tokens precede them (``prefix``). The attended
sequence is ``prefix`` tokens followed by the ``s_kv`` kv tokens; its length is
``s2 = prefix + s_kv``. Local column ``j`` of that sequence sits at column
``k0 + j`` of a user mask / pse (prefix and left padding never meet, so one of
``k0`` and ``prefix`` is 0).

Length rules (aclnn FusedInferAttentionScore docs, torch_npu docs):

* batch layouts: a 1-element list broadcasts to every batch, a longer list is
  cut to the first B values, a list of 2..B-1 values is an error; for decode
  (S1 == 1) ``actual_seq_lengths`` is ignored; missing lists mean "the full S".
* token layouts (TND/NTD): both lists are required and cumulative (prefix
  sums); B is the query list's length; with paged attention the kv list holds
  per-batch lengths instead (vllm-ascend passes it so, and the upstream st
  golden reads it so).
* left padding: ``query_padding_size`` / ``kv_padding_size`` (one value) move
  the valid block to the end: rows ``S1 - pad - len : S1 - pad``. A block that
  would start before 0 is not computed (its rows stay 0).

Invariants
----------
* ``0 <= q0``, ``q0 + s1 <= rows`` (S1 or T) and ``0 <= k0``, ``k0 + s_kv <=
  capacity``; violations raise ``ValueError`` naming the list and the value.
* ``s1 == 0`` means nothing is computed for the batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["BatchPlan", "per_batch", "cumulative", "plan_batch_layout", "plan_token_layout", "padding_value"]


@dataclass(frozen=True)
class BatchPlan:
    """One batch: query rows ``q0:q0+s1``, kv positions ``k0:k0+s_kv`` after ``prefix`` prefix tokens."""

    b: int
    q0: int
    s1: int
    k0: int
    s_kv: int
    prefix: int = 0

    @property
    def s2(self) -> int:
        """Length of the attended sequence (prefix + kv)."""
        return self.prefix + self.s_kv


def _ints(values, name: str) -> list[int]:
    arr = np.ravel(np.asarray(values))
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"{name}: lengths must be integers, got {list(arr)[:8]}")
    return [int(v) for v in arr]


def per_batch(values, batch: int, name: str) -> list[int] | None:
    """Normalise a per-batch int list: None stays None, 1 value broadcasts, >= B values cut to B."""
    if values is None:
        return None
    vals = _ints(values, name)
    if len(vals) == 1:
        return vals * batch
    if len(vals) < batch:
        raise ValueError(f"{name}: has {len(vals)} values; it must hold 1 value or at least batch size "
                         f"({batch}) values")
    return vals[:batch]


def cumulative(values, name: str, total: int | None = None) -> list[int]:
    """Per-batch lengths from a cumulative (prefix-sum) list; checks non-negative and non-decreasing."""
    vals = _ints(values, name)
    prev = 0
    out = []
    for i, v in enumerate(vals):
        if v < prev:
            raise ValueError(f"{name}[{i}]={v}: cumulative lengths must be non-decreasing "
                             f"(previous value {prev})")
        out.append(v - prev)
        prev = v
    if total is not None and prev > total:
        raise ValueError(f"{name}: the last cumulative value {prev} exceeds the tensor's token count {total}")
    return out


def padding_value(pad, name: str) -> int | None:
    """The single left-padding value (a 1-element tensor/list/int); negative counts as 0 (as the kernel does)."""
    if pad is None:
        return None
    vals = _ints(pad, name)
    if not vals:
        raise ValueError(f"{name}: empty")
    return max(vals[0], 0)


def _check_len(v: int, cap: int, name: str, b: int):
    if v < 0 or v > cap:
        raise ValueError(f"{name}[{b}]={v}: must lie in [0, {cap}]")


def plan_batch_layout(*, batch: int, s1_full: int, kv_capacity: Sequence[int], actual_seq_lengths=None,
                      actual_seq_lengths_kv=None, query_padding_size=None, kv_padding_size=None,
                      prefix: int = 0) -> list[BatchPlan]:
    """Plans for BSH/BSND/BNSD inputs (query ``[B, N, S1, D]``)."""
    decode = s1_full == 1
    q_lens = None if decode else per_batch(actual_seq_lengths, batch, "actual_seq_lengths")
    kv_lens = per_batch(actual_seq_lengths_kv, batch, "actual_seq_lengths_kv")
    qpad = padding_value(query_padding_size, "query_padding_size")
    kvpad = padding_value(kv_padding_size, "kv_padding_size")
    if qpad is not None and q_lens is None and not decode:
        raise ValueError("query_padding_size: left padding needs actual_seq_lengths")
    if kvpad is not None and kv_lens is None:
        raise ValueError("kv_padding_size: left padding needs actual_seq_lengths_kv")
    if prefix and kvpad is not None:
        raise ValueError("key_shared_prefix: the shared prefix cannot be combined with kv_padding_size")
    plans = []
    for b in range(batch):
        s1 = 1 if decode else (q_lens[b] if q_lens is not None else s1_full)
        if q_lens is not None:
            _check_len(s1, s1_full, "actual_seq_lengths", b)
        q0 = 0
        if qpad is not None and not decode:
            q0 = s1_full - qpad - s1
        cap = int(kv_capacity[b])
        s_kv = kv_lens[b] if kv_lens is not None else cap
        if kv_lens is not None:
            _check_len(s_kv, cap, "actual_seq_lengths_kv", b)
        k0 = 0
        if kvpad is not None:
            k0 = cap - kvpad - s_kv
        if q0 < 0:  # padding overflows the tensor: the batch is not computed
            plans.append(BatchPlan(b, 0, 0, 0, 0, 0))
            continue
        if k0 < 0:  # kv block overflows: rows are computed against an empty kv
            plans.append(BatchPlan(b, q0, s1, 0, 0, 0))
            continue
        plans.append(BatchPlan(b, q0, s1, k0, s_kv, prefix))
    return plans


def plan_token_layout(*, tokens: int, actual_seq_lengths, actual_seq_lengths_kv, kv_tokens: int | None,
                      paged: bool, kv_capacity=None) -> tuple[list[BatchPlan], list[int], list[int]]:
    """Plans for TND/NTD inputs; returns the plans and the kv token offsets/lengths of a dense kv source."""
    if actual_seq_lengths is None or actual_seq_lengths_kv is None:
        raise ValueError("actual_seq_lengths / actual_seq_lengths_kv: both are required for TND/NTD layouts")
    q_lens = cumulative(actual_seq_lengths, "actual_seq_lengths", tokens)
    batch = len(q_lens)
    if paged:
        kv_lens = per_batch(actual_seq_lengths_kv, batch, "actual_seq_lengths_kv")
    else:
        kv_all = cumulative(actual_seq_lengths_kv, "actual_seq_lengths_kv", kv_tokens)
        if len(kv_all) < batch:
            raise ValueError(f"actual_seq_lengths_kv: has {len(kv_all)} values, the query list has {batch}")
        kv_lens = kv_all[:batch]
    kv_offsets = list(np.concatenate([[0], np.cumsum(kv_lens)[:-1]]).astype(int)) if batch else []
    plans = []
    q0 = 0
    for b in range(batch):
        if paged and kv_capacity is not None:
            _check_len(kv_lens[b], int(kv_capacity[b]), "actual_seq_lengths_kv", b)
        plans.append(BatchPlan(b, q0, q_lens[b], 0, kv_lens[b], 0))
        q0 += q_lens[b]
    return plans, kv_offsets, kv_lens
