"""``cvtile.attention``: FusedInferAttentionScore with a user variant compiled into its kernel.

Model
-----
``attention(q, k, v, *, score_mod=None, mask_mod=None, mod_args=(), ...)`` is
``npu_fused_infer_attention_score`` (the same keywords, names and defaults:
``num_heads``, ``num_key_value_heads``, ``input_layout``, ``scale``,
``actual_seq_lengths(_kv)``, ``block_table``, ``softmax_lse_flag``, ``target``,
``order``...; plus V4's ``learnable_sink``) with the variant's hooks
(``hooks.Hooks``) compiled into the FIA kernel's vector stage: the call runs
op_host's checks and tiling unchanged (block sizes, GQA fold, core split,
flash-decode split), the hooks change the scores, and with a ``mask_mod`` the
host's block map (``block_map``) skips the blocks the mask empties and
re-balances the remaining work over the cores. It returns what that API
returns: ``(attention_out, softmax_lse)``.

``variant_golden`` is the float64 reference of the same call: the FIA golden
with the hooks applied on the host, in numpy (``hooks.host_function``).

Invariants
----------
* Without hooks, ``attention`` is ``npu_fused_infer_attention_score``
  (bitwise): the hooks are the only difference.
* A row that a mask_mod hides entirely gets output 0 and the empty-row lse, as
  the operator writes for fully masked rows.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..fia.api import npu_fused_infer_attention_score, simulate_fia, v1_call_parts
from ..golden.dtypes import to_numpy
from ..golden.fia import fia_golden_lowp
from .hooks import Hooks, host_modifier

__all__ = ["attention", "variant_golden", "variant_hooks", "variant_block_map"]

_FIA_SIGNATURE = inspect.signature(npu_fused_infer_attention_score)


def variant_hooks(score_mod=None, mask_mod=None, mod_args=(), block_sparse: bool = True) -> Hooks:
    """The ``Hooks`` record of a variant, the captured arrays as numpy (torch tensors are converted)."""
    return Hooks(score_mod, mask_mod, tuple(to_numpy(a) for a in mod_args), block_sparse)


def attention(query, key, value, *, score_mod=None, mask_mod=None, mod_args=(), block_sparse: bool = True,
              learnable_sink=None, **kwargs):
    """FusedInferAttentionScore on the simulator with ``score_mod`` / ``mask_mod`` (``@ct.inline`` hooks, see
    ``cvtile.kernels.variants.hooks``) compiled into its kernel; ``mod_args``: the arrays the hooks read
    (their trailing parameters); ``block_sparse``: skip the blocks ``mask_mod`` empties (default). Every other
    keyword is ``npu_fused_infer_attention_score``'s. Returns ``(attention_out, softmax_lse)``."""
    hooks = variant_hooks(score_mod, mask_mod, mod_args, block_sparse)
    try:
        bound = _FIA_SIGNATURE.bind(query, key, value, **kwargs)
    except TypeError as exc:
        raise TypeError(f"attention: {exc}") from None
    bound.apply_defaults()
    given = dict(bound.arguments)
    optional, attrs = v1_call_parts(given, learnable_sink)
    return simulate_fia(query, key, value, optional, attrs, given["target"], given["order"], hooks=hooks)


def variant_block_map(query, key, value, *, mask_mod, mod_args=(), learnable_sink=None, **kwargs):
    """The block map ``attention(...)`` would skip by (``block_map.BlockMap``: visited / full / skipped blocks
    and the density) for these arguments, from op_host's tiling of the call; nothing runs."""
    from ..fia.api import prepare_fia
    from ..fia.launch import effective_lengths, m_capacity
    from .block_map import plan_block_map

    hooks = variant_hooks(None, mask_mod, mod_args)
    bound = _FIA_SIGNATURE.bind(query, key, value, **kwargs)
    bound.apply_defaults()
    given = dict(bound.arguments)
    optional, attrs = v1_call_parts(given, learnable_sink)
    _, tiling = prepare_fia(query, key, value, optional, attrs, given["target"])
    tasks = [t for c in tiling.cores for t in c.tasks]
    qlen, kvlen = effective_lengths(tiling)
    return plan_block_map(tasks, hooks, m_cap=m_capacity(tiling, tasks), s2_base=tiling.s2_base, qlen=qlen,
                          kvlen=kvlen, group=attrs["num_heads"] // (attrs["num_key_value_heads"] or attrs["num_heads"]),
                          order=tiling.m_order)


def variant_golden(query, key, value, *, score_mod=None, mask_mod=None, mod_args=(), **kwargs):
    """The float64 result of ``attention(...)`` with the same arguments: ``(out, lse or None)``, P rounded to the
    query's dtype before P·V as the chip does (``fia_golden_lowp``)."""
    kwargs.pop("order", None)
    return fia_golden_lowp(query, key, value, score_hook=host_modifier(score_mod, mask_mod, mod_args), **kwargs)
