"""cvtile.kernels: the attention kernels written in the tile language, their goldens and operator APIs.

* ``fia``: FusedInferAttentionScore (the non-quant GQA kernel with flash-decode
  and its combine kernel, the host launcher, and ``npu_fused_infer_attention_score``), and the legacy
  IncreFlashAttention / PromptFlashAttention APIs mapped onto it (``npu_incre_flash_attention``,
  ``incre_flash_attention_v3``, ``npu_prompt_flash_attention``).
* ``ring_attention_update`` / ``attention_update``: RingAttentionUpdate and AttentionUpdate (merging partial
  attention results, vector-only kernels built on the ``merge_state`` primitives) and their APIs.
* ``fas``: FlashAttentionScore, the training forward and backward (host normalisation, the forward DSL kernel
  on op_host's FAS tiling, the two backward kernels, the dropout mask, ``npu_fusion_attention(_grad)``); ``redline``: the flash_attn redline train CSVs on it.
* ``golden``: float64 references written from the documented semantics.
* ``precision``: the comparison helper with the upstream tolerance classes.
* ``st_cases`` / ``tiny_rdv`` / ``st_runner``: the system-test and tiny_rdv corpus readers and their runner.
"""

from .errors import UnsupportedParameterError
from .fia.api import npu_fused_infer_attention_score
from .fia.api_v2 import npu_fused_infer_attention_score_v2
from .fia.api_ifa import incre_flash_attention_v3, npu_incre_flash_attention
from .fia.api_pfa import npu_prompt_flash_attention
from .attention_update import npu_attention_update
from .ring_attention_update import npu_ring_attention_update
from .golden import fia_golden, fia_golden_lowp, mask_template
from .precision import Report, compare, tolerance

__all__ = ["UnsupportedParameterError", "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2",
           "npu_incre_flash_attention", "incre_flash_attention_v3", "npu_prompt_flash_attention",
           "npu_ring_attention_update", "npu_attention_update", "fia_golden", "fia_golden_lowp",
           "mask_template", "Report", "compare", "tolerance", "StCase", "load_st_cases", "golden_api",
           "run_st_corpus"]

#: the corpus readers and runner, given on first use (a process that only calls an operator does not import them)
_ON_FIRST_USE = {"StCase": "cvtile.kernels.st_cases", "load_st_cases": "cvtile.kernels.st_cases",
                 "golden_api": "cvtile.kernels.st_runner", "run_st_corpus": "cvtile.kernels.st_runner"}


def __getattr__(name: str):
    from cvtile._on_first_use import attribute

    return attribute(globals(), _ON_FIRST_USE, name)
