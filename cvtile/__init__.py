"""cvtile: write, check and understand Ascend NPU attention kernels on a CPU.

* ``cvtile.dsl``: the Cube/Vector tile language (``@jit`` kernels).
* ``cvtile.sim``: the numba simulator the kernels run on.
* ``cvtile.tiling``: the mirror of CANN op_host tiling (checks, routes, core split).
* ``cvtile.kernels``: the attention kernels, goldens and operator APIs.

The operator APIs are re-exported here under their torch_npu names.
"""

__version__ = "0.1.0"

from . import sim as _sim  # noqa: E402,F401  (registers the simulator backend)
from .kernels import (  # noqa: E402
    UnsupportedParameterError, incre_flash_attention_v3, npu_attention_update, npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2, npu_incre_flash_attention, npu_prompt_flash_attention,
    npu_ring_attention_update)
from .tiling import ParamError  # noqa: E402

__all__ = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2", "npu_incre_flash_attention",
           "npu_prompt_flash_attention", "incre_flash_attention_v3", "npu_ring_attention_update",
           "npu_attention_update", "UnsupportedParameterError", "ParamError", "__version__"]

from .kernels.variants import attention  # noqa: E402  (FIA with a score_mod / mask_mod compiled in)

__all__ += ["attention"]

from .kernels.fas.api import npu_fusion_attention, npu_fusion_attention_v2  # noqa: E402  (FlashAttentionScore)
from .kernels.fas.api_grad import npu_fusion_attention_grad  # noqa: E402

__all__ += ["npu_fusion_attention", "npu_fusion_attention_v2", "npu_fusion_attention_grad"]
