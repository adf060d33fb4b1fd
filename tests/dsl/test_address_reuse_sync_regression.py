"""Regression: a buffer the memory plan places where a dead one was must wait for the dead one's readers on
other pipes.

insert_sync keyed its hazards by buffer, so a load into a new buffer at the address of one a store was still
reading (different buffers, the same bytes) got no event: on the chip the MTE2 load could overwrite the tile
before MTE3 had copied it out. Hazards are now checked over every buffer whose addresses overlap.
"""

from __future__ import annotations

import numpy as np

import cvtile.dsl as ct


@ct.jit
def two_passes(x, y, o1, o2, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        a = ct.load(x[0:R, 0:C])
        ct.store(o1[0:R, 0:C], a * 2.0)
        b = ct.load(y[0:R, 0:C])
        ct.store(o2[0:R, 0:C], b + 1.0)


def test_regression_a_load_into_a_reused_address_waits_for_the_store_and_the_vector_reads_of_it():
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    y = -x
    o1, o2 = np.zeros_like(x), np.zeros_like(x)
    ck = two_passes.compile(x, y, o1, o2, R=16, C=64)
    final = ck.compilation.final
    body = final.programs()["aiv"].ops
    plan = final.memory
    loads = [i for i, op in enumerate(body) if op.kind == "load"]
    a_buf, b_buf = (plan.buffer_of[body[i].results[0].id] for i in loads)
    assert a_buf is not b_buf and a_buf.offset == b_buf.offset     # the plan reuses the bytes
    first_store = next(i for i, op in enumerate(body) if op.kind == "store")
    waits = {op.attrs["event"] for op in body[first_store + 1:loads[1]] if op.kind == "event_wait"}
    assert {"V_MTE2", "MTE3_MTE2"} <= waits, waits
    two_passes[1](x, y, o1, o2, R=16, C=64)
    assert np.array_equal(o1, x * 2) and np.array_equal(o2, y + 1)
