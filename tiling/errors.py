"""Typed errors of the tiling mirror, with the aclnn status codes of the real operator.

Model
-----
The real FusedInferAttentionScore rejects bad input in two places: the aclnn
layer (null tensors: ``ACLNN_ERR_PARAM_NULLPTR`` 161001; unsupported dtype,
format or shape: ``ACLNN_ERR_PARAM_INVALID`` 161002) and op_host tiling (a
checker or template that returns GRAPH_FAILED surfaces as
``ACLNN_ERR_INNER_TILING_ERROR`` 561002). ``ParamError`` carries that status, the
parameter's name, the offending value, the rule it broke, and the checker
family that found it, so a user reads what to change without opening op_host.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["AclnnStatus", "ParamError", "UnsupportedPlanOverride"]


class AclnnStatus(IntEnum):
    SUCCESS = 0
    PARAM_NULLPTR = 161001
    PARAM_INVALID = 161002
    RUNTIME_ERROR = 361001
    INNER_TILING_ERROR = 561002


class ParamError(ValueError):
    """A parameter the real operator rejects.

    Attributes: ``status`` (an :class:`AclnnStatus`), ``param`` (the
    parameter's torch_npu / aclnn name), ``value`` (what was given), ``rule``
    (the constraint, in words) and ``checker`` (the op_host checker family or
    template that applies the rule, e.g. ``"mask"`` or ``"common"``).
    """

    def __init__(self, param: str, value, rule: str, *, status: AclnnStatus = AclnnStatus.INNER_TILING_ERROR,
                 checker: str = ""):
        self.param = param
        self.value = value
        self.rule = rule
        self.status = AclnnStatus(status)
        self.checker = checker
        where = f" [{checker}]" if checker else ""
        super().__init__(f"aclnn {int(self.status)} ({self.status.name}){where}: {param}={value!r}: {rule}")

    def to_dict(self) -> dict:
        return {"status": int(self.status), "status_name": self.status.name, "param": self.param,
                "value": _jsonable(self.value), "rule": self.rule, "checker": self.checker}


class UnsupportedPlanOverride(ValueError):
    """Plan-search overrides given for a template (or a variant of one) whose planner does not read them."""


def _jsonable(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)
