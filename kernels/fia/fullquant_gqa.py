"""Host side of Ascend950 FP8 full quant on the GQA route (FP8 query, key and value; quant modes 3/3/2).

Model
-----
op_host routes an FP8 full-quant call with query/key/value quant modes 3/3/2 to ``FiaTilingFullQuantGqaArch35``
(``tiling.route``; its rules are ``tiling.checkers.dequant``'s: NTD_TND, a paged BnNBsD cache, D 128,
``dequant_scale_query`` (N1, T), ``key_antiquant_scale`` (block_num, N2, block_size), ``value_antiquant_scale``
(N2,), float32, ``quant_scale1`` (torch_npu V2's ``quant_scale_p``) (1,), no post-quant, pse, padding, prefix,
tensor lists or rope). ``fullquant_gqa_call`` runs after op_host accepted the call and returns the
``FullQuantGqaSpec`` the launch hands to ``kernel_fullquant_gqa.fia_fullquant_gqa``: the query scales as an
(N1, T, 1) view, the key and value scales as float32, ln(quant_scale1) in fp32 (0 without it).

It refuses by name (``UnsupportedParameterError``) what the kernel does not model: a learnable sink, the tree
mask, and a quant_scale1 that is not a positive finite number (ln of it is the chip's max shift), and a tiling
with flash-decode splits (``refuse_flash_decode``: op_host's split for this template runs without stream-K, so
it never splits a row). Other Ascend950 full-quant flavours: MXFP8 6/6/8 runs on its own kernel
(``fullquant_mx``, with flash decode), and so does the MLA 3/0/0 on the catch-all template (``mla_fullquant``,
which shares ``fp8_p_scale_log``'s refusals and ``refuse_flash_decode``).

Invariants
----------
* The spec holds float32 arrays (views where the caller's already are float32); nothing is copied but the
  (N1, T) query scale's reshape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedParameterError

__all__ = ["FullQuantGqaSpec", "fullquant_gqa_call", "fp8_p_scale_log", "refuse_flash_decode", "FP8_GQA_TEMPLATE"]

#: op_host's template of the FP8 per-token-head full quant
FP8_GQA_TEMPLATE = "FiaTilingFullQuantGqaArch35"


@dataclass(frozen=True)
class FullQuantGqaSpec:
    """The kernel's scales: query (N1, T, 1), key (block_num, N2, block_size), value (N2,), all float32, and
    ln(quant_scale1) as an fp32."""

    deq_q: np.ndarray
    deq_k: np.ndarray
    deq_v: np.ndarray
    ln_p: np.float32


def fullquant_gqa_call(arrays: dict, attrs: dict, tiling) -> FullQuantGqaSpec:
    """Check an FP8 GQA full-quant call op_host accepted (see the module docstring); return its spec."""
    refuse_flash_decode(tiling, "FP8 GQA")
    ln_p = fp8_p_scale_log(arrays, attrs, tiling, "FP8 GQA")
    dq = np.asarray(arrays["dequant_scale_query"], np.float32)
    return FullQuantGqaSpec(deq_q=dq.reshape(dq.shape[0], dq.shape[1], 1),
                            deq_k=np.asarray(arrays["key_antiquant_scale"], np.float32),
                            deq_v=np.asarray(arrays["value_antiquant_scale"], np.float32).reshape(-1),
                            ln_p=ln_p)


def refuse_flash_decode(tiling, what: str) -> None:
    """Refuse by name a tiling that splits a row's KV across cores, for a kernel (``what``) without the
    flash-decode partials. op_host gives neither the FP8 GQA template (split_core_v2 without stream-K) nor the
    catch-all's MLA rope (``CheckFlashDecode``) such a split, so no API call reaches this; it guards the kernels
    against a tiling that would."""
    if tiling.fd_tasks:
        raise UnsupportedParameterError("actual_seq_lengths_kv", list(tiling.kv_seqlens),
                                        f"{what} full quant with flash-decode splits (the tiling split a row's KV "
                                        "across cores) is not simulated")


def fp8_p_scale_log(arrays: dict, attrs: dict, tiling, what: str) -> np.float32:
    """The refusals the Ascend950 FP8 full-quant kernels share (a learnable sink, the tree mask, a quant_scale1
    that is not a positive finite number), ``what`` naming the flavour; returns ln(quant_scale1) as an fp32 (0
    without it)."""
    if arrays.get("learnable_sink") is not None:
        raise UnsupportedParameterError("learnable_sink", "given", f"{what} full quant with a learnable sink is "
                                        "not simulated")
    if int(attrs["sparse_mode"]) == 9:
        raise UnsupportedParameterError("sparse_mode", 9, f"the tree mask with {what} full quant is not simulated")
    p_scale = np.float32(1.0)
    if arrays.get("quant_scale1") is not None:
        p_scale = np.float32(np.asarray(arrays["quant_scale1"], np.float32).reshape(-1)[0])
        if not np.isfinite(p_scale) or p_scale <= 0:
            raise UnsupportedParameterError("quant_scale1", float(p_scale), "P's FP8 scale must be a positive "
                                            "finite number: the kernel shifts the softmax max by its log")
    return np.float32(np.log(p_scale))
