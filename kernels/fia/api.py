"""``npu_fused_infer_attention_score``: the torch_npu operator, run on the simulated chip.

Model
-----
The call takes torch_npu's parameters with their names, order and defaults
(``torch_npu.npu_fused_infer_attention_score``, V1 API) plus ``target`` (the
platform; default Ascend910B1) and ``order`` (the simulator's execution order:
``"program"``, the sequential kernel, or ``"pipelined"``, the AIC and AIV
programs the compiler splits it into, as the chip runs them). It does what the real operator does on the
host and then runs the simulated kernels:

0. the binding's type checks (``check_binding``): what torch_npu's Python binding refuses (a query that is
   not a tensor, a float or string for an int, a non-bool flag, a non-int element of an ``int[]``) raises
   ``ParamError`` 161002 naming the parameter;
1. the parameter record (``FiaParams``) is built from the arrays' metadata and
   the attributes, with the output metadata the operator infers; a key and value both int32 are an int4 cache
   packed 8 per element, viewed as int4 of the real head dim as aclnn's op_api does (``golden.int4``; the
   simulator holds their int8 values);
2. the tiling mirror (``tile_fia``) runs op_host's checkers (bad input raises
   ``ParamError`` with the aclnn status), route, block sizes, core split and
   flash-decode plan; an accepted call's tiling is memoised by its whole parameter record (``tiling_memo``),
   so a repeated call signature is checked and tiled once; a repeated plain call (numpy arrays, no input the
   checks read or rewrite: ``tiling_memo.call_signature``) skips the record and the API's checks as well, and
   its launch plan keeps its band, task tables and kernel specialisation (``launch.run_fia``'s ``plan_key``);
3. features the simulated kernels do not model raise
   ``UnsupportedParameterError`` naming the parameter — nothing is ignored;
4. ``run_fia`` launches the DSL kernels on that tiling.

Inputs are numpy arrays (float16, ml_dtypes.bfloat16, float32 for none of
q/k/v; an int8 or int4 key/value cache with its antiquant parameters, on Ascend950 also ml_dtypes.float8_e4m3fn
and (MXFP4, mode 6 with float8_e8m0fnu scales) float4_e2m1fn;
int8 q/k/v for full quant) or torch
tensors when torch is installed; the outputs come back in the
same kind. A HiFloat8 key/value cache (Ascend950, per-channel mode 0) has no numpy dtype: it arrives as uint8
arrays of HiF8 codes marked by a dtype override, which only the V2 API takes (``key_dtype`` / ``value_dtype``
"hifloat8" or torch_npu.hifloat8 = 290, as torch_npu's V2 binding reinterprets a uint8 tensor; ``api_v2``).
This V1 API has no dtype argument, so it cannot express a HiF8 cache (a uint8 key is op_host's dtype error);
``simulate_fia`` / ``prepare_fia`` take the override as ``dtypes``, and ``run_call`` / ``plan_call`` (and
``cost.fia_cost``) take V1's keywords plus V2's ``key_dtype`` / ``value_dtype`` (``kv_dtype_overrides``).
Returns ``(attention_out, softmax_lse)``; ``softmax_lse`` is a
``(B, N, S1, 1)`` / ``(T, N, 1)`` float32 array when ``softmax_lse_flag``,
else an empty ``(0,)`` array (what torch_npu returns, whatever its doc says).

Semantics the simulator fixes where the chip varies: a fully masked row gives
output 0 (the chip guarantees it with inner_precise 2/3 and cvtile for all
values), and its lse is +inf. A row without kv gets ``golden.fia.empty_row_lse`` (one definition for the
kernel launch, this API and the golden): -3.4e38 on the arch22 legacy decode route, else +inf, and +inf for
an empty key/value tensor on every route.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from numbers import Integral, Real
from typing import Any

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.layouts import INPUT_LAYOUTS
from ...tiling.params import FiaParams, TensorMeta, canonical_dtype, host_list_values
from ...tiling.platform import DEFAULT_TARGET
from ..errors import UnsupportedParameterError
from ..golden.dtypes import numpy_dtype, to_numpy
from ..golden.layouts import parse_layout
from ..golden.fia import INNER_PRECISE_LIMIT, empty_row_lse, query_s as _query_s
from ..golden.antiquant import ANTIQUANT_PARAMS, antiquant_spec, \
    chip_seq_stride, pfa_dequantises
from ..golden.int4 import int4_kv
from ..golden.nz import group_scale_stride
from ...dsl.errors import BudgetError
from ...dsl.jit import launches_run
from ...sim.precompile import compiled_ahead, first_time
from .launch import counts_own_kv, run_fia as _launch_fia
from .kv_list import check_list_lengths, check_tensor_lists, first_tensor, kv_arrays, total_size
from .nz_cache import check_nz_call
from .tiling_memo import STATS as memo_stats, call_signature, keep_call, lookup_call, memo_tile_fia, tiling_copy
from .tree import check_rope_call, check_tree_call, join_rope_call
from .fullquant import fullquant_call, is_fullquant
from .fullquant_gqa import FP8_GQA_TEMPLATE, fullquant_gqa_call
from .fullquant_mx import MX_TEMPLATE, fullquant_mx_call
from .mla_fullquant import is_mla_fullquant, mla_fullquant_call
from .mla_quant import MLA_QUANT_INPUTS, is_mla_quant, mla_quant_call
from ..golden.fullquant import FULLQUANT_SCALES
from ..golden.hifloat8 import HIFLOAT8, hifloat8_marker

__all__ = ["npu_fused_infer_attention_score", "fused_infer_attention_score_v4", "SUPPORTED_OPTIONAL_INPUTS",
           "prepare_fia", "plan_call", "run_call", "simulate_fia", "check_binding", "kv_dtype_overrides",
           "split_dtype_overrides", "KV_DTYPE_KEYWORDS"]

#: Optional tensor inputs the simulated kernels implement; every other one raises UnsupportedParameterError.
SUPPORTED_OPTIONAL_INPUTS = ("atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv", "pse_shift", "block_table",
                             "query_padding_size", "kv_padding_size", "learnable_sink", "quant_scale2",
                             "quant_offset2", "key_shared_prefix", "value_shared_prefix", "actual_shared_prefix_len",
                             "query_rope", "key_rope", "dequant_scale_query", *ANTIQUANT_PARAMS,
                             *FULLQUANT_SCALES)

_UNSUPPORTED_REASON = {
    "key_rope_antiquant_scale": "the rope's antiquant scale (reserved by the operator) is not simulated",
}


def npu_fused_infer_attention_score(
        query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
        actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
        quant_offset2=None, antiquant_scale=None, antiquant_offset=None, key_antiquant_scale=None,
        key_antiquant_offset=None, value_antiquant_scale=None, value_antiquant_offset=None, block_table=None,
        query_padding_size=None, kv_padding_size=None, key_shared_prefix=None, value_shared_prefix=None,
        actual_shared_prefix_len=None, query_rope=None, key_rope=None, key_rope_antiquant_scale=None, num_heads=1,
        scale=1.0, pre_tokens=2147483647, next_tokens=2147483647, input_layout="BSH", num_key_value_heads=0,
        sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0, key_antiquant_mode=0,
        value_antiquant_mode=0, softmax_lse_flag=False, target: str = DEFAULT_TARGET, order: str = "program"):
    """FusedInferAttentionScore on the simulator; see the module docstring."""
    return _simulate_v1_names(dict(locals()))


def fused_infer_attention_score_v4(query, key, value, *, learnable_sink=None, dequant_scale_query=None,
                                   query_quant_mode=0, out_dtype=None, **kwargs):
    """The aclnnFusedInferAttentionScoreV4 parameter set: torch_npu's V1 keywords plus ``learnable_sink``,
    ``dequant_scale_query`` and ``query_quant_mode`` (what the st corpus describes; op_host's checks judge them,
    ``_check_query_quant`` says which run), and ``out_dtype``, the dtype of the caller's attentionOut tensor
    (float16 / bfloat16 for an FP8 full-quant query, as V2's ``out_dtype``; None: inferred as torch_npu does).
    Unknown keywords raise TypeError."""
    bound = inspect.signature(npu_fused_infer_attention_score).bind(query, key, value, **kwargs)
    bound.apply_defaults()
    given = dict(bound.arguments)
    optional, attrs = v1_call_parts(given, learnable_sink)
    optional["dequant_scale_query"] = dequant_scale_query
    attrs["query_quant_mode"] = query_quant_mode
    dtypes = {"attention_out": canonical_dtype(out_dtype)} if out_dtype is not None else None
    return simulate_fia(query, key, value, optional, attrs, given["target"], given["order"], dtypes=dtypes)


#: V1 optional tensor inputs, in torch_npu's order
_V1_TENSORS = ("pse_shift", "atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv", "dequant_scale1",
               "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2", "antiquant_scale",
               "antiquant_offset", "block_table", "query_padding_size", "kv_padding_size", "key_antiquant_scale",
               "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset", "key_shared_prefix",
               "value_shared_prefix", "actual_shared_prefix_len", "query_rope", "key_rope",
               "key_rope_antiquant_scale")
#: V1 attributes
_V1_ATTRS = ("num_heads", "scale", "pre_tokens", "next_tokens", "input_layout", "num_key_value_heads",
             "sparse_mode", "inner_precise", "block_size", "antiquant_mode", "softmax_lse_flag",
             "key_antiquant_mode", "value_antiquant_mode")


def v1_call_parts(given: dict, learnable_sink=None) -> tuple:
    """(optional inputs, attributes) of a V1-named call (``given``: every V1 parameter by name)."""
    optional = {name: given[name] for name in _V1_TENSORS}
    optional["learnable_sink"] = learnable_sink
    attrs = {name: given[name] for name in _V1_ATTRS}
    return optional, attrs


#: integer attributes (torch_npu's schema: int)
_INT_ATTRS = ("num_heads", "pre_tokens", "next_tokens", "num_key_value_heads", "sparse_mode", "inner_precise",
              "block_size", "antiquant_mode", "key_antiquant_mode", "value_antiquant_mode", "query_quant_mode")
#: int[] inputs whose values the host reads
_INT_LIST_INPUTS = ("actual_seq_lengths", "actual_seq_lengths_kv", "actual_shared_prefix_len")


def _binding_error(name: str, value, rule: str) -> ParamError:
    return ParamError(name, value, rule, status=AclnnStatus.PARAM_INVALID, checker="binding")


def check_binding(query, key, value, optional: dict, attrs: dict) -> dict:
    """What torch_npu's Python binding refuses before the operator runs: a value of the wrong Python type for
    its schema (a query that is not a tensor, a string or float where an int is expected, a non-bool flag, a
    non-string layout, an int[] with non-int elements). Raises ``ParamError`` (aclnn 161002, checker
    "binding") naming the parameter; returns the attributes as plain Python ints / float / bool / str."""
    if query is not None and not _is_array(query):   # None is the aclnn null check's (161001)
        raise _binding_error("query", _short_repr(query), "query must be an array/tensor (a numpy array or a torch "
                             f"tensor), not a {type(query).__name__}")
    for name, x in (("key", key), ("value", value)):
        items = x if isinstance(x, (list, tuple)) else [x]
        if x is not None and (not items or not all(_is_array(t) for t in items)):
            raise _binding_error(name, _short_repr(x), f"{name} must be an array/tensor or a list of them "
                                 f"(a tensor list), not a {type(x).__name__} of numbers")
    for name in _INT_LIST_INPUTS:
        if optional.get(name) is not None:
            host_list_values(name, optional[name])
    out = dict(attrs)
    for name in _INT_ATTRS:
        v = attrs.get(name)
        if name in attrs and (isinstance(v, bool) or not isinstance(v, Integral)):
            raise _binding_error(name, v, f"{name} must be an int (torch_npu: int), not {type(v).__name__}")
        if name in attrs:
            out[name] = int(v)
    sc = attrs.get("scale")
    if isinstance(sc, bool) or not isinstance(sc, Real):
        raise _binding_error("scale", sc, f"scale must be a float (torch_npu: float), not {type(sc).__name__}")
    out["scale"] = float(sc)
    flag = attrs.get("softmax_lse_flag")
    if not isinstance(flag, (bool, np.bool_)):
        raise _binding_error("softmax_lse_flag", flag, "softmax_lse_flag must be a bool (torch_npu: bool), not "
                             f"{type(flag).__name__}")
    out["softmax_lse_flag"] = bool(flag)
    layout = attrs.get("input_layout")
    if not isinstance(layout, str):
        raise _binding_error("input_layout", layout, f"input_layout must be a string, one of "
                             f"{', '.join(INPUT_LAYOUTS)}; not {type(layout).__name__}")
    return out


def run_fia(q, k, v, **kwargs):
    """``launch.run_fia``, except that kernels whose tiles do not fit the target's on-chip memory even in row
    passes of 16 rows (``row_passes.launch_in_row_passes``) raise ``UnsupportedParameterError`` naming the query and
    the budget line instead of the compiler's table."""
    try:
        return _launch_fia(q, k, v, **kwargs)
    except BudgetError as err:
        first = str(err).splitlines()[0]
        raise UnsupportedParameterError("query", f"{canonical_dtype(q.dtype)} tensor {tuple(q.shape)}",
                                        f"the simulated kernel's tiles for this call do not fit on chip ({first})"
                                        ) from None


def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _short_repr(x) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _simulate_v1_names(given: dict, learnable_sink=None, overrides=None):
    optional, attrs = v1_call_parts(given, learnable_sink)
    return simulate_fia(given["query"], given["key"], given["value"], optional, attrs, given["target"],
                        given.get("order", "program"), overrides)


def _refuse_unplanned_heads(arrays: dict, attrs: dict, tiling) -> None:
    """The TND split-fuse route (``FAInferTiling``) takes a num_key_value_heads that does not divide num_heads
    without a check, in aclnn and in op_host alike: its GQA group ``num_heads / num_key_value_heads`` rounds down
    (to 0 when num_key_value_heads is the larger), so its tasks miss query heads and the chip leaves their rows
    of attention_out unwritten. Nor does it check that the key and value hold the num_key_value_heads heads it
    reads. The tiling mirror plans as op_host does; the simulator refuses to run such a call rather than return
    rows the chip does not define."""
    if tiling.route != "fai":
        return
    n1, n2 = attrs["num_heads"], attrs["num_key_value_heads"]
    if n2 and n1 % n2:
        raise UnsupportedParameterError(
            "num_key_value_heads", n2,
            f"num_heads={n1} is not a multiple of it: the split-fuse route (FAInferTiling, TND) does not check "
            f"this, plans GQA groups of {n1 // n2} head(s) and leaves {n1 - n2 * (n1 // n2)} query head(s) "
            f"unwritten, which is no result to simulate")
    for name in ("key", "value"):   # a TND cache (T, N2, D) or an NZ paged one (blocks, N2, D/16, bs, 16)
        x = arrays[name]
        dense_tnd = np.ndim(x) == 3 and arrays.get("block_table") is None
        if not (dense_tnd or np.ndim(x) == 5):
            continue
        heads = np.shape(x)[1]
        # a cache of no heads at all counts too when a batch reads KV (only the key empty: no empty-tensor template)
        if heads < (n2 or n1) and max(tiling.kv_seqlens, default=0) > 0:
            raise UnsupportedParameterError(
                name, x, f"it holds {heads} head(s), fewer than the {n2 or n1} the split-fuse route reads "
                         f"(num_key_value_heads; aclnn and op_host do not check it there): the chip would read "
                         f"beyond the {name}")


def _refuse_cache_outside_the_table(arrays: dict, attrs: dict, tiling) -> None:
    """A paged cache whose blocks are not ``block_size`` positions long, or a block table whose entries a batch
    reads name a block the key or value cache does not hold: op_host checks neither (it reads the block size
    from the attribute and never reads the table), so the chip would read outside the cache. The simulator's
    kernels read the cache's own shape and would stop at their bounds check; the call is refused by name
    instead."""
    table = arrays.get("block_table")
    if table is None or tiling.route == "empty" or not tiling.cores:
        return
    bs = int(attrs["block_size"])
    t = np.asarray(table)
    axis = {3: 1, 4: 2, 5: 3}
    for name in ("key", "value"):
        x = arrays[name]
        if isinstance(x, list) or np.ndim(x) not in axis:
            continue
        held = int(np.shape(x)[axis[np.ndim(x)]])
        if held != bs:
            raise UnsupportedParameterError(name, _describe(x), f"its blocks hold {held} positions where block_size "
                                            f"is {bs}: op_host does not check it and the chip would read {bs} a "
                                            f"block, outside the {name}")
        blocks = int(np.shape(x)[0])
        for b, n in enumerate(tiling.kv_seqlens[:t.shape[0]]):
            used = t[b, :min(-(-int(n) // bs), t.shape[1])] if n > 0 else t[b, :0]
            bad = used[(used < 0) | (used >= blocks)]
            if bad.size:
                raise UnsupportedParameterError("block_table", f"entry {int(bad[0])} of batch {b}",
                                                f"the {name} cache holds {blocks} blocks: op_host does not check "
                                                f"the table and the chip would read outside the {name}")


#: the routes whose op_host takes inner_precise without the range check of the others (their names for it)
_UNCHECKED_INNER_PRECISE = {"fai": "the split-fuse route (FAInferTiling, TND) takes it unchecked",
                            "pfa": "the legacy PromptFlashAttention route reads only its bits 0 and 1"}


def _refuse_unchecked_inner_precise(attrs: dict, tiling) -> None:
    """The TND split-fuse route (``FAInferTiling``) and the legacy PromptFlashAttention route take inner_precise
    without the range check the other routes make (op_host's single-parameter check, 0 to
    ``INNER_PRECISE_LIMIT``; the PFA tiling reads bits 0 and 1 of any value): a value outside it has no
    documented meaning, so the simulator refuses it by name rather than guess how the kernel reads it."""
    ip = attrs.get("inner_precise", 0)
    why = _UNCHECKED_INNER_PRECISE.get(tiling.route)
    if why is not None and not 0 <= int(ip) <= INNER_PRECISE_LIMIT:
        raise UnsupportedParameterError("inner_precise", ip, f"outside 0-{INNER_PRECISE_LIMIT}: {why}, and the aclnn "
                                        "documents define only 0-3; no result to simulate")


def simulate_fia(query, key, value, optional: dict, attrs: dict, target: str = DEFAULT_TARGET,
                 order: str = "program", overrides: dict | None = None, hooks=None, dtypes: dict | None = None):
    """Check, tile and run one call given as the operator's (V1-named) optional inputs and attributes; the
    shared body of the V1 and V2 APIs. Returns ``(attention_out, softmax_lse)`` in the inputs' kind.
    ``overrides``: the plan search's replacements of op_host's block sizes or core count (``tile_fia``);
    ``hooks``: a variant's score_mod / mask_mod (``cvtile.attention``); ``dtypes``: the V2 dtype overrides
    (``prepare_fia``)."""
    torch_out = any(_is_torch(x) for x in (query, key, value))
    attrs = check_binding(query, key, value, optional, attrs)
    misses = memo_stats["misses"]
    arrays, tiling, sig = prepare_fia(query, key, value, optional, attrs, target, overrides, dtypes,
                                      binding_checked=True, with_signature=True)
    fresh = memo_stats["misses"] != misses   # this process tiled the call afresh: its kernels may be new
    q, k, v = arrays["query"], arrays["key"], arrays["value"]
    _refuse_unplanned_heads(arrays, attrs, tiling)
    _refuse_unchecked_inner_precise(attrs, tiling)
    _refuse_cache_outside_the_table(arrays, attrs, tiling)
    legacy = tiling.extras.get("legacy_ifa", False)
    if tiling.route == "empty" or not tiling.cores:
        out, lse = _empty_outputs(q, k, v, attrs, legacy, paged=arrays.get("block_table") is not None,
                                  int8_out=arrays.get("quant_scale2") is not None,
                                  out_dtype=_given_out_dtype(arrays))
    else:
        run = functools.partial(
            run_fia, q, k, v, tiling=tiling, scale=float(attrs["scale"]), input_layout=attrs["input_layout"],
            num_heads=attrs["num_heads"], num_key_value_heads=attrs["num_key_value_heads"],
            atten_mask=arrays.get("atten_mask"), sparse_mode=attrs["sparse_mode"], pre_tokens=attrs["pre_tokens"],
            next_tokens=attrs["next_tokens"], softmax_lse_flag=attrs["softmax_lse_flag"], legacy_route=legacy,
            pse_shift=arrays.get("pse_shift"), learnable_sink=arrays.get("learnable_sink"),
            block_table=arrays.get("block_table"), query_padding_size=arrays.get("query_padding_size"),
            kv_padding_size=arrays.get("kv_padding_size"), hooks=hooks, quant_scale2=arrays.get("quant_scale2"),
            quant_offset2=arrays.get("quant_offset2"), key_shared_prefix=arrays.get("key_shared_prefix"),
            value_shared_prefix=arrays.get("value_shared_prefix"),
            shared_prefix_len=_shared_prefix_len(arrays, attrs), antiquant=arrays.get("_antiquant"),
            inner_precise=attrs["inner_precise"], order=order, fullquant=arrays.get("_fullquant"),
            fullquant_gqa=arrays.get("_fullquant_gqa"), fullquant_mx=arrays.get("_fullquant_mx"),
            out_dtype=_given_out_dtype(arrays), plan_key=(sig, order) if sig is not None and hooks is None else None)
        # a new call compiles its later kernels in child processes while it compiles the first
        new = fresh or (sig is not None and first_time((sig, order, hooks is None)))
        with compiled_ahead(run, order, None if new and overrides is None and launches_run() else 1):
            out, lse, _ = run()
    if lse is None:
        lse = np.empty((0,), dtype=np.float32)
    if torch_out:
        return _to_torch(out), _to_torch(lse)
    return out, lse


#: the torch_npu V2 dtype overrides the simulator takes (``kv_dtype_overrides``)
KV_DTYPE_KEYWORDS = ("key_dtype", "value_dtype")


def kv_dtype_overrides(key_dtype=None, value_dtype=None) -> dict:
    """``prepare_fia``'s ``dtypes`` of V2's ``key_dtype`` / ``value_dtype`` (None: no override): hifloat8 (the
    name, or torch_npu.hifloat8 = 290) marks a uint8 key / value as HiF8 codes; any other dtype raises
    ``UnsupportedParameterError`` naming the keyword."""
    dtypes = {}
    for keyword, dtype in zip(KV_DTYPE_KEYWORDS, (key_dtype, value_dtype)):
        if dtype is None:
            continue
        if not hifloat8_marker(dtype):
            raise UnsupportedParameterError(keyword, dtype, "a torch_npu dtype override the simulator does not "
                                            "take: it takes dtypes from the arrays, except key_dtype / value_dtype "
                                            "hifloat8 (torch_npu.hifloat8 = 290) for a uint8 HiF8 key/value cache")
        dtypes[keyword[:-len("_dtype")]] = HIFLOAT8
    return dtypes


def split_dtype_overrides(kwargs: dict) -> tuple:
    """(``kwargs`` without ``key_dtype`` / ``value_dtype``, the ``dtypes`` they give: ``kv_dtype_overrides``)."""
    rest = {name: x for name, x in kwargs.items() if name not in KV_DTYPE_KEYWORDS}
    return rest, kv_dtype_overrides(**{name: kwargs[name] for name in KV_DTYPE_KEYWORDS if name in kwargs})


def _bound_v1_call(kwargs: dict) -> tuple:
    """(every V1 parameter by name, dtypes) of a call given as V1 keywords (``query``, ``key``, ``value``
    included) plus ``key_dtype`` / ``value_dtype``; unknown keywords raise TypeError."""
    kwargs, dtypes = split_dtype_overrides(kwargs)
    bound = inspect.signature(npu_fused_infer_attention_score).bind(**kwargs)
    bound.apply_defaults()
    return dict(bound.arguments), dtypes


def plan_call(**kwargs):
    """The checks and tiling of one ``npu_fused_infer_attention_score`` call (given by its keywords, ``query``,
    ``key`` and ``value`` included, plus V2's ``key_dtype`` / ``value_dtype`` for a HiF8 cache) without running a
    kernel: ``prepare_fia``'s ``(arrays, FiaTiling)``, or the error the call would raise before its launch."""
    given, dtypes = _bound_v1_call(kwargs)
    optional, attrs = v1_call_parts(given)
    return prepare_fia(given["query"], given["key"], given["value"], optional, attrs, given["target"],
                       dtypes=dtypes)


def run_call(query, key, value, **kwargs):
    """``npu_fused_infer_attention_score(query, key, value, **kwargs)`` that also takes V2's ``key_dtype`` /
    ``value_dtype`` (hifloat8: a uint8 HiF8 cache, ``kv_dtype_overrides``), as ``plan_call`` and
    ``cost.fia_cost`` do: one call description for cvtile's cases, whatever their cache."""
    given, dtypes = _bound_v1_call(dict(kwargs, query=query, key=key, value=value))
    optional, attrs = v1_call_parts(given)
    return simulate_fia(query, key, value, optional, attrs, given["target"], given["order"], dtypes=dtypes)


def prepare_fia(query, key, value, optional: dict, attrs: dict, target: str, overrides: dict | None = None,
                dtypes: dict | None = None, *, binding_checked: bool = False, with_signature: bool = False):
    """Check the call as the operator would and plan it: returns (numpy arrays by name, FiaTiling). A KV-antiquant
    call's arrays also hold its ``AntiquantSpec`` under ``"_antiquant"``, a full-quant call its
    ``FullQuantSpec`` under ``"_fullquant"``. ``dtypes``: dtype overrides by tensor name, what torch_npu's V2
    ``*_dtype`` arguments give (``_dtype_overrides``): ``{"key": "hifloat8", "value": "hifloat8"}`` reads uint8
    key / value arrays as HiFloat8 codes; no other override is taken.

    ``binding_checked``: the caller has just run ``check_binding`` on these very arguments and ``attrs`` is
    what it returned (``simulate_fia``); the binding's checks are then not run a second time.

    A plain call (numpy arrays, no input the checks read or rewrite: ``tiling_memo.call_signature``) seen before
    is answered from the call memo: its parameter record, checks and tiling depend only on that signature, so
    they are not run again. A signature is kept the second time it comes (when the tiling memo answers its
    record), so a call whose signature never recurs pays only for describing it and one lookup.
    ``with_signature``: return ``(arrays, tiling, signature)``, the signature None for a call the memo does not
    answer or keep (``simulate_fia`` keys the call's launch plan on it).

    Raises ``ParamError`` (the operator rejects the call) or ``UnsupportedParameterError``
    (the simulator does not model a requested feature)."""
    if not binding_checked:
        attrs.update(check_binding(query, key, value, optional, attrs))
    arrays: dict[str, Any] = {"query": to_numpy(query), "key": kv_arrays(key), "value": kv_arrays(value)}
    check_tensor_lists(arrays["key"], arrays["value"])
    for name, x in optional.items():
        if x is None:
            continue
        arrays[name] = x if isinstance(x, (list, tuple)) else to_numpy(x)
    sig = call_signature(query, key, value, optional, attrs, target, overrides, dtypes)
    if sig is not None:   # a plain call seen before: its record, checks and tiling are what they were then
        tiling = lookup_call(sig)
        if tiling is not None:
            return (arrays, tiling, sig) if with_signature else (arrays, tiling)
        given, hits = dict(arrays), memo_stats["hits"]
    planned = None
    q = arrays["query"]
    metas = {name: arrays.get(name) for name in ("query", "key", "value", *optional)}
    _int4_cache(arrays, metas)
    _dtype_overrides(arrays, metas, dtypes or {})
    paged = arrays.get("block_table") is not None
    try:
        out_shape = _out_shape(q.shape, attrs, first_tensor(arrays["value"]), paged)
        lse_shape = _lse_shape(q.shape, attrs) if attrs["softmax_lse_flag"] else None
        shape_error = None
    except (ValueError, IndexError, ZeroDivisionError) as exc:
        # the shapes do not fit input_layout (or the layout is unknown): the operator's checkers judge the
        # call with a placeholder output and name the parameter; the query's own shape stands in for it
        out_shape, lse_shape, shape_error = tuple(q.shape), None, exc
    metas["attention_out"] = TensorMeta(out_shape, _out_dtype(canonical_dtype(q.dtype), arrays))
    if attrs["softmax_lse_flag"] and lse_shape is not None:
        metas["softmax_lse"] = TensorMeta(lse_shape, "float32")
    params = FiaParams.from_api(metas, attrs)
    try:
        tiling = memo_tile_fia(params, target, overrides)
        if sig is not None and memo_stats["hits"] > hits:   # a signature seen before: kept if the checks pass
            planned = tiling_copy(tiling)
        layout_error = shape_error
    except ParamError as err:
        if err.param not in ("attention_out", "softmax_lse"):
            raise
        if shape_error is None:   # the outputs are inferred, never passed: blame what they were inferred from
            raise _blame_inferred_output(err, q, first_tensor(arrays["value"]), attrs) from None
        # a complaint about the placeholder output is a complaint about the layout
        layout_error = err
    if layout_error is not None:
        raise ParamError("input_layout", attrs["input_layout"],
                         f"query {tuple(q.shape)} / value {tuple(arrays['value'].shape)} do not fit the layout "
                         f"({layout_error})", status=AclnnStatus.INNER_TILING_ERROR, checker="api")
    _check_cumulative(tiling, optional)
    _check_kv_heads(tiling, attrs)
    own = [n - (0 if counts_own_kv(tiling) else _shared_prefix_len(arrays, attrs)) for n in tiling.kv_seqlens] \
        if "key_shared_prefix" in arrays else tiling.kv_seqlens
    check_list_lengths(arrays["key"], own, 2 if parse_layout(attrs["input_layout"]).qkv == "BNSD" else 1)
    _check_query_quant(arrays, attrs, tiling)
    # A2/A3 MLA FA quant (fia.mla_quant), Ascend950 MLA full quant (fia.mla_fullquant)
    mla_quant = is_mla_quant(arrays, tiling) or is_mla_fullquant(arrays, tiling)
    unsupported = [name for name in optional if name in arrays and name not in SUPPORTED_OPTIONAL_INPUTS
                   and not (mla_quant and name in MLA_QUANT_INPUTS)]
    if unsupported:
        name = unsupported[0]
        reason = _UNSUPPORTED_REASON.get(name, "")
        if len(unsupported) > 1:
            reason += f" (also given and not simulated: {', '.join(unsupported[1:])})"
        raise UnsupportedParameterError(name, _describe(arrays[name]), reason)
    if mla_quant:   # its own checks; the int8 nope and the bf16 rope stay apart (no join)
        arrays["_fullquant"] = (mla_fullquant_call if tiling.arch == "arch35" else mla_quant_call)(arrays, attrs,
                                                                                                  tiling)
    else:   # MXFP8's kernel takes the bf16 rope as operands of its own, as the chip's MX cube does
        check_rope_call(arrays, tiling, apart=(MX_TEMPLATE,))
    if "quant_offset2" in arrays and "quant_scale2" not in arrays:
        raise UnsupportedParameterError("quant_offset2", _describe(arrays["quant_offset2"]),
                                        "given without quant_scale2: the output is not quantised and the operator "
                                        "would ignore it; cvtile refuses it rather than drop it")
    check_nz_call(arrays, attrs, tiling.arch)
    if not tiling.cores and _has_work(tiling):
        raise UnsupportedParameterError("actual_seq_lengths_kv", list(tiling.kv_seqlens),
                                        f"the {tiling.route}/{tiling.template} tiling gave no core work for this "
                                        f"call: {tiling.extras.get('row_tasks', 'its core split is not mirrored')}")
    qd, kd, vd = (_dtype_of(arrays, name) for name in ("query", "key", "value"))
    if mla_quant:
        pass   # (its MlaQuantSpec is set above)
    elif tiling.template == FP8_GQA_TEMPLATE:   # FP8 query, key and value, modes 3/3/2 (fia.fullquant_gqa)
        arrays["_fullquant_gqa"] = fullquant_gqa_call(arrays, attrs, tiling)
    elif tiling.template == MX_TEMPLATE:   # FP8 query, key and value with E8M0 group scales, modes 6/6/8
        arrays["_fullquant_mx"] = fullquant_mx_call(arrays, attrs, tiling)
    elif is_fullquant(arrays):   # int8 query, key and value (fia.fullquant)
        arrays["_fullquant"] = fullquant_call(arrays, attrs, tiling)
    elif kd in ("int8", "int4", "float8_e4m3fn", "float4_e2m1", HIFLOAT8) or \
            any(name in arrays for name in ANTIQUANT_PARAMS):
        arrays["_antiquant"] = _antiquant_call(arrays, attrs, tiling, qd, kd)
    elif qd not in ("float16", "bfloat16") or kd != qd or vd != qd:
        raise UnsupportedParameterError("key" if qd in ("float16", "bfloat16") else "query",
                                        f"query {qd}, key {kd}",
                                        "the simulated kernel is the non-quant one: query, key and value float16 "
                                        "or bfloat16, all alike")
    if not mla_quant and tiling.template != MX_TEMPLATE:
        join_rope_call(arrays, attrs)   # the split rope (and with it the tree mask): fia.tree
    check_tree_call(arrays, attrs, tiling)
    if planned is not None and arrays.keys() == given.keys() and all(arrays[n] is x for n, x in given.items()) \
            and tiling == planned:   # the checks rewrote nothing: the call memo may answer it
        keep_call(sig, tiling)
    else:
        sig = None
    return (arrays, tiling, sig) if with_signature else (arrays, tiling)


def _check_query_quant(arrays: dict, attrs: dict, tiling) -> None:
    """Query quantisation (V4/V5's ``dequantScaleQuery`` and ``queryQuantMode``: FA full quant with a quantised
    query, per-token-head for mode 3), after op_host has judged the call (an invalid one is its ``ParamError``
    with the aclnn status). On Ascend950 a call op_host routes to FiaTilingFullQuantGqaArch35 (FP8 q/k/v, modes
    3/3/2) passes: ``kernel_fullquant_gqa`` runs it (host side ``fullquant_gqa``), and so does one routed to
    FiaTilingFullQuantMxArch35 (MXFP8, modes 6/6/8: ``kernel_fullquant_mx``, host side ``fullquant_mx``) and
    the MLA full quant (modes 3/0/0 with the split rope on the catch-all template: ``kernel_mla_fullquant``, host
    side ``mla_fullquant``: its FP8 and int8 flavours; the HiFloat8 one is refused by name). On A2/A3 an
    int8 query (MLA FA quant, op_host's only int8-query path there) passes to ``kernel_mla_quant``; another call
    op_host accepts is refused the same way (or naming ``query_quant_mode`` given alone, which takes effect only
    with a quantised query; cvtile refuses it rather than drop it)."""
    mode = int(attrs.get("query_quant_mode", 0) or 0)
    if "dequant_scale_query" not in arrays and not mode:
        return
    modes = f"query/key/value quant modes {mode}/{attrs['key_antiquant_mode']}/{attrs['value_antiquant_mode']}"
    qd = _dtype_of(arrays, "query")
    if "dequant_scale_query" in arrays and qd == "int8" and tiling.arch == "arch22":
        return   # A2/A3 MLA FA quant: simulated (fia.mla_quant, kernel_mla_quant)
    if "dequant_scale_query" in arrays and qd in ("float16", "bfloat16"):
        raise UnsupportedParameterError("dequant_scale_query", _describe(arrays["dequant_scale_query"]),
                                        f"a {qd} query is not quantised: query dequantisation belongs to FA full "
                                        f"quant ({modes}); op_host lets the call through ({tiling.route}/"
                                        f"{tiling.template}) and cvtile refuses the scale rather than drop it")
    if "dequant_scale_query" in arrays and tiling.arch == "arch35":
        if tiling.template in (FP8_GQA_TEMPLATE, MX_TEMPLATE) or is_mla_fullquant(arrays, tiling):
            return   # fullquant_gqa / fullquant_mx / mla_fullquant take these
        raise UnsupportedParameterError("dequant_scale_query", _describe(arrays["dequant_scale_query"]),
                                        f"query dequantisation on Ascend950's {tiling.template} ({qd} query, "
                                        f"{modes}) is not simulated: cvtile runs only the FP8 GQA full quant "
                                        f"(modes 3/3/2, {FP8_GQA_TEMPLATE}), MXFP8 (modes 6/6/8, "
                                        f"{MX_TEMPLATE}) and the MLA full quant (modes 3/0/0 with the rope)")
    if "dequant_scale_query" in arrays:
        raise UnsupportedParameterError("dequant_scale_query", _describe(arrays["dequant_scale_query"]),
                                        f"query dequantisation (FA full quant, {qd} query, {modes}) is not "
                                        f"simulated: op_host accepts the call ({tiling.route}/{tiling.template}), "
                                        "but cvtile has no query-quant kernel for it (it runs the A2/A3 MLA FA "
                                        "quant and Ascend950's FP8 GQA, MXFP8 and MLA full quant)")
    raise UnsupportedParameterError("query_quant_mode", mode, f"without dequant_scale_query ({modes}): the mode "
                                    "takes effect only when a quantised query comes with its scale; cvtile refuses "
                                    "it rather than drop it")


def _int4_cache(arrays: dict, metas: dict) -> None:
    """An int4 cache (key and value both int32 packing 8 int4 each, as aclnn's op_api views them, or both int4;
    the shared prefix likewise): op_host reads int4 tensors of the real shape (``metas``), the simulator their
    int8 values (``arrays``, ``"_int4"`` set). Anything else is left to op_host's dtype checks."""
    for k_name, v_name in (("key", "value"), ("key_shared_prefix", "value_shared_prefix")):
        if arrays.get(k_name) is None or arrays.get(v_name) is None:
            continue
        key, value, int4 = int4_kv(arrays[k_name], arrays[v_name])
        if not int4:
            continue
        arrays[k_name], arrays[v_name] = key, value
        for name, x in ((k_name, key), (v_name, value)):
            metas[name] = [TensorMeta(tuple(t.shape), "int4") for t in x] if isinstance(x, list) else \
                TensorMeta(tuple(x.shape), "int4")
        if k_name == "key":
            arrays["_int4"] = True


def _antiquant_call(arrays: dict, attrs: dict, tiling, qd: str, kd: str):
    """The ``AntiquantSpec`` of a KV-antiquant call (int8 or int4 key/value, fp16/bf16 query, on the A2/A3 IFATiling
    decode route the MSD kernel mirrors; on the A2/A3 PromptFlashAttention route int8 through its KvAntiquant path
    (the dequant kernel: the spec's ``rounding``) or its MSD path (the MSD kernel); on Ascend950's tiling-impl
    route the dequant kernel, which also takes FP8, FP4 and HiFloat8 caches), or the typed refusal naming the
    parameter."""
    vd = _dtype_of(arrays, "value")
    int4 = bool(arrays.get("_int4"))
    arch35 = tiling.arch == "arch35" and tiling.route == "fia"
    caches = ("int8", "float8_e4m3fn", "float4_e2m1", HIFLOAT8) if arch35 else ("int8",)
    if kd not in caches or vd != kd:
        given = next((name for name in ANTIQUANT_PARAMS if name in arrays), "key")
        raise UnsupportedParameterError(given, _describe(arrays[given]), f"antiquant parameters with a {kd} key "
                                        f"and {vd} value: KV antiquant takes an int8 (or int4) key and value, on "
                                        f"Ascend950 also float8_e4m3fn, float4_e2m1 and hifloat8")
    if qd not in ("float16", "bfloat16"):
        raise UnsupportedParameterError("query", f"query {qd}, key {kd}", "KV antiquant is simulated with a "
                                        "float16 or bfloat16 query (an int8 query, key and value are full quant)")
    pfa = tiling.route == "pfa" and tiling.arch == "arch22"
    if tiling.route != "ifa" and not arch35 and not pfa:
        raise UnsupportedParameterError("key", f"{'int4' if int4 else 'int8'} tensor {tuple(arrays['key'].shape)}",
                                        f"KV antiquant is simulated on the A2/A3 IFATiling decode route (its MSD "
                                        f"kernel), the A2/A3 PromptFlashAttention route (its KvAntiquant and MSD "
                                        f"paths) and on "
                                        f"Ascend950's FusedInferAttentionScoreTilingImpl (its dequant kernel); this "
                                        f"call tiles to the {tiling.route}/{tiling.template} route")
    if pfa:
        _check_pfa_antiquant(arrays, attrs, int4, qd)
    if "learnable_sink" in arrays:
        raise UnsupportedParameterError("learnable_sink", _describe(arrays["learnable_sink"]), "KV antiquant is "
                                        "simulated without a learnable sink")
    spec = antiquant_spec(arrays, antiquant_mode=attrs["antiquant_mode"],
                          key_antiquant_mode=attrs["key_antiquant_mode"],
                          value_antiquant_mode=attrs["value_antiquant_mode"], batch=tiling.batch,
                          num_kv_heads=attrs["num_key_value_heads"] or attrs["num_heads"],
                          head_dim=arrays["query"].shape[-1] if parse_layout(attrs["input_layout"]).qkv != "BSH"
                          else arrays["query"].shape[-1] // attrs["num_heads"],
                          kv_len=_antiquant_kv_extent(arrays, attrs, tiling),
                          nz_stride=group_scale_stride(arrays["key"], arrays.get("block_table")),
                          seq_stride=chip_seq_stride(arrays["key"], arrays.get("block_table"),
                                                     parse_layout(attrs["input_layout"]).qkv)
                          if arch35 and "key_shared_prefix" not in arrays else None)
    # PromptFlashAttention's KvAntiquant path dequantises in the vector (the spec's rounding); its MSD path
    # runs the MSD kernel as IFATiling's decode does
    dequant = pfa and pfa_dequantises(qd, _query_s(arrays["query"], parse_layout(attrs["input_layout"]).qkv),
                                      "key_antiquant_scale" in arrays)
    if pfa and spec.per_token and "key_shared_prefix" in arrays:
        raise UnsupportedParameterError("key_antiquant_mode", attrs["key_antiquant_mode"],
                                        "per-token antiquant parameters with a shared prefix on the A2/A3 "
                                        "PromptFlashAttention route are not simulated (its MSD kernel reads them at "
                                        "b x the key's S plus the position in the prefix and the own KV)")
    if dequant and spec.kind != "channel":
        raise UnsupportedParameterError("antiquant_mode", attrs["antiquant_mode"], "PromptFlashAttention's KvAntiquant "
                                        "path is simulated with per-channel or per-tensor parameters")
    return dataclasses.replace(spec, int4=int4, cache=HIFLOAT8 if kd == HIFLOAT8 else None,
                               rounding=qd if dequant else None)


def _check_pfa_antiquant(arrays: dict, attrs: dict, int4: bool, qd: str) -> None:
    """Refuse by name what cvtile does not run of A2/A3's PromptFlashAttention route with KV antiquant (the
    tiling mirror has already applied op_host's rules of both paths): an int4 cache, and an fp16 query with
    per-channel parameters on the MSD path, where op_host demands bf16 parameters that the fp16 MSD template
    reads as fp16 (``_antiquant_call`` refuses per-token parameters with a shared prefix). Both paths run: the
    KvAntiquant path (``kernel_dequant`` with SUB) and the MSD path (``kernel_antiquant`` with op_host's PFA
    constants; ``golden.antiquant.pfa_dequantises`` tells them apart), with dense or paged caches, a tensor
    list or, dense, a shared prefix, where op_host takes them."""
    if int4:
        raise UnsupportedParameterError("key", f"int4 tensor {tuple(np.shape(arrays['key']))}",
                                        "an int4 cache on the A2/A3 PromptFlashAttention route (a query S above 1) "
                                        "is not simulated: that tiling has no int4 path (its KvAntiquant path takes "
                                        "int8 only, its MSD path refuses int4), so what the chip runs is not "
                                        "defined")
    scale = arrays.get("key_antiquant_scale")
    if qd == "float16" and scale is not None and canonical_dtype(scale.dtype) == "bfloat16" \
            and not pfa_dequantises(qd, _query_s(arrays["query"], parse_layout(attrs["input_layout"]).qkv), True):
        raise UnsupportedParameterError("key_antiquant_scale", _describe(scale),
                                        "an fp16 query on PromptFlashAttention's MSD path with per-channel "
                                        "parameters: op_host demands them in bf16, and the fp16 MSD template reads "
                                        "them as fp16 values; what the chip then computes is not simulated")


def _dtype_overrides(arrays: dict, metas: dict, dtypes: dict) -> None:
    """Apply the V2 dtype overrides (``prepare_fia``'s ``dtypes``): a key / value of "hifloat8" must be one uint8
    array (its HiF8 codes, as torch_npu's V2 binding hands a uint8 tensor with ``key_dtype`` hifloat8 to aclnn);
    op_host then reads a hifloat8 tensor of that shape (``metas``) and ``_dtype_of`` names it so. Anything else
    is refused by its V2 keyword (``key_dtype`` ...) with ``UnsupportedParameterError``. Whether key and value
    agree and the cache suits the call is op_host's to judge (a hifloat8 key with a uint8 value is its dtype
    error)."""
    for name, dtype in dtypes.items():
        if name == "attention_out":   # V2's out_dtype: the FP8 full quant's fp16 / bf16 output
            qd = canonical_dtype(first_tensor(arrays["query"]).dtype)
            if dtype not in ("float16", "bfloat16") or qd != "float8_e4m3fn":
                raise UnsupportedParameterError("out_dtype", dtype, "the simulator takes out_dtype only as float16 "
                                                f"or bfloat16 with a float8_e4m3fn query (FP8 full quant); the "
                                                f"query is {qd}")
            continue
        keyword = f"{name}_dtype"
        if name not in ("key", "value") or dtype != HIFLOAT8:
            raise UnsupportedParameterError(keyword, dtype, "the simulator takes only key_dtype / value_dtype "
                                            "hifloat8 (a HiF8 cache as uint8 codes); other dtypes come from the "
                                            "arrays")
        x = arrays[name]
        if isinstance(x, list) or canonical_dtype(x.dtype) != "uint8":
            raise UnsupportedParameterError(keyword, dtype, f"hifloat8 reads a uint8 {name} array of HiF8 codes "
                                            f"(as torch_npu's V2 binding reinterprets one); {name} is "
                                            f"{_describe(x)}")
        metas[name] = TensorMeta(tuple(x.shape), HIFLOAT8)
    if dtypes:
        arrays["_dtypes"] = dict(dtypes)


def _dtype_of(arrays: dict, name: str) -> str:
    """The dtype op_host sees for the query / key / value: its V2 override (``_dtype_overrides``), else the
    (first) array's."""
    return arrays.get("_dtypes", {}).get(name) or canonical_dtype(first_tensor(arrays[name]).dtype)


def _antiquant_kv_extent(arrays: dict, attrs: dict, tiling) -> int:
    """The per-token parameters' least S': the attended positions (a shared prefix first) from the batch's first
    KV position in its tensor (the end of the tensor with left padding); with a shared prefix on Ascend950 the
    prefix's length and the key's S (the prefix reads from the table's start, the own KV its last S of key
    entries: ``kernel_dequant``)."""
    longest = max(tiling.kv_seqlens or [0])
    if tiling.route == "ifa":   # IFATiling counts the batch's own KV; the prefix comes before it
        longest += _shared_prefix_len(arrays, attrs)
    if tiling.arch == "arch35" and "key_shared_prefix" in arrays:
        k = arrays["key"]
        longest = max(_shared_prefix_len(arrays, attrs),
                      k.shape[2] if parse_layout(attrs["input_layout"]).qkv == "BNSD" else k.shape[1])
    if "kv_padding_size" in arrays:
        k = arrays["key"]
        longest = k.shape[2] if parse_layout(attrs["input_layout"]).qkv == "BNSD" else k.shape[1]
    return int(longest)


def _shared_prefix_len(arrays: dict, attrs: dict) -> int:
    """The prefix positions every batch attends to: actual_shared_prefix_len[0], else the prefix's S axis."""
    kp = arrays.get("key_shared_prefix")
    if kp is None:
        return 0
    given = arrays.get("actual_shared_prefix_len")
    if given is not None:
        return int(host_list_values("actual_shared_prefix_len", given)[0])
    return int(kp.shape[2] if parse_layout(attrs["input_layout"]).qkv == "BNSD" else kp.shape[1])


#: the N axis of query in each query layout (BSH has none)
_HEAD_AXIS = {"BSND": 2, "BNSD": 1, "TND": 1, "NTD": 0, "NBSD": 0}


def _blame_inferred_output(err: ParamError, q: np.ndarray, value: np.ndarray, attrs: dict) -> ParamError:
    """The user's parameter behind op_host's complaint about attention_out / softmax_lse, which the API infers
    (dtype from the query, shape from query, num_heads and value): the query for a dtype, num_heads when it
    disagrees with the query's N axis, else value (its head dim sets D of the output)."""
    if isinstance(err.value, str):
        return ParamError("query", canonical_dtype(q.dtype), f"{err.rule} (attention_out takes the query's dtype)",
                          status=err.status, checker=err.checker)
    layout = attrs["input_layout"]
    axis = _HEAD_AXIS.get(parse_layout(layout).qkv)
    n = attrs["num_heads"]
    if axis is not None and axis < q.ndim and q.shape[axis] != n:
        return ParamError("num_heads", n, f"num_heads must equal the N axis of query {tuple(q.shape)} "
                          f"({q.shape[axis]}) for input_layout {layout} (op_host: {err.rule})",
                          status=err.status, checker=err.checker)
    return ParamError("value", tuple(value.shape), f"the output inferred from query, num_heads and value is "
                      f"rejected: {err.rule}", status=err.status, checker=err.checker)


def _check_kv_heads(tiling, attrs: dict) -> None:
    """A negative num_key_value_heads that op_host lets through. The arch22 split-fuse route
    (``CheckFAIAvailability``) does not look at it: an empty TND call with -1 tiles (its tiling data holds
    4294967295 heads) where the framework's checks and the other routes refuse it. The chip would divide the
    query heads by that count; the simulator refuses the call instead, naming the parameter."""
    nkv = attrs["num_key_value_heads"]
    if nkv < 0:
        raise ParamError("num_key_value_heads", nkv, f"must not be negative (the {tiling.route} route does not "
                         f"check it; its tiling takes it as uint32)", status=AclnnStatus.PARAM_INVALID,
                         checker="api")


def _check_cumulative(tiling, optional: dict) -> None:
    """Cumulative (TND/NTD) lengths that decrease give a batch a negative length. op_host's FIA framework rejects
    them (``CheckFeatureActualSeqLensQData`` / ``CheckFeatureActualSeqLensKvData``); the arch22 split-fuse
    route's ``CheckFAIAvailability`` does not look, and its tiling takes the difference as uint32, so the chip
    would read past the tensors. The simulator refuses the call with the framework's rule."""
    for name, lens in (("actual_seq_lengths", tiling.q_seqlens), ("actual_seq_lengths_kv", tiling.kv_seqlens)):
        bad = [b for b, n in enumerate(lens) if n < 0]
        if bad:
            raise ParamError(name, list(host_list_values(name, optional[name])),
                             f"cumulative lengths must not decrease (batch {bad[0]} would get {lens[bad[0]]}); the "
                             f"split-fuse route does not check this but its tiling wraps the difference",
                             status=AclnnStatus.PARAM_INVALID, checker="api")


def _given_out_dtype(arrays: dict):
    """The numpy dtype of V2's / V4's ``out_dtype`` (``_dtype_overrides``), None when not given."""
    name = arrays.get("_dtypes", {}).get("attention_out")
    return numpy_dtype(name) if name else None


def _empty_outputs(q: np.ndarray, k, v, attrs: dict, legacy: bool, paged: bool, int8_out: bool = False,
                   out_dtype=None):
    shape = _out_shape(q.shape, attrs, first_tensor(v), paged)
    out = np.zeros(shape, dtype=np.int8 if int8_out else (out_dtype or q.dtype))
    lse = None
    if attrs["softmax_lse_flag"]:
        lse = np.full(_lse_shape(q.shape, attrs), empty_row_lse(legacy_decode=legacy,
                                                                   kv_empty=total_size(k) == 0 or
                                                                   total_size(v) == 0),
                      np.float32)
    return out, lse


def _out_shape(qshape, attrs: dict, value, paged: bool = False) -> tuple:
    from .launch import _out_shape as shape_for

    lay = parse_layout(attrs["input_layout"])
    n1 = attrs["num_heads"]
    n2 = attrs["num_key_value_heads"] or n1
    vshape = value.shape
    if paged:
        # a paged cache has its own layout: (blocks, block_size, H) BnBsH, (blocks, N, block_size, D) BnNBsD,
        # or NZ (blocks, N, D/16, block_size, 16)
        dv = vshape[-1] // n2 if len(vshape) == 3 else (vshape[2] * vshape[4] if len(vshape) == 5 else vshape[-1])
    elif lay.qkv == "BSH":
        dv = vshape[-1] // n2 if vshape else 0
    else:
        dv = vshape[-1]
    return shape_for(tuple(qshape), lay.qkv, lay.out, n1, dv)


def _out_dtype(q_dtype: str, arrays: dict) -> str:
    """attention_out's dtype as torch_npu infers it: int8 with quant_scale2 (post quant), V2's ``out_dtype``
    when given, the rope's (bf16) for an int8 query with query_rope (MLA FA quant, whose kernels write bf16), fp16
    for another int8 query, else the query's dtype."""
    if arrays.get("quant_scale2") is not None:
        return "int8"
    if arrays.get("_dtypes", {}).get("attention_out"):   # V2's out_dtype (``_dtype_overrides``)
        return arrays["_dtypes"]["attention_out"]
    if q_dtype == "int8" and arrays.get("query_rope") is not None:
        return canonical_dtype(arrays["query_rope"].dtype)
    return "float16" if q_dtype == "int8" else q_dtype


def _has_work(tiling) -> bool:
    """Some batch has both query rows and KV positions (so an empty core split would drop results)."""
    return any(q > 0 and kv > 0 for q, kv in zip(tiling.q_seqlens, tiling.kv_seqlens))


def _lse_shape(qshape, attrs: dict) -> tuple:
    lay = parse_layout(attrs["input_layout"])
    n1 = attrs["num_heads"]
    if lay.token:
        t = qshape[0] if lay.qkv == "TND" else qshape[1]
        return (t, n1, 1)
    b = qshape[0]
    s = qshape[2] if lay.qkv == "BNSD" else qshape[1]
    return (b, n1, s, 1)


def _describe(x) -> str:
    if isinstance(x, (list, tuple)):
        return f"list of {len(x)}"
    return f"{canonical_dtype(x.dtype)} tensor {tuple(x.shape)}"


def _is_torch(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu") and type(x).__module__.startswith("torch")


def _to_torch(a: np.ndarray):
    import torch

    if canonical_dtype(a.dtype) == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))
