"""The integer literals a generated module wraps in ``np.int64`` are module constants (``codegen._module_text``).

numba types a global numpy scalar by its dtype, as it types ``np.int64(26)``, without typing a call at each use;
a kernel's failure records alone hold a few hundred such literals. Checked: no ``np.int64(<literal>)`` is left in
the FIA decode kernel's module, each constant it uses is defined once with its value, and a failure record
built from them still reports its site and values (the grouped-check tests run the same path end to end).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import cvtile
import cvtile.dsl as ct
from cvtile.dsl.jit import record_launches


def _decode_module() -> str:
    q = np.zeros((2, 8, 1, 64), np.float16)
    k = np.zeros((2, 2, 1024, 64), np.float16)
    with record_launches(run=False) as rec:
        cvtile.npu_fused_infer_attention_score(q, k, k, num_heads=8, num_key_value_heads=2, input_layout="BNSD",
                                               scale=0.125)
    return rec.launches[0].kernel.numba_source


def test_no_wrapped_literal_is_left_and_each_constant_is_defined_once_with_its_value():
    text = _decode_module()
    uses = re.sub(r"^_Im?\d+ = np\.int64\(-?\d+\)$", "", text, flags=re.M)
    assert not re.search(r"np\.int64\(-?\d+\)", uses)
    defined = re.findall(r"^(_Im?\d+) = np\.int64\((-?\d+)\)$", text, re.M)
    assert defined and len({n for n, _ in defined}) == len(defined)
    for name, value in defined:
        assert name == (f"_I{value}" if int(value) >= 0 else f"_Im{-int(value)}")
    used = set(re.findall(r"\b(_Im?\d+)\b", text))
    assert used == {n for n, _ in defined}


@ct.jit
def bounded_read(tbl, o, r):
    with ct.vector():
        ct.store(o[0:8, 0:8], ct.full((8, 8), tbl[r, 0], ct.float32))


def test_a_failure_record_built_from_constants_names_its_values():
    with pytest.raises(ct.SimulationError) as info:
        bounded_read[1](np.zeros((4, 8), np.int32), np.zeros((8, 8), np.float32), 9)
    assert "GM index out of bounds" in str(info.value) and "9" in str(info.value)
