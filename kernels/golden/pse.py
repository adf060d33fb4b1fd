"""The additive position bias ``pse_shift`` and the learnable sink.

Model
-----
``pse_shift`` has shape ``(B or 1, N, P_S1, P_S2)`` in the query's dtype and is
added to the *scaled* scores (``scale * q·k + pse``, pse type 0 in the aclnn
docs: "mul then add"). It is indexed like a user mask: physical rows
``q0 + i`` (or row 0 broadcast when ``P_S1 == 1``, the decode form) and
columns ``k0 + j`` of the attended sequence (prefix then kv, so with a shared
prefix ``P_S2 >= prefix + S2``).

``learnable_sink`` has shape ``(N,)``: one logit per query head that joins each
row's softmax denominator only (op-plugin golden: an extra score column that is
dropped before P·V).

Invariants
----------
* Only the slice a chunk needs is converted to float64.
* Shapes are checked against the call: batch axis 1 or B, head axis N.
"""

from __future__ import annotations

import numpy as np

from .dtypes import to_f64, to_numpy

__all__ = ["PseShift", "sink_logits"]


class PseShift:
    """``pse_shift`` viewed per batch / head chunk / row chunk."""

    def __init__(self, pse, batch: int, num_heads: int):
        self.p = to_numpy(pse)
        if self.p.ndim != 4:
            raise ValueError(f"pse_shift: must be 4-D (B|1, N, S1, S2), got shape {tuple(self.p.shape)}")
        if self.p.shape[0] not in (1, batch):
            raise ValueError(f"pse_shift: shape {tuple(self.p.shape)}; batch axis must be 1 or B={batch}")
        if self.p.shape[1] != num_heads:
            raise ValueError(f"pse_shift: shape {tuple(self.p.shape)}; head axis must be num_heads={num_heads}")

    def block(self, plan, h0: int, h1: int, i0: int, i1: int) -> np.ndarray:
        """float64 ``[h1 - h0, i1 - i0 (or 1), s2]`` for query heads ``h0:h1``, local rows ``i0:i1``."""
        p = self.p[plan.b if self.p.shape[0] > 1 else 0]
        c0, s2 = plan.k0, plan.s2
        if c0 + s2 > p.shape[2]:
            raise ValueError(f"pse_shift: S2 axis {p.shape[2]} is shorter than batch {plan.b} needs ({c0 + s2})")
        if p.shape[1] == 1:
            rows = p[h0:h1, 0:1, c0:c0 + s2]
        else:
            r0 = plan.q0 + i0
            if r0 + (i1 - i0) > p.shape[1]:
                raise ValueError(f"pse_shift: S1 axis {p.shape[1]} is shorter than batch {plan.b} needs "
                                 f"({r0 + i1 - i0})")
            rows = p[h0:h1, r0:r0 + (i1 - i0), c0:c0 + s2]
        return to_f64(rows, "pse_shift")


def sink_logits(sink, num_heads: int) -> np.ndarray:
    """``learnable_sink`` as float64 ``[N]``."""
    s = to_f64(sink, "learnable_sink").reshape(-1)
    if s.shape[0] != num_heads:
        raise ValueError(f"learnable_sink: shape {tuple(np.shape(sink))}; it must be (num_heads,) = ({num_heads},)")
    return s
