"""Shared pieces of the FIA checkers: the context every rule reads and the way a rule fails.

Model
-----
op_host runs its checker families in four phases (single parameters, presence
of parameters, cross-feature rules, multi-parameter consistency), each phase
over all families in a fixed order, and stops at the first failure. A family
here is a module exposing up to four functions ``single_para``,
``existence``, ``cross_feature`` and ``consistency``, each taking a
:class:`CheckContext`; a rule that does not hold calls :func:`fail`, which
raises the ``ParamError`` with the family's name.

Invariants
----------
* Checkers only read; they never change the ``FiaInfo``.
* ``CheckContext.non_quant`` / ``full_quant`` / ``anti_quant`` are exclusive and
  follow op_host: q dtype != kv dtype is antiquant, else fp16/bf16 is non-quant,
  else full quant.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AclnnStatus, ParamError
from ..info import FiaInfo, present
from ..params import FiaParams, TensorMeta

__all__ = ["CheckContext", "fail", "present", "shape_str", "DTYPE_NAMES"]

#: op_host's per-input dtype lists of the arch35 base checker (canonical names).
DTYPE_NAMES = {
    "query": ("float16", "bfloat16", "int8"),
    "key": ("float16", "bfloat16", "int8", "int4", "hifloat8", "float8_e4m3fn", "float4_e2m1"),
    "value": ("float16", "bfloat16", "int8", "int4", "hifloat8", "float8_e4m3fn", "float4_e2m1"),
    "pse_shift": ("float16", "bfloat16"),
    "atten_mask": ("bool", "int8", "uint8"),
    "dequant_scale1": ("uint64", "float32"),
    "quant_scale1": ("float32",),
    "dequant_scale2": ("uint64", "float32"),
    "quant_scale2": ("float32", "bfloat16"),
    "quant_offset2": ("float32", "bfloat16"),
    "antiquant_scale": ("float16", "bfloat16"),
    "antiquant_offset": ("float16", "bfloat16"),
    "block_table": ("int32",),
    "key_antiquant_scale": ("float16", "bfloat16", "float32"),
    "key_antiquant_offset": ("float16", "bfloat16", "float32"),
    "value_antiquant_scale": ("float16", "bfloat16", "float32"),
    "value_antiquant_offset": ("float16", "bfloat16", "float32"),
    "key_shared_prefix": ("float16", "bfloat16", "int8"),
    "value_shared_prefix": ("float16", "bfloat16", "int8"),
    "query_rope": ("float16", "bfloat16", "int8"),
    "key_rope": ("float16", "bfloat16", "int8"),
    "dequant_scale_query": ("float32",),
    "attention_out": ("float16", "bfloat16", "int8"),
    "softmax_lse": ("float32",),
}

#: Tensor formats op_host accepts for FIA inputs.
FORMATS = ("ND", "NCHW", "NHWC", "NCDHW")


@dataclass
class CheckContext:
    """What a checker reads: the parsed info and the raw parameters."""

    info: FiaInfo

    @property
    def p(self) -> FiaParams:
        return self.info.params

    @property
    def non_quant(self) -> bool:
        i = self.info
        return i.q_dtype == i.kv_dtype and i.q_dtype in ("float16", "bfloat16")

    @property
    def anti_quant(self) -> bool:
        return self.info.q_dtype != self.info.kv_dtype

    @property
    def full_quant(self) -> bool:
        return not self.non_quant and not self.anti_quant

    @property
    def arch35(self) -> bool:
        return self.info.arch == "arch35"

    @property
    def arch22(self) -> bool:
        return self.info.arch == "arch22"

    def t(self, name: str) -> TensorMeta | None:
        """The tensor ``name`` when it reaches the tiling, else None."""
        m = getattr(self.info.params, name)
        return m if present(m) else None


def fail(checker: str, param: str, value, rule: str, status: AclnnStatus = AclnnStatus.INNER_TILING_ERROR):
    """Reject the call: raise the ``ParamError`` of ``checker``."""
    raise ParamError(param, value, rule, status=status, checker=checker)


def shape_str(t: TensorMeta | None):
    return tuple(t.shape) if t is not None else None


def first_noncontiguous_axis(shape: tuple[int, ...], stride: tuple[int, ...] | None) -> int | None:
    """The axis (scanning from the innermost) where a view stops being dense; None when dense or no strides.

    Singleton axes are skipped; strides are read by position even past the reported stride rank."""
    if not stride or len(shape) <= 1:
        return None
    expect = 1
    for ax in range(len(shape) - 1, -1, -1):
        if shape[ax] == 1:
            continue
        got = stride[ax] if ax < len(stride) else None
        if got != expect:
            return ax
        expect *= shape[ax]
    return None


def view_stride(c: "CheckContext", name: str):
    """The strides op_host checks for ``name``: its own view strides when the call carries K/V/key_rope stride
    metadata and it has some; None otherwise (op_host then treats it as dense)."""
    t = c.t(name)
    if t is None or not c.info.has_view_stride or t.stride_dims == 0:
        return None
    return t.stride


def ceil_div(a: int, b: int) -> int:
    """Ceiling division as op_host's helper computes it (0 for a zero divisor)."""
    if b == 0:
        return 0
    return (a + b - 1) // b
