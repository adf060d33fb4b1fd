"""Attention variants: score_mod / mask_mod hooks compiled into the library's attention kernels.

``hooks`` (the Hooks record and the host evaluation of a hook), ``block_map``
(block-sparse skipping from a mask_mod), ``attention`` (``cvtile.attention``
and its float64 golden), ``gallery`` (ready-made variants).
"""

from .attention import attention, variant_block_map, variant_golden, variant_hooks
from .hooks import Hooks, VariantError, host_function

__all__ = ["attention", "variant_block_map", "variant_golden", "variant_hooks", "Hooks", "VariantError", "host_function"]
