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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from operator import attrgetter

from ...tiling.fia import tile_fia
from ...tiling.params import ATTR_DEFAULTS
from ...tiling.platform import Platform, get_platform

__all__ = ["memo_tile_fia", "clear", "STATS", "SIZE"]

_ATTRS = attrgetter(*ATTR_DEFAULTS)
#: how many accepted call signatures the memo keeps (least recently used first out)
SIZE = 64
_MEMO: OrderedDict = OrderedDict()
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
    with _LOCK:
        tiling = _MEMO.get(key)
        if tiling is not None:
            STATS["hits"] += 1
            _MEMO.move_to_end(key)
            return _fresh(tiling)
        STATS["misses"] += 1
    tiling = tile_fia(params, target)   # raises for a rejected call: nothing is stored
    with _LOCK:
        _MEMO[key] = _fresh(tiling)
        while len(_MEMO) > SIZE:
            _MEMO.popitem(last=False)
    return tiling


def _fresh(tiling):
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
    """Forget every memoised tiling and reset ``STATS``."""
    with _LOCK:
        _MEMO.clear()
        STATS.update(hits=0, misses=0)
