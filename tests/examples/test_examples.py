"""Every example is also a test: each script runs in its own process, exits 0 and prints a PASS line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))


def test_the_examples_are_there():
    assert [p.name for p in SCRIPTS] == ["01_vector_add.py", "02_softmax_rows.py", "03_flash_attention.py",
                                         "04_budget_error.py", "05_cube_vector_subblocks.py",
                                         "06_attention_variants.py", "07_training_attention.py"]


#: examples that compile an operator-sized kernel (a minute cold): the slow tier
_SLOW = {"06_attention_variants", "07_training_attention"}


@pytest.mark.parametrize("script", [pytest.param(p, marks=pytest.mark.slow) if p.stem in _SLOW else p
                                    for p in SCRIPTS], ids=[p.stem for p in SCRIPTS])
def test_example_runs_and_passes(script):
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=EXAMPLES.parent)
    assert done.returncode == 0, f"{script.name} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("PASS: "), done.stdout
    assert "FAIL" not in done.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_example_is_short(script):
    assert len(script.read_text().splitlines()) < 80
