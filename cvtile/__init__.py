"""cvtile: write, check and understand Ascend NPU attention kernels on a CPU.

* ``cvtile.dsl``: the Cube/Vector tile language (``@jit`` kernels).
* ``cvtile.sim``: the simulator the kernels run on (generated numba code, compiled by ``cvtile.sim.direct``).
* ``cvtile.tiling``: the mirror of CANN op_host tiling (checks, routes, core split).
* ``cvtile.kernels``: the attention kernels, goldens and operator APIs.

The operator APIs are re-exported here under their torch_npu names.
"""

__version__ = "0.1.0"

try:
    from . import sim as _sim  # noqa: E402,F401  (registers the simulator backend)
except ImportError as _exc:
    if getattr(_exc, "name", None) != __name__:   # a missing dependency of the simulator: say that instead
        raise
    # cvtile/ was imported as a plain folder (the checkout's root on sys.path, no working install): its
    # subpackages dsl/, sim/, kernels/, tiling/ sit beside it and only the install maps them in
    raise ImportError(f"cvtile was imported from {__path__[0]} without its subpackages (cvtile.sim, cvtile.dsl, "
                      "cvtile.kernels, cvtile.tiling live beside it in the checkout and the install maps them in): "
                      "run `pip install -e .` in the checkout, or import cvtile from outside it if an install "
                      "points elsewhere", name=__name__) from None
from .kernels import (  # noqa: E402
    UnsupportedParameterError, incre_flash_attention_v3, npu_attention_update, npu_fused_infer_attention_score,
    npu_fused_infer_attention_score_v2, npu_incre_flash_attention, npu_prompt_flash_attention,
    npu_ring_attention_update)
from .tiling import ParamError  # noqa: E402

__all__ = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2", "npu_incre_flash_attention",
           "npu_prompt_flash_attention", "incre_flash_attention_v3", "npu_ring_attention_update",
           "npu_attention_update", "UnsupportedParameterError", "ParamError", "__version__"]

#: names given on first use, by the module that defines them: FIA with a score_mod / mask_mod compiled in, and
#: FlashAttentionScore forward and backward (importing them would cost every process that only calls FIA
#: about 0.03 s: ``docs/compile_time.md``, the warm process)
_ON_FIRST_USE = {"attention": "cvtile.kernels.variants", "npu_fusion_attention": "cvtile.kernels.fas.api",
                 "npu_fusion_attention_v2": "cvtile.kernels.fas.api",
                 "npu_fusion_attention_grad": "cvtile.kernels.fas.api_grad"}
__all__ += list(_ON_FIRST_USE)


def __getattr__(name: str):
    from ._on_first_use import attribute

    return attribute(globals(), _ON_FIRST_USE, name)
