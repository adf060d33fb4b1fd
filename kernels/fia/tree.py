"""The tree mask (sparse_mode 9) on the simulated GQA kernel, and the split rope it takes on arch22.

Model
-----
The tree mask of speculative decoding gives each batch a Q_S x Q_S tree over its last Q_S KV positions
(``golden.masks``: how it is read; the kernel's ``tree_kept``). op_host takes it on arch22 only with the split
rope (``query_rope`` / ``key_rope``; ``MaskChecker::CheckFeatureSparseMode``), and arch35 not at all, so a
tree-mask call reaches the simulated kernel through the split rope.

With the split rope the scores are ``scale · (q·kᵀ + q_rope·k_ropeᵀ)``. A query/key head dim of 128 with the
rope tiles to the GQA template ``FiaTilingNonQuant`` (its tiling key's last digit says tree when sparse_mode is
9); a head dim of 512 (MLA: one KV head, D 512 + rope 64) tiles to the MLA template ``FiaTilingNonQuantMla``.
Both run the same simulated kernel (``kernel.fia_attention``) with their template's block sizes and core
split: the chip's MLA cube (FiaBlockCubeNonQuantMla) copies q with q_rope and k with k_rope side by side into
L1 (its K axis 512 + 64, cut into two L1 halves of 288) and accumulates BMM1 over all of it into one L0C tile,
then BMM2 reads the value cache with D 512, and its vector side runs the GQA template's online softmax. The
host joins each head's rope values to its D (``golden.rope.join_rope``: one copy of q and k, what the cube
sees in L1; an NZ key cache joins its fractals) and the kernel computes one fp32 dot product over D + D_rope;
value and the output keep D. The golden joins them the same way.

The tree mask's rules the simulator adds to op_host's (:func:`check_tree_call`, ``ParamError`` 161002): the
tree is (B, Q_S, Q_S), or (Σ s1_b²,) for TND, covering every batch's query length (op_host checks only its
rank; the chip reads batch b's tree at ``b · rows · columns``, TND at Σ s1² of the batches before it, so a
smaller tree would be read past its end), naming ``atten_mask``; and every batch's query length is at most its
KV length (op_host compares the tensors' S, not the actual lengths; the chip's tree start s2 - s1 would be
negative), naming ``actual_seq_lengths_kv``.

Invariants
----------
* Only calls on the ``FiaTilingNonQuant`` and ``FiaTilingNonQuantMla`` templates are joined; a template the API
  names as taking the rope apart (MXFP8's, ``fullquant_mx``) passes the check unjoined; any other raises
  ``UnsupportedParameterError`` naming ``query_rope``.
* ``key_rope_antiquant_scale`` (reserved, ignored by the operator) stays refused by name in the API.
"""

from __future__ import annotations

from ...tiling.errors import AclnnStatus, ParamError
from ..errors import UnsupportedParameterError
from ..golden.layouts import parse_layout
from ..golden.masks import tree_masks
from ..golden.rope import join_rope

__all__ = ["ROPE_TEMPLATES", "check_rope_call", "join_rope_call", "check_tree_call"]

#: the tiling templates whose kernel the simulator runs with the split rope (GQA D 128, MLA D 512)
ROPE_TEMPLATES = ("FiaTilingNonQuant", "FiaTilingNonQuantMla")


def check_rope_call(arrays: dict, tiling, apart: tuple = ()) -> None:
    """Refuse a split-rope call naming ``query_rope`` unless it tiles to a simulated template (module doc, or one of
    ``apart``, whose kernel takes the rope as operands of its own rather than joined), or when ``key_rope`` is
    missing."""
    if "query_rope" not in arrays and "key_rope" not in arrays:
        return
    name = "query_rope" if "query_rope" in arrays else "key_rope"
    if tiling.template not in ROPE_TEMPLATES + tuple(apart):
        raise UnsupportedParameterError(name, f"tensor {tuple(arrays[name].shape)}",
                                        f"the split rope is simulated on the templates "
                                        f"{', '.join(ROPE_TEMPLATES + tuple(apart))}; "
                                        f"this call tiles to {tiling.route}/{tiling.template}, whose kernel is not "
                                        f"simulated")
    if "query_rope" not in arrays or "key_rope" not in arrays:
        raise UnsupportedParameterError(name, "given", "query_rope and key_rope come together")


def join_rope_call(arrays: dict, attrs: dict) -> None:
    """Replace ``arrays["query"]`` / ``arrays["key"]`` by their rope-joined forms (module doc) when the call has
    the split rope (:func:`check_rope_call` passed)."""
    if "query_rope" not in arrays:
        return
    qkv = parse_layout(attrs["input_layout"]).qkv
    n1 = attrs["num_heads"]
    n2 = attrs["num_key_value_heads"] or n1
    paged = arrays.get("block_table") is not None
    arrays["query"] = join_rope(arrays["query"], arrays["query_rope"], n1, qkv == "BSH", "query")
    arrays["key"] = join_rope(arrays["key"], arrays["key_rope"], n2,
                              arrays["key"].ndim == 3 if paged else qkv == "BSH", "key")


def check_tree_call(arrays: dict, attrs: dict, tiling) -> None:
    """A sparse_mode 9 call's tree mask covers every batch's query rows (module doc), else ``ParamError``
    (161002) naming ``atten_mask``. The legacy decode route, which ignores sparse_mode, is not checked."""
    if attrs["sparse_mode"] != 9 or tiling.extras.get("legacy_ifa", False) or arrays.get("atten_mask") is None:
        return
    mask = arrays["atten_mask"]
    try:
        trees = tree_masks(mask, tiling.batch, parse_layout(attrs["input_layout"]).token, tiling.q_seqlens)
        short = [b for b, n in enumerate(tiling.q_seqlens) if n > min(trees.shape[1:])]
        if short:
            raise ValueError(f"batch {short[0]} has {tiling.q_seqlens[short[0]]} query rows; its tree is "
                             f"{trees.shape[1]} x {trees.shape[2]}")
    except ValueError as exc:
        raise ParamError("atten_mask", tuple(mask.shape), f"the tree mask (sparse_mode 9) is (B, Q_S, Q_S), or "
                         f"(sum of s1_b**2,) for TND, covering every batch's query length; the chip would read "
                         f"past this one ({exc})", status=AclnnStatus.PARAM_INVALID, checker="api") from None
    longer = [b for b, (n1, n2) in enumerate(zip(tiling.q_seqlens, tiling.kv_seqlens)) if n2 and n1 > n2]
    if longer:
        b = longer[0]
        raise ParamError("actual_seq_lengths_kv", list(tiling.kv_seqlens),
                         f"sparse_mode 9 needs each batch's query length <= its KV length (batch {b}: "
                         f"{tiling.q_seqlens[b]} > {tiling.kv_seqlens[b]}); op_host compares the tensors' S only, "
                         f"and the chip's tree start s2 - s1 would be negative", status=AclnnStatus.PARAM_INVALID,
                         checker="api")
