"""The op table is the one place an op kind is defined: every consumer covers exactly its kinds, builtins are
real functions, and the verifier runs after the frontend and after every pass, blaming the pass that broke
the IR."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl.ir import Op, Value, walk
from cvtile.dsl.ops import OPS
from cvtile.dsl.passes import PassError, run_pipeline, simplify
from cvtile.dsl.types import INDEX
from cvtile.sim.codegen import _Gen
from cvtile.tiling.platform import get_platform

A2 = get_platform("Ascend910B1")


def test_every_op_kind_has_one_numba_lowering_rule():
    # kinds a pass replaces (send/recv, lowered by place_handoffs) and the program op need none
    missing = [k for k, d in OPS.items() if d.lowered_by is None and k != "program" and not hasattr(_Gen, "op_" + k)]
    assert not missing, f"op kinds without a numba lowering rule: {missing}"


def test_every_op_record_states_its_scopes_pipe_and_purity():
    for kind, d in OPS.items():
        assert d.category in ("scalar", "tile", "control", "sync"), kind
        assert d.scopes and all(s in (None, "cube", "vector") for s in d.scopes), kind
        assert isinstance(d.pure, bool) and d.doc, kind
        if d.category == "tile" and kind not in ("store", "send", "device_print"):   # no tile result
            assert d.valid is not None, f"{kind} has no valid-extent rule"


def test_builtins_are_functions_with_signatures_and_docstrings():
    sig = inspect.signature(ct.load)
    assert list(sig.parameters) == ["view", "space"] and sig.parameters["space"].default is None
    assert "GM->L1" in ct.load.__doc__
    assert list(inspect.signature(ct.mma).parameters) == ["a", "b", "trans_b", "acc"]


@ct.jit
def _bad_call(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.exp(ct.load(x[0:N]), 2))


def test_a_builtin_called_with_the_wrong_arguments_names_its_signature():
    x = np.zeros(16, np.float32)
    with pytest.raises(ct.CompilationError) as info:
        _bad_call.compile(x, x.copy(), N=16)
    text = str(info.value)
    assert "exp: too many positional arguments; the builtin is exp(x): elementwise e**x." in text, text
    assert "ct.exp(ct.load(x[0:N]), 2)" in text


@ct.jit
def _scale(x, o, s, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]) * s)


def _ir():
    x = np.zeros(16, np.float32)
    return _scale.compile(x, x.copy(), 2.0, N=16)


def test_ir_after_prints_each_stage():
    ck = _ir()
    assert "ewise.mul" in ck.ir_after("frontend") and "ewise.mul" in ck.ir_after("simplify")
    with pytest.raises(KeyError, match="no pass named 'nonsense'"):
        ck.ir_after("nonsense")


def test_a_pass_that_breaks_the_ir_is_reported_as_that_passs_bug():
    ir = _ir().compilation.frontend

    def reorder(kernel, platform):  # moves the first store to the front: uses before definitions
        ops = kernel.body.ops
        store = next(op for op in ops if op.kind == "store")
        ops.remove(store)
        ops.insert(0, store)
        return kernel

    with pytest.raises(PassError) as info:
        run_pipeline(ir, A2, [("simplify", simplify), ("reorder", reorder)])
    assert info.value.pass_name == "reorder"
    assert "internal compiler error: pass 'reorder' produced invalid IR: invalid IR: store uses" in str(info.value)


def test_windows_are_stored_once_and_rewritten_with_the_operands():
    ck = _ir()
    load = next(op for op in walk(ck.ir.body) if op.kind == "load")
    assert load.args == [] and set(load.windows) == {"window"}
    w = load.windows["window"]
    assert all(v in load.operands for v in w.values() if isinstance(v, Value))
    new = Value(INDEX, "n2")
    old = w.dims[0].bound
    load.map_values(lambda v: new if v is old else v)
    assert load.windows["window"].dims[0].bound is new and old not in load.operands
    assert isinstance(Op("const", [], [Value(INDEX, const=1)], {"value": 1}), Op)
