"""NZ paged KV caches on the simulated FIA kernels: the rules the simulator checks before it reads them.

Model
-----
With ``block_table`` a key/value cache may be NZ (``golden.nz``): (blocks, N, D/d0, block_size, d0), d0 = 32
bytes of the dtype (16 for fp16/bf16, 32 for int8), except a KV-antiquant cache on Ascend950, whose dequant kernel
reads fractals of 16 values whatever the cache's dtype (``golden.nz.antiquant_nz_fraction``). The kernels read it
in place (CACHE "NZ", ``kernel.paged_kv_rows``); the golden reads it as the BnNBsD cache it holds. op_host's paged-attention checker
(``tiling.checkers.common``) compares the axes of key and value with the heads and head dims; what the chip
would read wrongly and that checker does not name is checked here (:func:`check_nz_call`, ``ParamError`` 161002,
checker "api"):

* each NZ tensor (key, value, key_rope) has its d0 as its last axis: 32 bytes of its dtype (an int4 cache, held
  as int8 values with ``arrays["_int4"]`` set, 64), 16 for an antiquant cache on arch35;
* its block axis (3) is ``block_size`` (the chip walks the block rows by it);
* key and value are both NZ or neither, and with an NZ key the split rope's key_rope is NZ with the key's
  blocks, heads and block size (the chip copies both into one L1 block).

Invariants
----------
* Calls without an NZ tensor pass unchanged; nothing is copied or converted here.
"""

from __future__ import annotations

from ...tiling.errors import AclnnStatus, ParamError
from ...tiling.params import canonical_dtype
from ..golden.nz import antiquant_nz_fraction, nz_rule

__all__ = ["check_nz_call", "is_nz"]


def is_nz(x) -> bool:
    """True for a 5-D (NZ) cache tensor."""
    return getattr(x, "ndim", 0) == 5


def _fail(name: str, shape, rule: str) -> ParamError:
    return ParamError(name, tuple(shape), rule, status=AclnnStatus.PARAM_INVALID, checker="api")


def _fraction(arrays: dict, name: str, arch: str) -> tuple:
    """(dtype, d0) of the NZ tensor ``name``: an antiquant cache (an fp16/bf16 query and a key of another dtype)
    takes ``antiquant_nz_fraction`` on ``arch``, the others 32 bytes of their dtype."""
    x = arrays[name]
    dtype = "int4" if arrays.get("_int4") and name != "key_rope" else x.dtype
    qd, kd = arrays["query"].dtype, arrays["key"].dtype
    antiquant = name != "key_rope" and canonical_dtype(qd) in ("float16", "bfloat16") and kd != qd
    return dtype, antiquant_nz_fraction(dtype, arch) if antiquant else None


def check_nz_call(arrays: dict, attrs: dict, arch: str = "arch22") -> None:
    """Raise ``ParamError`` naming key, value or key_rope when an NZ cache breaks a rule of the module doc
    (``arch``: the tiling's, which sets an antiquant cache's fractal)."""
    key, value, rope = arrays["key"], arrays["value"], arrays.get("key_rope")
    if not (is_nz(key) or is_nz(value)) or arrays.get("block_table") is None:
        return
    if is_nz(key) != is_nz(value):
        name, x = ("value", value) if is_nz(key) else ("key", key)
        raise _fail(name, x.shape, "key and value caches are both NZ (5-D) or neither")
    bs = int(attrs.get("block_size") or 0)
    for name, x in (("key", key), ("value", value), ("key_rope", rope)):
        if x is None:
            continue
        rule = nz_rule(x.shape, *_fraction(arrays, name, arch))
        if rule is None and x.shape[3] != bs:
            rule = f"axis 3 of an NZ cache (blocks, N, D/d0, block_size, d0) is block_size {bs}, got {x.shape[3]}"
        if rule is None and name == "key_rope" and (x.shape[:2] != key.shape[:2]):
            rule = f"an NZ key_rope has the key cache's blocks and heads {tuple(key.shape[:2])}"
        if rule:
            raise _fail(name, x.shape, rule)
