"""Attention cases: a shape and feature set, its random inputs, and one checked run on the simulator.

Model
-----
A ``CaseSpec`` names a FusedInferAttentionScore call the way a kernel engineer
thinks of it (batch, heads, lengths, head dim, dtype, layout, sparse mode,
pre/next tokens, lse, target, and optionally a quantised KV cache).
``make_inputs`` draws query/key/value uniformly in [-1, 1) (seeded) in the
case's layout and builds the keyword arguments of
``npu_fused_infer_attention_score`` (the 2048x2048 compressed mask for sparse
2/3/4; cumulative lengths for TND/NTD). With ``kv_dtype`` "int8" or "int4" the
key/value are integer caches (int4 packed 8 per int32, as aclnn takes it), with "float8_e4m3fn" an FP8 cache
(Ascend950; no offset), with "hifloat8" a HiFloat8 cache (Ascend950; no offset: uint8 arrays of HiF8 codes, the
keywords carrying V2's ``key_dtype`` / ``value_dtype`` "hifloat8", which ``api.run_call`` / ``plan_call`` take;
``check_kv_dtype`` refuses it on a target without the dtype), with
per-channel ``antiquant_scale`` / ``antiquant_offset`` (2, Nkv, 1, D) in the
query's dtype (on arch35 the key's and the value's own, (Nkv, 1, D) each), drawn so the dequantised values
also lie about in [-1, 1]: KV antiquant, which op_host routes to the IFA decode template on A2/A3 and to
FusedInferAttentionScoreTilingImpl on Ascend950. ``run_case`` tiles the call, runs it on
the simulator, runs the float64 golden, and compares every output with the
upstream tolerance of the dtype; the result records the tiling summary, the
worst errors, PASS/FAIL and both wall times.

``DEFAULT_CASES`` are what ``cvtile run`` shows with no options: a GQA decode
whose tiling uses flash-decode (the KV of each (batch, kv head) row is split
across cores and merged by the combine kernel) and a causal prefill.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .kernels.golden import fia_golden, mask_template
from .kernels.golden.dtypes import numpy_dtype
from .kernels.precision import compare
from .sim.launch import COMPILE_STATS
from .tiling.platform import DEFAULT_TARGET, get_platform

__all__ = ["CaseSpec", "CaseResult", "DEFAULT_CASES", "make_inputs", "run_case", "shape_of", "check_kv_dtype"]


@dataclass(frozen=True)
class CaseSpec:
    name: str = "custom"
    batch: int = 4
    num_heads: int = 32
    num_kv_heads: int = 8
    q_seqlen: int = 1
    kv_seqlen: int = 16384
    head_dim: int = 128
    dtype: str = "float16"
    layout: str = "BNSD"
    sparse_mode: int = 0
    pre_tokens: int = 2147483647
    next_tokens: int = 2147483647
    lse: bool = True
    target: str = DEFAULT_TARGET
    actual_q: tuple | None = None
    actual_kv: tuple | None = None
    kv_dtype: str | None = None     # None: the query's dtype; "int8" / "int4" / "float8_e4m3fn" / "hifloat8": a
    #                                 KV-antiquant cache

    def describe(self) -> str:
        s = (f"B={self.batch} Nq={self.num_heads} Nkv={self.num_kv_heads} Sq={self.q_seqlen} "
             f"Skv={self.kv_seqlen} D={self.head_dim} {self.dtype} {self.layout}")
        if self.sparse_mode:
            s += f" sparse_mode={self.sparse_mode}"
            if self.sparse_mode == 4:
                s += f" pre={self.pre_tokens} next={self.next_tokens}"
        if self.lse:
            s += " lse"
        if self.kv_dtype:
            s += f" kv {self.kv_dtype}"
        return s + f" on {self.target}"


DEFAULT_CASES = (
    CaseSpec(name="gqa-decode-flash-decode", batch=4, num_heads=32, num_kv_heads=8, q_seqlen=1, kv_seqlen=16384,
             head_dim=128, dtype="float16", layout="BNSD", lse=True),
    CaseSpec(name="causal-prefill", batch=1, num_heads=8, num_kv_heads=8, q_seqlen=1024, kv_seqlen=1024,
             head_dim=128, dtype="float16", layout="BNSD", sparse_mode=3, lse=True),
)


def shape_of(layout: str, b: int, n: int, s: int, d: int) -> tuple:
    """The tensor shape of (B, N, S, D) data in a layout (TND/NTD hold B*S tokens)."""
    return {"BSH": (b, s, n * d), "BSND": (b, s, n, d), "BNSD": (b, n, s, d), "TND": (b * s, n, d),
            "NTD": (n, b * s, d), "NBSD": (n, b, s, d)}[layout]


def make_inputs(spec: CaseSpec, seed: int = 0):
    """(query, key, value, keyword arguments) of the case. Before anything is drawn, inputs larger than the memory
    this machine has available raise ``host_memory.HostMemoryError``, unless op_host rejects the call first
    (its ``ParamError``, asked on zero-stride stand-ins)."""
    rng = np.random.default_rng(seed)
    dt = numpy_dtype(spec.dtype)
    qlay = spec.layout.split("_")[0]
    qshape = shape_of(qlay, spec.batch, spec.num_heads, spec.q_seqlen, spec.head_dim)
    kshape = shape_of(qlay, spec.batch, spec.num_kv_heads, spec.kv_seqlen, spec.head_dim)
    _check_inputs_fit(spec, qshape, kshape, dt)
    q = uniform(rng, -1, 1, qshape, dt)
    if spec.kv_dtype:
        k, v, quant = _antiquant_cache(rng, spec, kshape, dt)
    else:
        k = uniform(rng, -1, 1, kshape, dt)
        v = uniform(rng, -1, 1, kshape, dt)
        quant = {}
    return q, k, v, dict(**quant, **_call_keywords(spec, qlay))


def uniform(rng, lo: float, hi: float, shape: tuple, dt) -> np.ndarray:
    """Values uniform in [lo, hi) drawn in float32 and cast to ``dt``: a 16-bit cache of 67 M elements (the default
    decode case's key) takes 0.5 s this way against 5.7 s through numpy's float64 draw and its scalar
    float64 -> float16 cast, which was most of a warm process's time to its first result."""
    x = rng.random(shape, dtype=np.float32)
    x *= np.float32(hi - lo)
    x += np.float32(lo)
    return x.astype(dt, copy=False)


def _call_keywords(spec: CaseSpec, qlay: str) -> dict:
    """The attributes, mask and length lists of the case's call (everything but the tensors and quant keywords)."""
    kw = dict(num_heads=spec.num_heads, num_key_value_heads=spec.num_kv_heads, input_layout=spec.layout,
              scale=float(spec.head_dim) ** -0.5, sparse_mode=spec.sparse_mode, pre_tokens=spec.pre_tokens,
              next_tokens=spec.next_tokens, softmax_lse_flag=spec.lse)
    if spec.sparse_mode in (2, 3, 4):
        kw["atten_mask"] = mask_template()
    actual_q, actual_kv = spec.actual_q, spec.actual_kv
    if qlay in ("TND", "NTD"):
        lens_q = list(actual_q) if actual_q else [spec.q_seqlen] * spec.batch
        lens_kv = list(actual_kv) if actual_kv else [spec.kv_seqlen] * spec.batch
        kw["actual_seq_lengths"] = list(np.cumsum(lens_q).tolist())
        kw["actual_seq_lengths_kv"] = list(np.cumsum(lens_kv).tolist())
    else:
        if actual_q:
            kw["actual_seq_lengths"] = list(actual_q)
        if actual_kv:
            kw["actual_seq_lengths_kv"] = list(actual_kv)
    return kw


def _check_inputs_fit(spec: CaseSpec, qshape: tuple, kshape: tuple, dt) -> None:
    """``host_memory.check_fits`` of the case's query, key and value and the largest 4-byte draw (``uniform``
    draws in float32, then casts; the integer caches are drawn as int8); when they do not fit, op_host's checks run first on zero-stride stand-ins,
    so a call the operator rejects reports its rule (not for an int4 cache: the host unpacks it to int8 before
    op_host's checks, which a cache this large cannot be; the memory rule is reported)."""
    from .host_memory import HostMemoryError, check_fits, stand_in

    if spec.kv_dtype and spec.kv_dtype not in _ANTIQUANT_CACHES:
        return                              # _antiquant_cache names the bad kv_dtype
    kv_shape, kv_dt = _kv_storage(spec.kv_dtype, kshape, dt)
    draw = 4 * max(math.prod(qshape), math.prod(kshape))
    try:
        check_fits({"query": (qshape, dt), "key": (kv_shape, kv_dt), "value": (kv_shape, kv_dt)}, temporary=draw,
                   what="the case's inputs (with the 4-byte draw of the largest)")
    except HostMemoryError as too_large:
        from .kernels.fia.api import plan_call
        from .kernels.golden.hifloat8 import HIFLOAT8

        check_kv_dtype(spec.kv_dtype, spec.target)
        quant = {}
        if spec.kv_dtype:
            params = (2, spec.num_kv_heads, 1, spec.head_dim)
            dtypes = dict(key_dtype=HIFLOAT8, value_dtype=HIFLOAT8) if spec.kv_dtype == HIFLOAT8 else {}
            quant = _quant_keywords(spec, np.ones(params, dt), np.zeros(params, dt), dtypes)
        try:
            plan_call(query=stand_in(qshape, dt), key=stand_in(kv_shape, kv_dt), value=stand_in(kv_shape, kv_dt),
                      target=spec.target, **quant, **_call_keywords(spec, spec.layout.split("_")[0]))
        except MemoryError:     # a host check that widens a tensor (an int4 cache is unpacked) cannot be asked
            raise too_large from None
        raise


def _kv_storage(kv_dtype: str | None, kshape: tuple, dt) -> tuple:
    """(shape, numpy dtype) of the key / value arrays ``make_inputs`` gives for a cache of ``kv_dtype``."""
    if not kv_dtype:
        return kshape, dt
    if kv_dtype == "int4":                  # packed 8 per int32 along the last axis
        return (*kshape[:-1], kshape[-1] // 8), np.int32
    return kshape, {"int8": np.int8, "hifloat8": np.uint8}.get(kv_dtype) or numpy_dtype(kv_dtype)


#: a KV-antiquant cache's value range and its per-channel scale range (dequantised values about in [-1, 1]);
#: an FP8 or HiF8 cache takes no offset (op_host refuses one)
_ANTIQUANT_CACHES = {"int8": ((-127, 128), (0.004, 0.008)), "int4": ((-8, 8), (0.08, 0.12)),
                     "float8_e4m3fn": ((-240, 240), (0.003, 0.005)), "hifloat8": ((-64, 64), (0.012, 0.016))}
#: caches without an offset
_NO_OFFSET = ("float8_e4m3fn", "hifloat8")
#: caches only Ascend950's dequant kernel takes, refused up front on other targets (``check_kv_dtype``)
_ARCH35_ONLY = ("float8_e4m3fn", "hifloat8")


def check_kv_dtype(kv_dtype: str | None, target: str) -> None:
    """Refuse a cache the target has no dtype for, before any input is drawn: an FP8 or HiFloat8 cache off
    Ascend950 raises ``ParamError`` 161002 (checker "cli") naming ``kv_dtype`` (the command line's
    ``--kv-dtype``), the target and the rule (op_host there would refuse the key's dtype)."""
    from .tiling.errors import AclnnStatus, ParamError

    arch = get_platform(target).arch
    if kv_dtype in _ARCH35_ONLY and arch != "arch35":
        raise ParamError("kv_dtype", kv_dtype, f"a {kv_dtype} KV cache is Ascend950's (arch35: its dequant kernel, "
                         f"without offsets); target {target} ({arch}) has no {kv_dtype} KV cache (op_host refuses "
                         f"the key's dtype there)",
                         status=AclnnStatus.PARAM_INVALID, checker="cli")


def _antiquant_cache(rng, spec: CaseSpec, kshape: tuple, dt):
    """(key, value, antiquant keywords) of an int8 / int4 / FP8 / HiF8 cache (int4 packed 8 per int32, HiF8 as
    uint8 codes with ``key_dtype`` / ``value_dtype`` "hifloat8" among the keywords): per-channel scale and offset
    (none for FP8 and HiF8), stacked (``antiquant_scale``, (2, Nkv, 1, D)) or, on arch35, as the key's and the
    value's own."""
    from .kernels.golden.hifloat8 import HIF8_TABLE, HIFLOAT8
    from .kernels.golden.int4 import pack_int4

    if spec.kv_dtype not in _ANTIQUANT_CACHES:
        raise ValueError(f"kv_dtype {spec.kv_dtype!r}: one of {', '.join(_ANTIQUANT_CACHES)} (or None)")
    check_kv_dtype(spec.kv_dtype, spec.target)
    (lo, hi), (s_lo, s_hi) = _ANTIQUANT_CACHES[spec.kv_dtype]
    dtypes = {}
    if spec.kv_dtype == "float8_e4m3fn":
        k, v = (uniform(rng, lo, hi, kshape, numpy_dtype(spec.kv_dtype)) for _ in range(2))
    elif spec.kv_dtype == HIFLOAT8:   # every finite code in [lo, hi], zero and denormals included
        codes = np.flatnonzero(np.isfinite(HIF8_TABLE) & (HIF8_TABLE >= lo) & (HIF8_TABLE <= hi)).astype(np.uint8)
        k, v = (codes[rng.integers(0, len(codes), kshape, dtype=np.uint8)] for _ in range(2))
        dtypes = dict(key_dtype=HIFLOAT8, value_dtype=HIFLOAT8)
    else:
        k, v = (rng.integers(lo, hi, kshape, dtype=np.int8) for _ in range(2))
    if spec.kv_dtype == "int4":
        k, v = pack_int4(k), pack_int4(v)
    params = (2, spec.num_kv_heads, 1, spec.head_dim)
    scale, offset = uniform(rng, s_lo, s_hi, params, dt), uniform(rng, -1, 1, params, dt)
    return k, v, _quant_keywords(spec, scale, offset, dtypes)


def _quant_keywords(spec: CaseSpec, scale, offset, dtypes: dict) -> dict:
    """The antiquant keywords of the case's cache: the stacked (2, Nkv, 1, D) scale and offset (none for FP8
    and HiF8), or on arch35 the key's and the value's own, plus V2's dtype keywords ``dtypes``."""
    no_offset = spec.kv_dtype in _NO_OFFSET
    if get_platform(spec.target).arch == "arch35":   # Ascend950 takes the key's and the value's apart
        kw = dict(dtypes, key_antiquant_scale=scale[0], value_antiquant_scale=scale[1])
        return kw if no_offset else dict(kw, key_antiquant_offset=offset[0], value_antiquant_offset=offset[1])
    return dict(antiquant_scale=scale) if no_offset else dict(antiquant_scale=scale, antiquant_offset=offset)


@dataclass
class CaseResult:
    spec: CaseSpec
    passed: bool
    tiling: dict
    reports: dict = field(default_factory=dict)     # output name -> precision report dict
    sim_seconds: float = 0.0          # the simulated run, without compiling
    golden_seconds: float = 0.0
    compile_seconds: float = 0.0      # kernel compilation (or loading it from the on-disk cache)
    error: str | None = None
    order: str = "program"            # the simulator's execution order
    sha256: dict = field(default_factory=dict)   # output name -> sha256 of its bytes (runs compare bitwise)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["spec"] = asdict(self.spec)
        d["spec"]["description"] = self.spec.describe()
        return d


def run_case(spec: CaseSpec, seed: int = 0, order: str = "program") -> CaseResult:
    """Tile, simulate (in ``order``: "program" or "pipelined"), compare with the float64 golden. The call's
    later kernels (the flash-decode combine, a core group's second program) compile in child processes while
    the call compiles its first (the API's ``sim.precompile``); ``compile_seconds`` is the call's own wait."""
    from .kernels.fia.api import plan_call, run_call

    q, k, v, kw = make_inputs(spec, seed)
    _, tiling = plan_call(query=q, key=k, value=v, target=spec.target, **kw)
    summary = tiling.summary()
    summary["fd_reason"] = _reason(tiling, "flash_decode")
    compiled_before = COMPILE_STATS["seconds"]
    t0 = time.perf_counter()
    out, lse = run_call(q, k, v, target=spec.target, order=order, **kw)
    t1 = time.perf_counter()
    compile_seconds = COMPILE_STATS["seconds"] - compiled_before
    g_out, g_lse = fia_golden(q, k, v, target=spec.target, **kw)
    t2 = time.perf_counter()
    reports = {"attention_out": compare(out, g_out, spec.dtype, name="attention_out")}
    if spec.lse:
        reports["softmax_lse"] = compare(lse, g_lse, spec.dtype, name="softmax_lse")
    passed = all(r.passed for r in reports.values())
    digests = {"attention_out": _sha256(out)}
    if spec.lse:
        digests["softmax_lse"] = _sha256(lse)
    return CaseResult(spec, passed, summary, {n: r.to_dict() for n, r in reports.items()},
                      t1 - t0 - compile_seconds, t2 - t1, compile_seconds, order=order, sha256=digests)


def _sha256(a) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(a).view(np.uint8).tobytes()).hexdigest()


def _reason(tiling, what: str) -> str:
    d = tiling.decision(what)
    return d.rule if d is not None else ""


def with_options(base: CaseSpec, **changes) -> CaseSpec:
    """``base`` with the given fields replaced (None values are ignored)."""
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
