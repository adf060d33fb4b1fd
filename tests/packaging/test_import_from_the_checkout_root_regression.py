"""Regression: ``import cvtile`` from the checkout's root without a working install said "circular import".

With the checkout's root first on ``sys.path`` (``python -c`` there) and no install that maps the subpackages in
(none, or an editable install pointing at a checkout that was moved), Python imports ``cvtile/`` as a plain
folder, which has no ``sim/``: ``from . import sim`` failed with "cannot import name 'sim' from partially
initialized module 'cvtile' (most likely due to a circular import)", which sends a new user the wrong way. The
package now says what happened and what to run."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_checkout_without_its_install_says_to_install():
    # -S: no site-packages, so no install maps the subpackages in; the root is sys.path[0] as for `python -c`
    res = subprocess.run([sys.executable, "-S", "-c", "import cvtile"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: cvtile was imported from") and "pip install -e ." in last, last
    assert "circular" not in res.stderr
