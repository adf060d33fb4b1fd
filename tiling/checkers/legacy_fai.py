"""arch22 legacy route "FAI" (TND split-fuse tiling): the checks before its (never-failing) tiling.

Rules (op_host split-fuse availability checks)
----------------------------------------------
* query, key and value share one dtype, fp16 or bf16; no key/value tensor list.
* TND: query 3-D; without a paged cache key/value 3-D; paged 3-D (BnBsH) or 5-D (NZ, last axis 16 and the
  block axis = block_size) caches with key and value of equal rank; actual_seq_lengths and _kv both given and
  non-empty; with values: T of query >= the last query length, and without a paged cache T of key/value >= the
  last kv length; sparse 4 with values: not both tokens negative and -next_tokens <= pre_tokens.
* sparse_mode 0, 3 or 4; without a mask only 0; a mask needs sparse 3/4, 2-4 dims, its last two axes 2048 and
  the others 1.
* head dims of query, key and value equal and <= 256; paged: the cache block axis equals block_size, which is a
  multiple of 16 and <= 512.
* learnable_sink: the query dtype (fp16/bf16), 1-D with N of query elements, inner_precise 0.
* softmax_lse (when requested): [T, N, 1].
"""

from __future__ import annotations

from ..errors import AclnnStatus, ParamError
from ..info import present
from ..layouts import dim, numel
from .legacy import legacy_value
from .mask import expected_mask

CHECKER = "legacy_fai"


def _fail(param, value, rule):
    raise ParamError(param, value, rule, status=AclnnStatus.INNER_TILING_ERROR, checker=CHECKER)


def _cdiv(a: int, b: int) -> int:
    if b == 0:
        _fail("num_key_value_heads", b, "num_key_value_heads must be set (non-zero) for a paged BnBsH cache")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def check(p, plat, dims) -> None:
    paged = present(p.block_table)
    _qkv(p, paged)
    _mask(p)
    _single_para(p, paged)
    _lse(p)


def _qkv(p, paged: bool) -> None:
    v = legacy_value(p)
    qt, kt, vt = p.query.dtype, p.key.dtype, v.dtype
    if qt != kt or qt != vt:
        _fail("key", kt, f"split-fuse needs query, key and value of one dtype (got {qt}, {kt}, {vt})")
    if qt not in ("float16", "bfloat16"):
        _fail("query", qt, "split-fuse needs fp16 or bf16 query/key/value")
    if len(p.key_list) > 1 or len(p.value_list) > 1:
        _fail("key", "tensor list", "split-fuse does not support key/value tensor lists")
    if p.input_layout == "TND":
        _tnd(p, paged, v)


def _tnd(p, paged: bool, v) -> None:
    q, k, vs = p.query.shape, p.key.shape, v.shape
    if len(q) != 3:
        _fail("query", q, "with TND query must have 3 dims")
    if not paged:
        if len(k) != 3 or len(vs) != 3:
            _fail("key", k, "with TND and no paged cache key and value must have 3 dims")
    elif len(k) == 3 or len(vs) == 3:
        if len(k) != len(vs):
            _fail("value", vs, "a 3-D paged key cache needs a 3-D value cache")
    elif len(k) == 5 or len(vs) == 5:
        if len(k) != len(vs):
            _fail("value", vs, "a 5-D paged key cache needs a 5-D value cache")
        if dim(k, 4) != 16 or dim(vs, 4) != 16:
            _fail("key", k, "the last axis of NZ key/value caches must be 16")
        bs = p.block_size & 0xFFFFFFFF
        bs = bs - (1 << 32) if bs >= (1 << 31) else bs
        if dim(k, 3) != bs or dim(vs, 3) != bs:
            _fail("key", k, f"the block axis of NZ key/value caches must be block_size ({p.block_size})")
    aq = p.actual_seq_lengths if present(p.actual_seq_lengths) else None
    akv = p.actual_seq_lengths_kv if present(p.actual_seq_lengths_kv) else None
    if aq is None:
        _fail("actual_seq_lengths", None, "TND needs actual_seq_lengths")
    if akv is None:
        _fail("actual_seq_lengths_kv", None, "TND needs actual_seq_lengths_kv")
    nq, nkv = numel(aq.shape), numel(akv.shape)
    if nq == 0:
        _fail("actual_seq_lengths", aq.shape, "actual_seq_lengths must not be empty with TND")
    if nkv == 0:
        _fail("actual_seq_lengths_kv", akv.shape, "actual_seq_lengths_kv must not be empty with TND")
    if aq.data is not None and akv.data is not None:
        last_q = _at(aq.data, nq - 1)
        last_kv = _at(akv.data, nkv - 1)
        if dim(q, 0) < last_q:
            _fail("actual_seq_lengths", last_q, f"T of query ({dim(q, 0)}) must not be below the last length")
        if not paged and (dim(k, 0) < last_kv or dim(vs, 0) < last_kv):
            _fail("actual_seq_lengths_kv", last_kv, f"T of key/value ({dim(k, 0)}) must not be below the last length")
        if p.sparse_mode == 4:
            if p.pre_tokens < 0 and p.next_tokens < 0:
                _fail("pre_tokens", (p.pre_tokens, p.next_tokens), "pre_tokens and next_tokens must not both be "
                      "negative")
            if -p.next_tokens > p.pre_tokens:
                _fail("pre_tokens", (p.pre_tokens, p.next_tokens), "-next_tokens must not exceed pre_tokens")


def _at(vals, i: int) -> int:
    return int(vals[i]) if 0 <= i < len(vals) else 0


def _mask(p) -> None:
    sm = p.sparse_mode
    if sm not in (0, 3, 4):
        _fail("sparse_mode", sm, "split-fuse supports sparse_mode 0, 3 and 4")
    m = p.atten_mask if present(p.atten_mask) else None
    if m is None:
        if sm != 0:
            _fail("sparse_mode", sm, f"without atten_mask sparse_mode must be 0 (sparse_mode {sm} takes "
                  f"{expected_mask(sm)})")
        return
    if sm not in (3, 4):
        _fail("sparse_mode", sm, "with atten_mask sparse_mode must be 3 or 4")
    s = m.shape
    if len(s) not in (2, 3, 4):
        _fail("atten_mask", s, "atten_mask must have 2, 3 or 4 dims")
    for back, d in enumerate(reversed(s)):
        want = 2048 if back < 2 else 1
        if d != want:
            _fail("atten_mask", s, "the last two axes of atten_mask must be 2048 and the others 1")


def _single_para(p, paged: bool) -> None:
    q, k = p.query.shape, p.key.shape
    v = legacy_value(p).shape
    qd = dim(q, 2)
    if not paged:
        kd, vd = dim(k, 2), dim(v, 2)
    else:
        nkv = p.num_key_value_heads
        cache_bs = 0
        kd = vd = 0
        if len(k) == 3:
            kd, vd, cache_bs = _cdiv(dim(k, 2), nkv), _cdiv(dim(v, 2), nkv), dim(k, 1)
        elif len(k) == 5:
            kd, vd, cache_bs = dim(k, 2) * 16, dim(v, 2) * 16, dim(k, 3)
        if p.block_size != cache_bs:
            _fail("block_size", p.block_size, f"block_size must equal the block axis of the cache ({cache_bs})")
        if p.block_size % 16 != 0:
            _fail("block_size", p.block_size, "with TND and a paged cache block_size must be a multiple of 16")
        if p.block_size > 512:
            _fail("block_size", p.block_size, "with TND and a paged cache block_size must be <= 512")
    if qd != kd or qd != vd:
        _fail("value", v, f"split-fuse needs equal head dims for query, key and value ({qd}, {kd}, {vd})")
    if qd > 256:
        _fail("query", q, "split-fuse needs a head dim <= 256")
    sink = p.learnable_sink if present(p.learnable_sink) else None
    if sink is not None:
        if sink.dtype != p.query.dtype:
            _fail("learnable_sink", sink.dtype, "learnable_sink must have the query dtype")
        if sink.dtype not in ("float16", "bfloat16"):
            _fail("learnable_sink", sink.dtype, "learnable_sink must be fp16 or bf16")
        if len(sink.shape) != 1:
            _fail("learnable_sink", sink.shape, "learnable_sink must be 1-D")
        if sink.shape[0] != dim(q, 1):
            _fail("learnable_sink", sink.shape, f"learnable_sink must have N of query ({dim(q, 1)}) elements")
        if p.inner_precise in (1, 2, 3):
            _fail("inner_precise", p.inner_precise, "learnable_sink needs inner_precise 0")


def _lse(p) -> None:
    if not p.softmax_lse_flag:
        return
    lse = p.softmax_lse.shape if present(p.softmax_lse) else ()
    q = p.query.shape
    if len(lse) != 3:
        _fail("softmax_lse", lse, "with TND softmax_lse must have 3 dims")
    if lse[0] != dim(q, 0) or lse[1] != dim(q, 1) or lse[2] != 1:
        _fail("softmax_lse", lse, f"with TND softmax_lse must be [T, N, 1] = [{dim(q, 0)}, {dim(q, 1)}, 1]")
