"""The package names given on first use (``cvtile._on_first_use``): ``import cvtile`` does not import
FlashAttentionScore, the attention variants or the corpus runner, and each name, asked for, is the defining
module's object."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import cvtile
import cvtile.kernels


def test_import_cvtile_leaves_them_unimported():
    code = ("import sys, cvtile; print(sorted(m for m in ('cvtile.kernels.fas.api', 'cvtile.kernels.variants', "
            "'cvtile.kernels.st_runner', 'cvtile.kernels.st_cases') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("package", [cvtile, cvtile.kernels])
def test_each_name_is_the_defining_modules(package):
    for name, module in package._ON_FIRST_USE.items():
        assert name in package.__all__
        assert getattr(package, name) is getattr(importlib.import_module(module), name)


def test_an_unknown_name_names_the_package():
    with pytest.raises(AttributeError, match="module 'cvtile' has no attribute 'npu_fusion_attention_v9'"):
        cvtile.npu_fusion_attention_v9  # noqa: B018
