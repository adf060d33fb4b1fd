"""Fixtures of the Ascend C tests."""

from __future__ import annotations

import pytest

from cvtile.dsl import ascendc as A


@pytest.fixture
def twin(tmp_path):
    """``twin(launches, tol=0.0)``: emit the launches as one project, syntax-check it, build and run it on the CPU
    twin, and assert every output is within ``tol`` (atol and rtol; 0: bitwise) of the simulator's; returns the
    first kernel's generated source."""

    def run(launches, tol: float = 0.0) -> str:
        d = str(tmp_path / "proj")
        res = A.emit(d, launches, atol=tol, rtol=tol)
        A.check_project(d, res["kernels"])
        report = A.run_project(d, A.arch_of(launches[0].kernel.platform))
        lines = [ln for ln in report.splitlines() if ln.strip()]
        assert lines and all(ln.startswith("PASS") for ln in lines), report
        return "\n".join(p.read_text() for p in sorted((tmp_path / "proj" / "op_kernel").glob("*_kernel.cpp")))

    return run
