"""Shared pytest fixtures: where the external corpora live, and the slow tier.

The acceptance corpora (the upstream ops-transformer test cases as data) sit in
``../shared/cases`` beside the project checkout, or wherever ``CVTILE_CASES``
points. Tests that need them skip cleanly when they are absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cases_root() -> Path:
    env = os.environ.get("CVTILE_CASES")
    return Path(env) if env else ROOT.parent / "shared" / "cases"


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    root = cases_root()
    if not root.is_dir():
        pytest.skip(f"external corpus folder {root} is absent (set CVTILE_CASES)")
    return root


@pytest.fixture(scope="session")
def corpus_file():
    """``corpus_file("st/fia_v4.json")``: the path of one corpus file; skips the test when it is absent."""

    def find(relpath: str) -> Path:
        path = cases_root() / relpath
        if not path.is_file():
            pytest.skip(f"corpus file {path} is absent (set CVTILE_CASES)")
        return path

    return find
