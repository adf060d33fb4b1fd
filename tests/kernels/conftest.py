"""Fixtures of the FIA kernel tests: one small FusedInferAttentionScore call, run on the simulator and judged.

``fia_kit.run(FiaCase(...))`` builds seeded random inputs for the case, calls
``cvtile.npu_fused_infer_attention_score`` (the simulated kernels), the float64
golden ``fia_golden_lowp`` (``fia_golden`` with P rounded to the input dtype
before P·V, as the chip's cube multiplies it) and the tiling mirror
``tile_fia`` on the same call, and
returns a :class:`FiaRunResult` with the two comparison reports (upstream
tolerance classes, worst element), the tiling and the rows the operator
promises to leave empty (a batch with q length 0 or kv length 0, fully masked
rows). ``fia_kit.check(case)`` additionally asserts everything the operator
promises and returns the result.

What a test must know about the numbers it is given:

* The golden does not take a target; for the lse of rows without any KV it
  writes -3.4e38 on every decode call of layout BSH/BSND/BNSD (the legacy IFA
  class of A2/A3). The operator promises that value only where the tiling says
  so (``tiling.extras["legacy_ifa"]``, arch22); elsewhere +inf. The kit
  replaces the golden's value on those rows by the tiling's promise before
  comparing, and asserts the promise itself on the empty rows.
* The kernel's compile key is its constexprs (layout pair, row fold, G, M, S2,
  D, Dv, band, mask, lse, FD, P dtype, empty-lse value) plus the argument
  dtypes/ranks. Each new combination costs a numba compile (~5-10 s cold), so
  the grids vary lengths, batch counts and sparse modes 2/3/4 (all one "band"
  specialisation) freely and the constexprs sparingly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from cvtile.kernels import compare, fia_golden_lowp, mask_template, npu_fused_infer_attention_score
from cvtile.kernels.fia.api_v2 import V2_ATTRS_TO_V1, V2_TO_V1, npu_fused_infer_attention_score_v2
from cvtile.kernels.golden import LSE_EMPTY_LEGACY_DECODE
from cvtile.kernels.golden.dtypes import numpy_dtype
from cvtile.kernels.golden.layouts import parse_layout
from cvtile.tiling.fia import tile_fia
from cvtile.tiling.params import FiaParams, TensorMeta

INT_MAX = 2147483647
#: lse of a row without KV: FIA routes / the arch22 legacy IFA decode class
LSE_INF = float("inf")
LSE_LEGACY = float(np.float32(-3.4e38))


@dataclass(frozen=True)
class FiaCase:
    """One FusedInferAttentionScore call on small shapes.

    ``s1`` / ``s2`` are the tensors' sequence sizes (batch layouts); ``q_lens`` / ``kv_lens`` the
    per-batch actual lengths (passed as ``actual_seq_lengths(_kv)``; cumulative for TND/NTD, where
    they are required and the token counts are their sums). ``mask``: None, "random" (about a third
    of the pairs masked, one (B, 1, S1, S2) bool mask) or "rows" (random plus the first query row of
    every batch fully masked). Sparse 2/3/4 always get the compressed 2048x2048 template.
    """

    layout: str = "BNSD"
    b: int = 2
    n: int = 8
    nkv: int = 2
    s1: int = 64
    s2: int = 600
    d: int = 64
    dtype: str = "float16"
    q_lens: tuple | None = None
    kv_lens: tuple | None = None
    sparse: int = 0
    mask: str | None = None
    pre: int = INT_MAX
    nxt: int = INT_MAX
    lse: bool = True
    target: str = "Ascend910B1"
    inner_precise: int = 0
    seed: int = 0

    def with_(self, **kw) -> "FiaCase":
        return replace(self, **kw)

    @property
    def g(self) -> int:
        return self.n // self.nkv

    def label(self) -> str:
        parts = [self.target, self.layout, self.dtype, f"B{self.b}", f"N{self.n}/{self.nkv}", f"S{self.s1}x{self.s2}",
                 f"D{self.d}", f"sparse{self.sparse}"]
        if self.mask:
            parts.append(f"mask={self.mask}")
        if self.q_lens is not None:
            parts.append(f"q={list(self.q_lens)}")
        if self.kv_lens is not None:
            parts.append(f"kv={list(self.kv_lens)}")
        if self.pre != INT_MAX or self.nxt != INT_MAX:
            parts.append(f"pre/next={self.pre}/{self.nxt}")
        parts.append("lse" if self.lse else "nolse")
        return " ".join(parts)


@dataclass
class FiaRunResult:
    case: FiaCase
    kwargs: dict
    out: np.ndarray
    lse: np.ndarray
    golden_out: np.ndarray
    golden_lse: np.ndarray | None
    tiling: object
    out_report: object
    lse_report: object | None
    empty_rows: list = field(default_factory=list)   # (b, query position) with no visible KV at all
    empty_lse: float = LSE_INF

    def describe(self) -> str:
        t = self.tiling
        text = [self.case.label(),
                f"  tiling: {t.route}/{t.template} m_base={t.m_base} s2_base={t.s2_base} order={t.m_order} "
                f"fd={t.fd} ({len(t.fd_tasks)} split rows) cores={t.used_cores} legacy_ifa={t.extras.get('legacy_ifa')}",
                f"  out: {self.out_report}"]
        if self.lse_report is not None:
            text.append(f"  lse: {self.lse_report}")
        return "\n".join(text)


def _rand(rng, shape, dtype: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32).astype(numpy_dtype(dtype))


def _cum(vals) -> list[int]:
    return [int(x) for x in np.cumsum(vals)]


class FiaKit:
    """Builds, runs and judges :class:`FiaCase` calls (see the module docstring)."""

    Case = FiaCase

    def inputs(self, c: FiaCase) -> dict:
        """The torch_npu keyword arguments of the case (seeded random data)."""
        rng = np.random.default_rng([c.seed, c.b, c.s1, c.s2, c.n, c.d])
        lay = parse_layout(c.layout)
        kw: dict = dict(num_heads=c.n, num_key_value_heads=c.nkv, input_layout=c.layout, scale=c.d ** -0.5,
                        sparse_mode=c.sparse, pre_tokens=c.pre, next_tokens=c.nxt, softmax_lse_flag=c.lse,
                        inner_precise=c.inner_precise)
        if lay.token:
            if c.q_lens is None or c.kv_lens is None:
                raise ValueError("TND/NTD cases need q_lens and kv_lens")
            t1, t2 = sum(c.q_lens), sum(c.kv_lens)
            qs, ks = (t1, c.n, c.d), (t2, c.nkv, c.d)
            if lay.qkv == "NTD":
                qs, ks = (c.n, t1, c.d), (c.nkv, t2, c.d)
            kw["actual_seq_lengths"] = _cum(c.q_lens)
            kw["actual_seq_lengths_kv"] = _cum(c.kv_lens)
        else:
            qs = {"BSH": (c.b, c.s1, c.n * c.d), "BSND": (c.b, c.s1, c.n, c.d),
                  "BNSD": (c.b, c.n, c.s1, c.d)}[lay.qkv]
            ks = {"BSH": (c.b, c.s2, c.nkv * c.d), "BSND": (c.b, c.s2, c.nkv, c.d),
                  "BNSD": (c.b, c.nkv, c.s2, c.d)}[lay.qkv]
            if c.q_lens is not None:
                kw["actual_seq_lengths"] = list(c.q_lens)
            if c.kv_lens is not None:
                kw["actual_seq_lengths_kv"] = list(c.kv_lens)
        kw["query"] = _rand(rng, qs, c.dtype)
        kw["key"] = _rand(rng, ks, c.dtype)
        kw["value"] = _rand(rng, ks, c.dtype)
        if c.sparse in (2, 3, 4):
            kw["atten_mask"] = mask_template()
        elif c.mask is not None:
            m = rng.random((c.b, 1, c.s1, c.s2)) < 0.35
            if c.mask == "rows":
                m[:, :, 0, :] = True
            kw["atten_mask"] = m
        return kw

    def tiling(self, c: FiaCase, kw: dict | None = None):
        """``tile_fia`` of the case's call on its target (what the API plans)."""
        kw = kw if kw is not None else self.inputs(c)
        tensors = {name: kw.get(name) for name in ("query", "key", "value", "atten_mask", "actual_seq_lengths",
                                                   "actual_seq_lengths_kv")}
        q, v = kw["query"], kw["value"]
        tensors["attention_out"] = TensorMeta(self._out_shape(c, q, v), c.dtype)
        if c.lse:
            tensors["softmax_lse"] = TensorMeta(self._lse_shape(c, q), "float32")
        attrs = {k: kw[k] for k in ("num_heads", "num_key_value_heads", "input_layout", "scale", "sparse_mode",
                                    "pre_tokens", "next_tokens", "softmax_lse_flag", "inner_precise")}
        return tile_fia(FiaParams.from_api(tensors, attrs), c.target)

    @staticmethod
    def _out_shape(c: FiaCase, q, v) -> tuple:
        lay = parse_layout(c.layout)
        if lay.token:
            t = q.shape[0] if lay.qkv == "TND" else q.shape[1]
            return (t, c.n, c.d) if lay.out == "TND" else (c.n, t, c.d)
        return {"BSH": (c.b, c.s1, c.n * c.d), "BSND": (c.b, c.s1, c.n, c.d),
                "BNSD": (c.b, c.n, c.s1, c.d)}[lay.out]

    @staticmethod
    def _lse_shape(c: FiaCase, q) -> tuple:
        lay = parse_layout(c.layout)
        if lay.token:
            return (q.shape[0] if lay.qkv == "TND" else q.shape[1], c.n, 1)
        return (c.b, c.n, c.s1, 1)

    def _empty_rows(self, c: FiaCase, kw: dict, legacy: bool) -> list:
        """(b, query position) of computed rows that see no KV position at all, from the documented sparse
        modes (written here independently of the golden's mask engine): no KV, a fully masked mask row
        (mask="rows"), or a band that misses [0, kv)."""
        lay = parse_layout(c.layout)
        decode = not lay.token and c.s1 == 1
        rows = []
        for b in range(c.b):
            ql = 1 if decode else (c.q_lens[b] if c.q_lens is not None else c.s1)
            kl = c.kv_lens[b] if c.kv_lens is not None else c.s2
            for i in range(ql):
                if kl == 0:
                    rows.append((b, i))
                    continue
                if legacy:           # the legacy decode route ignores sparse_mode and pre/next tokens
                    lo, hi = 0, kl - 1
                elif c.sparse == 2:  # left-up causal: j <= i
                    lo, hi = 0, i
                elif c.sparse == 3:  # right-down causal: j <= i + kv - q
                    lo, hi = 0, i + kl - ql
                elif c.sparse == 4:  # band from the bottom-right corner
                    lo, hi = i + kl - ql - c.pre, i + kl - ql + c.nxt
                elif c.sparse == 0 and c.mask is not None:  # pre/next apply with a mask (left-up origin)
                    lo, hi = i - c.pre, i + c.nxt
                else:
                    lo, hi = 0, kl - 1
                if max(lo, 0) > min(hi, kl - 1) or (c.mask == "rows" and i == 0 and c.sparse in (0, 1)):
                    rows.append((b, i))
        return rows

    def run(self, c: FiaCase) -> FiaRunResult:
        kw = self.inputs(c)
        snapshot = {k: np.array(v, copy=True) for k, v in kw.items() if isinstance(v, np.ndarray)}
        tiling = self.tiling(c, kw)
        out, lse = npu_fused_infer_attention_score(**kw, target=c.target)
        for k, v in snapshot.items():   # the operator must not touch its inputs
            assert np.array_equal(kw[k].view(np.uint8), v.view(np.uint8)), f"{k} was modified by the call"
        g_out, g_lse = fia_golden_lowp(**kw)
        legacy = bool(tiling.extras.get("legacy_ifa", False))
        empty = LSE_LEGACY if legacy else LSE_INF
        if g_lse is not None and not legacy:
            # the golden has no target: its legacy-IFA value applies only where the tiling says legacy_ifa
            g_lse = np.where(g_lse == LSE_EMPTY_LEGACY_DECODE, LSE_INF, g_lse)
        rep_o = compare(out, g_out, c.dtype, name="attention_out")
        rep_l = compare(lse, g_lse, c.dtype, name="softmax_lse") if c.lse else None
        return FiaRunResult(c, kw, out, lse, g_out, g_lse, tiling, rep_o, rep_l, self._empty_rows(c, kw, legacy),
                            empty)

    # ------------------------------------------------------------------ promises
    def row_view(self, r: FiaRunResult, a: np.ndarray, b: int, i: int, what: str) -> np.ndarray:
        """Output (what="out") or lse (what="lse") values of query row i of batch b, all heads."""
        c = r.case
        lay = parse_layout(c.layout)
        if lay.token:
            tok = int(np.concatenate([[0], np.cumsum(c.q_lens)])[b]) + i
            if what == "lse":
                return a[tok]
            return a[tok] if lay.out == "TND" else a[:, tok]
        if what == "lse":
            return a[b, :, i]
        return {"BSH": lambda: a[b, i], "BSND": lambda: a[b, i], "BNSD": lambda: a[b, :, i]}[lay.out]()

    def check_pipelined(self, c: FiaCase) -> FiaRunResult:
        """Check the case in program order, then run it in pipelined order (the split, synced, pipelined
        programs) and assert that both orders give bitwise the same outputs."""
        r = self.check(c)
        out, lse = npu_fused_infer_attention_score(**r.kwargs, target=c.target, order="pipelined")
        bits = np.uint16 if out.itemsize == 2 else np.uint32
        assert np.array_equal(out.view(bits), r.out.view(bits)), \
            f"pipelined attention_out differs from program order (max |diff| " \
            f"{np.nanmax(np.abs(out.astype(np.float64) - r.out.astype(np.float64)))})\n{r.describe()}"
        if c.lse:
            assert np.array_equal(lse.view(np.uint32), r.lse.view(np.uint32)), \
                f"pipelined softmax_lse differs from program order\n{r.describe()}"
        return r

    def check(self, c: FiaCase) -> FiaRunResult:
        """Run the case and assert: shapes/dtypes, the comparisons, and output 0 / the promised lse on empty rows."""
        r = self.run(c)
        info = r.describe()
        assert r.out.shape == r.golden_out.shape and r.out.dtype == np.dtype(numpy_dtype(c.dtype)), info
        assert r.out_report.passed, info
        if c.lse:
            assert r.lse.dtype == np.float32 and r.lse.shape == r.golden_lse.shape, info
            assert r.lse_report.passed, info
        else:
            assert r.lse.shape == (0,), info
        for b, i in r.empty_rows:
            assert not np.any(self.row_view(r, r.out, b, i, "out")), f"row (b={b}, s={i}) is not 0\n{info}"
            if c.lse:
                vals = self.row_view(r, r.lse, b, i, "lse")
                assert np.all(vals == np.float32(r.empty_lse)), \
                    f"lse of empty row (b={b}, s={i}) is {vals.ravel()[:4]}, promised {r.empty_lse}\n{info}"
        return r


@pytest.fixture(scope="session")
def fia_kit() -> FiaKit:
    return FiaKit()


def _judged(simulated, golden, dtype, lse: bool):
    """Assert the simulated ``(out, lse)`` within the golden's under the upstream rule of ``dtype`` (the lse
    too, as fp32, when ``lse``); returns the output."""
    (out, got_lse), (gold, gold_lse) = simulated, golden
    rep = compare(out, gold, dtype)
    assert rep.passed, str(rep)
    if lse:
        rl = compare(got_lse, gold_lse, "float32")
        assert rl.passed, str(rl)
    return out


def _judge_fia(q, k, v, **kw):
    """Run one call on the simulator and judge it against ``fia_golden_lowp`` under the upstream rule of the
    query's dtype (the lse too, as fp32, with ``softmax_lse_flag``); returns the output."""
    return _judged(npu_fused_infer_attention_score(q, k, v, **kw), fia_golden_lowp(q, k, v, **kw), q.dtype,
                   kw.get("softmax_lse_flag"))


def _judge_fia_v2(q, k, v, **kw):
    """``_judge_fia`` of a call in FIA V2's keywords (the golden gets their V1 names; ``key_dtype`` /
    ``value_dtype`` as they are)."""
    names = {**V2_TO_V1, **V2_ATTRS_TO_V1}
    return _judged(npu_fused_infer_attention_score_v2(q, k, v, **kw),
                   fia_golden_lowp(q, k, v, **{names.get(name, name): x for name, x in kw.items()}), q.dtype,
                   kw.get("return_softmax_lse"))


@pytest.fixture
def judge_fia():
    """``judge_fia(q, k, v, **keywords)``: the call's simulated output, asserted within the golden's tolerance."""
    return _judge_fia


@pytest.fixture
def judge_fia_v2():
    """``judge_fia_v2(q, k, v, **V2 keywords)``: as ``judge_fia``, through ``npu_fused_infer_attention_score_v2``."""
    return _judge_fia_v2


def _paged_bsh(rng, values, *, b, n, n2, d, bs, lens, s1=1, dtype=np.float16):
    """A paged BnBsH call: a BSH query (b, s1, n*d) of ``dtype``, key and value caches (b * blocks per batch, bs,
    n2*d) drawn by ``values(shape)`` and a permuted block table covering ``lens``. Returns (q, kc, vc, table)."""
    per = -(-max(lens) // bs)
    q = rng.uniform(-1, 1, (b, s1, n * d)).astype(dtype)
    kc, vc = (values((b * per, bs, n2 * d)) for _ in range(2))
    table = rng.permutation(b * per).reshape(b, per).astype(np.int32)
    return q, kc, vc, table


@pytest.fixture
def paged_bsh():
    """``paged_bsh(rng, values, b=, n=, n2=, d=, bs=, lens=, s1=1, dtype=fp16)``: (q, kc, vc, table) of a paged
    BnBsH call (``_paged_bsh``)."""
    return _paged_bsh
