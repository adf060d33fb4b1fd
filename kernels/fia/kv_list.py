"""Key/value tensor lists of FusedInferAttentionScore: one tensor per batch (the aclnn non-contiguous KV).

Model
-----
aclnn takes key and value as tensor lists. A list of one tensor is the contiguous form; a list of B tensors,
each of batch 1 with its own S_b (and the same N and D), gives batch b its own KV tensor at its own address:
op_host reads each tensor's S as that batch's KV length (``kvListSeqLens``) and the kernel reads batch b's
K/V from tensor b.

The simulator's kernel takes one GM tensor per argument, so the host lays the B tensors one after the other
along S in one batch-1 *arena* (:func:`list_arena`; B separate allocations become B regions of one GM space,
the one copy of the simulated call) and the kernel (``CACHE="list"``) views batch b's K/V rows from
``kvoff[b]``, its tensor's offset in the arena, through the dense views of batch 0. On the chip a batch that
read past its own tensor would leave it; in the arena it would read the next batch's tensor, so the host
refuses any call that could ask for that (:func:`check_list_lengths`).

The operator's rules (typed errors):

* op_host (the tiling mirror's checkers, ``ParamError`` 561002): as many key tensors as B of query, key and
  value lists of one length, each key/value pair of one S, N and D alike across the list, no block_table, no
  TND/NTD layout, no shared prefix with S1 > 1 (none at all on Ascend950);
* the aclnn doc, checked here before tiling (``ParamError`` 161002): every tensor of the lists has batch 1,
  and B is at most :data:`LIST_B_LIMIT` (256, "due to the tensorlist limit");
* after tiling: each batch's KV length (``actual_seq_lengths_kv``) within its own tensor's S. op_host checks
  it against the longest tensor only, so the chip would read past a shorter batch's tensor; the simulator
  refuses the call with the rule (161002) instead.

An int8 or int4 cache (KV antiquant) is read from the arena the same way, on Atlas A2/A3 by the MSD kernel
(``kernel_antiquant``, CACHE "list") and on Ascend950 by the dequant kernel (``kernel_dequant``; per-channel, per-
tensor, per-token or per-token-group parameters). ``kvoff[b]`` is the arena position of batch b's tensor, not a
column: every kernel reads the batch's mask, pse and per-token antiquant parameters from column 0
(``kernel.column_start``). Not simulated (``UnsupportedParameterError`` naming the parameter): left padding with a
list (the aclnn doc: query left padding is not supported with lists, kv left padding then falls back to right
padding). Ascend950 reads per-token and per-token-group parameters of a list at each batch's own positions, their
(b, n) rows spaced by op_host's S of key, the longest tensor's S (``golden.antiquant.chip_seq_stride``). A shared
prefix with a list (a decode on Atlas A2/A3: op_host's feature check refuses only a query S above 1 with it there,
though the aclnn doc's general line says the prefix takes no list; Ascend950's op_host refuses it) is read from its
own tensors before each batch's region of the arena; each batch's own KV length (the tiling's, less the prefix
where the route counts it in) stays within its tensor.

Invariants
----------
* ``list_arena`` keeps each tensor's element order within its region; offsets are the cumulative S of the
  tensors before it.
* A list of one tensor never reaches this module's arena: :func:`kv_arrays` unwraps it.
"""

from __future__ import annotations

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.params import canonical_dtype
from ..errors import UnsupportedParameterError
from ..golden.dtypes import to_numpy

__all__ = ["LIST_B_LIMIT", "kv_arrays", "first_tensor", "total_size", "check_tensor_lists", "check_list_lengths",
           "check_list_launch", "list_arena"]

#: the most batches a key/value tensor list may hold (aclnn doc: "due to the tensorlist limit")
LIST_B_LIMIT = 256


def kv_arrays(x):
    """key / value as numpy: one array, or a list of arrays for a tensor list of two or more (a list of one is
    the contiguous form, as aclnn counts it)."""
    if isinstance(x, (list, tuple)):
        items = [to_numpy(t) for t in x]
        return items[0] if len(items) == 1 else items
    return to_numpy(x)


def first_tensor(x):
    """The tensor itself, or the first of a tensor list."""
    return x[0] if isinstance(x, (list, tuple)) else x


def total_size(x) -> int:
    """Elements of a tensor or of every tensor of a tensor list."""
    return sum(int(t.size) for t in x) if isinstance(x, (list, tuple)) else int(x.size)


def _invalid(name: str, value, rule: str) -> ParamError:
    return ParamError(name, value, rule, status=AclnnStatus.PARAM_INVALID, checker="api")


def check_tensor_lists(key, value) -> None:
    """The aclnn doc's list rules op_host does not check: batch 1 in every tensor, at most LIST_B_LIMIT of
    them (``ParamError`` 161002 naming the list)."""
    for name, x in (("key", key), ("value", value)):
        if not isinstance(x, list):
            continue
        if len(x) > LIST_B_LIMIT:
            raise _invalid(name, f"a tensor list of {len(x)}", f"a key/value tensor list holds at most "
                           f"{LIST_B_LIMIT} tensors (B <= {LIST_B_LIMIT}, the tensorlist limit)")
        for i, t in enumerate(x):
            if t.ndim < 3 or t.shape[0] != 1:
                raise _invalid(f"{name}[{i}]", f"{canonical_dtype(t.dtype)} tensor {tuple(t.shape)}",
                               "every tensor of a key/value tensor list has batch 1 (one tensor per batch)")


def check_list_lengths(key, kv_seqlens, s_axis: int) -> None:
    """Each batch's KV length within its own tensor's S (see the module doc); ``s_axis`` is the S axis of the
    list's layout."""
    if not isinstance(key, list):
        return
    for b, (t, n) in enumerate(zip(key, kv_seqlens)):
        if n > t.shape[s_axis]:
            raise _invalid("actual_seq_lengths_kv", list(kv_seqlens),
                           f"batch {b} attends {n} KV positions but its key tensor holds {t.shape[s_axis]} "
                           f"(op_host checks the longest tensor only; the chip would read past this one)")


def check_list_launch(token_layout: bool, layout: str, query_padding_size, kv_padding_size) -> None:
    """What the simulated tensor-list reading does not model, refused naming the parameter (module doc)."""
    refused = (("query_padding_size", query_padding_size is not None,
                "left padding (the operator does not support it with tensor lists)"),
               ("kv_padding_size", kv_padding_size is not None,
                "kv left padding (the aclnn doc: the operator then assumes right padding; cvtile refuses "
                "rather than guess)"),
               ("input_layout", token_layout, f"the {layout} layout"))
    for name, given, what in refused:
        if given:
            raise UnsupportedParameterError(name, layout if name == "input_layout" else "given",
                                            f"a key/value tensor list with {what} is not simulated")


def list_arena(keys, values, as_heads, s_axis: int):
    """``(k, v, offsets)``: the B tensors laid one after the other along ``s_axis`` in one batch-1 tensor
    (each first viewed by ``as_heads``, e.g. BSH as BSND) and ``offsets[b]``, the arena position of batch b's
    first KV token."""
    k = np.concatenate([as_heads(t) for t in keys], axis=s_axis)
    v = np.concatenate([as_heads(t) for t in values], axis=s_axis)
    lengths = [t.shape[s_axis] for t in keys]
    return k, v, np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
