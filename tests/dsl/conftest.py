"""Shared helpers of the tile-language tests (tests/dsl).

Test modules cannot import each other (pytest runs with ``--import-mode=importlib``), so the helpers are
handed out by the ``dsl`` fixture:

* ``dsl.line_of(kernel, marker)``: the absolute line number, in the kernel's file, of the one source line of
  ``kernel`` that carries ``marker`` (a comment such as ``# <- error``), so tests pin error locations without
  hard-coding line numbers;
* ``dsl.compile_error(kernel, *args, **kw)``: compile and return the ``CompilationError`` it must raise;
* ``dsl.assert_at(err, kernel, marker, *fragments)``: ``str(err)`` names the kernel's file and marked line,
  quotes the source line, and contains every fragment;
* ``dsl.same_bits(a, b)``: bit-for-bit equality of two arrays (NaN payloads, -0.0 included);
* ``dsl.ulp_diff16(a, b)``: the distance in units of the last place between two float16/bfloat16 arrays.

Kernels compile to numba the first time each specialisation launches (about 1-3 s); tests share module-level
kernels and module-scoped fixtures so that each specialisation compiles once per session.
"""

from __future__ import annotations

import inspect
import os

import numpy as np
import pytest

import cvtile.dsl as ct


class DslHelpers:
    @staticmethod
    def line_of(kernel, marker: str) -> int:
        fn = getattr(kernel, "fn", None) or getattr(kernel, "__wrapped__", kernel)
        lines, first = inspect.getsourcelines(fn)
        hits = [first + i for i, text in enumerate(lines) if marker in text]
        assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times in {fn.__name__}"
        return hits[0]

    @staticmethod
    def source_line(kernel, marker: str) -> str:
        fn = getattr(kernel, "fn", None) or getattr(kernel, "__wrapped__", kernel)
        lines, _ = inspect.getsourcelines(fn)
        (text,) = [t for t in lines if marker in t]
        return text.split("#")[0].strip()

    @staticmethod
    def compile_error(kernel, *args, error=ct.CompilationError, **kwargs):
        with pytest.raises(error) as info:
            kernel.compile(*args, **kwargs)
        return info.value

    @classmethod
    def assert_at(cls, err, kernel, marker: str, *fragments: str) -> str:
        text = str(err)
        fn = getattr(kernel, "fn", None) or getattr(kernel, "__wrapped__", kernel)
        where = f"{os.path.basename(inspect.getsourcefile(fn))}:{cls.line_of(kernel, marker)}: "
        assert where in text, f"expected the location {where!r} in:\n{text}"
        assert cls.source_line(kernel, marker) in text, f"the offending source line is not quoted in:\n{text}"
        for frag in fragments:
            assert frag in text, f"expected {frag!r} in:\n{text}"
        return text

    @staticmethod
    def same_bits(a, b) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    @staticmethod
    def ulp_diff16(a, b) -> int:
        """Max distance in ulps between two same-dtype 16-bit float arrays (finite values of one sign per pair)."""
        ia = np.asarray(a).view(np.int16).astype(np.int64)
        ib = np.asarray(b).view(np.int16).astype(np.int64)
        # map sign-magnitude to a monotone integer line
        ia = np.where(ia < 0, -(ia & 0x7FFF), ia)
        ib = np.where(ib < 0, -(ib & 0x7FFF), ib)
        return int(np.abs(ia - ib).max()) if ia.size else 0


@pytest.fixture(scope="session")
def dsl():
    return DslHelpers
