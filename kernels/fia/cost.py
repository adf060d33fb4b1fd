"""The cost of a FusedInferAttentionScore call: the cost model on exactly what the operator launches.

``fia_cost(query, key, value, **kwargs)`` takes the arguments of
``npu_fused_infer_attention_score`` (torch_npu's names) plus ``target``,
V2's ``key_dtype`` / ``value_dtype`` (hifloat8: a uint8 HiF8 cache, as
``api.run_call`` takes them) and V4's ``dequant_scale_query`` / ``query_quant_mode`` / ``out_dtype`` (the
full quant with a quantised query), runs the operator's host side (checks, tiling, the kernels' compilation for
the target) with launches recorded but not run, and times every launch with
``cvtile.sim.cost`` (the attention kernel, then the flash-decode combine when
the tiling splits the KV). A cache the simulated kernel reads widened (FP8, FP4, HiF8: ``launch.float_cache_widened``)
is timed as the 16-bit K/V the kernel loads, not the 8- or 4-bit one the chip loads. The inputs' values matter only where the kernels
read scalars (actual lengths, block tables, the tiling's per-core tables);
zeros are a fine stand-in for the data.
A call with nothing to attend (op_host's empty-tensor template) records no launch: the chip's kernel there
only fills the outputs and cvtile does not build it, so ``fia_cost`` raises ``UnsupportedParameterError`` naming
the empty tensor (or the all-zero lengths) rather than report a time for a kernel it does not have.
The report's ``notes`` (``build_notes``) say where cvtile's build runs the call otherwise than the chip's kernel
in a way that moves the estimate (today: the legacy IFA route's units per vector core, run in more waves).

``useful_flops`` is the call's matmul work, 2·S1·S2·(D + Dv) per (batch,
head) over the actual lengths, counted only for calls with no mask (sparse
mode 0, no atten_mask; else 0 and no TFLOPS figure is claimed).
"""

from __future__ import annotations

import inspect

import numpy as np

from ...dsl.jit import record_launches
from ...sim.cost import CostReport, estimate_calls
from ..errors import UnsupportedParameterError
from ..golden.dtypes import canonical_dtype
from ..golden.int4 import INT4_PER_INT32
from .api import npu_fused_infer_attention_score, prepare_fia, simulate_fia, split_dtype_overrides, v1_call_parts

__all__ = ["build_notes", "fia_cost", "fia_plan", "useful_flops"]

#: V4 keywords ``fia_cost`` takes beside V1's (the query quantisation of the FA full quant: the A2/A3 MLA FA quant,
#: Ascend950's FP8 GQA and MXFP8 full quant)
V4_ONLY = ("dequant_scale_query", "query_quant_mode", "out_dtype")


def fia_cost(query, key, value, *, target: str, record: str = "critical", overrides: dict | None = None,
             hooks=None, **kwargs) -> CostReport:
    """The cost report of ``npu_fused_infer_attention_score(query, key, value, target=target, **kwargs)``;
    ``overrides`` replaces op_host's block sizes or core count (the plan search, ``tile_fia``); ``hooks`` (a
    ``variants.Hooks``) costs the call with a variant compiled in (``cvtile.attention``); ``key_dtype`` /
    ``value_dtype`` in ``kwargs`` are V2's dtype overrides (``api.kv_dtype_overrides``)."""
    optional, attrs, dtypes = _call_parts(query, key, value, target, kwargs)
    _, tiling = prepare_fia(query, key, value, optional, attrs, target, overrides, dtypes)
    with record_launches(run=False) as rec:
        simulate_fia(query, key, value, optional, attrs, target, "program", overrides, hooks, dtypes)
    if not rec.launches:
        param = _empty_param(query, key, optional)
        raise UnsupportedParameterError(
            param, {"query": query, "key": key}.get(param, optional.get(param)),
            f"the call has nothing to attend (op_host's {tiling.template} template): the chip launches a kernel "
            f"that only fills the outputs, which cvtile does not build (the simulator fills them on the host), "
            f"so there is no launch to time")
    report = estimate_calls(rec.launches, target, flops=useful_flops(query, key, value, **kwargs), record=record)
    report.tiling = tiling
    report.notes = build_notes(tiling, report)
    return report


def build_notes(tiling, report: CostReport) -> list:
    """Where cvtile's build runs the call otherwise than the chip's kernel, in ways that move the estimate.

    * More waves than op_host's launch: the legacy IFA route's perf modes that split (b, n2) units over the
      vector cores give each AIV its own unit, two per core group, and op_host launches half as many groups
      (``block_dim``). cvtile's kernel takes one unit per core group (its vector sections split the unit's rows
      over the two AIVs), so it launches a group per unit: more groups than the chip has cube cores, more waves
      than op_host's launch runs in, and its estimate is of those waves."""
    notes = []
    if not report.launches or not tiling.block_dim:
        return notes
    main = report.launches[0]
    chip_waves = -(-tiling.block_dim // main.cores) if main.cores else 0
    if main.waves > chip_waves:
        perf = tiling.decision("perf_mode")
        mode = f" (perf mode {perf.value})" if perf is not None else ""
        notes.append(f"cvtile's {main.kernel} runs its {main.grid} blocks in {main.waves} waves where op_host "
                     f"launches {tiling.block_dim} core groups{mode}, {chip_waves} wave(s) on the {main.cores} cube "
                     f"cores, each vector core with a work unit of its own; cvtile's kernel takes one unit per "
                     f"group, so this estimate is of its build's waves, not the chip's")
    return notes


def _empty_param(query, key, optional: dict) -> str:
    """The parameter that leaves a call without work: an empty query or key, else the actual lengths."""
    if np.size(query) == 0:
        return "query"
    if np.size(key) == 0:
        return "key"
    kv = optional.get("actual_seq_lengths_kv")
    return "actual_seq_lengths_kv" if kv is not None and not any(kv) else "actual_seq_lengths"


def fia_plan(query, key, value, *, target: str, overrides: dict | None = None, **kwargs):
    """The tiling (``FiaTiling``) ``fia_cost`` would time for the same arguments, without compiling or timing."""
    optional, attrs, dtypes = _call_parts(query, key, value, target, kwargs)
    return prepare_fia(query, key, value, optional, attrs, target, overrides, dtypes)[1]


def _call_parts(query, key, value, target: str, kwargs: dict) -> tuple[dict, dict, dict]:
    """(optional inputs, attributes, V2 dtype overrides) of a call given by V1's keywords plus V2's
    ``key_dtype`` / ``value_dtype`` and V4's ``dequant_scale_query`` / ``query_quant_mode`` / ``out_dtype``
    (``api.fused_infer_attention_score_v4``: the full quant with a quantised query)."""
    kwargs, dtypes = split_dtype_overrides(kwargs)
    v4 = {name: kwargs.pop(name) for name in V4_ONLY if name in kwargs}
    bound = inspect.signature(npu_fused_infer_attention_score).bind(query, key, value, target=target, **kwargs)
    bound.apply_defaults()
    optional, attrs = v1_call_parts(dict(bound.arguments))
    optional["dequant_scale_query"] = v4.get("dequant_scale_query")
    attrs["query_quant_mode"] = v4.get("query_quant_mode", 0)
    if v4.get("out_dtype") is not None:
        dtypes["attention_out"] = canonical_dtype(v4["out_dtype"])
    return optional, attrs, dtypes


def useful_flops(query, key, value, *, input_layout="BSH", num_heads=1, actual_seq_lengths=None,
                 actual_seq_lengths_kv=None, atten_mask=None, sparse_mode=0, block_table=None, **_) -> float:
    if atten_mask is not None or sparse_mode != 0 or block_table is not None:
        return 0.0
    lay = input_layout.split("_")[0]
    q, k, v = (np.asarray(x) for x in (query, key, value))
    d, dv = q.shape[-1], v.shape[-1]
    if k.dtype == np.int32 and v.dtype == np.int32:   # an int4 cache, 8 values per int32 (golden.int4)
        dv *= INT4_PER_INT32
    if lay in ("TND", "NTD"):
        cq = [0] + list(actual_seq_lengths)
        ck = [0] + list(actual_seq_lengths_kv)
        pairs = sum((cq[i + 1] - cq[i]) * (ck[i + 1] - ck[i]) for i in range(len(cq) - 1))
        return 2.0 * num_heads * pairs * (d + dv)
    if lay == "BSH":
        b, s1 = q.shape[0], q.shape[1]
        s2 = k.shape[1]
        d = q.shape[2] // num_heads
        dv = d * v.shape[2] // k.shape[2] if k.shape[2] else d
    elif lay == "BSND":
        b, s1, s2 = q.shape[0], q.shape[1], k.shape[1]
    else:  # BNSD
        b, s1, s2 = q.shape[0], q.shape[2], k.shape[2]
    lq = list(actual_seq_lengths) if actual_seq_lengths is not None else [s1] * b
    lk = list(actual_seq_lengths_kv) if actual_seq_lengths_kv is not None else [s2] * b
    return 2.0 * num_heads * sum(x * y for x, y in zip(lq, lk)) * (d + dv)
