"""The arch22 FlashAttentionScore tiling key: ``GET_TPL_TILING_KEY`` over the ``ASCENDC_TPL_ARGS_DECL`` fields.

Model
-----
``op_kernel/flash_attention_score_template_tiling_key.h`` declares 20 fields, least significant first, each a
bit width and a list of allowed values; the key stores a field as the *index* of its value in that list (so
``AxisEnum::NONE`` = 9 is stored as 6 in the 7-entry axis list). The layout of the bits (KernelTypeKey 3-0,
UB0 7-4, UB1 11-8, Block 15-12, ImplMode 17-16, DataType 19-18, Layout 22-20, Bmm1Format 23, Bmm2Source 24,
Sparse 28-25, BigDoubleBuffer 30-29, HasDropOut 31, HasAttenMask 32, HasPse 33, EnableL1Reuse 34, HasRope 35,
MatmulPolicyType 36, S1TemplateType 40-37, S2TemplateType 44-41, DTemplateType 48-45) is the one the header's
comments give; the op_host unit tests' expected keys (``tests/utest/ts_fas/ts_fas_tc_redline.cpp``) decode to
the fields their shapes imply under the index rule, which is how the rule was confirmed.

The empty-tensor route does not use this encoding: ``GetTilingKeyAttentionScore4EmptyInput`` in
``flash_attention_score_tiling.cpp`` sets 90 (fp16 key), 92 (fp32) or 94 (bf16).

Invariants
----------
* ``decode_fas_key(encode_fas_key(f)) == f`` for every field dict within the lists (tests check it).
* ``encode_fas_key`` rejects a value outside its field's list (``ValueError``).
"""

from __future__ import annotations

__all__ = ["FAS_KEY_FIELDS", "encode_fas_key", "decode_fas_key", "EMPTY_TENSOR_KEYS", "AXIS"]

_AXES = (0, 1, 2, 3, 4, 5, 9)
#: (name, bit width, allowed values in declaration order), least significant first
FAS_KEY_FIELDS = (
    ("KernelTypeKey", 4, (0, 1)),
    ("UB0", 4, _AXES),
    ("UB1", 4, _AXES),
    ("Block", 4, _AXES),
    ("ImplMode", 2, (0, 1, 2)),
    ("DataType", 2, (0, 1, 2, 3)),
    ("Layout", 3, (0, 1, 2, 3, 4)),
    ("Bmm1Format", 1, (0, 1)),
    ("Bmm2Source", 1, (0, 1)),
    ("Sparse", 4, tuple(range(10))),
    ("BigDoubleBuffer", 2, (0, 1, 2)),
    ("HasDropOut", 1, (0, 1)),
    ("HasAttenMask", 1, (0, 1)),
    ("HasPse", 1, (0, 1)),
    ("EnableL1Reuse", 1, (0, 1)),
    ("HasRope", 1, (0, 1)),
    ("MatmulPolicyType", 1, (0, 1)),
    ("S1TemplateType", 4, tuple(range(9))),
    ("S2TemplateType", 4, tuple(range(9))),
    ("DTemplateType", 4, (0, 5, 6, 8)),
)
#: ``AxisEnum`` of ``tiling_base/tiling_type.h``
AXIS = {"B": 0, "N2": 1, "G": 2, "S1": 3, "S2": 4, "D": 5, "NONE": 9}
EMPTY_TENSOR_KEYS = {"float16": 90, "float32": 92, "bfloat16": 94}


def encode_fas_key(fields: dict) -> int:
    """Pack the named field values (missing ones are 0) into the key."""
    key, shift = 0, 0
    for name, width, values in FAS_KEY_FIELDS:
        v = int(fields.get(name, 0))
        if v not in values:
            raise ValueError(f"tiling key field {name}={v} is not one of {values}")
        key |= values.index(v) << shift
        shift += width
    return key


def decode_fas_key(key: int) -> dict:
    """The field values of a key (inverse of ``encode_fas_key``)."""
    out, shift = {}, 0
    for name, width, values in FAS_KEY_FIELDS:
        idx = (int(key) >> shift) & ((1 << width) - 1)
        if idx >= len(values):
            raise ValueError(f"tiling key {key}: field {name} index {idx} is outside {values}")
        out[name] = values[idx]
        shift += width
    return out
