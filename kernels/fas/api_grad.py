"""FlashAttentionScore backward on the simulated chip: torch_npu's ``npu_fusion_attention_grad``.

Model
-----
The call is normalised by the forward's :func:`.host.prepare_call` (the grad's ``scale_value`` is its
``scale``), so the layouts, sparse modes, pse, dropout keep mask (an explicit ``dropout_mask``, or drawn from
``seed`` / ``offset`` by the target's generator as the forward draws it) and sink are exactly the forward's. The
forward's results come back in: ``softmax_max`` / ``softmax_sum`` (fp32, (B, N1, S1, 8) or (T, N1, 8)) and
``attention_in`` (the forward's output); ``softmax_in`` is reserved by the operator and not read. The
backward runs as the two kernels of :mod:`.grad_kernel` (:mod:`.grad_launch`: Δ and dq, then dk / dv; the FAG
op_host tiling is not mirrored).

Returns ``(dq, dk, dv, dpse, dsink)``: dq / dk / dv in the shapes and dtype of query / key / value; dpse in
the shape and dtype of an outer pse (pse types 0 and 1), an empty array of the query dtype without one (and
for the inner alibi types 2 / 3, whose slopes get no gradient); dsink float32 (N1,), or empty without a sink.
``gen_mask_parallel``, ``sync``, ``numels`` and ``inner_precise`` schedule or tune the device and change no
value here.

Invariants
----------
* A missing dy / softmax_max / softmax_sum / attention_in is ``ParamError`` 161001 naming it; one of the
  wrong shape or dtype is 161002 naming it; the rest is the forward's checks.
"""

from __future__ import annotations

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.platform import DEFAULT_TARGET, get_platform
from ..golden.dtypes import canonical_dtype, numpy_dtype, to_numpy
from ..golden.masks import INT_MAX
from .api import dropout_source
from .grad_launch import run_fas_grad
from .host import FasCall, out_shape, prepare_call, stat_shape

__all__ = ["npu_fusion_attention_grad", "fas_grad_call", "fas_grad"]

_REQUIRED = ("dy", "softmax_max", "softmax_sum", "attention_in")


def _check_inputs(call: FasCall, tensors: dict) -> dict:
    """The grad-only tensors as numpy arrays, checked against the normalised call (161002 on a mismatch)."""
    want = {"dy": (out_shape(call), call.dtype), "attention_in": (out_shape(call), call.dtype),
            "softmax_max": (stat_shape(call), "float32"), "softmax_sum": (stat_shape(call), "float32")}
    out = {}
    for name, (shape, dtype) in want.items():
        x = to_numpy(tensors[name])
        if tuple(x.shape) != tuple(shape):
            raise ParamError(name, f"shape {tuple(x.shape)}", f"must be {tuple(shape)} for this call",
                             status=AclnnStatus.PARAM_INVALID, checker="aclnn")
        if canonical_dtype(x.dtype) != dtype:
            raise ParamError(name, f"dtype {canonical_dtype(x.dtype)}", f"must be {dtype}",
                             status=AclnnStatus.PARAM_INVALID, checker="aclnn")
        out[name] = x
    return out


def fas_grad_call(query, key, value, dy, head_num, input_layout, *, softmax_max, softmax_sum, attention_in,
                  target=DEFAULT_TARGET, **kw) -> tuple[FasCall, dict]:
    """(the normalised call, the checked dy / softmax_max / softmax_sum / attention_in); ``kw`` are
    :func:`.host.prepare_call`'s keywords (``scale`` for the grad's ``scale_value``); a keep mask drawn from
    seed / offset comes from the target's generator, as the forward's (:func:`.api.dropout_source`)."""
    given = {"dy": dy, "softmax_max": softmax_max, "softmax_sum": softmax_sum, "attention_in": attention_in}
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x is None:
            raise ParamError(name, None, "a required tensor is missing", status=AclnnStatus.PARAM_NULLPTR,
                             checker="aclnn")
    for name in _REQUIRED:
        if given[name] is None:
            raise ParamError(name, None, "the backward needs the forward's results and dy (a required tensor "
                             "is missing)", status=AclnnStatus.PARAM_NULLPTR, checker="aclnn")
    call = prepare_call(query, key, value, head_num=head_num, input_layout=input_layout,
                        dropout_source=dropout_source(target), **kw)
    return call, _check_inputs(call, given)


def npu_fusion_attention_grad(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                              atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                              attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=INT_MAX,
                              next_tockens=INT_MAX, inner_precise=0, seed=0, offset=0, numels=0, prefix=None,
                              actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                              sync=False, softmax_layout="", sink=None, pse_type=1, q_start_idx=None,
                              kv_start_idx=None, dropout_mask=None, target=DEFAULT_TARGET, order="program"):
    """torch_npu.npu_fusion_attention_grad on the simulated chip: ``(dq, dk, dv, dpse, dsink)`` (see the
    module docstring)."""
    call, t = fas_grad_call(query, key, value, dy, head_num, input_layout, softmax_max=softmax_max,
                            softmax_sum=softmax_sum, attention_in=attention_in, pse=pse, padding_mask=padding_mask,
                            atten_mask=atten_mask, scale=scale_value, keep_prob=keep_prob, pre_tockens=pre_tockens,
                            next_tockens=next_tockens, inner_precise=inner_precise, prefix=prefix,
                            actual_seq_qlen=actual_seq_qlen, actual_seq_kvlen=actual_seq_kvlen,
                            sparse_mode=sparse_mode, softmax_layout=softmax_layout, sink=sink,
                            dropout_mask=dropout_mask, seed=seed, offset=offset, pse_type=pse_type,
                            q_start_idx=q_start_idx, kv_start_idx=kv_start_idx, target=target)
    return fas_grad(call, to_numpy(query), to_numpy(key), to_numpy(value), t["dy"], t["softmax_max"],
                    t["softmax_sum"], t["attention_in"], target=target, order=order)


def fas_grad(call: FasCall, query, key, value, dy, softmax_max, softmax_sum, attention_in, *,
             target=DEFAULT_TARGET, order="program"):
    """``(dq, dk, dv, dpse, dsink)`` of a normalised call on the simulated chip (the empty-array convention
    of the module docstring)."""
    dq, dk, dv, dpse, dsink, _ = run_fas_grad(call, query, key, value, dy, softmax_max, softmax_sum, attention_in,
                                              get_platform(target), order=order)
    qdt = numpy_dtype(call.dtype)
    dpse = np.zeros(0, qdt) if dpse is None else dpse.astype(call.pse.dtype)
    dsink = np.zeros(0, np.float32) if dsink is None else dsink.astype(np.float32)
    return dq, dk, dv, dpse, dsink
