"""``npu_attention_update``: AttentionUpdate (merging K (O, lse) partials) in the tile language, simulated.

Model
-----
vllm-ascend's MLA chunked-context and context-parallel paths run one FusedInferAttentionScore per KV chunk
with the lse on, flatten the outputs to rows (B·S·N rows of D) and merge the K partials with
``torch_npu.npu_attention_update(lse_list, out_list, update_type)``:

    lse_max = max_i lse_i;  L = Σ_i exp(lse_i - lse_max);  lse_m = lse_max + log L;  O = Σ_i O_i · exp(lse_i - lse_max) / L

``attention_update_kernel`` is that merge written with :mod:`cvtile.kernels.merge_state` (a (O, lse) partial
is the state (O, lse, 1)): each vector core takes blocks of BR rows, reduces the K lse rows to the guarded max
and sum, then accumulates the K outputs DL lanes at a time in fp32 and casts to the output dtype. A row whose
partials are all empty (lse -inf, as FIA writes for a chunk without keys) gives O = 0 and lse -inf.

The K partials are stacked on the host into (K, rows) and (K, rows, D) arrays (the chip reads the tensor
lists in place; the copy changes no value). Contract (aclnnAttentionUpdate, public ops-transformer docs),
raised as ``ParamError``: 1 <= K <= 16 partials, lse float32 of one shape (rows,), outputs (rows, D) of one
dtype with D in [8, 512] a multiple of 8, float32 on the A2/A3 platforms, ``update_type`` 0 or 1 (161002;
a missing list is 161001). Returns ``(out, lse_out)``; ``lse_out`` is an empty (0,) float32 array when
``update_type`` is 0 (the convention of this package's FIA API for an output not requested).
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct

from ..tiling.errors import AclnnStatus, ParamError
from ..tiling.params import canonical_dtype
from ..tiling.platform import DEFAULT_TARGET, get_platform
from .golden.dtypes import to_numpy
from .merge_state import guarded_max, guarded_sum, rescaled, state_lse
from .ring_attention_update import to_torch_like

__all__ = ["npu_attention_update", "attention_update_kernel", "MAX_PARTIALS"]

MAX_PARTIALS = 16
_BR = 64
_DL = 64


@ct.jit
def attention_update_kernel(lse, outs, out, lse_out, rows, k, d, BR: ct.constexpr, DL: ct.constexpr,
                            LSE: ct.constexpr):
    for r0 in range(ct.block_idx() * BR, rows, ct.block_num() * BR):
        nr = min(BR, rows - r0)
        blk = ct.ds(r0, BR, valid=nr)
        with ct.vector():
            top = ct.full((BR,), -ct.inf, ct.float32, valid=nr)
            for i in range(k):
                top = ct.maximum(top, ct.load(lse[i, blk]))
            shift = guarded_max(top)
            total = ct.zeros((BR,), ct.float32, valid=nr)
            for i in range(k):
                total = total + rescaled(ct.load(lse[i, blk]), 1.0, shift)
            ok, tsafe = guarded_sum(total)
            for d0 in range(0, d, DL):
                nd = min(DL, d - d0)
                lanes = ct.ds(d0, DL, valid=nd)
                acc = ct.zeros((BR, DL), ct.float32, valid=(nr, nd))
                for i in range(k):
                    w = rescaled(ct.load(lse[i, blk]), 1.0, shift) / tsafe
                    acc = acc + ct.cast(ct.load(outs[i][blk, lanes]), ct.float32) * w[:, None]
                ct.store(out[blk, lanes], ct.cast(acc, out.dtype))
            if LSE:
                ct.store(lse_out[blk], ct.where(ok, state_lse(shift, tsafe), -ct.inf))


def _err(param, value, rule, status=AclnnStatus.PARAM_INVALID):
    return ParamError(param, value, rule, status=status, checker="attention_update")


def _check(lse, outs, update_type, target: str) -> None:
    if len(lse) != len(outs):
        raise _err("out_list", len(outs), f"one output per lse: lse_list has {len(lse)}")
    if not 1 <= len(lse) <= MAX_PARTIALS:
        raise _err("lse_list", len(lse), f"the sequence-parallel degree must be in [1, {MAX_PARTIALS}]")
    if int(update_type) not in (0, 1):
        raise _err("update_type", update_type, "must be 0 (no lse_out) or 1 (lse_out)")
    shape, odt = lse[0].shape, canonical_dtype(outs[0].dtype)
    for i, x in enumerate(lse):
        if canonical_dtype(x.dtype) != "float32":
            raise _err(f"lse_list[{i}]", canonical_dtype(x.dtype), "lse must be float32")
        if x.ndim != 1 or x.shape != shape:
            raise _err(f"lse_list[{i}]", tuple(x.shape), f"every lse is 1-D (rows,) of one shape {tuple(shape)}")
    for i, o in enumerate(outs):
        if o.ndim != 2 or o.shape[0] != shape[0] or o.shape != outs[0].shape:
            raise _err(f"out_list[{i}]", tuple(o.shape), f"every output is (rows={shape[0]}, D) of one shape")
        if canonical_dtype(o.dtype) != odt:
            raise _err(f"out_list[{i}]", canonical_dtype(o.dtype), f"every output has out_list[0]'s dtype {odt}")
    d = int(outs[0].shape[1])
    if d < 8 or d > 512 or d % 8:
        raise _err("out_list[0]", tuple(outs[0].shape), f"D={d} must be a multiple of 8 in [8, 512]")
    allowed = ("float32",) if get_platform(target).arch == "arch22" else ("float32", "float16", "bfloat16")
    if odt not in allowed:
        raise _err("out_list[0]", odt, f"output dtype must be one of {allowed} on {target}")


def npu_attention_update(lse_list, out_list, update_type: int = 0, *, target: str = DEFAULT_TARGET,
                         order: str = "program"):
    """torch_npu.npu_attention_update on the simulator: ``(out, lse_out)`` (see the module doc)."""
    for name, v in (("lse_list", lse_list), ("out_list", out_list)):
        if v is None or any(x is None for x in v):
            raise _err(name, None, "a required tensor list (or one of its tensors) is null",
                       AclnnStatus.PARAM_NULLPTR)
    lse = [to_numpy(x) for x in lse_list]
    outs = [to_numpy(x) for x in out_list]
    _check(lse, outs, update_type, target)
    rows, d = (int(v) for v in outs[0].shape)
    out = np.zeros((rows, d), outs[0].dtype)
    lse_out = np.full((rows,), -np.inf, np.float32)
    if rows:
        lse_k = np.ascontiguousarray(np.stack(lse))
        out_k = np.ascontiguousarray(np.stack(outs))
        grid = max(1, min(get_platform(target).aiv, -(-rows // _BR)))
        attention_update_kernel.on(target)[grid](lse_k, out_k, out, lse_out, rows, len(lse), d, BR=_BR, DL=_DL,
                                                 LSE=int(update_type) == 1, order=order)
    res = (out, lse_out if int(update_type) == 1 else np.empty((0,), np.float32))
    return to_torch_like(list(lse_list) + list(out_list), res)
