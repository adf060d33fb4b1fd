"""Regression: ``cvtile cost`` on a call whose outputs exceed the host's memory died with a MemoryError.

The cost model records the launches without running them (``record_launches(run=False)``), but the operator
APIs still allocated their outputs and workspaces at full size: ``cvtile cost -b 64 -n 64 --q-seqlen 32768``
asked numpy for a 32 GiB attention_out and exited 2 on "Unable to allocate". Outputs and workspaces now come
from ``dsl.jit.output_array``: filled arrays when the launches run, zero-stride stand-ins that take no memory when
they are only recorded. The estimate is the same either way (it reads shapes, dtypes and sizes only)."""

from __future__ import annotations

import tracemalloc

import numpy as np

from cvtile.dsl.jit import launches_run, output_array, record_launches
from cvtile.kernels.fas.cost import fas_cost
from cvtile.kernels.fia.cost import fia_cost


def test_output_array_is_filled_when_launches_run_and_a_stand_in_when_only_recorded():
    a = output_array((3, 4), np.float32, -np.inf)
    assert launches_run() and a.flags.writeable and (a == -np.inf).all()
    assert output_array((2,), np.int8).tolist() == [0, 0]
    with record_launches(run=False):
        assert not launches_run()
        b = output_array((1 << 20, 1 << 20), np.float16, 1.5)   # 2 TiB if it were real
        assert b.shape == (1 << 20, 1 << 20) and b.strides == (0, 0) and not b.flags.writeable
        assert b.nbytes == 2 << 40 and float(b[7, 9]) == 1.5
        with record_launches():   # an inner recording that runs does not make the outer one run
            assert not launches_run()
    assert launches_run()


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fia_cost_does_not_allocate_the_attention_out():
    # attention_out is 1 x 32768 x 32 x 128 fp16 = 256 MiB; the inputs are stand-ins as in `cvtile cost`
    q = np.broadcast_to(np.float16(0), (1, 32, 32768, 128))
    k = np.broadcast_to(np.float16(0), (1, 32, 512, 128))
    peak = _peak_bytes(lambda: fia_cost(q, k, k, target="Ascend910B1", input_layout="BNSD", num_heads=32,
                                        num_key_value_heads=32))
    # the cost model itself peaks at about 110 MiB here (its spans and memos); a real output would add 256 MiB
    assert peak < 256 << 20, f"fia_cost allocated {peak / 2**20:.0f} MiB at its peak"


def test_fas_cost_is_the_same_with_stand_in_outputs(monkeypatch):
    """The estimate does not depend on whether the outputs are real arrays (a launch that runs allocates them)."""
    import cvtile.kernels.fas.launch as fas_launch

    q = np.zeros((1, 4, 1024, 64), np.float16)

    def estimate():
        rep = fas_cost(q, q.copy(), q.copy(), target="Ascend910B1", head_num=4, input_layout="BNSD")
        return rep.estimated_us, rep.bound, [lc.block_cycles for lc in rep.launches]

    stand_ins = estimate()
    monkeypatch.setattr(fas_launch, "output_array", lambda shape, dtype, fill=0: np.full(shape, fill, dtype))
    assert estimate() == stand_ins
