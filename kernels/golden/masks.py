"""The sparse-mode mask engine: which (query row, key column) pairs each batch attends.

Model
-----
``MaskEngine.keep(plan, i0, i1)`` returns a boolean ``[i1 - i0, s2]`` array
(True = attend) for local query rows ``i0:i1`` of batch ``plan`` and the local
columns ``0:s2`` of its attended sequence (shared prefix, then kv), or ``None``
when every pair is visible. A user mask holds True/1 for *masked out*.

Modes (aclnn FusedInferAttentionScore "Mask" table; i = local row, j = local
column, s1/s2 = the batch's actual query / attended lengths):

====  =================  ====================================================
mode  name               visible pairs
====  =================  ====================================================
0     defaultMask        no mask: all (pre/next ignored). With a mask:
                         ``~mask[i, j]`` and ``-pre <= j - i <= next``
                         (pre/next ignored under left padding)
1     allMask            ``~mask[i, j]`` (mask required; pre/next ignored)
2     leftUpCausal       ``j <= i``
3     rightDownCausal    ``j - i <= s2 - s1``
4     band               ``s2 - s1 - pre <= j - i <= s2 - s1 + next``
====  =================  ====================================================

Modes 2/3/4 take the compressed mask: the caller passes the 2048×2048 template
``triu(ones, 1)`` as (2048, 2048), (1, 2048, 2048) or (1, 1, 2048, 2048); only
its shape is checked, the pattern is computed from the mode and the per-batch
lengths (so 3/4 anchor at each batch's bottom-right corner). Modes 5–8 are
rejected (the inference operator does not support them).

Mode 9 (treeMask, speculative decoding) takes each batch's Q_S × Q_S tree:
``(B, Q_S, Q_S)`` for BSH/BSND/BNSD, the batches' ``s1_b × s1_b`` trees one
after the other as ``(Σ s1_b²,)`` for TND (``tree`` normalises both to
``[B, W, W]``, W = Q_S or the longest s1_b, zero-padded). The tree covers the
batch's last s1 KV positions (from ``start = s2 - s1``): row i sees column
j < start, and j >= start iff ``tree[b, i, j - start] == 0`` — the kernel's
``AttentionmaskCopyIn<ENABLE_TREE>`` copies the tree from ``start`` on into a
UB tile zero-filled before it. The chip also skips whole S2 blocks past the
right-down diagonal (``CalcNextTokenLeftUp``: TREE -> next = s2 - s1); it reads
the tree inside the blocks it computes, so a tree that showed a pair past the
diagonal would give a result that depends on the block boundaries. A tree (a
node sees itself and earlier nodes) hides those pairs anyway; cvtile hides
them always (``j - i <= s2 - s1``), in the golden and in the kernel alike.

Legacy decode route (layout BSH/BSND/BNSD, S1 == 1, D == Dv, no rope): the
operator ignores ``sparse_mode`` and pre/next there (aclnn doc, sparseMode
row; op_host ``GetUpdateInfo`` forces sparse 0, pre/next INT_MAX and drops
``actual_seq_lengths`` / ``query_padding_size`` on that route for A2); a given
mask is a plain full mask (``~mask``), so a 2048×2048 template is rejected
there as a mask of the wrong shape.

User mask shapes (modes 0/1 and the legacy decode route): (S1, S2) [prefill],
(B, S2) or (1, S2) [decode], (B|1, S1, S2), (B|1, 1, S1, S2). The mask is
indexed at physical rows ``q0 + i`` and columns ``k0 + j`` (see
:mod:`.batches`); its S axes may be longer than needed, never shorter.

Invariants
----------
* ``keep`` depends on the batch, never on the head.
* A template for modes 2/3/4 must have the documented shape even though its
  content is ignored; a missing mask for modes 1–4 is a ``ValueError``.
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_numpy

__all__ = ["MaskEngine", "TEMPLATE_SIZE", "mask_template", "band_keep", "tree_masks"]

TEMPLATE_SIZE = 2048
INT_MAX = 2147483647


def mask_template(dtype=np.bool_) -> np.ndarray:
    """The compressed mask the operator expects for sparse modes 2/3/4: ``triu(ones(2048, 2048), 1)``."""
    return np.triu(np.ones((TEMPLATE_SIZE, TEMPLATE_SIZE), dtype=dtype), k=1)


def band_keep(rows: np.ndarray, cols: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``lo <= j - i <= hi`` over the grid ``rows × cols`` (bool ``[len(rows), len(cols)]``)."""
    diff = cols[None, :].astype(np.int64) - rows[:, None].astype(np.int64)
    return (diff >= lo) & (diff <= hi)


def tree_masks(mask, batch: int, token_layout: bool, q_lengths=None) -> np.ndarray:
    """The sparse_mode 9 trees as ``[B, W, W']`` (1 = masked out, row i of batch b's tree at ``[b, i, :]``): a
    ``(B, Q_S, Q_S)`` mask as it is (any ``(B, R, C)`` is read with its own strides, as the chip reads it); a TND
    ``(Σ s1_b²,)`` one (``q_lengths``: the batches' query lengths) cut into its s1_b × s1_b trees, each at the
    top left of a zero-filled W × W, W the longest s1_b."""
    m = to_numpy(mask)
    if token_layout:
        if m.ndim != 1 or q_lengths is None:
            raise ValueError(f"atten_mask: shape {tuple(m.shape)}; sparse_mode 9 with TND takes the batches' trees "
                             "one after the other, (sum of s1_b**2,)")
        lens = [int(n) for n in q_lengths]
        if m.size != sum(n * n for n in lens):
            raise ValueError(f"atten_mask: {m.size} elements; the TND tree mask holds sum(s1_b**2) = "
                             f"{sum(n * n for n in lens)} for query lengths {lens}")
        w = max(lens, default=0)
        out = np.zeros((len(lens), w, w), m.dtype)
        at = 0
        for b, n in enumerate(lens):
            out[b, :n, :n] = m[at:at + n * n].reshape(n, n)
            at += n * n
        return out
    if m.ndim != 3 or m.shape[0] != batch:
        raise ValueError(f"atten_mask: shape {tuple(m.shape)}; sparse_mode 9 takes the (B={batch}, Q_S, Q_S) tree "
                         "mask (the chip reads batch b's tree at b x its rows x its columns)")
    return m


class MaskEngine:
    """Visible (row, column) pairs per batch for one operator call."""

    def __init__(self, *, sparse_mode: int, atten_mask, pre_tokens: int, next_tokens: int, batch: int,
                 decode: bool, legacy_decode: bool, token_layout: bool, left_padding: bool, q_lengths=None):
        self.sparse_mode = int(sparse_mode)
        self.pre = int(pre_tokens)
        self.next = int(next_tokens)
        self.batch = batch
        self.left_padding = left_padding
        mask = None if atten_mask is None else to_numpy(atten_mask)
        if legacy_decode:
            # The operator ignores sparse_mode (whatever its value) and pre/next on this route (aclnn doc,
            # sparseMode row; op_host GetUpdateInfo forces sparse 0 before any sparse_mode check).
            self.mode = "full" if mask is not None else "none"
        elif self.sparse_mode == 9:
            if mask is None:
                raise ValueError("atten_mask: sparse_mode=9 (tree mask) requires the tree mask")
            self.mode = "tree"
        elif self.sparse_mode not in (0, 1, 2, 3, 4):
            raise ValueError(f"sparse_mode={sparse_mode}: the inference operator supports 0-4 and 9 "
                             f"(5-8 are training-only)")
        elif self.sparse_mode == 0:
            self.mode = "default" if mask is not None else "none"
        elif self.sparse_mode == 1:
            if mask is None:
                raise ValueError("atten_mask: sparse_mode=1 (allMask) requires a mask")
            self.mode = "full"
        else:
            if mask is None:
                raise ValueError(f"atten_mask: sparse_mode={self.sparse_mode} requires the compressed "
                                 f"{TEMPLATE_SIZE}x{TEMPLATE_SIZE} mask")
            shape = tuple(mask.shape)
            allowed = [(TEMPLATE_SIZE,) * 2, (1,) + (TEMPLATE_SIZE,) * 2, (1, 1) + (TEMPLATE_SIZE,) * 2]
            if shape not in allowed:
                raise ValueError(f"atten_mask: shape {shape} for sparse_mode={self.sparse_mode}; it must be "
                                 f"one of {allowed} (the compressed triu(ones, 1) template)")
            self.mode = {2: "left_up", 3: "right_down", 4: "band"}[self.sparse_mode]
        self.user = None
        self.tree = None
        if self.mode == "tree":
            self.tree = tree_masks(mask, batch, token_layout, q_lengths)
        if self.mode in ("full", "default"):
            if token_layout:
                raise ValueError("atten_mask: TND/NTD layouts take no full mask (sparse_mode 0 without a mask, "
                                 "or 3/4 with the compressed mask)")
            self.user = self._normalise(mask, decode)

    def _normalise(self, mask: np.ndarray, decode: bool) -> np.ndarray:
        """A ``[Bm, M1, M2]`` view of the user mask, Bm in {1, B}."""
        shape = tuple(mask.shape)
        if mask.ndim == 2:
            m = mask[:, None, :] if decode else mask[None]
        elif mask.ndim == 3:
            m = mask
        elif mask.ndim == 4:
            if shape[1] != 1:
                raise ValueError(f"atten_mask: shape {shape}; a 4-D mask must be (B or 1, 1, S1, S2)")
            m = mask[:, 0]
        else:
            raise ValueError(f"atten_mask: {mask.ndim}-D shape {shape}; expected (S1,S2), (B,S2) [decode], "
                             f"(B|1,S1,S2) or (B|1,1,S1,S2)")
        if m.shape[0] not in (1, self.batch):
            raise ValueError(f"atten_mask: shape {shape}; its batch axis {m.shape[0]} must be 1 or B={self.batch}")
        return m

    def keep(self, plan, i0: int, i1: int) -> np.ndarray | None:
        """Visible pairs for local rows ``i0:i1`` of ``plan`` (``None`` = all visible)."""
        s1, s2 = plan.s1, plan.s2
        rows = np.arange(i0, i1)
        cols = np.arange(s2)
        if self.mode == "none":
            return None
        if self.mode in ("full", "default"):
            m = self.user[plan.b if self.user.shape[0] > 1 else 0]
            r0, c0 = plan.q0 + i0, plan.k0
            if r0 + (i1 - i0) > m.shape[0] or c0 + s2 > m.shape[1]:
                raise ValueError(f"atten_mask: its S axes {m.shape} are shorter than batch {plan.b} needs "
                                 f"(rows {r0}:{r0 + i1 - i0}, columns {c0}:{c0 + s2})")
            keep = m[r0:r0 + (i1 - i0), c0:c0 + s2] == 0
            if self.mode == "default" and not self.left_padding and (self.pre < INT_MAX or self.next < INT_MAX):
                keep = keep & band_keep(rows, cols, -self.pre, self.next)
            return keep
        if self.mode == "left_up":
            return band_keep(rows, cols, -INT_MAX, 0)
        offset = s2 - s1
        if self.mode == "tree":
            if offset < 0 or s1 > min(self.tree.shape[1:]):
                raise ValueError(f"atten_mask: batch {plan.b}'s tree is {self.tree.shape[1]} x {self.tree.shape[2]}; "
                                 f"sparse_mode 9 needs its s1 ({s1}) within both and <= its s2 ({s2})")
            keep = band_keep(rows, cols, -INT_MAX, offset)
            keep[:, offset:] &= self.tree[plan.b, i0:i1, :s1] == 0
            return keep
        if self.mode == "right_down":
            return band_keep(rows, cols, -INT_MAX, offset)
        return band_keep(rows, cols, offset - self.pre, offset + self.next)
