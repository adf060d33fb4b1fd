"""Regression: the runtime's closure families (row readers/writers per dtype, skinny matmuls, the called
one-argument functions) shared one qualified name per family, so numba gave the fp16 and the bf16 row
reader the same mangled symbol. A process that loaded a cached bf16 kernel and then a cached fp16 one
(built in different processes) ran the fp16 kernel with the bf16 decoder: RingAttentionUpdate's fp16 cases
gave inf after a bf16 case, and parallel corpus sweeps differed from the serial run. Every runtime jitted
function must now carry a name of its own."""

from __future__ import annotations

from cvtile.sim import rt


def test_every_runtime_dispatcher_has_its_own_qualified_name():
    names: dict[str, str] = {}
    for attr, obj in vars(rt).items():
        if hasattr(obj, "py_func") and getattr(obj, "_cache", None) is not None and \
                type(obj._cache).__name__ != "NullCache":
            q = obj.py_func.__qualname__
            assert q not in names, f"rt.{attr} and rt.{names[q]} share the qualified name {q!r}"
            names[q] = attr
    assert {"read_rows_f16", "read_rows_bf16", "mm_bt_f16", "mm_bt_bf16", "fexp_call"} <= set(names.values())


def test_the_dtype_readers_still_decode_their_own_dtype():
    import numpy as np

    vals = np.array([[1.5, -2.25, 3.0]], np.float32)
    for read, write, dt in ((rt.read_rows_f16, rt.write_rows_f16, "f16"),
                            (rt.read_rows_bf16, rt.write_rows_bf16, "bf16")):
        flat = np.zeros(3, np.uint16)
        write(vals, flat, 0, 3, 1, 3)
        out = np.zeros((1, 3), np.float32)
        read(flat, 0, 3, 1, 3, out)
        assert np.array_equal(out, vals), dt
