"""FlashAttentionScore's host side: one normalised call record read by the forward and backward kernels and
their float64 goldens.

Model
-----
``prepare_call(query, key, value, ...)`` takes the operator's tensors and attributes (torch_npu's
``npu_fusion_attention`` keyword names) and returns a :class:`FasCall`: the shapes, the per-batch lengths
and row/KV starts, and what every score goes through, each in one canonical form:

* **layout** — BSH / BSND / BNSD / SBH / TND. The kernels read BSH as BSND and SBH as (S, B, N, D) permuted
  to BSND inside the kernel ("SBND"); views only. TND batches are consecutive token runs
  (``actual_seq_qlen`` / ``actual_seq_kvlen`` cumulative, as the aclnn API takes them; an empty batch
  repeats the running total, trailing unused batches may be 0).
* **pse** — ``pse_type`` 0 (outer, ``scale·qkᵀ + pse``), 1 (outer, ``scale·(qkᵀ + pse)``: the original
  FlashAttentionScore and torch_npu's ``npu_fusion_attention``), 2 (inner alibi, ``scale·qkᵀ + pse``) and
  3 (inner alibi with a square root). An outer pse is (B|1, N1, S1|1, S2) in the query dtype (BNSS, 1NSS,
  BN1S, 1N1S); the compressed alibi forms BNHS/1NHS are refused (``UnsupportedParameterError``). The inner
  forms take slopes (B, N1) or (N1,) float32 and generate, as ``common/include/kernel/pse.h``
  (``PseSlopeCopyIn``) does, ``pse[i, j] = -slope · |j - i + kv_start_idx - q_start_idx|`` (type 3:
  ``-slope · sqrt(|…|)``); types 2/3 need Sq == Skv (documented constraint).
* **visibility** — every sparse mode becomes a per-batch *band* over local positions (keep iff
  ``lo[b] <= j - i <= hi[b]``), an optional per-batch *prefix* (also keep ``j < prefix[b]``: modes 5/6) and
  an optional explicit mask (B|1, N1|1, S1, S2), 1 = masked, read at local positions:

  ====  =====================================================  ===========================================
  mode  band (off = s2 - s1 of the batch)                      mask tensor
  ====  =====================================================  ===========================================
  0     ``-pre <= j - i <= next`` (none when both are INT_MAX)  read
  1     none                                                   read
  2     ``j - i <= 0``                                         compressed 2048x2048, not read
  3     ``j - i <= off``                                       compressed, not read
  4     ``off - pre <= j - i <= off + next``                   compressed, not read
  5     ``j - i <= off`` or ``j < prefix[b]`` (no prefix, or    read (BNSS / B1SS)
        prefix[b] > s2: no band, full computation)
  6     ``j - i <= off`` or ``j < prefix[b]``                   compressed 3072x2048, not read
  7     TND: mode 3 per batch; the last non-empty batch takes   compressed, not read
        mode 4's band
  8     TND: mode 2 per batch; the first non-empty batch takes  compressed, not read
        mode 4's band
  ====  =====================================================  ===========================================

  Without ``atten_mask`` the sparse mode and pre/next are ignored and every pair is visible (torch_npu).
* **dropout** — ``keep_prob < 1``: a keep mask (B, N1, S1, S2) bool at local positions, from the explicit
  ``dropout_mask`` (a flat LSB-first bit stream, unpacked by :mod:`.dropout`; TND batches back to back) or
  generated from ``seed`` / ``offset`` (``dropout_source``); a kept
  probability is scaled by ``1 / keep_prob`` before P·V, the softmax statistics are not.
* **sink** — fp32 (N1,): ``m = max(sink, max s)``, denominator ``+ exp(sink - m)`` (rows that see a key).

Invariants
----------
* The kernels, the goldens and the block accounting read only a ``FasCall``: one definition of every rule.
* ``FasCall.visible(b, n1)`` is exactly the pair set the kernel computes; a row with no visible pair gives
  output 0, softmax_max -inf and softmax_sum 0.
* Bad input raises ``ParamError`` (aclnn status, the parameter, the value, the rule); a feature the
  simulator does not model raises ``UnsupportedParameterError``; nothing is silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...tiling.errors import AclnnStatus, ParamError
from ..errors import UnsupportedParameterError
from ..golden.dtypes import canonical_dtype, to_numpy
from ..golden.masks import INT_MAX, TEMPLATE_SIZE

__all__ = ["FasCall", "prepare_call", "head_rows", "stat_rows", "out_shape", "stat_shape", "LAYOUTS", "PREFIX_TEMPLATE_ROWS", "prefix_template"]

LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
PREFIX_TEMPLATE_ROWS = 3072      # sparse mode 6's compressed mask: (3072, 2048)
_KERNEL_LAYOUT = {"BSH": "BSND", "BSND": "BSND", "BNSD": "BNSD", "SBH": "SBND", "TND": "TND"}
_FLOATS = ("float16", "bfloat16", "float32")
_BAND_CLAMP = 1 << 30
_INVALID = AclnnStatus.PARAM_INVALID


def prefix_template(dtype=np.bool_) -> np.ndarray:
    """Sparse mode 6's compressed mask: a 2048x2048 ``triu(ones, 1)`` over a 1024x2048 block whose left half is
    0 and right half 1."""
    m = np.zeros((PREFIX_TEMPLATE_ROWS, TEMPLATE_SIZE), dtype=dtype)
    m[:TEMPLATE_SIZE] = np.triu(np.ones((TEMPLATE_SIZE, TEMPLATE_SIZE), dtype=dtype), k=1)
    m[TEMPLATE_SIZE:, TEMPLATE_SIZE // 2:] = 1
    return m


@dataclass
class FasCall:
    """One FlashAttentionScore call, normalised (see the module docstring)."""

    layout: str
    kernel_layout: str
    dtype: str
    b: int
    n1: int
    n2: int
    d: int
    dv: int
    qlen: np.ndarray
    kvlen: np.ndarray
    qoff: np.ndarray
    kvoff: np.ndarray
    scale: float
    keep_prob: float
    pse_type: int
    pse_kind: str                 # "none" | "outer" | "alibi" | "alibi_sqrt"
    pse: np.ndarray | None        # outer: (Bp, N1, Sp1, S2p) query dtype; alibi: slopes (Bs, N1) float32
    q_start: int
    kv_start: int
    band: bool
    lo: np.ndarray
    hi: np.ndarray
    prefix: np.ndarray | None
    mask: np.ndarray | None       # (Bm, Nm, S1, S2) uint8, 1 = masked
    keep: np.ndarray | None       # (B, N1, S1, S2) bool, True = kept
    sink: np.ndarray | None       # (N1,) float32
    softmax_layout: str           # "BNSD" (batch layouts) | "NTD" (TND, per batch (N, S_b, 8)) | "TND"
    sparse_mode: int
    pre_tokens: int
    next_tokens: int
    q_shape: tuple
    s1_full: int
    s2_full: int

    @property
    def g(self) -> int:
        return self.n1 // self.n2

    @property
    def token(self) -> bool:
        return self.layout == "TND"

    def visible(self, b: int, n1: int, rows: slice = slice(None)) -> np.ndarray:
        """bool (qlen[b], kvlen[b]): the (query, key) pairs head n1 of batch b computes; ``rows``: only those
        query rows."""
        s1, s2 = int(self.qlen[b]), int(self.kvlen[b])
        i = np.arange(s1)[rows, None]
        j = np.arange(s2)[None, :]
        vis = np.ones((len(i), s2), dtype=bool)
        if self.band:
            diff = j - i
            vis = (diff >= self.lo[b]) & (diff <= self.hi[b])
            if self.prefix is not None:
                vis = vis | (j < self.prefix[b])
        if self.mask is not None:
            m = self.mask[b if self.mask.shape[0] > 1 else 0, n1 if self.mask.shape[1] > 1 else 0]
            vis = vis & (m[:s1][rows, :s2] == 0)
        return vis

    def visible_pairs(self, b: int, n1: int) -> int:
        """How many pairs ``visible(b, n1)`` holds, counted a block of rows at a time (at most about 2**22 pairs
        in memory), so a long prefill's count does not build its whole (S1, S2) matrix."""
        s1, s2 = int(self.qlen[b]), int(self.kvlen[b])
        step = max(1, (1 << 22) // max(s2, 1))
        return sum(int(np.count_nonzero(self.visible(b, n1, slice(r, r + step)))) for r in range(0, s1, step))

    def bias(self, b: int, n1: int) -> np.ndarray | None:
        """float64 (qlen[b] or 1, kvlen[b]) pse of head n1 of batch b (None without a pse)."""
        from ..golden.dtypes import to_f64

        s1, s2 = int(self.qlen[b]), int(self.kvlen[b])
        if self.pse_kind == "none":
            return None
        if self.pse_kind == "outer":
            p = self.pse[b if self.pse.shape[0] > 1 else 0, n1]
            rows = p[:1] if p.shape[0] == 1 else p[:s1]
            return to_f64(rows[:, :s2], "pse")
        slope = float(self.pse[b if self.pse.shape[0] > 1 else 0, n1])
        dist = np.abs(np.arange(s2)[None, :] - np.arange(s1)[:, None] + self.kv_start - self.q_start)
        dist = dist.astype(np.float64)
        if self.pse_kind == "alibi_sqrt":
            dist = np.sqrt(dist)
        return -slope * dist


def _err(param, value, rule, status=_INVALID, checker="aclnn"):
    return ParamError(param, value, rule, status=status, checker=checker)


def _int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise _err(name, v, "must be an int")
    return int(v)


def _heads(x: np.ndarray, layout: str, heads: int, what: str) -> tuple:
    """(B, N, S, D) sizes of a q/k/v tensor in ``layout`` (TND: B = 1, S = T)."""
    want = 3 if layout in ("BSH", "SBH", "TND") else 4
    if x.ndim != want:
        raise _err(what, f"shape {tuple(x.shape)}", f"a {layout} tensor is {want}-D")
    if layout in ("BSH", "SBH"):
        h = x.shape[2]
        if heads <= 0 or h % heads:
            raise _err("head_num" if what == "query" else what, heads if what == "query" else tuple(x.shape),
                       f"H = {h} of {what} must be a multiple of the head count ({heads})")
        bb, s = (x.shape[0], x.shape[1]) if layout == "BSH" else (x.shape[1], x.shape[0])
        return bb, heads, s, h // heads
    if layout == "BSND":
        return x.shape[0], x.shape[2], x.shape[1], x.shape[3]
    if layout == "BNSD":
        return x.shape[0], x.shape[1], x.shape[2], x.shape[3]
    return 1, x.shape[1], x.shape[0], x.shape[2]


def _lengths(name: str, cum, total: int) -> np.ndarray:
    """Per-batch lengths from a cumulative TND length list (trailing 0s are unused batches)."""
    if cum is None:
        raise _err(name, None, "TND requires actual_seq_qlen and actual_seq_kvlen (cumulative lengths)",
                   status=AclnnStatus.PARAM_NULLPTR)
    c = [int(v) for v in np.asarray(to_numpy(cum)).reshape(-1)]
    if not c:
        raise _err(name, cum, "must hold one cumulative length per batch")
    used = len(c)
    while used > 1 and c[used - 1] == 0:
        used -= 1
    c_used = c[:used]
    prev = 0
    for i, v in enumerate(c_used):
        if v < prev:
            raise _err(name, c, f"cumulative lengths must not decrease (element {i}: {v} < {prev})")
        prev = v
    if c_used[-1] > total:
        raise _err(name, c, f"the last cumulative length {c_used[-1]} exceeds the tensor's T = {total}")
    lens = np.diff(np.array([0] + c_used + [c_used[-1]] * (len(c) - used), dtype=np.int64))
    return lens


def prepare_call(query, key, value, *, head_num: int, input_layout: str, pse=None, padding_mask=None,
                 atten_mask=None, scale: float = 1.0, keep_prob: float = 1.0, pre_tockens: int = INT_MAX,
                 next_tockens: int = INT_MAX, inner_precise: int = 0, prefix=None, actual_seq_qlen=None,
                 actual_seq_kvlen=None, sparse_mode: int = 0, softmax_layout: str = "", sink=None,
                 dropout_mask=None, seed: int = 0, offset: int = 0, pse_type: int = 1, q_start_idx=None,
                 kv_start_idx=None, dropout_source: str = "kernel") -> FasCall:
    """The normalised call (see the module docstring); raises ``ParamError`` / ``UnsupportedParameterError``.

    ``dropout_source``: which generator draws the keep mask from seed / offset (:func:`.dropout.generate_keep_mask`:
    "kernel" = the Ascend 950 in-kernel generator, "gen_mask" = the public StatelessDropOutGenMask op that stands
    in for the A2/A3 mask-generation unit, whose algorithm is not public)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t is None:
            raise _err(name, None, "a required tensor is missing", status=AclnnStatus.PARAM_NULLPTR)
    q, k, v = to_numpy(query), to_numpy(key), to_numpy(value)
    if not isinstance(input_layout, str) or input_layout not in LAYOUTS:
        raise _err("input_layout", input_layout, f"must be one of {', '.join(LAYOUTS)}")
    layout = input_layout
    n1 = _int("head_num", head_num)
    if n1 <= 0:
        raise _err("head_num", n1, "must be positive")
    dtype = canonical_dtype(q.dtype)
    if dtype not in _FLOATS:
        raise _err("query", f"dtype {dtype}", "query, key and value are float16, bfloat16 or float32")
    for name, t in (("key", k), ("value", v)):
        if canonical_dtype(t.dtype) != dtype:
            raise _err(name, f"dtype {canonical_dtype(t.dtype)}", f"must have the query's dtype ({dtype})")
    if padding_mask is not None:
        raise UnsupportedParameterError("padding_mask", padding_mask, "reserved by the operator (not used)")
    bq, nq, sq, d = _heads(q, layout, n1, "query")
    if layout in ("BSH", "SBH"):   # the kv head count follows from H_kv and D
        hk = k.shape[2] if k.ndim == 3 else 0
        if d <= 0 or hk % d:
            raise _err("key", f"shape {tuple(k.shape)}", f"H_kv = {hk} must be a multiple of the query's D = {d}")
        n2 = hk // d
    else:
        n2 = k.shape[1] if layout in ("BNSD", "TND") else (k.shape[2] if k.ndim == 4 else 0)
    if n2 <= 0 or n1 % n2:
        raise _err("key", f"shape {tuple(k.shape)}", f"the kv head count {n2} must divide head_num = {n1}")
    bk, _, sk, dk = _heads(k, layout, n2, "key")
    bv, nv, sv, dv = _heads(v, layout, n2, "value")
    if dk != d:
        raise _err("key", f"shape {tuple(k.shape)}", f"D of key ({dk}) must equal D of query ({d})")
    if dv > d or nv != n2 or sv != sk or bv != bk:
        raise _err("value", f"shape {tuple(v.shape)}", f"value must match key in B, N and S, with Dv <= D ({d})")
    if bk != bq:
        raise _err("key", f"shape {tuple(k.shape)}", f"B of key ({bk}) must equal B of query ({bq})")
    if not (0.0 < float(keep_prob) <= 1.0):
        raise _err("keep_prob", keep_prob, "must be in (0, 1]")

    if layout == "TND":
        qlen = _lengths("actual_seq_qlen", actual_seq_qlen, sq)
        kvlen = _lengths("actual_seq_kvlen", actual_seq_kvlen, sk)
        if len(qlen) != len(kvlen):
            raise _err("actual_seq_kvlen", len(kvlen), f"must hold as many batches as actual_seq_qlen ({len(qlen)})")
        batch = len(qlen)
        qoff = np.concatenate([[0], np.cumsum(qlen)[:-1]]).astype(np.int64)
        kvoff = np.concatenate([[0], np.cumsum(kvlen)[:-1]]).astype(np.int64)
    else:
        if actual_seq_qlen is not None or actual_seq_kvlen is not None:
            raise _err("actual_seq_qlen", actual_seq_qlen, f"varlen lengths are for the TND layout, not {layout}")
        batch = bq
        qlen = np.full(batch, sq, np.int64)
        kvlen = np.full(batch, sk, np.int64)
        qoff = np.zeros(batch, np.int64)
        kvoff = np.zeros(batch, np.int64)
    s1_full, s2_full = int(qlen.max(initial=0)), int(kvlen.max(initial=0))

    mode = _int("sparse_mode", sparse_mode)
    pre, nxt = _int("pre_tockens", pre_tockens), _int("next_tockens", next_tockens)
    pse_type = _int("pse_type", pse_type)
    if pse_type not in (0, 1, 2, 3):
        raise _err("pse_type", pse_type, "must be 0, 1, 2 or 3")
    kind, pse_arr = _pse(pse, pse_type, dtype, batch, n1, s1_full, s2_full, layout, qlen, kvlen)
    qs = 0 if q_start_idx is None else int(np.asarray(q_start_idx).reshape(-1)[0])
    kvs = 0 if kv_start_idx is None else int(np.asarray(kv_start_idx).reshape(-1)[0])

    band, lo, hi, pfx, mask = _visibility(atten_mask, mode, pre, nxt, prefix, qlen, kvlen, batch, n1, s1_full,
                                          s2_full, layout)
    if kind != "none" and mode in (7, 8) and atten_mask is not None:
        raise _err("pse", "given", f"sparse_mode {mode} takes no pse (documented constraint)")
    keep = None
    if float(keep_prob) < 1.0:
        from .dropout import generate_keep_mask, unpack_drop_mask

        shape = (batch, n1, s1_full, s2_full)
        lens = dict(qlen=qlen, kvlen=kvlen) if layout == "TND" else {}
        if dropout_mask is not None:
            keep = unpack_drop_mask(to_numpy(dropout_mask), shape, **lens)
        else:
            keep = generate_keep_mask(int(seed), int(offset), float(keep_prob), shape, source=dropout_source, **lens)
    sink_arr = None
    if sink is not None:
        s = to_numpy(sink)
        if canonical_dtype(s.dtype) != "float32" or s.reshape(-1).shape[0] != n1:
            raise _err("sink", f"{canonical_dtype(s.dtype)} {tuple(s.shape)}", f"must be float32 of shape ({n1},)")
        sink_arr = np.ascontiguousarray(s.reshape(-1), dtype=np.float32)
    if softmax_layout not in ("", "same_as_input", "TND"):
        raise _err("softmax_layout", softmax_layout, 'must be "", "same_as_input" or "TND"')
    if softmax_layout == "TND" and layout != "TND":
        raise _err("softmax_layout", softmax_layout, f'"TND" is for the TND layout, not {layout}')
    sm = "BNSD" if layout != "TND" else ("NTD" if softmax_layout == "" else "TND")
    return FasCall(layout=layout, kernel_layout=_KERNEL_LAYOUT[layout], dtype=dtype, b=batch, n1=n1, n2=n2, d=d,
                   dv=dv, qlen=qlen, kvlen=kvlen, qoff=qoff, kvoff=kvoff, scale=float(scale),
                   keep_prob=float(keep_prob), pse_type=pse_type, pse_kind=kind, pse=pse_arr, q_start=qs,
                   kv_start=kvs, band=band, lo=lo, hi=hi, prefix=pfx, mask=mask, keep=keep, sink=sink_arr,
                   softmax_layout=sm, sparse_mode=mode, pre_tokens=pre, next_tokens=nxt, q_shape=tuple(q.shape),
                   s1_full=s1_full, s2_full=s2_full)


def _pse(pse, pse_type: int, dtype: str, batch: int, n1: int, s1: int, s2: int, layout: str, qlen, kvlen):
    if pse is None:
        return "none", None
    p = to_numpy(pse)
    if pse_type in (2, 3):
        if canonical_dtype(p.dtype) != "float32" or p.ndim not in (1, 2) or p.shape[-1] != n1 or \
                (p.ndim == 2 and p.shape[0] != batch):
            raise _err("pse", f"{canonical_dtype(p.dtype)} {tuple(p.shape)}",
                       f"pse_type {pse_type} takes alibi slopes, float32 of shape ({batch}, {n1}) or ({n1},)")
        if np.any(qlen != kvlen):
            raise _err("pse", f"pse_type {pse_type}", "an internally generated pse needs Sq == Skv")
        slopes = np.ascontiguousarray(p.reshape(-1, n1), dtype=np.float32)
        return ("alibi" if pse_type == 2 else "alibi_sqrt"), slopes
    if canonical_dtype(p.dtype) != dtype:
        raise _err("pse", f"dtype {canonical_dtype(p.dtype)}", f"must have the query's dtype ({dtype})")
    if p.ndim != 4 or p.shape[0] not in (1, batch) or p.shape[1] != n1:
        raise _err("pse", f"shape {tuple(p.shape)}", f"must be (B|1, N1, S1|1, S2) = ({batch}|1, {n1}, {s1}|1, {s2})")
    if p.shape[2] not in (1, s1) or p.shape[3] < s2:
        if p.shape[2] == 1024 and s1 > 1024:
            raise UnsupportedParameterError("pse", p, "the compressed alibi pse (BNHS / 1NHS, H = 1024) is not "
                                                      "simulated")
        raise _err("pse", f"shape {tuple(p.shape)}", f"its S axes must be ({s1} or 1, >= {s2})")
    if layout == "TND" and np.any(qlen == 0):
        raise _err("pse", "given", "a TND call with a zero-length batch takes no pse (documented constraint)")
    return "outer", p


def _visibility(atten_mask, mode: int, pre: int, nxt: int, prefix, qlen, kvlen, batch: int, n1: int, s1: int,
                s2: int, layout: str):
    """(band, lo, hi, prefix, mask) of the module table."""
    zeros = np.zeros(batch, np.int64)
    if mode not in range(9):
        raise _err("sparse_mode", mode, "must be 0-8", status=AclnnStatus.INNER_TILING_ERROR, checker="sparse")
    if atten_mask is None:   # torch_npu: without a mask, sparse_mode and pre/next are ignored
        return False, zeros, zeros, None, None
    m = to_numpy(atten_mask)
    if canonical_dtype(m.dtype) not in ("bool", "uint8"):
        raise _err("atten_mask", f"dtype {canonical_dtype(m.dtype)}", "must be bool or uint8 (1 = masked)")
    off = kvlen - qlen
    big = np.full(batch, -_BAND_CLAMP, np.int64)
    if mode in (7, 8) and layout != "TND":
        raise _err("sparse_mode", mode, "modes 7 and 8 are for the varlen (TND) layout", checker="sparse",
                   status=AclnnStatus.INNER_TILING_ERROR)
    if mode == 5 and layout == "TND":
        raise _err("sparse_mode", 5, "prefix mode 5 is not supported with TND (use 6)", checker="sparse",
                   status=AclnnStatus.INNER_TILING_ERROR)
    if mode in (2, 3, 4, 7, 8):
        _template(m, (TEMPLATE_SIZE, TEMPLATE_SIZE), mode)
    if mode == 6:
        _template(m, (PREFIX_TEMPLATE_ROWS, TEMPLATE_SIZE), mode)
    if mode in (4, 7, 8, 0):
        if nxt < 0 and pre < -nxt:
            raise _err("pre_tockens", pre, f"with next_tockens {nxt} < 0, pre_tockens must be >= {-nxt}",
                       status=AclnnStatus.INNER_TILING_ERROR, checker="sparse")
        if pre < 0 and nxt < -pre:
            raise _err("next_tockens", nxt, f"with pre_tockens {pre} < 0, next_tockens must be >= {-pre}",
                       status=AclnnStatus.INNER_TILING_ERROR, checker="sparse")
    mask = None
    pfx = None
    if mode in (0, 1, 5):
        mask = _full_mask(m, batch, n1, s1, s2, mode)
    if mode == 0:
        if pre >= INT_MAX and nxt >= INT_MAX:
            return False, zeros, zeros, None, mask
        lo, hi = np.full(batch, -pre, np.int64), np.full(batch, nxt, np.int64)
    elif mode == 1:
        return False, zeros, zeros, None, mask
    elif mode == 2:
        lo, hi = big, zeros.copy()
    elif mode == 3:
        lo, hi = big, off.copy()
    elif mode == 4:
        lo, hi = off - pre, off + nxt
    elif mode in (5, 6):
        if prefix is None and mode == 6:
            raise _err("prefix", None, "sparse_mode 6 requires prefix (one N per batch)",
                       status=AclnnStatus.PARAM_NULLPTR)
        if prefix is None:
            return False, zeros, zeros, None, mask
        pfx = np.asarray([int(x) for x in np.asarray(to_numpy(prefix)).reshape(-1)], np.int64)
        if len(pfx) < batch:
            raise _err("prefix", list(pfx), f"must hold one N per batch ({batch})")
        pfx = pfx[:batch]
        for b in range(batch):
            low = 0 if qlen[b] > kvlen[b] else kvlen[b] - qlen[b]
            if mode == 6 and not (low <= pfx[b] <= kvlen[b]) and qlen[b] > 0:
                raise _err("prefix", list(pfx), f"batch {b}: N = {pfx[b]} must be in [{low}, {kvlen[b]}] "
                           f"(Sq = {qlen[b]}, Skv = {kvlen[b]})", status=AclnnStatus.INNER_TILING_ERROR,
                           checker="sparse")
        if mode == 5 and np.any(pfx > kvlen):
            return False, zeros, zeros, None, mask      # documented: N > Skv runs the full computation
        lo, hi = big, off.copy()
    else:   # 7 / 8: the causal mode per batch, the band at the last (7) / first (8) non-empty batch
        lo = big.copy()
        hi = off.copy() if mode == 7 else zeros.copy()
        nonempty = [b for b in range(batch) if qlen[b] > 0]
        if nonempty:
            b = nonempty[-1] if mode == 7 else nonempty[0]
            lo[b], hi[b] = off[b] - pre, off[b] + nxt
    lo = np.clip(np.asarray(lo, np.int64), -_BAND_CLAMP, _BAND_CLAMP)
    hi = np.clip(np.asarray(hi, np.int64), -_BAND_CLAMP, _BAND_CLAMP)
    return True, lo, hi, pfx, mask


def _template(m: np.ndarray, shape: tuple, mode: int):
    if tuple(m.shape[-2:]) != shape or any(x != 1 for x in m.shape[:-2]):
        raise _err("atten_mask", f"shape {tuple(m.shape)}", f"sparse_mode {mode} takes the compressed "
                   f"{shape[0]}x{shape[1]} mask (optionally with leading 1 axes)")


def _full_mask(m: np.ndarray, batch: int, n1: int, s1: int, s2: int, mode: int) -> np.ndarray:
    """A (Bm, Nm, S1, S2) uint8 view of a mask that is read (modes 0, 1, 5)."""
    if m.ndim == 2:
        m4 = m[None, None]
    elif m.ndim == 4:
        m4 = m
    else:
        raise _err("atten_mask", f"shape {tuple(m.shape)}", "must be (S1, S2), (B|1, N|1, S1, S2)")
    if m4.shape[0] not in (1, batch) or m4.shape[1] not in (1, n1):
        raise _err("atten_mask", f"shape {tuple(m.shape)}", f"its B and N axes must be 1 or ({batch}, {n1})")
    if mode == 5 and m.ndim != 4:
        raise _err("atten_mask", f"shape {tuple(m.shape)}", "sparse_mode 5 takes a BNSS or B1SS mask")
    if m4.shape[2] < s1 or m4.shape[3] < s2:
        raise _err("atten_mask", f"shape {tuple(m.shape)}", f"its S axes must cover ({s1}, {s2})")
    if m4.dtype == np.bool_:
        m4 = m4.view(np.uint8)
    return m4


def head_rows(x: np.ndarray, call: FasCall, b: int, n: int, start: int, length: int, d: int) -> np.ndarray:
    """The (length, d) view of head n of batch b of a q/k/v/out-shaped tensor (head size d) in
    ``call.layout``, from position (TND: token) ``start``."""
    lay = call.layout
    if lay in ("BSH", "SBH"):
        x = x.reshape(x.shape[0], x.shape[1], -1, d)
    if lay in ("BSH", "BSND"):
        return x[b, start:start + length, n]
    if lay == "SBH":
        return x[start:start + length, b, n]
    if lay == "BNSD":
        return x[b, n, start:start + length]
    return x[start:start + length, n]


def stat_rows(t: np.ndarray, call: FasCall, b: int, n: int) -> np.ndarray:
    """The (qlen[b], 8) view of softmax_max / softmax_sum for head n of batch b (``call.softmax_layout``)."""
    s1, q0 = int(call.qlen[b]), int(call.qoff[b])
    if call.softmax_layout == "BNSD":
        return t[b, n, :s1]
    if call.softmax_layout == "TND":
        return t[q0:q0 + s1, n]
    flat = t.reshape(-1, 8)
    base = q0 * call.n1 + n * s1
    return flat[base:base + s1]


def out_shape(call: FasCall) -> tuple:
    """attention_out's shape: the query's with D replaced by Dv."""
    shp = list(call.q_shape)
    if call.layout in ("BSH", "SBH"):
        shp[2] = call.n1 * call.dv
    else:
        shp[-1] = call.dv
    return tuple(shp)


def stat_shape(call: FasCall) -> tuple:
    """softmax_max / softmax_sum's shape: (B, N1, S1, 8), or (T, N1, 8) for TND."""
    if call.token:
        return (call.q_shape[0], call.n1, 8)
    return (call.b, call.n1, call.s1_full, 8)
