"""Errors raised by the operator APIs of ``cvtile.kernels``.

Model
-----
An operator API (``npu_fused_infer_attention_score`` and its siblings) accepts
every keyword of its torch_npu namesake, but the simulated kernels implement a
subset of the real operator's features. A call that asks for a feature the
simulator does not model raises :class:`UnsupportedParameterError`; a call the
real operator would reject raises the tiling layer's ``ParamError`` instead.
The st-corpus runner (:mod:`cvtile.kernels.st_runner`) classifies a case as
*unsupported* exactly when the API raises this class (matched by class name, so
a subclass or a re-declared class from another module counts too).

Invariants
----------
* ``UnsupportedParameterError`` is a ``NotImplementedError``: code that already
  catches ``NotImplementedError`` keeps working.
* It carries ``param`` (the torch_npu keyword), ``value`` (what was given, or a
  short description of it) and ``reason`` (why it is not modelled); its message
  names all three.
"""

from __future__ import annotations

__all__ = ["UnsupportedParameterError"]


class UnsupportedParameterError(NotImplementedError):
    """A parameter (or parameter value) the simulator does not model.

    ``param`` is the torch_npu keyword name, ``value`` the offending value (or
    a short description such as ``"int8 tensor (2, 128)"``), ``reason`` the
    rule in words, e.g. ``"KV antiquantisation is not simulated"``.
    """

    def __init__(self, param: str, value=None, reason: str = "not supported by the simulator"):
        self.param = param
        self.value = value
        self.reason = reason
        super().__init__(f"unsupported parameter {param}={_short(value)}: {reason}")

    def to_dict(self) -> dict:
        return {"param": self.param, "value": _short(self.value), "reason": self.reason}


def _short(value, limit: int = 80) -> str:
    """A one-line description of ``value``: arrays by dtype and shape, other values by repr."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"<{dtype} array {tuple(shape)}>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
