"""pyproject lists every package of the tree (bug: cvtile.kernels.fas was missing, so a wheel install had no FAS).

An editable install finds subpackages through the mapped directories whatever the list says; a wheel holds only
the listed packages. The list must equal the directories with an ``__init__.py`` under each mapped root.
"""

from __future__ import annotations

import os

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tree_packages(package_dir: dict) -> set:
    found = set()
    for package, folder in package_dir.items():
        base = os.path.join(ROOT, folder)
        for dirpath, _dirs, files in os.walk(base):
            if "__init__.py" in files and "__pycache__" not in dirpath:
                rel = os.path.relpath(dirpath, base)
                found.add(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    return found


def test_every_package_directory_is_listed():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        setup = tomllib.load(fh)["tool"]["setuptools"]
    listed = set(setup["packages"])
    tree = _tree_packages(setup["package-dir"])
    assert tree - listed == set(), f"packages missing from pyproject: {sorted(tree - listed)}"
    assert listed - tree == set(), f"pyproject lists packages that do not exist: {sorted(listed - tree)}"
