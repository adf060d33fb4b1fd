"""Host side of full int8 quantisation (int8 query, key and value): the call's checks and its scales.

Model
-----
``fullquant_call`` runs after the tiling mirror accepted the call (op_host has then checked that an int8
query comes with non-empty ``dequant_scale1``, ``quant_scale1`` and ``dequant_scale2``). It adds the rules
the aclnn documents and the kernel relies on, as ``ParamError`` 161002 (checker "fullquant"):

* the three scales are per tensor: one element each (the PFA kernel reads element 0 of each);
* ``dequant_scale1`` / ``dequant_scale2`` are uint64 (the low 32 bits hold the fp32 bits) or float32,
  ``quant_scale1`` float32;
* key and value are int8 like the query;
* with a float query the scales are not full quant: with an int8 output (quant_scale2) the docs make them an
  error (161002); otherwise the operator ignores them, and the simulator refuses them
  (``UnsupportedParameterError``) rather than drop them.

and refuses what the simulated kernel (``kernel_fullquant.fia_fullquant``, the arch22 PFA int8 template)
does not model, with ``UnsupportedParameterError`` naming the parameter: a route other than the legacy PFA
tiling, paged or tensor-list key/value, a shared prefix, a learnable sink, left padding, the tree mask, token
layouts. It returns the ``FullQuantSpec`` the launch passes to the kernel: the fp32 dequant scales as the fixpipe applies
them (their high 19 bits, ``golden.fullquant.dequant_value``) and ``quant_scale1`` and ``scale`` rounded to
fp16, as the kernel's half multiplies take them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.params import canonical_dtype
from ..errors import UnsupportedParameterError
from ..golden.fullquant import FULLQUANT_SCALES, dequant_value
from ..golden.layouts import parse_layout

__all__ = ["FullQuantSpec", "fullquant_call", "is_fullquant"]

_SCALE_DTYPES = {"dequant_scale1": ("uint64", "float32"), "quant_scale1": ("float32",),
                 "dequant_scale2": ("uint64", "float32")}
#: inputs the full-quant kernel does not take, with what they are
_NOT_WITH = (("block_table", "paged attention"), ("key_shared_prefix", "a shared prefix"),
             ("learnable_sink", "a learnable sink"), ("query_padding_size", "left padding"),
             ("kv_padding_size", "left padding"), ("query_rope", "the split rope"))


@dataclass(frozen=True)
class FullQuantSpec:
    """The kernel's scalars: dequant_scale1 and dequant_scale2 (fp32), quant_scale1 and the softmax scale
    rounded to fp16 (held as fp32)."""

    deq1: np.float32
    qs1_half: np.float32
    deq2: np.float32
    scale_half: np.float32


def is_fullquant(arrays: dict) -> bool:
    """An int8 query (full quant; op_host requires its scales) or any full-quant scale given."""
    q = arrays.get("query")
    return (q is not None and canonical_dtype(q.dtype) == "int8") or any(n in arrays for n in FULLQUANT_SCALES)


def _invalid(name: str, value, rule: str) -> ParamError:
    return ParamError(name, value, rule, status=AclnnStatus.PARAM_INVALID, checker="fullquant")


def fullquant_call(arrays: dict, attrs: dict, tiling) -> FullQuantSpec:
    """Check a full-quant call (see the module docstring) and return its ``FullQuantSpec``."""
    qd = canonical_dtype(arrays["query"].dtype)
    if qd != "int8":
        given = next(name for name in FULLQUANT_SCALES if name in arrays)
        x = arrays[given]
        value = f"{canonical_dtype(x.dtype)} tensor {tuple(x.shape)}" if hasattr(x, "dtype") else "given"
        if "quant_scale2" in arrays:   # the documented float-in, int8-out scenario: an error
            raise _invalid(given, value, f"a {qd} query with an int8 output (quant_scale2) takes no {given} "
                           "(full quant needs an int8 query)")
        raise UnsupportedParameterError(given, value, f"with a {qd} query the operator ignores it (full quant "
                                        "needs an int8 query); cvtile refuses it rather than drop it")
    for name in FULLQUANT_SCALES:
        x = arrays.get(name)
        if x is None or isinstance(x, (list, tuple)):
            raise _invalid(name, None if x is None else f"list of {len(x)}",
                           "full quant (an int8 query) needs dequant_scale1, quant_scale1 and dequant_scale2 "
                           "tensors")
        kind = canonical_dtype(x.dtype)
        if kind not in _SCALE_DTYPES[name]:
            raise _invalid(name, f"{kind} tensor {tuple(x.shape)}", f"{name} must be "
                           f"{' or '.join(_SCALE_DTYPES[name])}")
        if x.size != 1:
            raise _invalid(name, f"{kind} tensor {tuple(x.shape)}", f"{name} is per tensor: one element (shape "
                           "(1,)), the kernel reads one value")
    for name in ("query", "key", "value"):
        x = arrays[name]
        if isinstance(x, (list, tuple)):
            raise UnsupportedParameterError(name, f"list of {len(x)}", "full quant with a key/value tensor list "
                                            "is not simulated (the PFA int8 template reads dense key/value)")
        if canonical_dtype(x.dtype) != "int8":
            raise _invalid(name, canonical_dtype(x.dtype), "full quant (an int8 query) takes int8 key and value")
    for name, what in _NOT_WITH:
        if name in arrays:
            raise UnsupportedParameterError(name, "given", f"full quant with {what} is not simulated")
    if tiling.route != "pfa" or tiling.fd_tasks:
        raise UnsupportedParameterError("query", f"int8 tensor {tuple(arrays['query'].shape)}",
                                        "full quant is simulated on the legacy PFA route's int8 template; this "
                                        f"call tiles to the {tiling.route}/{tiling.template} route")
    if parse_layout(attrs["input_layout"]).token:
        raise UnsupportedParameterError("input_layout", attrs["input_layout"], "full quant with a token layout "
                                        "is not simulated")
    if int(attrs["sparse_mode"]) == 9:
        raise UnsupportedParameterError("sparse_mode", 9, "the tree mask with full quant is not simulated")
    return FullQuantSpec(deq1=np.float32(dequant_value(arrays["dequant_scale1"])),
                         qs1_half=np.float32(np.float16(np.float32(np.asarray(arrays["quant_scale1"]).reshape(-1)[0]))),
                         deq2=np.float32(dequant_value(arrays["dequant_scale2"])),
                         scale_half=np.float32(np.float16(float(attrs["scale"]))))
