"""FusedInferAttentionScore golden: float64 reference written from the documented semantics.

Model
-----
``fia_golden`` takes the torch_npu ``npu_fused_infer_attention_score`` keywords
and returns ``(attention_out, softmax_lse)`` as float64 arrays: the output in
the operator's output layout (value head dim Dv), the lse as ``(B, N, S1, 1)``
(``(T, N, 1)`` for TND/NTD) or ``None`` when ``softmax_lse_flag`` is False.

    out[b, h, i] = softmax_j(scale · q[b,h,i]·k[b,n2,j] + pse[b,h,i,j], visible pairs, sink[h]) · v[b,n2,j]

with ``n2 = h // (num_heads // num_key_value_heads)`` (GQA/MQA), the visible
pairs from :mod:`.masks`, the rows/kv ranges from :mod:`.batches` and the kv
from :mod:`.kv` (dense, tensor list, token layout, paged, shared prefix).

Semantics decisions (with their sources)
----------------------------------------
* Rows that are not computed — beyond a batch's ``actual_seq_lengths``, outside
  a left-padded block, or beyond the last cumulative length in TND — are 0 in
  the output. Source: the kernel zero-initialises the output
  (``InitOutputSingleCore``, ``fia_kernel_nonquant.h``; for TND it skips that
  init when no invalid row is possible, so those rows are left unwritten on the
  chip and cvtile defines them as 0).
* Fully masked rows (no visible key) give output 0 for every
  ``inner_precise``. The operator guarantees that only with the invalid-row
  correction (inner_precise 2/3, auto-enabled e.g. for sparse 3 with S1 > S2);
  with 0/1 it masks with the finite -1e12 (bool masks), so such a row becomes a
  uniform average of V (the aclnn doc warns the result "may lose precision";
  vllm-omni PR #7324 reports garbage). cvtile promises 0 throughout.
* lse of a fully masked row is ``+inf``: ``AdjustSoftMaxRes(..., FLOAT_INF)`` in
  ``fia_block_vec_nonquant.h`` and ``lse_default_value = np.inf`` in the upstream
  st golden. A learnable sink does not rescue such a row (the kernel keeps the
  -inf row max, ``UpdateRowMaxWithSink``).
* lse of a row with no kv (a batch with kv length 0, or an uncomputed row) is
  the value the kernel initialises the lse tensor with: ``+inf`` (FLOAT_INF
  3e+99 cast to fp32) on the FIA paths; ``-3.4e38`` (FLOAT_MIN, "for IFA
  compatibility") on the legacy decode route (layout BSH/BSND/BNSD, S1 == 1,
  D == Dv, no rope; ``GetLegacyIfaFlag``) — the IFA kernel's
  ``InitAllZeroOutput`` writes the same. The TND paged path's
  ``InitOutWhenZero`` epilogue also writes ``+inf``. (vllm-ascend treats an empty
  chunk's lse as -inf; the upstream flash_attn compare maps +inf to -inf
  before comparing. Both are merge-equivalent: exp(lse - M) = 0.)
* An empty key/value tensor (shapeSize 0) gives zeros and lse ``+inf``
  everywhere (aclnn doc "empty tensor": "lse ... returns all inf";
  ``FiaKernelEmptyTensor`` writes FLOAT_INF), on every route.
* A batch with kv length 0 but a shared prefix attends the prefix alone (the
  IFA kernel computes the prefix part and a zero user part and merges them by
  lse; the upstream st golden skips such a batch instead, i.e. outputs 0 — the
  one place where the two disagree).
* Sparse modes, masks and pse: see :mod:`.masks` and :mod:`.pse` (modes 0-4,
  the compressed 2048x2048 template for 2/3/4, sparse_mode ignored on the
  legacy decode route as the aclnn doc states). A call with no query rows
  returns its empty outputs without judging the mask attributes, as op_host's
  empty-output path does.
* ``inner_precise`` 0-4 (op_host's range): every mode computes the float64
  result; 4 is high precision without the invalid-row correction bit.

Scope: post-quant (int8 output) is applied as the chip rounds it (:mod:`.quant`);
an int8 or int4 KV cache with its antiquant parameters (modes 0-5, :mod:`.antiquant`; an int4
cache as int4 or as op_api's int32 packing, :mod:`.int4`; on arch35 also an FP8 E4M3 cache, a HiFloat8 one —
uint8 codes with ``key_dtype`` / ``value_dtype`` "hifloat8", as FIA V2 takes it, :mod:`.hifloat8` — and an FP4
E2M1 one with per-token-group E8M0 scales, mode 6) is dequantised exactly in float64, with P
unrounded (A2/A3's decode: the chip's MSD split keeps P to ~1e-7), or for an arch35 ``target`` (Ascend950's
dequant kernel) and on A2/A3's PromptFlashAttention route when it takes its KvAntiquant path (a query S above 1,
``antiquant.pfa_dequantises``) with each dequant step rounded to the query's dtype and P rounded as ``p_dtype``
says (with a shared
prefix, per-token parameters of the prefix's positions are the table's first; the own KV's follow them on
A2/A3 and start S' - S of key into the table on arch35, as each chip reads them); the split rope (``query_rope`` / ``key_rope``) joins
each head's rope values to its D, one dot product over D + D_rope (:mod:`.rope`); the query's dequant
scale raises ``UnsupportedParameterError`` (a ``NotImplementedError``) naming the parameter. Full int8
quantisation (``dequant_scale1``, ``quant_scale1``, ``dequant_scale2``) is :mod:`.fullquant`'s float64
formula.

Invariants
----------
* Float64 unless ``work_dtype`` says otherwise: inputs convert exactly; only the chunk being computed is
  converted, so memory stays bounded for multi-GB KV caches.
* ``p_dtype`` (or :func:`fia_golden_lowp`) rounds P to the input dtype before
  P·V, to separate algorithmic error from the chip's precision loss.
* :func:`fia_golden_st` is the upstream st executor's golden and its judgement (fp32 throughout, or a
  float64 golden with an online-softmax benchmark for TND); the only golden that is not float64.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any

import numpy as np

from ..errors import UnsupportedParameterError
from .attend import attend
from .online import KV_BLOCK, attend_online
from .batches import BatchPlan, padding_value, plan_batch_layout, plan_token_layout
from .dtypes import canonical_dtype, round_to, to_f64, to_numpy
from .kv import DenseKV, ListKV, PagedKV, SharedPrefix, TokenKV
from .layouts import from_bnsd, from_tnd, parse_layout, to_bnsd, to_tnd
from .masks import MaskEngine
from .pse import PseShift, sink_logits
from .antiquant import QUANTISED_CACHES, antiquant_spec, chip_seq_stride, pfa_dequantises
from .hifloat8 import HIFLOAT8, hifloat8_marker
from .int4 import int4_kv
from .nz import antiquant_nz_fraction, from_nz, group_scale_stride
from .fullquant import FULLQUANT_SCALES, attend_fullquant, dequant_value
from .quant import post_quant_int8
from .rope import join_rope

__all__ = ["fia_golden", "fia_golden_lowp", "fia_golden_st", "FIA_TND_STANDARD", "LSE_EMPTY",
           "LSE_EMPTY_LEGACY_DECODE", "CHUNK_ELEMENTS", "is_legacy_decode", "empty_row_lse", "query_s"]

#: lse of rows without any kv / not computed, FIA routes (kernel init value FLOAT_INF).
LSE_EMPTY = float("inf")
#: lse of rows without any kv on the legacy decode (IFA) route: fp32(-3.4e38).
LSE_EMPTY_LEGACY_DECODE = float(np.float32(-3.4e38))
#: The largest ``inner_precise`` the operator accepts (op_host's common check: [0, 4]). 4 reads as high
#: precision without the invalid-row correction (bit 0 clear, bit 1 clear); only 1 selects fp16 intermediates.
INNER_PRECISE_LIMIT = 4
#: Largest float64 score block computed at once (elements).
CHUNK_ELEMENTS = 1 << 23
#: Calls whose largest batch has fewer query rows (x GQA group) run BLAS single-threaded.
SMALL_GEMM_ROWS = 256

_QUANT_PARAMS = ("key_rope_antiquant_scale", "dequant_scale_query")


def _blas_threads(limit):
    """``threadpool_limits(limit, "blas")``, or a no-op context for ``None``."""
    if limit is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=limit, user_api="blas")


def _arch(target: str | None) -> str:
    """The arch (``Platform.arch``) of ``target``; None: the default target."""
    from ...tiling.platform import DEFAULT_TARGET, get_platform
    return get_platform(target or DEFAULT_TARGET).arch


def query_s(query, qkv_layout: str) -> int:
    """The S axis of a BSH / BSND / BNSD query."""
    shape = np.shape(to_numpy(query))
    return int(shape[2] if qkv_layout == "BNSD" else shape[1])


def is_legacy_decode(layout_name: str, s1: int, d: int, dv: int, target: str | None = None) -> bool:
    """The route op_host marks ``isLegacyIfa``: BSH/BSND/BNSD, S1 == 1, D == Dv (no rope), on an arch22
    (Atlas A2/A3) ``target`` (None: the default target); arch35 has no legacy decode class."""
    if _arch(target) != "arch22":
        return False
    return layout_name in ("BSH", "BSND", "BNSD") and s1 == 1 and d == dv


def empty_row_lse(*, legacy_decode: bool, kv_empty: bool) -> float:
    """The lse of a row that sees no kv: the one definition the kernel launch, the API's empty-route outputs and
    this golden share. ``LSE_EMPTY`` (+inf, the FIA kernels' init value) except on the arch22 legacy decode
    route, whose kernel initialises to ``LSE_EMPTY_LEGACY_DECODE``; an empty key/value tensor is the
    empty-tensor template's business on every route, which writes +inf."""
    return LSE_EMPTY_LEGACY_DECODE if legacy_decode and not kv_empty else LSE_EMPTY


def _reject_out_of_scope(extra: dict):
    for name in _QUANT_PARAMS:
        if extra.get(name) is not None:
            raise UnsupportedParameterError(name, extra[name], "quantisation is outside the float golden's scope")
    unknown = set(extra) - set(_QUANT_PARAMS) - {"query_quant_mode"}
    if unknown:
        raise TypeError(f"fia_golden: unexpected keyword(s) {sorted(unknown)}")


def _check_float(x, name: str, antiquant: bool = False, cache: str | None = None):
    kind = canonical_dtype(to_numpy(x).dtype)
    if antiquant and (kind in QUANTISED_CACHES or (cache == HIFLOAT8 and kind == "uint8")):
        return   # (also full quant's int8 query, key and value)
    if kind not in ("float16", "bfloat16", "float32", "float64"):
        reason = "an int8/int4 KV cache needs its antiquant scale (antiquant_scale or key_/value_antiquant_scale)" \
            if name in ("key", "value") else "not a float tensor"
        raise UnsupportedParameterError(name, f"{kind} tensor {tuple(np.shape(to_numpy(x)))}",
                                        f"{reason}; outside the float golden's scope")


def _cache_marker(key_dtype, value_dtype, key, value) -> str | None:
    """"hifloat8" when ``key_dtype`` and ``value_dtype`` both name HiFloat8 (uint8 key/value arrays of its
    codes), None when neither is given; anything else raises naming the keyword."""
    if key_dtype is None and value_dtype is None:
        return None
    for name, dtype, x in (("key_dtype", key_dtype, key), ("value_dtype", value_dtype, value)):
        if not hifloat8_marker(dtype):
            raise UnsupportedParameterError(name, dtype, "the golden takes key_dtype and value_dtype hifloat8 "
                                            "together (uint8 key/value of HiF8 codes), or neither")
        if isinstance(x, list) or canonical_dtype(to_numpy(x).dtype) != "uint8":
            raise UnsupportedParameterError(name, dtype, "hifloat8 marks a uint8 key/value array of HiF8 codes")
    return HIFLOAT8


def _kv_list(x):
    """Unwrap a 1-element tensor list; keep longer lists as lists."""
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            raise ValueError("key/value: empty tensor list")
        return x[0] if len(x) == 1 else list(x)
    return x


def _total_size(x) -> int:
    if isinstance(x, list):
        return sum(int(np.prod(np.shape(to_numpy(t)))) for t in x)
    return int(np.prod(np.shape(to_numpy(x))))


def fia_golden(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
               actual_seq_lengths_kv=None, block_table=None, query_padding_size=None, kv_padding_size=None,
               key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None,
               learnable_sink=None, num_heads: int = 1, scale: float = 1.0, pre_tokens: int = 2147483647,
               next_tokens: int = 2147483647, input_layout: str = "BSH", num_key_value_heads: int = 0,
               sparse_mode: int = 0, inner_precise: int = 0, block_size: int = 0, softmax_lse_flag: bool = False,
               p_dtype: Any = None, target: str | None = None, score_hook=None, work_dtype: Any = None,
               kv_block: int | None = None,
               quant_scale2=None, quant_offset2=None, empty_rows_quantised: bool = False, antiquant_scale=None,
               antiquant_offset=None, key_antiquant_scale=None, key_antiquant_offset=None, value_antiquant_scale=None,
               value_antiquant_offset=None, antiquant_mode: int = 0, key_antiquant_mode: int = 0,
               value_antiquant_mode: int = 0, query_rope=None, key_rope=None, dequant_scale1=None, quant_scale1=None,
               dequant_scale2=None, key_dtype=None, value_dtype=None, _attend=None, **out_of_scope):
    """Float64 FusedInferAttentionScore; returns ``(out, lse)`` (``lse`` None unless ``softmax_lse_flag``).

    Keywords follow ``torch_npu.npu_fused_infer_attention_score`` (plus the v2
    ``learnable_sink``). ``quant_scale2`` / ``quant_offset2`` post-quantise the
    output to int8 (:mod:`.quant`); an int8 or int4 (on arch35 also FP8, HiF8 or FP4) key/value with its
    antiquant scale (and offset) is
    dequantised exactly, ``(x + offset) · scale`` (:mod:`.antiquant`), and P is then never rounded (``p_dtype``
    is ignored: the A2/A3 chip splits the fp32 P into int8 or int4 digits instead of rounding it; on arch35 see
    ``target`` below); ``key_dtype`` / ``value_dtype`` (FIA V2's overrides) "hifloat8" or torch_npu.hifloat8
    (290), both, mark uint8 key/value as HiFloat8 codes (:mod:`.hifloat8`, an antiquant cache); ``query_rope`` /
    ``key_rope`` join the scores' dot product (:mod:`.rope`); the other quantisation keywords are accepted only
    to raise ``UnsupportedParameterError`` when given. Rows of a batch without KV stay 0
    in a post-quantised output, as the FIA framework's output init leaves them; ``empty_rows_quantised``
    gives them ``quant(offset)`` instead, what the legacy IFATiling kernel writes (``InitAllZeroInt8Output``). ``p_dtype`` rounds P
    before P·V; ``work_dtype`` ("float32") computes every intermediate in that precision (:mod:`.attend`);
    ``kv_block`` computes each row by the online softmax over KV blocks of that many columns (:mod:`.online`,
    the st double benchmark's benchmark; not with ``score_hook``).
    ``dequant_scale1`` / ``quant_scale1`` / ``dequant_scale2`` (all three, per tensor, with int8 query, key
    and value) compute full quant (:mod:`.fullquant`: P quantised to int8 against the row max, or the running
    max of ``kv_block`` blocks); ``p_dtype`` may then only name int8 and ``work_dtype`` is not taken.
    ``dequant_scale_query`` with an int8 query and the split rope (int8 key and value, ``query_quant_mode`` 3) computes
    the A2/A3 MLA FA quant (:mod:`.mla_quant`, P quantised per ``kv_block`` block, 512 by default).
    ``target`` (the platform; None: the default) decides whether the
    legacy decode route exists (arch22), which sets the lse of rows without kv (``empty_row_lse``), and how a
    KV-antiquant cache dequantises: exactly (A2/A3's MSD kernel) or, on arch35 (Ascend950's dequant kernel),
    each step rounded to the query's dtype, with P then rounded as ``p_dtype`` says.
    ``score_hook(s, b, h, q_idx, kv_idx) -> s``: an attention variant (``variants.golden``), applied to the
    scaled, biased float64 scores before the masks, with numpy index arrays that broadcast against ``s [h,
    q, kv]`` (positions within the batch's sequence).
    """
    if out_of_scope.get("dequant_scale_query") is not None and query_rope is not None and \
            canonical_dtype(to_numpy(query).dtype) == "int8":   # MLA FA quant (golden.mla_quant)
        given = {name: x for name, x in locals().items() if name not in ("query", "key", "value", "out_of_scope",
                                                                         "_attend")}
        from .mla_quant import mla_quant_golden

        if given["kv_block"] is None:
            del given["kv_block"]
        return mla_quant_golden(query, key, value, **given, **out_of_scope)
    _reject_out_of_scope(out_of_scope)
    if not 0 <= int(inner_precise) <= INNER_PRECISE_LIMIT:
        raise ValueError(f"inner_precise={inner_precise}: must be in [0, {INNER_PRECISE_LIMIT}]")
    layouts = parse_layout(input_layout)
    num_heads = int(num_heads)
    nkv = int(num_key_value_heads) or num_heads
    if num_heads <= 0 or num_heads % nkv:
        raise ValueError(f"num_heads={num_heads}, num_key_value_heads={num_key_value_heads}: num_heads must be a "
                         f"positive multiple of num_key_value_heads")
    group = num_heads // nkv
    key, value = _kv_list(key), _kv_list(value)
    if (query_rope is None) != (key_rope is None):
        raise ValueError("query_rope / key_rope: give both or neither")
    if query_rope is not None:   # the split rope: one dot product over D + D_rope (golden.rope)
        if isinstance(key, list):
            raise ValueError("key_rope: not supported with key/value tensor lists")
        query = join_rope(query, query_rope, num_heads, layouts.qkv == "BSH", "query")
        key = join_rope(key, key_rope, nkv, to_numpy(key).ndim == 3 if block_table is not None
                        else layouts.qkv == "BSH", "key")
    aq_arrays = {"antiquant_scale": antiquant_scale, "antiquant_offset": antiquant_offset,
                 "key_antiquant_scale": key_antiquant_scale, "key_antiquant_offset": key_antiquant_offset,
                 "value_antiquant_scale": value_antiquant_scale, "value_antiquant_offset": value_antiquant_offset}
    antiquant = any(x is not None for x in aq_arrays.values())
    cache = _cache_marker(key_dtype, value_dtype, key, value)
    nz_stride = None
    if antiquant:   # an int4 cache (int4, or int32 packing 8 each as op_api views it) as its int8 values
        key, value, int4 = int4_kv(key, value)
        nz_stride = group_scale_stride(key, block_table)
        if nz_stride is not None:   # an NZ cache (its reader's fractals) as BnNBsD
            kind = "int4" if int4 else to_numpy(key).dtype
            d0 = antiquant_nz_fraction(kind, _arch(target))
            key, value = (from_nz(to_numpy(t), "int4" if int4 else None, d0) for t in (key, value))
        if key_shared_prefix is not None and value_shared_prefix is not None:
            key_shared_prefix, value_shared_prefix, _ = int4_kv(key_shared_prefix, value_shared_prefix)
    fq_scales = {"dequant_scale1": dequant_scale1, "quant_scale1": quant_scale1, "dequant_scale2": dequant_scale2}
    fullquant = _fullquant_call(fq_scales, query, key, value, antiquant, work_dtype, score_hook)
    if fullquant is not None:   # int8 values are exact in float64; the golden reads them as floats
        query, key, value = (_int8_as_f64(t) for t in (query, key, value))
    _check_float(query, "query", fullquant is not None)
    for name, t in (("key", key), ("value", value)):
        for item in (t if isinstance(t, list) else [t]):
            _check_float(item, name, antiquant or fullquant is not None, cache)
    dequant_950 = antiquant and _arch(target) == "arch35"   # the 950 dequantises K/V, then the non-quant flow
    # so does A2/A3's PromptFlashAttention route with its KvAntiquant path (a query S above 1: not the IFA decode
    # or PFA's MSD path, whose MSD split is exact; an NZ cache would be IFA's MTP, the split rope its MLA route)
    vector_dequant = dequant_950 or (antiquant and _arch(target) == "arch22" and not layouts.token
                                     and query_rope is None and nz_stride is None
                                     and query_s(query, layouts.qkv) > 1
                                     and pfa_dequantises(canonical_dtype(to_numpy(query).dtype),
                                                         query_s(query, layouts.qkv),
                                                         key_antiquant_scale is not None))
    if antiquant and not vector_dequant:
        p_dtype = None
    paged = block_table is not None
    q_np = to_numpy(query)
    token = layouts.token

    # ---- query view and kv source -------------------------------------------------------------
    if token:
        q = to_tnd(q_np, layouts.qkv, "query")
        rows_total = q.shape[0]
    else:
        q = to_bnsd(q_np, layouts.qkv, num_heads, "query")
        rows_total = q.shape[2]
    if q.shape[-3 if not token else 1] != num_heads:
        raise ValueError(f"query: shape {tuple(q_np.shape)} has {q.shape[1]} heads, num_heads is {num_heads}")
    d = q.shape[-1]
    kv_empty = _total_size(key) == 0 or _total_size(value) == 0
    if paged:
        if isinstance(key, list):
            raise ValueError("block_table: paged attention does not take tensor lists")
        source = PagedKV(key, value, block_table, block_size, nkv)
    elif token:
        source = TokenKV(key, value, layouts.qkv)
    elif isinstance(key, list):
        source = ListKV(key, value if isinstance(value, list) else [value], layouts.qkv, nkv)
    else:
        source = DenseKV(key, value, layouts.qkv, nkv)
    if source.num_kv_heads != nkv:
        raise ValueError(f"key: has {source.num_kv_heads} heads, num_key_value_heads resolves to {nkv}")
    if source.d != d and not kv_empty:
        raise ValueError(f"key: head dim {source.d} differs from the query's {d}")
    dv = source.dv

    prefix = None
    if key_shared_prefix is not None or value_shared_prefix is not None:
        if key_shared_prefix is None or value_shared_prefix is None:
            raise ValueError("key_shared_prefix / value_shared_prefix: give both or neither")
        if token or paged:
            raise ValueError("key_shared_prefix: not supported with TND/NTD layouts or paged attention")
        prefix = SharedPrefix(key_shared_prefix, value_shared_prefix, layouts.qkv, nkv, actual_shared_prefix_len)
        if prefix.d != d or prefix.dv != dv:
            raise ValueError(f"key_shared_prefix: head dims ({prefix.d}, {prefix.dv}) differ from key/value "
                             f"({d}, {dv})")

    # ---- per-batch plans ------------------------------------------------------------------------
    if token:
        if query_padding_size is not None or kv_padding_size is not None:
            raise ValueError("query_padding_size / kv_padding_size: left padding is not supported with TND/NTD")
        if paged and actual_seq_lengths is not None and len(np.ravel(actual_seq_lengths)) > source.batch:
            raise ValueError(f"block_table: has {source.batch} rows, actual_seq_lengths describes "
                             f"{len(np.ravel(actual_seq_lengths))} batches")
        caps = [source.capacity(b) for b in range(source.batch)] if paged else None
        plans, offsets, lengths = plan_token_layout(
            tokens=rows_total, actual_seq_lengths=actual_seq_lengths, actual_seq_lengths_kv=actual_seq_lengths_kv,
            kv_tokens=None if paged else source.tokens, paged=paged, kv_capacity=caps)
        batch = len(plans)
        if not paged:
            source.set_ranges(offsets, lengths)
    else:
        batch = q.shape[0]
        if source.batch != batch and not (kv_empty and not isinstance(key, list)):
            what = "block_table rows" if paged else "key batch"
            raise ValueError(f"{what} ({source.batch}) differs from the query's batch size {batch}")
        if paged and actual_seq_lengths_kv is None:
            raise ValueError("actual_seq_lengths_kv: required with paged attention (block_table)")
        if paged and (query_padding_size is not None or kv_padding_size is not None):
            raise ValueError("query_padding_size / kv_padding_size: left padding is not supported with paged "
                             "attention")
        caps = [source.capacity(b) if b < source.batch else 0 for b in range(batch)]
        plans = plan_batch_layout(
            batch=batch, s1_full=rows_total, kv_capacity=caps, actual_seq_lengths=actual_seq_lengths,
            actual_seq_lengths_kv=actual_seq_lengths_kv, query_padding_size=query_padding_size,
            kv_padding_size=kv_padding_size, prefix=prefix.length if prefix is not None else 0)

    aq = None
    own_params = None   # where the own KV's per-token parameters start after a shared prefix (None: at its end)
    if antiquant:
        if token:
            raise UnsupportedParameterError("antiquant_scale", "given", "KV antiquant is modelled for BSH/BSND/BNSD "
                                            "key/value, dense, paged or a tensor list (no TND/NTD)")
        kv_len = max((p.k0 + p.prefix + p.s_kv for p in plans), default=0)
        if dequant_950 and prefix is not None:   # the prefix reads [0, plen), the own KV the last S of key
            kv_len = max(prefix.length, source.capacity(0))
        aq = antiquant_spec(dict(aq_arrays, block_table=block_table), antiquant_mode=antiquant_mode,
                            key_antiquant_mode=key_antiquant_mode,
                            value_antiquant_mode=value_antiquant_mode, batch=batch, num_kv_heads=nkv, head_dim=d,
                            kv_len=kv_len, nz_stride=nz_stride,
                            seq_stride=chip_seq_stride(key, block_table, layouts.qkv)
                            if dequant_950 and prefix is None else None)
        aq = dataclasses.replace(aq, cache=cache)
        if vector_dequant:
            aq = dataclasses.replace(aq, rounding=canonical_dtype(q_np.dtype))
            if prefix is not None and aq.per_token:
                own_params = aq.key_scale.shape[-1] - source.capacity(0)
    legacy = (not token) and is_legacy_decode(layouts.name, rows_total, d, dv, target)
    lse_empty = empty_row_lse(legacy_decode=legacy, kv_empty=kv_empty)
    left_padding = padding_value(query_padding_size, "query_padding_size") is not None or \
        padding_value(kv_padding_size, "kv_padding_size") is not None
    # An empty query is an empty output: op_host takes its empty-tensor path before any mask or sparse-mode
    # check (the empty-output early return of the tiling), so those attributes are not judged either.
    masks = None if rows_total == 0 else MaskEngine(
        sparse_mode=sparse_mode, atten_mask=atten_mask, pre_tokens=pre_tokens, next_tokens=next_tokens,
        batch=batch, decode=(not token and rows_total == 1), legacy_decode=legacy, token_layout=token,
        left_padding=left_padding, q_lengths=[p.s1 for p in plans])
    pse = None
    if pse_shift is not None:
        if token:
            raise ValueError("pse_shift: not supported with TND/NTD layouts")
        pse = PseShift(pse_shift, batch, num_heads)
    sink = sink_logits(learnable_sink, num_heads) if learnable_sink is not None else None

    # ---- compute --------------------------------------------------------------------------------
    if kv_block is not None and score_hook is not None:
        raise ValueError("kv_block: the online benchmark takes no score_hook")
    if _attend is not None:   # a quantised block function prepared by a caller (golden.mla_quant)
        attend_fn = _attend
    elif fullquant is not None:
        attend_fn = functools.partial(attend_fullquant, kv_block=kv_block, **fullquant)
    elif kv_block is not None:
        attend_fn = functools.partial(attend_online, kv_block=int(kv_block), work_dtype=work_dtype or "float32")
    else:
        attend_fn = functools.partial(attend, work_dtype=work_dtype)
    if token:
        out = np.zeros((rows_total, num_heads, dv))
        lse = np.full((rows_total, num_heads), lse_empty)
    else:
        out = np.zeros((batch, num_heads, rows_total, dv))
        lse = np.full((batch, num_heads, rows_total), lse_empty)
    if not kv_empty and rows_total:
        # Decode-like calls run many tiny GEMMs: BLAS threads only add hand-off latency there (and stall
        # badly when another process holds a core), so they run single-threaded.
        rows_max = max((plan.s1 for plan in plans), default=0) * group
        with _blas_threads(1 if rows_max < SMALL_GEMM_ROWS else None):
            for plan in plans:
                _run_batch(plan, q, token, source, prefix, masks, pse, sink, float(scale), group, nkv, p_dtype,
                           out, lse, lse_empty, score_hook, attend_fn, aq, own_params)

    if quant_scale2 is not None:   # post-quant: an int8 output (golden.quant)
        q8 = post_quant_int8(out, quant_scale2, quant_offset2, heads_axis=1, num_heads=num_heads)
        if not empty_rows_quantised:   # the FIA framework's zero init: rows of batches without KV stay 0
            for plan in (plans if not kv_empty else []):
                if plan.s2 == 0 and not token:
                    q8[plan.b, :, plan.q0:plan.q0 + plan.s1] = 0
                elif plan.s2 == 0:
                    q8[plan.q0:plan.q0 + plan.s1] = 0
        out = q8
    elif quant_offset2 is not None:
        raise ValueError("quant_offset2: given without quant_scale2")

    # ---- output layouts -------------------------------------------------------------------------
    if token:
        out_l = from_tnd(out, layouts.out)
        lse_l = lse[:, :, None]
    else:
        out_l = from_bnsd(out, layouts.out)
        lse_l = lse[..., None]
    return out_l, (lse_l if softmax_lse_flag else None)


def _fullquant_call(scales: dict, query, key, value, antiquant: bool, work_dtype, score_hook) -> dict | None:
    """The (deq1, qs1, deq2) keywords of :func:`.fullquant.attend_fullquant` when the full-quant scales are
    given (all three, with int8 query, key and value), else None."""
    given = [name for name, x in scales.items() if x is not None]
    if not given:
        return None
    if len(given) < len(FULLQUANT_SCALES):
        missing = [name for name in FULLQUANT_SCALES if name not in given]
        raise ValueError(f"{given[0]}: full quant needs {', '.join(FULLQUANT_SCALES)} (missing {', '.join(missing)})")
    for name, t in (("query", query), ("key", key), ("value", value)):
        for item in (t if isinstance(t, list) else [t]):
            kind = canonical_dtype(to_numpy(item).dtype)
            if kind != "int8":
                raise ValueError(f"{name}: full quant takes int8 query, key and value, not {kind}")
    for name, bad in (("antiquant_scale", antiquant), ("work_dtype", work_dtype is not None),
                      ("score_hook", score_hook is not None)):
        if bad:
            raise ValueError(f"{name}: not taken with full quant (dequant_scale1 / quant_scale1 / dequant_scale2)")
    return {"deq1": dequant_value(scales["dequant_scale1"]), "qs1": float(np.float32(to_numpy(
        scales["quant_scale1"]).reshape(-1)[0])), "deq2": dequant_value(scales["dequant_scale2"])}


def _int8_as_f64(t):
    """An int8 tensor (or tensor list) as float64 arrays of the same values."""
    return [to_numpy(x).astype(np.float64) for x in t] if isinstance(t, list) else to_numpy(t).astype(np.float64)


def _run_batch(plan: BatchPlan, q, token: bool, source, prefix, masks: MaskEngine, pse, sink, scale: float,
               group: int, nkv: int, p_dtype, out, lse, lse_empty: float, score_hook=None, attend_fn=attend,
               antiquant=None, own_params=None):
    """Compute one batch into ``out`` / ``lse`` (canonical layouts), chunked over kv heads and rows; an int8 KV
    (int4 as its int8 values) is dequantised by ``antiquant`` (an ``AntiquantSpec``) as it is fetched.
    ``own_params``: where the own KV's per-token parameters start after a shared prefix (None: right after the
    prefix's)."""
    s1, s2 = plan.s1, plan.s2
    if s1 == 0:
        return
    if s2 == 0:
        # No kv at all: output stays 0, the lse keeps the kernel's init value.
        return
    d, dv = q.shape[-1], source.dv
    per_head = group * s1 * s2
    heads_per_chunk = max(1, min(nkv, CHUNK_ELEMENTS // max(1, per_head), CHUNK_ELEMENTS // max(1, s2 * (d + dv))))
    rows_per_chunk = s1 if heads_per_chunk > 1 or per_head <= CHUNK_ELEMENTS else \
        max(1, CHUNK_ELEMENTS // max(1, group * s2))
    for n0 in range(0, nkv, heads_per_chunk):
        n1 = min(nkv, n0 + heads_per_chunk)
        k_raw, v_raw = source.fetch(plan.b, n0, n1, plan.k0, plan.k0 + plan.s_kv)
        # per-token antiquant parameters are indexed by the position in the attended sequence (prefix first)
        # from the batch's first KV position in its tensor (k0, left padding); on Ascend950 the own KV's start
        # S' - S of key into the table whatever the prefix's length (own_params)
        own = plan.k0 + (plan.prefix if own_params is None else own_params)
        if antiquant is not None:
            k = antiquant.dequantised(k_raw, "key", plan.b, n0, n1, own, own + plan.s_kv)
            v = antiquant.dequantised(v_raw, "value", plan.b, n0, n1, own, own + plan.s_kv)
        else:
            k = to_f64(k_raw, "key")
            v = to_f64(v_raw, "value")
        if prefix is not None and plan.prefix:
            kp, vp = prefix.fetch(n0, n1)
            if antiquant is not None:
                kp = antiquant.dequantised(kp, "key", plan.b, n0, n1, plan.k0, plan.k0 + plan.prefix)
                vp = antiquant.dequantised(vp, "value", plan.b, n0, n1, plan.k0, plan.k0 + plan.prefix)
            k = np.concatenate([to_f64(kp, "key_shared_prefix"), k], axis=1)
            v = np.concatenate([to_f64(vp, "value_shared_prefix"), v], axis=1)
        h0, h1 = n0 * group, n1 * group
        for i0 in range(0, s1, rows_per_chunk):
            i1 = min(s1, i0 + rows_per_chunk)
            if token:
                qb = to_f64(q[plan.q0 + i0:plan.q0 + i1, h0:h1], "query").transpose(1, 0, 2)
            else:
                qb = to_f64(q[plan.b, h0:h1, plan.q0 + i0:plan.q0 + i1], "query")
            keep = masks.keep(plan, i0, i1)
            bias = pse.block(plan, h0, h1, i0, i1) if pse is not None else None
            modify = None
            if score_hook is not None:
                heads = np.arange(h0, h1)[:, None, None]
                qi = np.arange(i0, i1)[None, :, None]
                ki = np.arange(k.shape[1])[None, None, :]
                modify = (lambda s_, b_=plan.b, h_=heads, q_=qi, k_=ki: score_hook(s_, b_, h_, q_, k_))
            extra = {} if modify is None else {"modify": modify}
            o, l_ = attend_fn(qb, k, v, scale, bias=bias, keep=keep, sink=None if sink is None else sink[h0:h1],
                              p_dtype=p_dtype, **extra)
            if token:
                out[plan.q0 + i0:plan.q0 + i1, h0:h1] = o.transpose(1, 0, 2)
                lse[plan.q0 + i0:plan.q0 + i1, h0:h1] = l_.T
            else:
                out[plan.b, h0:h1, plan.q0 + i0:plan.q0 + i1] = o
                lse[plan.b, h0:h1, plan.q0 + i0:plan.q0 + i1] = l_


def fia_golden_lowp(query, key, value, **kwargs):
    """:func:`fia_golden` with P rounded to the query's dtype before P·V (as the chip does)."""
    kwargs.setdefault("p_dtype", canonical_dtype(to_numpy(query).dtype))
    return fia_golden(query, key, value, **kwargs)


#: the FIA corpus' double-benchmark standard (its TND cases): what a TND call is judged by without a case
FIA_TND_STANDARD = {"cv_fused_double_benchmark": {"max_re_ratio": 2, "avg_re_ratio": 1.2,
                                                  "root_mean_squared_ratio": 1.2}}


def fia_golden_st(query, key, value, *, accuracy_standard=None, **kwargs):
    """The upstream st executor's golden (``executor_aclnnFusedInferAttentionScoreV4.py``), judged as its
    case's ``standard["acc"]`` (``accuracy_standard``; None: the FIA corpus' pairing, a double benchmark for
    TND and ``"default"`` otherwise) says. Returns ``(out, lse)`` like :func:`fia_golden`, each either an array
    (compared with :func:`..precision.compare`) or a :class:`..precision.Benchmarked` (the double benchmark).

    * ``input_layout`` "TND" (the executor's split-fuse golden, ``TestFIAV4SplitFuse``): the golden is
      float64 with P in fp32 (``ref_masked_attention``), the benchmark the online softmax over KV blocks of 512
      in fp32 (fp16 for ``inner_precise`` 1) with P rounded to the query dtype against the running max
      (``ref_flash_attention``, :mod:`.online`), its output rounded to the query dtype; both handed to the
      comparison as fp32 (the executor casts the chip's output to fp32 too), which sets its thresholds.
    * every other layout (``FiaOpForward``): every intermediate in fp32 (:mod:`.attend`'s ``work_dtype``), P
      rounded to the query dtype, the output rounded to the query dtype (the executor's final
      ``output.to(query.dtype)``; int8 when post-quantised), the lse fp32. A double-benchmark standard there
      has this golden as its benchmark too (the executor computes its benchmark task as the golden).
    * full quant (``dequant_scale1`` / ``quant_scale1`` / ``dequant_scale2`` with int8 query, key and value):
      the float64 full-quant golden (:mod:`.fullquant`, P quantised against the row max), its output rounded
      to fp16 (or post-quantised to int8) and the lse to fp32, whatever the case's standard; cvtile's choice,
      the executor's int8 golden is not mirrored.
    """
    from ..precision import Benchmarked, DoubleBenchmark

    qd = canonical_dtype(to_numpy(query).dtype)
    if any(kwargs.get(name) is not None for name in FULLQUANT_SCALES):
        # full quant: the float64 golden (P quantised against the row max), its output in fp16 (or the int8
        # of post-quant) and lse in fp32; cvtile's choice, the executor's int8 golden is not mirrored
        out, lse = fia_golden(query, key, value, **kwargs)
        if kwargs.get("quant_scale2") is None:
            out = round_to(out, "float16")
        return out, None if lse is None else round_to(lse, "float32")
    split_fuse = str(kwargs.get("input_layout", "BSH")) == "TND"
    standard = accuracy_standard if accuracy_standard is not None else \
        (FIA_TND_STANDARD if split_fuse else "default")
    limits = DoubleBenchmark.from_standard(standard)
    if split_fuse:
        out, lse = fia_golden(query, key, value, **dict(kwargs, p_dtype="float32"))
        interm = "float16" if int(kwargs.get("inner_precise", 0)) == 1 else "float32"
        b_out, b_lse = fia_golden(query, key, value, **dict(kwargs, p_dtype=qd, work_dtype=interm,
                                                            kv_block=KV_BLOCK))
        out, lse = round_to(out, "float32"), None if lse is None else round_to(lse, "float32")
        b_out, b_lse = round_to(b_out, qd), None if b_lse is None else round_to(b_lse, "float32")
    else:
        out, lse = fia_golden(query, key, value, **dict(kwargs, p_dtype=qd, work_dtype="float32"))
        if kwargs.get("quant_scale2") is None:
            out = round_to(out, qd)
        b_out, b_lse = out, lse
    if limits is None:
        return out, lse
    return (Benchmarked(out, b_out, limits),
            None if lse is None else Benchmarked(lse, b_lse, limits))
