"""Typed refusals renamed into the keywords of the API a caller used.

Model
-----
Every operator API of ``cvtile.kernels.fia`` (torch_npu's FIA V1 and V2, IFA, PFA and the aclnn-level IFA V3)
runs one shared body, ``api.simulate_fia``, whose checks name parameters by FIA's V1 (torch_npu) keywords. An
API with other names maps its keywords onto those and, when the body refuses the call, re-raises the same
refusal under the caller's name: :func:`renamed` keeps the class, the aclnn status, the value and the rule,
and only swaps the parameter name (``ParamError`` and ``UnsupportedParameterError`` alike).

Invariants
----------
* A name the mapping does not hold (or maps to itself) leaves the error object unchanged.
* The message of the renamed error names the caller's keyword, the value and the rule.
"""

from __future__ import annotations

from ...tiling.errors import ParamError
from ..errors import UnsupportedParameterError

__all__ = ["renamed", "inverse"]


def inverse(mapping: dict) -> dict:
    """``{v: k}`` of a keyword mapping (``{caller's name: operator name}`` -> ``{operator name: caller's}``)."""
    return {v: k for k, v in mapping.items()}


def renamed(err, names: dict):
    """``err`` (a ``ParamError`` or ``UnsupportedParameterError``) naming ``names[err.param]`` instead."""
    new = names.get(err.param)
    if new is None or new == err.param:
        return err
    if isinstance(err, ParamError):
        return ParamError(new, err.value, err.rule, status=err.status, checker=err.checker)
    if isinstance(err, UnsupportedParameterError):
        return UnsupportedParameterError(new, err.value, err.reason)
    return err
