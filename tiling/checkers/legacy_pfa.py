"""arch22 legacy route "PFA" (prompt flash attention tiling): the checks that can reject a call.

Model
-----
A call neither the new framework, the split-fuse tiling nor the IFA tiling takes goes to the legacy PFA
tiling. In order, each broken rule rejects the call (status 561002):

1. *Entry*: ``antiquant_mode`` must be 0; ``dequant_scale_query`` only with S of query <= 16 and with
   ``query_rope`` (and the PFA tiling then refuses it anyway, as it refuses ``query_quant_mode`` != 0);
   AIV:AIC must be 2:1; the mask dtype bool/int8/uint8; ``sparse_mode`` 9 is not supported.
2. *Key/value tensor list* (batch of query != batch of key, more than one key tensor, no block table):
   every tensor has batch 1, as many key and value tensors as the query batch, the same heads/head dim
   across the list and equal key/value S; an empty tensor only when all are empty. Lists and left padding
   exclude TND, each other and paged caches; a padding size is a 1-element 1-D list and needs the matching
   actual length list.
3. *softmax_lse* (when requested): TND/NTD_TND [T, N, 1], else [B, num_heads, S, 1].
4. *Head dim*: a multiple of 32 when query, key or attention_out is int8, else of 16.
5. *Sparse modes 20-22* take a separate basic-API tiling (accepted here). Otherwise: TND refuses int8
   query/key/value, int8 output and int8 key/value antiquant; a bf16 query with int8 key/value needs the
   key/value antiquant scales; key rank <= 5 and equal to value rank; BSH/TND/NTD_TND ranks 3 (BNSD/BSND/
   BNSD_BSND: query 4-D, key 4-D or paged 3/4-D, paged BSND 3-D only); head dims of query, key and value
   agree; no fp32 query or output; ``inner_precise`` 4 (approximate) is not supported on this chip; TND takes no ``pse_shift``; a
   paged call takes no int8 query and no tensor list; mask dtype rules (no fp32; bool/int8/uint8 with bf16
   or fp16 high precision; no fp16 with row-invalid correction, ``inner_precise`` bit 1); int8 query with
   fp16 output takes no post-quant inputs; a shared prefix needs both tensors, no list, no paged cache, no
   padding, not int8 query with int8 key/value, the key/value rank and equal non-empty shapes; TND rope
   tensors are non-empty; an int8 query needs non-empty ``dequant_scale1``, ``quant_scale1`` and
   ``dequant_scale2``.

6. *CheckShape*: a non-empty output needs a non-empty query; query rank 2-4; the layouts the PFA tiling
   knows (``PFA_LAYOUTS``); rope only with TND / NTD_TND. Then the *empty-tensor exit* (empty key, value or
   output: accepted, zero-filled, unless int8 is involved); nothing below applies to it.
7. After it: key/value dtype and rank consistency; the head ratio (a divisor, at most 64); TND / NTD_TND
   lengths, T, heads, head dims and a bf16 query (``_tnd``); elsewhere query batch = key batch (unpaged);
   sparse modes 1-4 need a mask; the sparse tokens (``_sparse_and_tokens``) and, for BSH / BSND / BNSD,
   their windows against S and against each batch's actual lengths (``_token_windows``); a paged block size
   is a multiple of 128 up to 1024; an fp16 query with int8 key/value needs an antiquant scale.

8. *Post-quant dtypes* (an int8 output): quant_scale2 bf16/fp16/fp32, quant_offset2 of its dtype, bf16 only with
   a bf16 query, fp16 only with an fp16 query.
9. *KV antiquant* (an int8 or int4 key/value under an fp16/bf16 query): an fp16 query on an int8 cache with the
   stacked parameters, or with the key's and the value's own and a query S above 16, takes the KvAntiquant path (per tensor: a (2,)
   scale; per channel: the stacked scale in the layout's (2, ...) shape or, paged, the key's and the value's
   (1, ...) ones with modes 0, BSH/BSND, inner_precise 1, sparse_mode 3 and no pse); otherwise the MSD path
   (a query S of at most 16; equal modes 0 or 1; no tensor list or left padding; both scales, offsets on both
   or neither; no int4; per channel (N, D), (N, 1, D) or (H,) bf16, per token (B, S) fp32). An int4 cache with
   the stacked parameters takes neither path and is not checked here.

Not mirrored (documented gap): the per-mode quant shapes of full quant, the pse shape rule,
the learnable-sink TND rule and the paged TND input rules; calls reaching them are accepted here. The
random-call comparison with the real op_host (``tiling.oracle``) counts what is left.
"""

from __future__ import annotations

from ..errors import AclnnStatus, ParamError
from ..info import present
from ..layouts import dim, numel
from .legacy import legacy_value

CHECKER = "legacy_pfa"


def _fail(param, value, rule):
    raise ParamError(param, value, rule, status=AclnnStatus.INNER_TILING_ERROR, checker=CHECKER)


def check(p, plat, dims) -> None:
    """Run the legacy PFA checks on ``p``; ``dims`` are the legacy entry's axes (B, N, S, D of query)."""
    _entry(p, plat, dims.qs)
    contiguous = _kv_list(p)
    _padding(p, contiguous)
    _lse(p, dims)
    d = dims.qd
    if "int8" in (p.query.dtype, p.key.dtype, p.attention_out.dtype) and d % 32 != 0:
        _fail("query", p.query.shape, f"with int8 involved the head dim ({d}) must be a multiple of 32")
    if d % 16 != 0:
        _fail("query", p.query.shape, f"the head dim ({d}) must be a multiple of 16")
    if p.sparse_mode in (20, 21, 22):
        return
    _tiling(p, contiguous)


def _entry(p, plat, qs: int) -> None:
    if p.antiquant_mode != 0:
        _fail("antiquant_mode", p.antiquant_mode, "the PFA route takes antiquant_mode 0 only")
    dsq = present(p.dequant_scale_query)
    if qs > 16 and dsq:
        _fail("dequant_scale_query", p.dequant_scale_query.shape, f"not supported with S of query ({qs}) > 16")
    if not present(p.query_rope) and dsq:
        _fail("dequant_scale_query", p.dequant_scale_query.shape, "needs query_rope")
    if plat.aiv != plat.aic and plat.aiv != 2 * plat.aic:
        _fail("platform", (plat.aic, plat.aiv), "the PFA route needs an AIV:AIC ratio of 1 or 2")
    if plat.aiv == plat.aic:
        _fail("platform", (plat.aic, plat.aiv), "the PFA route does not run on 1:1 cores")
    mask = p.atten_mask
    if present(mask) and mask.dtype not in ("bool", "int8", "uint8"):
        _fail("atten_mask", mask.dtype, "atten_mask must be bool, int8 or uint8")
    if dsq or p.query_quant_mode != 0:
        _fail("query_quant_mode", p.query_quant_mode, "the PFA route does not dequantise the query")
    if p.sparse_mode == 9:
        _fail("sparse_mode", 9, "the PFA route does not support the tree mask (sparse_mode 9)")


def _kv_list(p) -> bool:
    """Check a key/value tensor list; returns whether key/value are contiguous (not a list)."""
    layout = p.input_layout
    keys = p.key_list or (p.key,)
    values = p.value_list or (p.value,)
    bq, bk = (1, 1) if layout == "NSD" else (dim(p.query.shape, 0), dim(p.key.shape, 0))
    if bq == bk or len(keys) <= 1 or present(p.block_table):
        return True
    for name, ts in (("key", keys), ("value", values)):
        for t in ts:
            if dim(t.shape, 0) != 1:
                _fail(name, t.shape, "every tensor of a key/value list must have batch 1")
    if bq != len(keys) or len(keys) != len(values):
        _fail("key", len(keys), f"a key/value list needs one key and one value tensor per query batch ({bq})")
    kv_heads = p.num_key_value_heads or p.num_heads
    if layout == "BSH":
        fixed, s_axis = (2,), 1
    elif layout in ("BNSD", "BNSD_BSND"):
        fixed, s_axis = (1, 3), 2
    else:
        fixed, s_axis = (2, 3), 1
    if layout != "BSH" and dim(keys[0].shape, fixed[0]) != kv_heads:
        _fail("key", keys[0].shape, f"the list's kv heads must equal num_key_value_heads ({kv_heads})")
    empty, sum_k, sum_v = False, 0, 0
    for k, v in zip(keys, values):
        for ax in fixed:
            want = dim(keys[0].shape, ax)
            if dim(k.shape, ax) != want or dim(v.shape, ax) != want:
                _fail("key", k.shape, "heads and head dim must be the same across the key/value list")
        if dim(k.shape, s_axis) != dim(v.shape, s_axis):
            _fail("value", v.shape, "S of key and value must agree in every list entry")
        if dim(k.shape, s_axis) == 0:
            empty = True
        sum_k += dim(k.shape, s_axis)
        sum_v += dim(v.shape, s_axis)
    if empty and sum_k != 0 and sum_v != 0:
        _fail("key", [list(k.shape) for k in keys], "an empty tensor in a key/value list needs all empty")
    return False


def _padding(p, contiguous: bool) -> None:
    layout = p.input_layout
    qpad, kvpad = present(p.query_padding_size), present(p.kv_padding_size)
    if not contiguous and layout == "TND":
        _fail("key", len(p.key_list), "TND does not take a key/value tensor list")
    if (qpad or kvpad) and layout == "TND":
        _fail("query_padding_size" if qpad else "kv_padding_size", None, "TND does not take left padding")
    if not contiguous and (qpad or kvpad):
        _fail("query_padding_size" if qpad else "kv_padding_size", None, "a tensor list takes no left padding")
    for name, flag in (("query_padding_size", qpad), ("kv_padding_size", kvpad)):
        t = getattr(p, name)
        if flag and (numel(t.shape) != 1 or len(t.shape) != 1):
            _fail(name, t.shape, "a padding size is a 1-element 1-D tensor")
    if present(p.block_table) and (qpad or kvpad):
        _fail("block_table", p.block_table.shape, "a paged cache takes no left padding")
    if qpad and not present(p.actual_seq_lengths):
        _fail("actual_seq_lengths", None, "query left padding needs actual_seq_lengths")
    if kvpad and not present(p.actual_seq_lengths_kv):
        _fail("actual_seq_lengths_kv", None, "key/value left padding needs actual_seq_lengths_kv")


def _lse(p, dims) -> None:
    if not p.softmax_lse_flag:
        return
    lse = p.softmax_lse
    if lse is None:
        _fail("softmax_lse", None, "softmax_lse is requested but not given")
    s = tuple(lse.shape)
    if p.input_layout in ("TND", "NTD_TND"):
        if len(s) != 3:
            _fail("softmax_lse", s, "with TND softmax_lse must have 3 dims")
        if s != (dims.qs, dims.qn, 1):
            _fail("softmax_lse", s, f"with TND softmax_lse must be [{dims.qs}, {dims.qn}, 1]")
    else:
        if len(s) != 4:
            _fail("softmax_lse", s, "softmax_lse must have 4 dims")
        if s != (dims.b, p.num_heads, dims.qs, 1):
            _fail("softmax_lse", s, f"softmax_lse must be [{dims.b}, {p.num_heads}, {dims.qs}, 1]")


def _tiling(p, contiguous: bool) -> None:
    layout = p.input_layout
    qt, kt, vt, ot = p.query.dtype, p.key.dtype, legacy_value(p).dtype, p.attention_out.dtype
    paged = present(p.block_table)
    if layout == "TND":
        if qt == kt == vt == "int8":
            _fail("query", qt, "TND does not take int8 query/key/value")
        if ot == "int8":
            _fail("attention_out", ot, "TND does not take an int8 attention_out")
        if qt != "int8" and kt == "int8" and vt == "int8":
            _fail("key", kt, "TND does not take int8 key/value antiquant")
    has_kv_scales = present(p.key_antiquant_scale) or present(p.value_antiquant_scale)
    if not has_kv_scales and qt == "bfloat16" and kt == "int8":
        _fail("key_antiquant_scale", None, "a bf16 query with int8 key/value needs the key/value antiquant scales")
    _ranks(p, layout, paged)
    _head_dims(p, layout)
    if qt == "float32" or ot == "float32":
        _fail("query" if qt == "float32" else "attention_out", "float32", "the PFA route takes no fp32 query/output")
    precise = p.inner_precise
    row_invalid = (precise >> 1) & 1
    if precise != 4:
        precise = 1 if precise & 1 else 0
    if precise == 4:
        _fail("inner_precise", 4, "approximate computation (inner_precise 4) is not supported on this chip")
    if layout == "TND" and present(p.pse_shift):
        _fail("pse_shift", p.pse_shift.shape, "TND takes no pse_shift")
    if present(p.pse_shift) and qt == "float16" and precise == 1:
        precise = 0
    if paged:
        if qt == "int8":
            _fail("query", qt, "a paged call takes no int8 query")
        if not contiguous:
            _fail("key", len(p.key_list), "a paged call takes no key/value tensor list")
    _mask(p, qt, precise, row_invalid)
    if qt == "int8" and ot == "float16" and (present(p.quant_scale2) or present(p.quant_offset2)):
        _fail("quant_scale2", None, "an int8 query with fp16 output takes no post-quant inputs")
    _prefix(p, contiguous, paged)
    if layout in ("TND", "NTD_TND"):
        for name in ("query_rope", "key_rope"):
            t = getattr(p, name)
            if present(t) and numel(t.shape) == 0:
                _fail(name, t.shape, f"with {layout} {name} must not be empty")
    _shape(p, layout)
    if pfa_empty(p):
        # op_host's empty-tensor exit: the output is zero-filled and nothing below is checked
        if "int8" in (qt, kt, vt):
            _fail("query" if qt == "int8" else "key", "int8", "an empty query/key/value/output takes no int8 inputs")
        return
    if qt == "int8":
        for name in ("dequant_scale1", "quant_scale1", "dequant_scale2"):
            t = getattr(p, name)
            if not present(t):
                _fail(name, None, "an int8 query needs dequant_scale1, quant_scale1 and dequant_scale2")
            if numel(t.shape) == 0:
                _fail(name, t.shape, "must not be empty with an int8 query")
    check_after_empty(p, contiguous)


def _ranks(p, layout: str, paged: bool) -> None:
    v = legacy_value(p)
    qr, kr, vr = len(p.query.shape), len(p.key.shape), len(v.shape)
    if kr > 5:
        _fail("key", p.key.shape, "key must have at most 5 dims")
    if kr != vr:
        _fail("value", v.shape, f"value must have as many dims as key ({kr})")
    paged_special = paged and layout in ("TND", "NTD_TND") and kr in (4, 5)
    if paged_special or (paged and layout in ("TND", "NTD_TND") and kr == 3):
        if qr != 3:
            _fail("query", p.query.shape, f"with {layout} and a paged cache query must have 3 dims")
    elif layout in ("TND", "NTD_TND", "BSH") and (qr != 3 or kr != 3):
        _fail("query", p.query.shape, f"with {layout} query, key and value must have 3 dims")
    if layout in ("BNSD", "BSND", "BNSD_BSND"):
        if qr != 4:
            _fail("query", p.query.shape, f"with {layout} query must have 4 dims")
        if paged and layout == "BSND" and kr != 3:
            _fail("key", p.key.shape, "with BSND a paged key cache must have 3 dims (blocks, block size, H)")
        if paged and kr not in (3, 4):
            _fail("key", p.key.shape, f"with {layout} a paged key cache must have 3 or 4 dims")
        if not paged and kr != 4:
            _fail("key", p.key.shape, f"with {layout} key and value must have 4 dims")


def _head_dims(p, layout: str) -> None:
    if layout in ("TND", "NTD_TND", "SH", "NSD"):
        return
    q, k, v = p.query.shape, p.key.shape, legacy_value(p).shape
    n = n2 = 1
    if len(k) == 3:
        if p.num_heads == 0:
            _fail("num_heads", 0, "num_heads must not be 0")
        n = p.num_heads
        n2 = p.num_key_value_heads or n
    if layout == "BSH":
        qd, kd, vd = dim(q, 2) // n, dim(k, 2) // n2, dim(v, 2) // n2
    elif layout in ("BNSD", "BNSD_BSND", "BSND"):
        qd = dim(q, 3)
        kd, vd = (dim(k, 2) // n2, dim(v, 2) // n2) if len(k) == 3 else (dim(k, 3), dim(v, 3))
    else:
        return
    if not qd == kd == vd:
        _fail("key", k, f"head dims of query, key and value must agree ({qd}, {kd}, {vd})")


def _mask(p, qt: str, precise: int, row_invalid: int) -> None:
    mask = p.atten_mask
    if not present(mask):
        return
    mt = mask.dtype
    if mt == "float32":
        _fail("atten_mask", mt, "atten_mask must not be fp32")
    allowed = ("bool", "int8", "uint8")
    if qt == "float16" and precise == 0 and mt not in allowed:
        _fail("atten_mask", mt, "with an fp16 query in high precision atten_mask must be bool, int8 or uint8")
    if qt == "bfloat16" and mt not in allowed:
        _fail("atten_mask", mt, "with a bf16 query atten_mask must be bool, int8 or uint8")
    if mt == "float16" and row_invalid:
        _fail("atten_mask", mt, "an fp16 mask cannot be used with row-invalid correction (inner_precise 2/3)")


def _prefix(p, contiguous: bool, paged: bool) -> None:
    kp, vp = present(p.key_shared_prefix), present(p.value_shared_prefix)
    if kp != vp:
        _fail("value_shared_prefix" if kp else "key_shared_prefix", None,
              "key_shared_prefix and value_shared_prefix come together")
    if not kp:
        return
    if not contiguous:
        _fail("key_shared_prefix", None, "a shared prefix takes no key/value tensor list")
    if paged:
        _fail("key_shared_prefix", None, "a shared prefix takes no paged cache")
    if present(p.query_padding_size) or present(p.kv_padding_size):
        _fail("key_shared_prefix", None, "a shared prefix takes no left padding")
    if p.query.dtype == "int8" and p.key.dtype == "int8":
        _fail("key_shared_prefix", None, "a shared prefix is not supported with int8 query and key/value")
    ks, vs = p.key_shared_prefix.shape, p.value_shared_prefix.shape
    if len(ks) != len(p.key.shape) or len(ks) != len(vs):
        _fail("key_shared_prefix", ks, f"the shared prefix must have as many dims as key ({len(p.key.shape)})")
    for a, b in zip(ks, vs):
        if a == 0 or b == 0:
            _fail("key_shared_prefix", ks, "the shared prefix must not be empty")
        if a != b:
            _fail("value_shared_prefix", vs, f"must have the shape of key_shared_prefix ({list(ks)})")
    plen = p.actual_shared_prefix_len
    if not present(plen) or numel(plen.shape) == 0 or plen.data is None:
        return                                          # absent, empty, or a tiling sink: the prefix's S is used
    if len(plen.shape) != 1 or numel(plen.shape) != 1:
        _fail("actual_shared_prefix_len", list(plen.shape), "actual_shared_prefix_len must be a 1-element list")
    s_prefix = _prefix_s(p)
    length = int(plen.data[0]) & 0xFFFFFFFF             # read as uint32: a negative length is out of range
    if length > s_prefix:
        _fail("actual_shared_prefix_len", int(plen.data[0]), f"must be in [0, {s_prefix}] (S of the shared prefix)")


def _prefix_s(p) -> int:
    """S of the shared prefix (``prefixSeqInnerSize``; 0 without one)."""
    ks = p.key_shared_prefix.shape if present(p.key_shared_prefix) else ()
    s_axis = {"BNSD": 2, "NSD": 1, "SH": 0}.get(p.input_layout.split("_")[0], 1)
    return ks[s_axis] if len(ks) > s_axis else 0


def _prefix_len(p) -> int:
    """``actualSharedPrefixLen`` (after ``_prefix``'s checks): the given length, else S of the prefix."""
    plen = p.actual_shared_prefix_len
    if present(p.key_shared_prefix) and present(plen) and numel(plen.shape) > 0 and plen.data is not None:
        return int(plen.data[0]) & 0xFFFFFFFF
    return _prefix_s(p)


#: ``SetInputLayout`` of the PFA tiling: the input_layout values it knows (any other is refused).
PFA_LAYOUTS = ("", "SH", "BSH", "NSD", "BSND", "BNSD", "BNSD_BSND", "TND", "NTD_TND")


def pfa_empty(p) -> bool:
    """The PFA tiling's empty-tensor exit: key, value or attention_out has no element (a key/value list
    with an empty entry counts as empty)."""
    v = legacy_value(p)
    if numel(p.key.shape) == 0 or numel(v.shape) == 0 or numel(p.attention_out.shape) == 0:
        return True
    keys = p.key_list or (p.key,)
    return len(keys) > 1 and any(len(k.shape) > 1 and k.shape[1] == 0 for k in keys)


def _shape(p, layout: str) -> None:
    """``CheckShape``: a non-empty output needs a non-empty query, query rank 2-4, a layout the PFA tiling
    knows, rope tensors only with TND / NTD_TND."""
    if numel(p.attention_out.shape) != 0 and numel(p.query.shape) == 0:
        _fail("query", p.query.shape, "query is empty while attention_out is not")
    if not 2 <= len(p.query.shape) <= 4:
        _fail("query", p.query.shape, "query must have 2 to 4 dims")
    if layout not in PFA_LAYOUTS:
        _fail("input_layout", layout, "the PFA route takes input_layout " + ", ".join(x for x in PFA_LAYOUTS if x)
              + " only (without a D=512 rope shape)")
    if layout not in ("TND", "NTD_TND") and (present(p.query_rope) or present(p.key_rope)):
        _fail("query_rope" if present(p.query_rope) else "key_rope", None,
              "on the PFA route only TND / NTD_TND take query_rope / key_rope")


def check_after_empty(p, contiguous: bool) -> None:
    """The checks op_host runs after its empty-tensor exit (item 7 of the module docstring): key/value
    consistency, TND / batch shapes, masks for sparse 1-4, the paged block size, the antiquant scale and
    the head ratio."""
    v = legacy_value(p)
    if contiguous:
        if p.key.dtype != v.dtype:
            _fail("value", v.dtype, f"the dtype of value must equal the dtype of key ({p.key.dtype})")
        if len(p.key.shape) != len(v.shape):
            _fail("value", v.shape, f"value must have as many dims as key ({len(p.key.shape)})")
        if not 3 <= len(p.key.shape) <= 5:
            _fail("key", p.key.shape, "key must have 3 to 5 dims")
    nq, nkv = p.num_heads, p.num_key_value_heads
    paged = present(p.block_table)
    if p.input_layout in ("TND", "NTD_TND"):
        _tnd(p, p.input_layout, paged)
    elif contiguous and not paged and p.key.shape and p.query.shape and p.key.shape[0] != p.query.shape[0]:
        _fail("key", p.key.shape, f"the batch of key/value must equal the batch of query ({p.query.shape[0]})")
    if p.sparse_mode in (1, 2, 3, 4) and (not present(p.atten_mask) or numel(p.atten_mask.shape) == 0):
        _fail("atten_mask", None, f"sparse_mode {p.sparse_mode} needs a non-empty atten_mask")
    if paged and (p.block_size <= 0 or p.block_size % 128 or p.block_size > 1024):
        _fail("block_size", p.block_size, "with a paged cache the PFA route needs a multiple of 128, at most 1024")
    if p.input_layout not in ("TND", "NTD_TND"):
        _bsnd_shapes(p, contiguous, paged)
    else:
        mask_and_pse(p, 0, 0, 0)
    pre, nxt = _sparse_and_tokens(p)
    if p.input_layout not in ("TND", "NTD_TND"):
        _token_windows(p, contiguous, paged, pre, nxt)
    if (p.query.dtype == "float16" and p.key.dtype == "int8" and not present(p.key_antiquant_scale)
            and not present(p.value_antiquant_scale) and not present(p.antiquant_scale)):
        _fail("antiquant_scale", None, "an fp16 query with int8 key/value needs antiquant_scale")
    if nq < 0 or nkv < 0:
        _fail("num_heads" if nq < 0 else "num_key_value_heads", nq if nq < 0 else nkv, "must not be negative")
    if nkv and nq % nkv:
        _fail("num_key_value_heads", nkv, f"num_heads ({nq}) must be a multiple of num_key_value_heads")
    if nkv and nq // nkv > 64:
        _fail("num_key_value_heads", nkv, f"num_heads / num_key_value_heads ({nq // nkv}) must be at most 64")
    if p.attention_out.dtype == "int8" and present(p.quant_scale2):
        _post_quant_dtypes(p)
    if p.key.dtype in ("int8", "int4") and p.query.dtype in ("float16", "bfloat16") \
            and p.input_layout not in ("TND", "NTD_TND"):   # the TND branch (pfa_tnd) has rules of its own
        _kv_antiquant(p, contiguous)


def _post_quant_dtypes(p) -> None:
    """CheckPostQuantParams' dtype rules for an int8 output: the scale bf16, fp16 or fp32, the offset the scale's
    dtype, a bf16 scale only with a bf16 query and an fp16 one only with an fp16 query."""
    qs, qo, qt = p.quant_scale2, p.quant_offset2, p.query.dtype
    if qs.dtype not in ("bfloat16", "float16", "float32"):
        _fail("quant_scale2", qs.dtype, "quant_scale2 must be bf16, fp16 or fp32")
    if present(qo) and qo.dtype != qs.dtype:
        _fail("quant_offset2", qo.dtype, f"quant_offset2 must have quant_scale2's dtype ({qs.dtype})")
    for dt in ("bfloat16", "float16"):
        if qs.dtype == dt and qt != dt:
            _fail("quant_scale2", qs.dtype, f"a {dt} quant_scale2 needs a {dt} query (the query is {qt})")


#: the longest query S the MSD path takes (op_host's CVDIFF_SMALL_QS_THRESHOLDS; beyond it an fp16 query on an int8
#: cache with the key's and value's own parameters takes the KvAntiquant path: ``golden.antiquant.pfa_dequantises``)
MSD_MAX_QUERY_S = 16


def _query_s(p) -> int:
    return dim(p.query.shape, 2 if p.input_layout in ("BNSD", "BNSD_BSND") else 1)


def _head_dim(p) -> int:
    return dim(p.query.shape, 2) // max(p.num_heads, 1) if p.input_layout == "BSH" else dim(p.query.shape, 3)


def _kv_antiquant(p, contiguous: bool) -> None:
    """KV antiquant on this route (item 9 of the module docstring): op_host's path (KvAntiquant for an fp16
    query with the stacked antiquant_scale, or with the key's and the value's own parameters and a query S
    above 16; MSD for the key's and the value's own parameters otherwise), then that path's parameter rules."""
    separate = present(p.key_antiquant_scale) or present(p.value_antiquant_scale)
    s = _query_s(p)
    if p.key.dtype == "int4" and not separate:
        return   # neither path takes it (the KvAntiquant path is int8 only): op_host checks nothing here
    if p.key.dtype == "int8" and p.query.dtype == "float16" and (not separate or s > MSD_MAX_QUERY_S):
        _kv_antiquant_params(p)
        return
    if s > MSD_MAX_QUERY_S:
        _fail("query", p.query.shape, f"with the key/value antiquant scales (the MSD path) the query S ({s}) must "
                                      f"be at most {MSD_MAX_QUERY_S}")
    _msd_params(p, contiguous)


def _channel_shape(layout: str, first: int, n: int, d: int) -> tuple[int, ...]:
    """The per-channel parameter shape op_host demands for ``layout`` (CheckPerchannelAntiquantParamsShape)."""
    return {"BSH": (first, n * d), "BSND": (first, n, d)}.get(layout, (first, n, 1, d))


def _kv_antiquant_params(p) -> None:
    """The KvAntiquant path (CheckAntiquantParamsShape, CheckPAAntiquantSupportScenarios): a 1-D stacked
    scale is per tensor, (2,); otherwise per channel in the layout's shape, the stacked (2, ...) one, or with a
    paged cache the key's and the value's own (1, ...) ones with modes 0, an fp16 query, BSH/BSND,
    inner_precise 1, sparse_mode 3 with its mask and no pse."""
    nkv = p.num_key_value_heads or p.num_heads
    d = _head_dim(p)
    scale, offset = p.antiquant_scale, p.antiquant_offset
    if present(scale) and len(scale.shape) == 1:
        if scale.shape[0] != 2:
            _fail("antiquant_scale", scale.shape, "a per-tensor antiquant_scale must have 2 elements")
        if present(offset) and offset.shape[0] != 2:
            _fail("antiquant_offset", offset.shape, "a per-tensor antiquant_offset must have 2 elements")
        if present(p.block_table):
            _fail("antiquant_scale", scale.shape, "a paged cache takes per-channel antiquant parameters only")
        return
    layout = p.input_layout
    if present(p.block_table):
        if p.key_antiquant_mode != 0 or p.value_antiquant_mode != 0:
            _fail("key_antiquant_mode", (p.key_antiquant_mode, p.value_antiquant_mode),
                  "a paged cache on the KvAntiquant path takes per-channel (mode 0) key/value parameters")
        want = _channel_shape(layout, 1, nkv, d)
        pairs = (("key_antiquant_scale", "key_antiquant_offset"), ("value_antiquant_scale", "value_antiquant_offset"))
    else:
        want = _channel_shape(layout, 2, nkv, d)
        pairs = (("antiquant_scale", "antiquant_offset"),)
    for sname, oname in pairs:
        sc, of = getattr(p, sname), getattr(p, oname)
        if not present(sc):
            _fail(sname, None, f"the KvAntiquant path needs {sname} of shape {want}")
        for name, t in ((sname, sc), (oname, of)):
            if present(t) and tuple(t.shape) != want:
                _fail(name, t.shape, f"the per-channel {name} must have shape {want} with {layout}")
    if present(p.block_table):
        if layout not in ("BSH", "BSND"):
            _fail("input_layout", layout, "a paged cache with KV antiquant takes BSH or BSND")
        if p.inner_precise != 1:
            _fail("inner_precise", p.inner_precise, "a paged cache with KV antiquant takes inner_precise 1 only")
        if p.sparse_mode != 3 or not present(p.atten_mask) or numel(p.atten_mask.shape) == 0:
            _fail("sparse_mode", p.sparse_mode, "a paged cache with KV antiquant takes sparse_mode 3 with its mask")
        if present(p.pse_shift):
            _fail("pse_shift", p.pse_shift.shape, "a paged cache with KV antiquant takes no pse_shift")


def _msd_params(p, contiguous: bool) -> None:
    """The MSD path's rules (op_host's enableMsd block): equal key/value modes 0 or 1, no tensor list or left
    padding, both scales, offsets on both or neither; per token (B, S) fp32 tables (S the key's), per channel
    (N, D), (N, 1, D) or (H,) bf16 ones."""
    km, vm = p.key_antiquant_mode, p.value_antiquant_mode
    if km != vm or km not in (0, 1):
        _fail("key_antiquant_mode", (km, vm), "the MSD path takes equal key/value antiquant modes, 0 or 1")
    if p.key.dtype == "int4":
        _fail("key", "int4", "the MSD path (key/value antiquant scales) takes no int4 cache")
    if not contiguous:
        _fail("key", "tensor list", "the MSD path (key/value antiquant scales) takes no key/value tensor list")
    if present(p.query_padding_size) or present(p.kv_padding_size):
        _fail("kv_padding_size" if present(p.kv_padding_size) else "query_padding_size", None,
              "the MSD path (key/value antiquant scales) takes no left padding")
    ks, vs, ko, vo = p.key_antiquant_scale, p.value_antiquant_scale, p.key_antiquant_offset, p.value_antiquant_offset
    if not present(ks) or not present(vs):
        _fail("value_antiquant_scale" if present(ks) else "key_antiquant_scale", None,
              "the MSD path needs both key_antiquant_scale and value_antiquant_scale")
    if present(ko) != present(vo):
        _fail("value_antiquant_offset" if present(ko) else "key_antiquant_offset", None,
              "the MSD path takes both key/value antiquant offsets or neither")
    nkv = p.num_key_value_heads or p.num_heads
    d = _head_dim(p)
    tensors = (("key_antiquant_scale", ks), ("value_antiquant_scale", vs), ("key_antiquant_offset", ko),
               ("value_antiquant_offset", vo))
    if km == 1:
        key = p.key
        if present(p.block_table):
            s2 = dim(p.block_table.shape, 1) * p.block_size
        else:
            s2 = dim(key.shape, 2 if p.input_layout in ("BNSD", "BNSD_BSND") else 1)
        want = [(dim(key.shape, 0), s2)]
        dtype = "float32"
    else:
        want = [(nkv, d), (nkv, 1, d), (nkv * d,)]
        dtype = "bfloat16"
    rank = len(ks.shape)
    for name, t in tensors:
        if not present(t):
            continue
        if len(t.shape) != rank or tuple(t.shape) not in want:
            _fail(name, t.shape, f"the MSD path takes {'per-token' if km == 1 else 'per-channel'} parameters of "
                                 f"shape {' or '.join(str(w) for w in want)}, all of one rank")
        if t.dtype != dtype:
            _fail(name, t.dtype, f"the MSD path takes {dtype} {'per-token' if km == 1 else 'per-channel'} "
                                 "parameters")


def _tnd(p, layout: str, paged: bool) -> None:
    """``CheckInputShapeWhenLayoutIsTND`` and ``CheckActSeqWhenLayoutIsTND`` (TND and NTD_TND on the PFA
    route): both length lists with values, T of query (and of an unpaged key/value) equal to the last
    cumulative length, heads consistent (a paged (blocks, block size, H) cache has the attribute's heads),
    the head dim pairs (192, 192, 192|128) or equal 128 / 64 (with rope: 128 + rope 64; a paged cache's D read
    as op_host reads it, ``_paged_head_dim``), no value D 192 with G > 1 or NTD_TND, a bf16 query; then as many query as kv lengths, none negative, none decreasing (kv:
    unless paged); with a paged cache, the block rules of ``_tnd_block_table``."""
    lists = (("actual_seq_lengths", p.actual_seq_lengths), ("actual_seq_lengths_kv", p.actual_seq_lengths_kv))
    for name, t in lists:
        if not present(t):
            _fail(name, None, f"with {layout} {name} is required")
        if t.data is None:
            _fail(name, t.shape, f"with {layout} {name} must carry its values (no tiling sink)")
        if len(t.data) == 0:
            _fail(name, t.shape, f"with {layout} {name} must not be empty")
    t_axis, n_axis = (1, 0) if layout == "NTD_TND" else (0, 1)
    q, k, v = p.query.shape, p.key.shape, legacy_value(p).shape
    aq, akv = list(p.actual_seq_lengths.data), list(p.actual_seq_lengths_kv.data)
    if len(q) != 3:
        return                                # the rank rules above have refused it
    if q[t_axis] != aq[-1]:
        _fail("query", q, f"with {layout} T of query must equal the last actual_seq_lengths ({aq[-1]})")
    dims = None
    if paged:
        kn, vn = ((p.num_key_value_heads if len(t) == 3 else (t[1] if len(t) > 1 else 0)) for t in (k, v))
        _tnd_heads(p, layout, q[n_axis], kn, vn)
        if all(len(t) in (3, 4, 5) for t in (k, v)):
            dims = (q[2], _paged_head_dim(k, p.num_key_value_heads), _paged_head_dim(v, p.num_key_value_heads), kn)
    elif len(k) == 3 and len(v) == 3:
        if k[t_axis] != akv[-1] or v[t_axis] != akv[-1]:
            _fail("key", k, f"with {layout} T of key and value must equal the last actual_seq_lengths_kv ({akv[-1]})")
        _tnd_heads(p, layout, q[n_axis], k[n_axis], v[n_axis])
        dims = (q[2], k[2], v[2], k[n_axis])
    if dims is not None:
        qd, kd, vd, kn = dims
        g = q[n_axis] // kn
        if present(p.query_rope) or present(p.key_rope):
            if (qd, kd, vd) != (128, 128, 128):
                _fail("query", q, f"with {layout} and rope the head dims must be 128 (plus rope 64)")
        elif not ((qd == kd == 192 and vd in (192, 128)) or (qd == kd == vd and vd in (128, 64))):
            _fail("query", q, f"with {layout} the head dims (query {qd}, key {kd}, value {vd}) must be equal 128 or "
                              "64, or query and key 192 with value 192 or 128")
        if g != 1 and vd == 192:
            _fail("value", v, f"with {layout} and G {g} > 1 the value head dim must not be 192")
    if p.query.dtype != "bfloat16":
        _fail("query", p.query.dtype, f"with {layout} the PFA route takes a bf16 query only")
    if layout == "NTD_TND" and v and v[-1] == 192:
        _fail("value", v, "with NTD_TND the value head dim must be 128, not 192")
    if len(aq) != len(akv):
        _fail("actual_seq_lengths_kv", len(akv),
              f"with {layout} must have as many entries as actual_seq_lengths ({len(aq)})")
    if min(aq + akv) < 0:
        _fail("actual_seq_lengths", min(aq + akv), f"with {layout} lengths must not be negative")
    for name, vals in (("actual_seq_lengths", aq), ("actual_seq_lengths_kv", None if paged else akv)):
        if vals is not None and any(b < a for a, b in zip(vals, vals[1:])):
            _fail(name, vals, f"with {layout} the cumulative lengths must not decrease")
    if paged:
        _tnd_block_table(p, layout, len(aq), akv)


def _tnd_block_table(p, layout: str, b: int, akv: list) -> None:
    """``CheckPAWhenBaseApi`` (TND / NTD_TND with a paged cache; ``akv`` are per-batch lengths): the blocks
    the batches need (``ceil(kv / block_size)`` each) must not all be 0 (op_host fails without a log), and
    the block table is ``[B, >= the most blocks one batch needs]``."""
    if p.block_size <= 0:
        return                                 # the block size rule refuses it
    blocks = [-(-kv // p.block_size) for kv in akv]
    if sum(blocks) == 0:
        _fail("actual_seq_lengths_kv", akv, f"with {layout} and a paged cache some KV length must be positive")
    _tnd_cache_dims(p, layout)
    bt = p.block_table.shape
    if len(bt) == 2 and (bt[0] != b or bt[1] < max(blocks)):
        _fail("block_table", list(bt), f"with {layout} the block table must be [{b}, >= {max(blocks)}] (the most "
                                       f"blocks of {p.block_size} one batch's KV needs)")


def _tnd_cache_dims(p, layout: str) -> None:
    """``CheckPAKeyValueParams``: key and value caches of one rank (3, 4 or 5) and the same first two dims; BBH
    (blocks, block_size, H_kv), BNBD (blocks, N_kv, block_size, D) or NZ (blocks, N_kv, D/16, block_size, 16,
    its last two dims the value's too), with N_kv x the head ratio the query's heads."""
    k, v = tuple(p.key.shape), tuple(legacy_value(p).shape)
    n = p.num_heads
    ratio = n // (p.num_key_value_heads or n) or 1
    d = dim(p.query.shape, 2)
    if len(k) != len(v) or len(k) not in (3, 4, 5) or k[:2] != v[:2]:
        _fail("value", v, f"with {layout} and a paged cache key {k} and value must be of one rank 3-5, their first "
                          "two dims equal")
    if len(k) == 3:
        ok = k[1] == p.block_size and k[2] * ratio == n * d
    elif len(k) == 4:
        ok = k[1] * ratio == n and k[2] == p.block_size and k[3] == d
    else:
        ok = k[3:] == v[3:] and k[4] != 0 and k[1] * ratio == n and k[3] == p.block_size and k[2] * 16 == d
    if not ok:
        want = {3: f"(blocks, {p.block_size}, {n // ratio * d})", 4: f"(blocks, {n // ratio}, {p.block_size}, {d})",
                5: f"(blocks, {n // ratio}, {d // 16}, {p.block_size}, 16)"}[len(k)]
        _fail("key", k, f"with {layout} and a paged cache the key must be {want}")


def _paged_head_dim(t, n_kv: int) -> int:
    """``GetDFromInputShape`` of a paged cache: NZ (blocks, N, D/16, block size, 16), BBH (blocks, block size,
    H = N * D) with N the num_key_value_heads attribute, BNBD (blocks, N, block size, D)."""
    if len(t) == 5:
        return t[4] * t[2]
    return t[2] // n_kv if len(t) == 3 else t[3]


def _tnd_heads(p, layout: str, qn: int, kn: int, vn: int) -> None:
    if kn != vn:
        _fail("value", vn, f"with {layout} key and value must have the same heads ({kn})")
    if qn != p.num_heads:
        _fail("num_heads", p.num_heads, f"with {layout} must equal the heads of query ({qn})")
    if kn == 0:
        _fail("num_key_value_heads", kn, f"with {layout} the key/value heads must not be 0")
    if qn % kn:
        _fail("key", kn, f"with {layout} the heads of query ({qn}) must be a multiple of key's ({kn})")


_SPARSE_2048 = 2048


def _q_kv_dims(p, paged: bool) -> tuple[int, int, int] | None:
    """(B, S of query, S of key/value) as the PFA tiling reads them for BSH / BSND / BNSD(_BSND); S of a
    paged cache is the block table's width times the block size. None where the ranks do not fit."""
    q, k = p.query.shape, p.key.shape
    lay = p.input_layout
    if lay == "BSH" and len(q) == 3:
        b, s = q[0], q[1]
    elif lay == "BSND" and len(q) == 4:
        b, s = q[0], q[1]
    elif lay in ("BNSD", "BNSD_BSND") and len(q) == 4:
        b, s = q[0], q[2]
    else:
        return None
    if paged:
        bt = p.block_table.shape
        return b, s, (bt[1] if len(bt) > 1 else 0) * max(p.block_size, 0)
    if lay in ("BSH", "BSND") and len(k) >= 2:
        return b, s, k[1]
    if len(k) >= 3:
        return b, s, k[2]
    return None


def _bsnd_shapes(p, contiguous: bool, paged: bool) -> None:
    """After the batch check, for the non-TND layouts: the length lists (``CheckActualSeqLength``: one entry
    or at least B, values in [0, S]), the mask shape (``CheckAttenMaskShape``: covering S1 x S2 for sparse
    0/2, the 2048 x 2048 template for 1/3/4) and the pse shift (``CheckPseShiftTypeAndShape``)."""
    dims = _q_kv_dims(p, paged)
    if dims is None:
        return
    b, s, s_kv = dims
    _heads_in_shapes(p, paged)
    for name, cap in (("actual_seq_lengths", s), ("actual_seq_lengths_kv", s_kv)):
        t = getattr(p, name)
        if not present(t) or not t.data:
            continue
        if 1 < len(t.data) < b:
            _fail(name, len(t.data), f"must have 1 or at least B ({b}) entries")
        for i, x in enumerate(t.data[:b]):
            if x < 0 or (x > cap and (name == "actual_seq_lengths" or (contiguous and not paged))):
                _fail(name, x, f"entry {i} must be in [0, {cap}]")
    mask_and_pse(p, b, s, s_kv)


def mask_and_pse(p, b: int, s: int, s_kv: int) -> None:
    """``CheckAttenMaskShape`` and ``CheckPseShiftTypeAndShape`` against B, S of query and S of key/value
    (TND / NTD_TND pass 0, 0, 0 there: only the batch-1 and heads rules bite)."""
    mask = p.atten_mask
    if present(mask) and numel(mask.shape) and not present(p.key_shared_prefix):
        ms, sp = mask.shape, p.sparse_mode
        if len(ms) not in (2, 3, 4):
            _fail("atten_mask", ms, "atten_mask must have 2, 3 or 4 dims")
        mb = 1 if len(ms) == 2 else ms[0]
        if sp in (0, 2) and not (ms[-2] >= s and ms[-1] >= s_kv and mb in (1, b)):
            _fail("atten_mask", ms, f"atten_mask must be [1 or {b}, ..., >= {s}, >= {s_kv}]")
        if sp in (1, 3, 4) and not (tuple(ms[-2:]) == (_SPARSE_2048, _SPARSE_2048) and mb == 1
                                    and (len(ms) < 4 or ms[1] == 1)):
            _fail("atten_mask", ms, f"sparse_mode {sp} takes the (1, 1,) 2048 x 2048 template")
    pse = p.pse_shift
    if present(pse):
        want = {"float16": "float16", "bfloat16": "bfloat16", "int8": "float16"}.get(p.query.dtype)
        if want and pse.dtype != want:
            _fail("pse_shift", pse.dtype, f"with a {p.query.dtype} query pse_shift must be {want}")
        if numel(pse.shape):
            ps = pse.shape
            if len(ps) != 4:
                _fail("pse_shift", ps, "pse_shift must have 4 dims")
            if ps[0] not in (1, b) or ps[1] != p.num_heads or ps[2] < s or ps[3] < s_kv:
                _fail("pse_shift", ps, f"pse_shift must be [1 or {b}, {p.num_heads}, >= {s}, >= {s_kv}]")


def _sparse_and_tokens(p) -> tuple[int, int]:
    """The sparse-mode range (0-4; TND / NTD_TND take 0, 3, 4, no mask with 0, value D 64 or 128 with 4) and
    the token rules on the tokens the mode implies (band: not both negative; the next-token line above the
    pre-token line); returns those tokens (op_host's ``sparsePreTokens`` / ``sparseNextTokens``)."""
    sp = p.sparse_mode
    if sp not in (0, 1, 2, 3, 4):
        _fail("sparse_mode", sp, "the PFA route takes sparse_mode 0-4")
    has_mask = present(p.atten_mask) and numel(p.atten_mask.shape) > 0
    if p.input_layout in ("TND", "NTD_TND") and has_mask and sp in (1, 2):
        _fail("sparse_mode", sp, f"with {p.input_layout} the PFA route takes sparse_mode 0, 3 or 4")
    if p.input_layout in ("TND", "NTD_TND") and present(p.atten_mask) and sp == 0:     # even an empty one
        _fail("atten_mask", list(p.atten_mask.shape), f"with {p.input_layout} and sparse_mode 0 the PFA route "
                                                      "takes no attention mask, not even an empty one")
    if p.input_layout in ("TND", "NTD_TND") and sp == 4 and legacy_value(p).shape and \
            legacy_value(p).shape[-1] not in (64, 128):
        _fail("value", list(legacy_value(p).shape), f"with {p.input_layout} and sparse_mode 4 the value head dim "
                                                    "must be 64 or 128")
    big = 2147483647
    pre, nxt = p.pre_tokens, p.next_tokens
    if sp == 4 and pre < 0 and nxt < 0:
        _fail("pre_tokens", pre, "band mode takes no negative pre_tokens and next_tokens together")
    if has_mask:
        pre, nxt = {1: (big, big), 2: (big, 0), 3: (big, nxt)}.get(sp, (pre, nxt))   # all / left-up / right-down
    elif sp == 0:
        pre, nxt = big, big
    if sp == 0 and (present(p.query_padding_size) or present(p.kv_padding_size)):
        pre, nxt = big, big
    if pre < 0 and nxt < 0:
        _fail("pre_tokens", pre, f"pre_tokens and next_tokens ({nxt}) must not both be negative")
    if -nxt > pre:
        _fail("next_tokens", nxt, f"the next-token line must lie above the pre-token line (pre_tokens {pre})")
    return pre, nxt


def _token_windows(p, contiguous: bool, paged: bool, pre: int, nxt: int) -> None:
    """The token windows ``RunBigKernelTilingWithParams`` checks against the lengths (BSH / BSND / BNSD, the
    tokens of ``_sparse_and_tokens``; ``prefix`` is ``actualSharedPrefixLen``): with sparse 0, |next| < S of
    query and |pre| < S of key/value + prefix for a negative token; band mode (4) with an int8 output takes no
    negative token; then per batch (``_batch_windows``)."""
    dims = _q_kv_dims(p, paged)
    if dims is None:
        return
    b, s, s_kv = dims
    if not contiguous:
        s_kv = max((_list_s(p, i) for i in range(len(p.key_list))), default=0)
    prefix = _prefix_len(p)
    sp = p.sparse_mode
    if sp == 0 and nxt < 0 and -nxt >= s:
        _fail("next_tokens", nxt, f"with sparse_mode 0 |next_tokens| must be smaller than S of query ({s})")
    if sp == 0 and pre < 0 and -pre >= s_kv + prefix:
        _fail("pre_tokens", pre, f"with sparse_mode 0 |pre_tokens| must be smaller than S of key/value ({s_kv}) "
                                 f"plus the shared prefix ({prefix})")
    if sp == 4 and p.attention_out.dtype == "int8" and (pre < 0 or nxt < 0):
        _fail("pre_tokens" if pre < 0 else "next_tokens", pre if pre < 0 else nxt,
              "band mode with an int8 output takes no negative pre_tokens or next_tokens")
    for i in range(b):
        _batch_windows(p, i, _actual(p.actual_seq_lengths, i, s),
                       _actual(p.actual_seq_lengths_kv, i, s_kv if contiguous else _list_s(p, i)), s, prefix, pre, nxt)


def _batch_windows(p, i: int, q: int, kv: int, s: int, prefix: int, pre: int, nxt: int) -> None:
    """The per-batch windows of ``RunBigKernelTilingWithParams`` (batch ``i``, actual lengths ``q`` / ``kv``):
    sparse 0: |next| < q (when q is not S) and |pre| < kv + prefix for a negative token; an int8 output with a
    non-empty ``quant_offset2`` needs every query row to see a key (the batch's tokens, right-down causal
    next = kv + prefix - q, band both shifted by kv + prefix - q); band: |next| < kv + prefix and |pre| < q."""
    sp = p.sparse_mode
    if sp == 0 and q != s and nxt < 0 and -nxt >= q:
        _fail("next_tokens", nxt, f"with sparse_mode 0 |next_tokens| must be smaller than the query's actual "
                                  f"length of batch {i} ({q})")
    if sp == 0 and pre < 0 and -pre >= kv + prefix:
        _fail("pre_tokens", pre, f"with sparse_mode 0 |pre_tokens| must be smaller than the key/value's actual "
                                 f"length of batch {i} ({kv}) plus the shared prefix ({prefix})")
    shift = kv + prefix - q
    bpre, bnxt = {3: (2147483647, shift), 4: (pre - shift, nxt + shift)}.get(sp, (pre, nxt))
    quant_offset = present(p.quant_offset2) and numel(p.quant_offset2.shape) > 0
    if p.attention_out.dtype == "int8" and quant_offset and (bpre + shift < 0 or bnxt < 0):
        _fail("quant_offset2", list(p.quant_offset2.shape), f"an int8 output with quant_offset2 needs every query "
                                                           f"row of batch {i} to see a key (sparse_mode {sp})")
    if sp == 4 and nxt < 0 and -nxt >= kv + prefix:
        _fail("next_tokens", nxt, f"in band mode |next_tokens| must be smaller than the key/value's actual length "
                                  f"of batch {i} ({kv}) plus the shared prefix ({prefix})")
    if sp == 4 and pre < 0 and -pre >= q:
        _fail("pre_tokens", pre, f"in band mode |pre_tokens| must be smaller than the query's actual length of "
                                 f"batch {i} ({q})")


def _actual(t, i: int, default: int) -> int:
    """Entry ``i`` of an actual-length list as the PFA tiling reads it: one entry for every batch, the default
    (S) when the list is absent or has no values."""
    if not present(t) or not t.data:
        return default
    return int(t.data[i] if len(t.data) > 1 else t.data[0]) & 0xFFFFFFFF


def _list_s(p, i: int) -> int:
    """S of key tensor ``i`` of a key/value list (axis 1 for BSH / BSND, else 2)."""
    return dim(p.key_list[i].shape, 1 if p.input_layout in ("BSH", "BSND") else 2)


def _heads_in_shapes(p, paged: bool) -> None:
    """``CheckInputDimAndHeadNum``: at most 256 query heads; unpaged BNSD / BSND take 4-D query, key and value
    whose heads axis equals num_heads / num_key_value_heads (0 meaning num_heads)."""
    nq = p.num_heads
    nkv = p.num_key_value_heads or nq
    if nq > 256:
        _fail("num_heads", nq, "the PFA route takes at most 256 query heads")
    if paged or p.input_layout not in ("BNSD", "BNSD_BSND", "BSND"):
        return
    v = legacy_value(p)
    if not (len(p.query.shape) == len(p.key.shape) == len(v.shape) == 4):
        _fail("query", p.query.shape, f"with {p.input_layout} query, key and value must have 4 dims")
    ax = 2 if p.input_layout == "BSND" else 1
    if p.query.shape[ax] != nq:
        _fail("num_heads", nq, f"must equal the heads in the query shape ({p.query.shape[ax]})")
    if p.key.shape[ax] != nkv or v.shape[ax] != nkv:
        _fail("num_key_value_heads", p.num_key_value_heads,
              f"must equal the heads in the key/value shapes ({p.key.shape[ax]}, {v.shape[ax]})")
