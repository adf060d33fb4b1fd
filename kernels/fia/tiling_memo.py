"""The FIA API's memo of ``tile_fia``: a repeated call signature is checked and tiled once per process.

Model
-----
``tile_fia(params, platform)`` (op_host's checks, route, block sizes, core split and flash-decode plan) is a
function of the parameter record and the platform alone: ``FiaParams`` holds every input's metadata (shape,
dtype, format, strides), the values of the host-side integer lists (actual sequence lengths, shared prefix
length) and every attribute, and nothing in the tiling reads a tensor's contents. ``memo_tile_fia`` keeps the
result of the last ``SIZE`` accepted calls by that record, so a call repeated with the same shapes, dtypes,
lengths and attributes (an inference loop, a benchmark) costs a dictionary lookup instead of the ~0.6 ms
the checks and the planner take (``docs/call_overhead.md``).

Invariants
----------
* The key is the whole record, compared field by field (``FiaParams`` and ``TensorMeta`` are frozen
  dataclasses of tuples, strings and numbers), plus each attribute's type and each float attribute's ``repr``
  (so ``1``, ``1.0`` and ``True``, or ``0.0`` and ``-0.0``, never share an entry; a NaN never equals itself,
  so a call with one is tiled every time), plus the resolved ``Platform`` record. A call that
  differs in any of them is tiled afresh.
* A call that tile_fia rejects is never memoised: every repeat runs the checks again and raises the same
  ``ParamError``.
* Calls with plan-search ``overrides`` are not memoised (each one is tiled).
* Every caller gets its own ``FiaTiling``: the memo hands out copies whose mutable containers (``key_fields``,
  ``workspace_layout``, ``decisions``, ``extras`` and the lists inside it) are fresh, so a caller that edits
  its tiling cannot change another's. The core and flash-decode work are tuples of frozen records, shared.
* ``clear()`` empties the memo (a test that patches a planner clears it before and after).

The call memo
-------------
``prepare_fia`` builds the parameter record and runs the API's own checks before it asks for the tiling; for a
repeated plain call that is most of the work. ``call_signature`` describes such a call without building the
record: the platform record, every given array's type, dtype, shape and strides (of query, key, value and the
optional inputs in ``CALL_INPUTS``), the host lists' values (and their type, dtype and shape), and the
attributes with their types and float reprs (as the tiling memo keys them). Everything ``prepare_fia`` reads of
such a call is in it: the record is built from those fields, and none of its checks reads a tensor's
contents. ``lookup_call`` answers a signature seen before with a fresh copy of the tiling ``prepare_fia`` then
returned; ``keep_call`` stores one. A call is described (and so can be answered) only when:

* query, key and value are numpy arrays (not tensor lists, not torch tensors: those are converted), as is
  every given optional input other than the host lists;
* it gives no optional input outside ``CALL_INPUTS`` (antiquant, quant, rope, prefix and padding inputs are
  read or rewritten by ``prepare_fia``'s checks or by the launch), no V2 dtype override, no plan-search
  override, and its sparse_mode is not 9 (the tree mask's values are checked);

and ``prepare_fia`` keeps it only the second time the signature comes (the tiling memo answered its record: a
signature that never recurs, such as a decode step's growing KV length, costs no copies), and only when its checks
left the call's arrays as they were (the same objects under the same names) and its tiling unchanged. A call hit
counts in ``STATS`` as a tiling memo hit (a tiling served from memory); a call miss is counted by the tiling memo's
lookup that follows it. ``clear()`` empties both memos; each keeps ``SIZE`` entries.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from operator import attrgetter

import numpy as np

from ...tiling.fia import tile_fia
from ...tiling.params import ATTR_DEFAULTS, host_list_values
from ...tiling.platform import Platform, get_platform

__all__ = ["memo_tile_fia", "call_signature", "lookup_call", "keep_call", "tiling_copy", "launch_plan", "clear",
           "STATS", "SIZE", "CALL_INPUTS"]

_ATTRS = attrgetter(*ATTR_DEFAULTS)
#: how many accepted call signatures the memo keeps (least recently used first out)
SIZE = 64
_MEMO: OrderedDict = OrderedDict()
#: call signature -> the tiling ``prepare_fia`` returned for it (the call memo)
_CALLS: OrderedDict = OrderedDict()
#: plan key -> launch plan (``launch_plan``)
_PLANS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()   # callers on several threads (the memo's order changes on every hit)
#: hits and misses since the process started (or the last ``clear``)
STATS = {"hits": 0, "misses": 0}


def memo_tile_fia(params, target, overrides: dict | None = None):
    """``tile_fia(params, target, overrides)``, from the memo when the same call was tiled before."""
    if overrides:
        return tile_fia(params, target, overrides)
    plat = target if isinstance(target, Platform) else get_platform(target)
    attrs = _ATTRS(params)
    key = (params, tuple(map(type, attrs)), tuple(repr(v) for v in attrs if type(v) is float), plat)
    tiling = _get(_MEMO, key)
    if tiling is not None:
        return tiling
    tiling = tile_fia(params, target)   # raises for a rejected call: nothing is stored
    _put(_MEMO, key, tiling)
    return tiling


def _get(table: OrderedDict, key, count_miss: bool = True):
    """A fresh copy of ``table[key]`` (counted as a hit), or None (counted as a miss if ``count_miss``)."""
    with _LOCK:
        tiling = table.get(key)
        if tiling is None:
            STATS["misses"] += count_miss
            return None
        STATS["hits"] += 1
        table.move_to_end(key)
        return tiling_copy(tiling)


def _put(table: OrderedDict, key, tiling) -> None:
    """Keep a copy of ``tiling`` under ``key``, the least recently used entries past ``SIZE`` dropped."""
    with _LOCK:
        table[key] = tiling_copy(tiling)
        while len(table) > SIZE:
            table.popitem(last=False)


def launch_plan(key) -> dict:
    """The launch plan of ``key`` (``launch.run_fia``'s ``plan_key``): a dict the launch fills with what it may
    reuse for the next call with that key (its tables, its kernels' specialisations), empty the first time."""
    with _LOCK:
        plan = _PLANS.get(key)
        if plan is None:
            plan = _PLANS[key] = {}
            while len(_PLANS) > SIZE:
                _PLANS.popitem(last=False)
        else:
            _PLANS.move_to_end(key)
        return plan


#: the optional inputs a call answered by the call memo may give (see the module doc)
CALL_INPUTS = frozenset(("atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv"))
_HOST_LISTS = ("actual_seq_lengths", "actual_seq_lengths_kv")


def call_signature(query, key, value, optional: dict, attrs: dict, target, overrides=None, dtypes=None):
    """The call memo's key of one ``prepare_fia`` call (``attrs`` as ``check_binding`` returned them), or None
    when the call is not one the memo answers (module doc)."""
    if overrides or dtypes or attrs.get("sparse_mode") == 9:
        return None
    parts = []
    for x in (query, key, value):
        if type(x) is not np.ndarray:
            return None
        parts.append((x.dtype, x.shape, x.strides))
    for name, x in optional.items():
        if x is None:
            continue
        if name not in CALL_INPUTS:
            return None
        if name in _HOST_LISTS:
            if type(x) not in (list, tuple, np.ndarray):
                return None
            meta = (x.dtype, x.shape) if type(x) is np.ndarray else None
            parts.append((name, type(x), meta, host_list_values(name, x)))
        elif type(x) is np.ndarray:
            parts.append((name, x.dtype, x.shape, x.strides))
        else:
            return None
    values = tuple(attrs.values())
    plat = target if isinstance(target, Platform) else get_platform(target)
    sig = (tuple(parts), tuple(attrs), values, tuple(map(type, values)),
           tuple(repr(v) for v in values if type(v) is float), plat)
    try:
        hash(sig)
    except TypeError:   # an attribute the binding let through unhashable: not answered from memory
        return None
    return sig


def lookup_call(sig):
    """The tiling ``prepare_fia`` returned for the call ``sig`` (a fresh copy), or None. A miss is not counted:
    the tiling memo's lookup that follows it counts."""
    return _get(_CALLS, sig, count_miss=False)


def keep_call(sig, tiling) -> None:
    """Remember ``tiling`` as the answer to the call ``sig`` (``prepare_fia``, after its checks passed)."""
    _put(_CALLS, sig, tiling)


def tiling_copy(tiling):
    """A copy of ``tiling`` sharing only immutable parts (see the module invariants)."""
    out = object.__new__(type(tiling))
    out.__dict__.update(tiling.__dict__)
    out.key_fields = dict(tiling.key_fields)
    out.workspace_layout = dict(tiling.workspace_layout)
    out.decisions = list(tiling.decisions)
    out.extras = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                  for k, v in tiling.extras.items()}
    return out


def clear() -> None:
    """Forget every memoised tiling, call and launch plan and reset ``STATS``."""
    with _LOCK:
        _MEMO.clear()
        _CALLS.clear()
        _PLANS.clear()
        STATS.update(hits=0, misses=0)
