"""sim.storage: user arrays <-> simulator storage, zero-copy, torch optional."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from cvtile.sim import storage as S

SAMPLES = {
    "float16": np.array([[0.0, -0.0, 1.5, -65504.0], [np.inf, -np.inf, np.nan, 6e-8]], np.float16),
    "bfloat16": np.array([[0.0, -0.0, 1.5, -3.0e38], [np.inf, -np.inf, np.nan, 1e-40]], ml_dtypes.bfloat16),
    "float8_e4m3fn": np.array([[0.0, -0.0, 1.5, -448.0], [240.0, -0.001953125, np.nan, 0.0625]],
                              ml_dtypes.float8_e4m3fn),
    "float32": np.array([[0.0, -0.0, 1.5, 3.4e38], [np.inf, -np.inf, np.nan, 1e-45]], np.float32),
    "int8": np.array([[-128, 127, 0, 1], [2, 3, 4, 5]], np.int8),
    "int16": np.array([[-32768, 32767, 0, 1], [2, 3, 4, 5]], np.int16),
    "int32": np.array([[-(2**31), 2**31 - 1, 0, 1], [2, 3, 4, 5]], np.int32),
    "int64": np.array([[-(2**63), 2**63 - 1, 0, 1], [2, 3, 4, 5]], np.int64),
    "uint8": np.array([[0, 255, 1, 2], [3, 4, 5, 6]], np.uint8),
    "bool": np.array([[True, False, True, True], [False, False, True, False]]),
}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_tables():
    assert S.DTYPE_NAMES == tuple(SAMPLES)
    assert set(S.ITEMSIZE) == set(S.STORAGE_DTYPE) == set(S.USER_DTYPE) == set(S.DTYPE_NAMES)
    for name in S.DTYPE_NAMES:
        assert S.ITEMSIZE[name] == S.itemsize(name) == SAMPLES[name].itemsize
        assert S.STORAGE_DTYPE[name].itemsize == S.ITEMSIZE[name]
        assert S.user_dtype(name) == SAMPLES[name].dtype
        assert S.is_16bit(name) == (name in ("float16", "bfloat16"))
    assert S.storage_dtype("float16") == S.storage_dtype("bfloat16") == np.uint16


def test_names_match_the_dsl():
    from cvtile.dsl import types as T

    assert set(S.DTYPE_NAMES) == set(T.DTYPES)
    for d in T.DTYPES.values():
        assert S.dtype_name(d) == d.name


@pytest.mark.parametrize(
    "given, name",
    [
        ("float16", "float16"),
        ("fp16", "float16"),
        ("half", "float16"),
        ("bf16", "bfloat16"),
        ("fp32", "float32"),
        (np.float16, "float16"),
        (ml_dtypes.bfloat16, "bfloat16"),
        (np.dtype("bfloat16"), "bfloat16"),
        (np.dtype(">f4"), "float32"),
        ("<i8", "int64"),
        (bool, "bool"),
        (np.bool_, "bool"),
        (np.uint8, "uint8"),
    ],
)
def test_dtype_name(given, name):
    assert S.dtype_name(given) == name


@pytest.mark.parametrize(
    "bad", [np.float64, "float64", np.uint16, np.uint32, np.complex64, object, "nope", None, np.dtype([("a", np.int8)])]
)
def test_unsupported_dtype_names_the_parameter(bad):
    with pytest.raises(TypeError, match=r"^query: unsupported dtype .*supported: float16, bfloat16"):
        S.dtype_name(bad, "query")


def test_to_storage_rejects_unsupported_arrays():
    with pytest.raises(TypeError, match="^key: unsupported dtype float64"):
        S.to_storage(np.zeros(3), "key")
    with pytest.raises(TypeError, match="^array: unsupported dtype uint16"):
        S.to_storage(np.zeros(3, np.uint16))  # bits without a format are ambiguous


@pytest.mark.parametrize("name", list(SAMPLES))
def test_round_trip_is_zero_copy_and_bit_exact(name):
    a = SAMPLES[name].copy()
    st, got = S.to_storage(a)
    assert got == name
    assert st.dtype == S.STORAGE_DTYPE[name] and st.shape == a.shape
    assert st.flags.c_contiguous
    assert np.shares_memory(st, a)
    back = S.from_storage(st, name)
    assert back.dtype == a.dtype
    assert np.shares_memory(back, a)
    assert same_bits(back, a)  # NaN payloads and -0 included


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_storage_is_the_bit_pattern(name):
    a = SAMPLES[name].copy()
    st, _ = S.to_storage(a)
    np.testing.assert_array_equal(st, a.view(np.uint16))
    st[0, 0] = 0x3C00 if name == "float16" else 0x3F80  # 1.0, written through the view
    assert a[0, 0] == 1.0


def test_non_contiguous_and_byte_swapped_inputs_are_copied():
    a = np.arange(24, dtype=np.float16).reshape(4, 6)
    for view in (a[:, ::2], a.T, np.asfortranarray(a)):
        st, name = S.to_storage(view)
        assert name == "float16" and st.flags.c_contiguous
        assert not np.shares_memory(st, a)
        np.testing.assert_array_equal(S.from_storage(st, name), view)
    swapped = np.arange(5, dtype=">f4")
    st, name = S.to_storage(swapped)
    assert name == "float32" and st.dtype == np.float32 and st.dtype.isnative
    np.testing.assert_array_equal(st, swapped)


def test_zero_dim_and_empty_arrays():
    st, name = S.to_storage(np.float16(2.5))
    assert name == "float16" and st.shape == () and S.from_storage(st, name) == 2.5
    st, name = S.to_storage(np.empty((0, 3), ml_dtypes.bfloat16))
    assert st.shape == (0, 3) and st.dtype == np.uint16


def test_from_storage_checks_the_storage_dtype():
    assert S.from_storage(np.zeros(2, np.int16), "bfloat16").dtype == ml_dtypes.bfloat16
    with pytest.raises(TypeError, match="storage"):
        S.from_storage(np.zeros(2, np.float32), "float16")
    with pytest.raises(TypeError, match="storage"):
        S.from_storage(np.zeros(2, np.int64), "int32")


@pytest.mark.parametrize("name", list(SAMPLES))
def test_empty_storage(name):
    st = S.empty_storage((3, 5), name)
    assert st.shape == (3, 5) and st.dtype == S.STORAGE_DTYPE[name] and st.flags.c_contiguous
    assert S.from_storage(st, name).dtype == S.USER_DTYPE[name]


def test_importing_storage_does_not_import_torch():
    code = "import sys, cvtile.sim.storage; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ torch
TORCH_NAMES = ["float16", "bfloat16", "float32", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torch_tensors_are_viewed_without_copy(name):
    torch = pytest.importorskip("torch")
    a = SAMPLES[name].copy()
    if S.is_16bit(name):  # torch.from_numpy knows no bfloat16: go through int16
        t = torch.from_numpy(a.view(np.int16)).view(getattr(torch, name))
    else:
        t = torch.from_numpy(a)
    st, got = S.to_storage(t, "q")
    assert got == name and st.dtype == S.STORAGE_DTYPE[name] and st.shape == tuple(t.shape)
    assert st.ctypes.data == t.data_ptr()  # zero-copy
    assert S.dtype_name(t.dtype) == name
    np.testing.assert_array_equal(st.view(np.uint8), t.view(torch.uint8).numpy())


def test_torch_writes_through_and_copies_when_needed():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 6, dtype=torch.bfloat16)
    st, name = S.to_storage(t)
    st[1, 2] = 0x4040  # bf16 3.0
    assert t[1, 2].item() == 3.0
    u = torch.arange(24, dtype=torch.float16, requires_grad=True).reshape(4, 6)
    st, name = S.to_storage(u.t())  # non-contiguous, needs grad: copied
    assert st.flags.c_contiguous and name == "float16"
    np.testing.assert_array_equal(S.from_storage(st, name), u.detach().t().numpy())
    with pytest.raises(TypeError, match="^k: unsupported dtype torch.float64"):
        S.to_storage(torch.zeros(2, dtype=torch.float64), "k")


def test_gather_bytes_is_numpys_table_lookup_for_every_byte():
    """The host's widening of narrow caches: FP8 patterns to bf16 values, int4 pairs to int8 values."""
    import ml_dtypes

    from cvtile.sim.storage import gather_bytes

    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, (3, 5, 7), dtype=np.uint8)
    table = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(ml_dtypes.bfloat16)
    got = gather_bytes(table, data)
    assert got.dtype == table.dtype and got.shape == (data.size,)
    assert np.array_equal(got.view(np.uint16), table[data.reshape(-1)].view(np.uint16))
    pairs = rng.integers(0, 2 ** 16, 256).astype("<u2")
    assert np.array_equal(gather_bytes(pairs, data.view(np.int8)), pairs[data.reshape(-1)])
    with pytest.raises(ValueError, match="256"):
        gather_bytes(table[:16], data)
