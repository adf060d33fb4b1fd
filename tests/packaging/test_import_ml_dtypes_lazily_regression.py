"""Regression: ``import cvtile`` imported ml_dtypes (for its bfloat16 dtype), about 0.45 s of a 1 s import and
of every warm process's time to first result. bfloat16 is now looked up on first use (``sim.storage``,
``kernels.golden.dtypes``); a bfloat16 call still works."""

from __future__ import annotations

import subprocess
import sys


def test_import_cvtile_does_not_import_ml_dtypes():
    code = "import sys, cvtile; print('ml_dtypes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bfloat16_is_still_found_on_first_use():
    code = ("import cvtile.sim.storage as S, cvtile.kernels.golden.dtypes as D, numpy as np\n"
            "assert 'bfloat16' in S.USER_DTYPE and len(S.USER_DTYPE) == len(S.DTYPE_NAMES)\n"
            "bf = S.user_dtype('bf16'); assert bf.name == 'bfloat16' and D.numpy_dtype('bfloat16') == bf\n"
            "a = np.ones(4, bf); st, name = S.to_storage(a)\n"
            "assert name == 'bfloat16' and S.from_storage(st, name).dtype == bf and D.BFLOAT16 == bf\n"
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
