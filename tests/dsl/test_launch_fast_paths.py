"""The launch's fast paths give what the general paths give (issue 12: the API's fixed cost per call).

``JITFunction._bind`` walks a kernel's parameters instead of ``inspect.Signature.bind``; ``_runtime_class``
classifies Python scalars and numpy arrays by type (arrays memoised by dtype and rank) instead of
``_classify``'s walk. Both must give the same bindings, the same specialisation key and the same errors;
nothing here compiles a kernel.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.jit import _runtime_class


@ct.jit
def scaled_copy(x, o, alpha, N: ct.constexpr, BLOCK: ct.constexpr = 8):
    with ct.vector():    # BLOCK: a constexpr with a default, for the binder
        ct.store(o[0:N], ct.load(x[0:N]) * alpha)


def _inspect_bind(kernel, args, kwargs) -> dict:
    bound = kernel.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


X, O = np.zeros(16, np.float32), np.zeros(16, np.float32)


@pytest.mark.parametrize("args, kwargs", [
    ((X, O, 2.0), {"N": 16}),
    ((X, O, 2.0, 16), {}),
    ((X, O, 2.0, 16, 4), {}),
    ((X,), {"o": O, "alpha": 2.0, "N": 16, "BLOCK": 4}),
    ((), {"BLOCK": 2, "N": 16, "alpha": 1.5, "o": O, "x": X}),
])
def test_the_fast_binder_gives_inspects_bindings_in_signature_order(args, kwargs):
    got = scaled_copy._bind(args, kwargs)
    want = _inspect_bind(scaled_copy, args, kwargs)
    assert list(got) == list(want)
    assert all(got[k] is want[k] for k in want)


@pytest.mark.parametrize("args, kwargs, fragment", [
    ((X, O, 2.0, 16, 4, 5), {}, "too many positional arguments"),
    ((X, O, 2.0), {"N": 16, "BOGUS": 1}, "unexpected keyword argument 'BOGUS'"),
    ((X, O, 2.0, 16), {"N": 16}, "multiple values for argument 'N'"),
    ((X, O), {"N": 16}, "missing a required argument: 'alpha'"),
])
def test_a_call_that_does_not_bind_raises_inspects_type_error(args, kwargs, fragment):
    with pytest.raises(TypeError, match=fragment) as err:
        scaled_copy._bind(args, kwargs)
    assert str(err.value).startswith("scaled_copy: ")


def test_a_kernel_with_keyword_only_parameters_binds_through_inspect():
    def fn(x, *, N: ct.constexpr = 4):
        pass

    kernel = ct.jit(fn)
    assert kernel._plain_params is None
    assert kernel._bind((X,), {}) == {"x": X, "N": 4}
    with pytest.raises(TypeError, match="too many positional arguments"):
        kernel._bind((X, 8), {})


VALUES = [True, False, 0, 7, -3, 1.5, 0.0, np.float32(2.0), np.int64(3), np.array(4), np.array(2.5, np.float32),
          np.zeros(3, np.float16), np.zeros((2, 3), np.float32), np.zeros((1, 2, 3), ml_dtypes.bfloat16),
          np.zeros(5, np.int8), np.zeros((2, 2), np.int32), np.zeros(4, np.int64), np.zeros(3, np.uint8),
          np.zeros(3, np.bool_), np.zeros((2, 3), np.float32)[:, ::2]]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{type(v).__name__}-{getattr(v, 'dtype', '')}"
                         f"-{getattr(v, 'ndim', '')}")
def test_the_fast_classification_is_classifys(value):
    kind, info, text = _runtime_class(value)
    want_kind, want_info = scaled_copy._classify("x", value)
    if kind is not None:   # known fast: the same class, and the repr the specialisation key holds
        assert (kind, info, text) == (want_kind, want_info, repr(want_info))
    assert _runtime_class(value) == (kind, info, text)   # a memoised answer is the same answer


def test_an_array_of_a_dtype_the_language_lacks_still_raises_naming_the_argument():
    assert _runtime_class(np.zeros(3, np.complex64)) == (None, None, None)
    with pytest.raises(TypeError, match="argument 'x'"):
        scaled_copy.compile(np.zeros(16, np.complex64), O, 2.0, N=16)


def test_the_specialisation_key_is_the_classify_walks_key():
    """The key a launch builds is made of ``_classify``'s classes and their reprs, whichever path found them."""
    compiled = scaled_copy.compile(X, O, 2.0, N=16)
    parts = dict((p[0], p[1:]) for p in compiled.key[1])
    assert parts["x"] == ("tensor", repr(scaled_copy._classify("x", X)[1]))
    assert parts["alpha"] == ("scalar", repr(scaled_copy._classify("alpha", 2.0)[1]))
    assert parts["N"] == (16,) and parts["BLOCK"] == (8,)
    assert scaled_copy.compile(np.zeros(99, np.float32), np.zeros(99, np.float32), -1.0, N=16) is compiled


def test_the_source_digest_is_computed_once_per_function():
    from cvtile.dsl.frontend import source_of

    src = source_of(scaled_copy.fn)
    assert src.digest == src.digest and len(src.digest) == 16
    assert source_of(scaled_copy.fn) is src
    assert inspect.getsource(scaled_copy.fn).count("\n") == len(src.lines)
