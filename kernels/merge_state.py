"""Merging partial attention results: the softmax-state primitives of the tile language's kernel library.

Model
-----
A partial attention result over a subset of the keys is a *state*: either
``(O, m, l)`` — the output normalised by its own softmax sum, the row max m and
the row sum l = Σ exp(s - m) — or ``(O, lse)`` with lse = m + log l (which is
the state ``(O, lse, 1)``). Two or more states of the same query row merge into
the state of the union of their keys:

    M  = max mᵢ                       (the merged max)
    sᵢ = lᵢ · exp(mᵢ - M)             (each sum rescaled to M: ``rescaled``)
    L  = Σ sᵢ                         (the merged sum)
    O  = Σ (sᵢ / L) · Oᵢ              (each output weighted by its share of L)
    lse = M + log L                   (``state_lse``)

These ``@ct.inline`` helpers are that algebra once, on vector tiles of any
shape (the rows of a block, or rows × the trailing 8 of the FA statistics):

* ``merge_pair`` — the two-state merge in the order RingAttentionUpdate's
  vector kernel computes it (max, two rescales, add, two divides), with no
  guard: -inf maxima or zero sums give NaN as on the chip;
* ``rescaled``, ``guarded_max``, ``guarded_sum``, ``state_lse`` — the pieces an
  N-state merge (FIA's flash-decode combine, AttentionUpdate) is built from,
  with the guards those kernels apply to rows that saw no key (max -inf →
  subtract 0 so exp gives 0 not NaN; sum 0 → divide by 1, lse empty);
* ``online_softmax_step`` (and its second half ``softmax_rescale``) — one KV
  block of the flash-attention online softmax, the state ``(m, l)`` of the
  rows so far extended by the block's scores, with the all-masked guard: a
  row whose every score so far is -inf (a sliding window or document mask
  that hides a whole block from it) keeps m = -inf, l = 0 and P = 0 instead
  of the NaN that exp(-inf - (-inf)) gives. Every attention kernel of the
  library and example 03 take their softmax from here, so a kernel written on
  top of them cannot forget the guard.

Invariants
----------
* Every helper is elementwise (or a row broadcast): shapes pass through.
* ``rescaled(m, l, M)`` is ``exp(m - M) * l`` in that operand order, so a kernel
  that wrote the expression inline computes bit-identical values through it.
"""

from __future__ import annotations

import cvtile.dsl as ct

__all__ = ["rescaled", "merge_pair", "guarded_max", "guarded_sum", "state_lse", "online_softmax_step",
           "softmax_rescale"]


@ct.inline
def rescaled(m, l, m_new):
    """A partial's softmax sum ``l`` (taken against max ``m``) rescaled to the merged max ``m_new``."""
    return ct.exp(m - m_new) * l


@ct.inline
def merge_pair(m1, l1, m2, l2):
    """Merge two (max, sum) states: returns ``(m, l, w1, w2)`` with m the merged max, l the merged sum and
    ``w1``/``w2`` the weights of the two normalised outputs (O = w1·O1 + w2·O2). No guards (see module doc)."""
    m = ct.maximum(m1, m2)
    s1 = rescaled(m1, l1, m)
    s2 = rescaled(m2, l2, m)
    l = s1 + s2
    return m, l, s1 / l, s2 / l


@ct.inline
def guarded_max(m):
    """The max to subtract: 0 where no state saw a key (m = -inf), so that exp(-inf - 0) = 0 rather than NaN."""
    return ct.where(m == -ct.inf, 0.0, m)


@ct.inline
def guarded_sum(total):
    """``(ok, divisor)``: ok where the merged sum is non-zero (NaN counts as non-zero and propagates), the
    divisor 1 elsewhere so that empty rows divide 0 by 1."""
    ok = total != 0.0
    return ok, ct.where(ok, total, 1.0)


@ct.inline
def state_lse(m, l):
    """The log-sum-exp of a (max, sum) state."""
    return m + ct.log(l)


@ct.inline
def softmax_rescale(s, m, l, m_new):
    """The second half of an online-softmax step, for a new running max ``m_new`` already taken (a kernel that
    folds something else into the max, such as FIA's learnable sink, takes it in between): returns
    ``(p, alpha, l_new)`` with ``p = exp(s - m_new)`` (0 on rows whose max is still -inf), ``alpha = exp(m -
    m_new)`` the factor that rescales the rows' earlier sum and output, and ``l_new = l·alpha + rowsum(p)``."""
    ms = guarded_max(m_new)
    p = ct.exp(s - ms[:, None])
    alpha = ct.exp(m - ms)
    return p, alpha, l * alpha + ct.rowsum(p)


@ct.inline
def online_softmax_step(s, m, l):
    """One KV block of the online softmax: the rows' state ``(m, l)`` (running max, running sum of exp(s - m))
    extended by the block's fp32 scores ``s`` (masked entries -inf). Returns ``(p, alpha, m_new, l_new)``: the
    block's unnormalised probabilities, the factor for the rows' running output (``acc = acc·alpha + p·v``) and
    the new state. Rows that have seen only -inf scores stay at (-inf, 0) with p = 0 and alpha = exp(-inf - 0) = 0,
    which leaves their (zero) output zero, never NaN."""
    m_new = ct.maximum(m, ct.rowmax(s))
    p, alpha, l_new = softmax_rescale(s, m, l, m_new)
    return p, alpha, m_new, l_new
