"""PromptFlashAttention (PFA, prefill): ``npu_prompt_flash_attention``, run on the simulated chip.

Model
-----
PFA is the prefill operator that FusedInferAttentionScore absorbed. torch_npu's
``npu_prompt_flash_attention`` takes the FIA parameters under a few other names and defaults and returns
the attention output alone (no lse). This module renames and runs exactly the FIA call it maps to
(``npu_fused_infer_attention_score``: the same checks, tiling routes and kernels):

=====================  ==========================  =================================================
PFA keyword            FIA (V1) parameter          note
=====================  ==========================  =================================================
deq_scale1/deq_scale2  dequant_scale1/2            full quant with an int8 query, key and value
quant_scale1/2,        same                        (``fia.fullquant``); quant_scale2/offset2: post-quant
quant_offset2
scale_value            scale
next_tokens            next_tokens                 default 0 here (FIA: INT_MAX), so a sparse_mode 0
                                                   mask with default tokens is causal-banded
actual_seq_lengths,    same                        query / KV lengths
actual_seq_lengths_kv
padding_mask           -                           reserved by torch_npu: UnsupportedParameterError
-                      inner_precise               1 (torch_npu's PFA exposes none; the aclnn
                                                   recommended high-performance value)
-                      softmax_lse_flag            False (PFA returns no lse)
=====================  ==========================  =================================================

PFA's own rules on top of FIA's (torch_npu PFA documentation, research notes §1.4), each a
``ParamError`` 161002 naming the parameter, the value and the rule: ``input_layout`` is BSH, BSND, BNSD
or BNSD_BSND; ``sparse_mode`` is 0..4. Errors raised by the FIA body are renamed to the PFA keywords
(``dequant_scale1`` -> ``deq_scale1``, ``scale`` -> ``scale_value``).

Invariants
----------
* The output is bitwise the ``attention_out`` of ``npu_fused_infer_attention_score(**pfa_to_fia(...))``.
* Nothing given is ignored: every parameter is mapped or refused by name.
"""

from __future__ import annotations

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.platform import DEFAULT_TARGET
from ..errors import UnsupportedParameterError
from .api import npu_fused_infer_attention_score
from .keywords import inverse, renamed

__all__ = ["npu_prompt_flash_attention", "pfa_to_fia", "PFA_LAYOUTS", "PFA_SPARSE_MODES"]

#: the layouts PFA takes
PFA_LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND")
#: the sparse modes PFA takes
PFA_SPARSE_MODES = (0, 1, 2, 3, 4)
#: PFA keyword -> FIA (V1) keyword, where they differ
_PFA_TO_FIA = {"deq_scale1": "dequant_scale1", "deq_scale2": "dequant_scale2", "scale_value": "scale"}
_FIA_TO_PFA = inverse(_PFA_TO_FIA)
#: what PFA passes for the FIA parameters it does not expose
_FIXED = {"inner_precise": 1, "softmax_lse_flag": False}


def npu_prompt_flash_attention(
        query, key, value, *, pse_shift=None, padding_mask=None, atten_mask=None, actual_seq_lengths=None,
        deq_scale1=None, quant_scale1=None, deq_scale2=None, quant_scale2=None, quant_offset2=None, num_heads=1,
        scale_value=1.0, pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
        actual_seq_lengths_kv=None, sparse_mode=0, target: str = DEFAULT_TARGET, order: str = "program"):
    """torch_npu's PromptFlashAttention on the simulator (see the module docstring); returns ``attention_out``."""
    given = dict(locals())
    if padding_mask is not None:
        raise UnsupportedParameterError("padding_mask", f"tensor {tuple(getattr(padding_mask, 'shape', ()))}",
                                        "reserved by torch_npu (the operator has no padding mask)")
    if not isinstance(input_layout, str) or input_layout not in PFA_LAYOUTS:
        raise ParamError("input_layout", input_layout, f"PromptFlashAttention takes input_layout "
                         f"{', '.join(PFA_LAYOUTS)}", status=AclnnStatus.PARAM_INVALID, checker="pfa")
    if isinstance(sparse_mode, bool) or sparse_mode not in PFA_SPARSE_MODES:
        raise ParamError("sparse_mode", sparse_mode, "PromptFlashAttention takes sparse_mode 0..4",
                         status=AclnnStatus.PARAM_INVALID, checker="pfa")
    call = {k: v for k, v in given.items() if k not in ("padding_mask", "target", "order")}
    try:
        out, _ = npu_fused_infer_attention_score(**pfa_to_fia(call), target=target, order=order)
    except (ParamError, UnsupportedParameterError) as err:
        raise renamed(err, _FIA_TO_PFA) from None
    return out


def pfa_to_fia(call: dict) -> dict:
    """The ``npu_fused_infer_attention_score`` keywords (query, key, value included) of a PFA call given by
    PFA names (``padding_mask`` excluded)."""
    kw = {_PFA_TO_FIA.get(k, k): v for k, v in call.items() if v is not None and k != "padding_mask"}
    kw.update(_FIXED)
    return kw
