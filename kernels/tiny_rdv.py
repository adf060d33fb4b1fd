"""Reader of the upstream tiny_rdv model cases (``tiny_rdv/*.json``): one FIA call per file.

Model
-----
A tiny_rdv file is one JSON object describing one
``torch_npu.npu_fused_infer_attention_score`` call by its model-level shape, not by
tensors: ``b``, ``n2`` (kv heads), ``g`` (query heads per kv head), ``s1``, ``s2``,
``qk_d``, ``v_d``, ``rope_d``, ``input_layout``, ``kv_storage_mode``
(``continue`` | ``pa_bbh`` | ``pa_bnbd`` | ``pa_nz``), ``block_size``, the dtypes,
``act_seq_lens_q`` / ``act_seq_lens_kv`` (empty = not given), ``enable_mask``,
``mask_shape``, ``sparse_mode``, ``pre_tokens`` / ``next_tokens``,
``enable_softmax_lse``, ``enable_learnable_sink`` and ``inner_precise``.
:class:`TinyRdvCase` turns it into the keyword arguments of that call the way the
upstream tiny_rdv harness (``fused_infer_attention_test.py``) builds them:

* ``num_heads = n2 * g``, ``num_key_value_heads = n2``, ``scale = 1 / sqrt(qk_d)``;
* query ``(B, n2*g, s1, qk_d)``, key ``(B, n2, s2, qk_d)``, value ``(B, n2, s2, v_d)``
  (and, when ``rope_d > 0``, query_rope / key_rope with ``rope_d``) drawn uniformly
  from [-10, 10) and rounded to their dtypes, then laid out in the query layout
  (the first part of ``input_layout``, e.g. BSND for ``BSND_NBSD``);
* ``continue``: key/value in the query layout; paged modes: a block table
  ``(B, ceil(max kv / block_size))`` int32, each batch's ``ceil(kv_b / block_size)``
  blocks drawn from one random permutation of all needed blocks, unused entries
  -1, and the cache ``(blocks, block_size, n2*d)`` (``pa_bbh``), ``(blocks, n2,
  block_size, d)`` (``pa_bnbd``) or NZ ``(blocks, n2, d/16, block_size, 16)``
  (``pa_nz``, 32-byte fractals of fp16/bf16);
* the mask, when enabled, is built from ``sparse_mode`` (the harness ignores
  ``mask_shape``): mode 0 a ``(B, s1, s2)`` bool mask, random half masked and
  every pair outside ``-pre <= j - i <= next`` masked; mode 1 random ``(B, s1,
  s2)``; modes 2/3/4 the 2048x2048 template;
* ``act_seq_lens_*`` are passed as given (a list of 1 or B lengths);
* the platform (``target``): the file names none and the suite runs on A2/A3 and 950 machines, so a case
  runs on Ascend910B1 unless that op_host rejects it and Ascend950's accepts it (a head dim of 259, D 15
  with Dv 80: 950-only calls); see :meth:`TinyRdvCase.target_for`;
  ``enable_learnable_sink`` and ``out_dtype`` have no effect, as in the harness
  (it calls the V1 API, which has no sink, and passes no quant_scale2).

What cvtile cannot build raises ``UnsupportedParameterError`` naming the field
(an int8 query or kv, a token layout TND/NTD); the st runner reports those cases
as unsupported. The case has the interface the runner uses for st cases
(``id``, ``name``, ``features()``, ``elements()``, ``make_inputs(rng)``), so
:func:`cvtile.kernels.st_runner.run_st_corpus` runs a file or a whole folder.

Invariants
----------
* Parsing needs no numpy data; ``make_inputs`` is the only place values are drawn.
* A folder is read in sorted file order; a file that is not a tiny_rdv case is a
  ``ValueError`` naming it.
"""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..tiling.errors import ParamError
from .errors import UnsupportedParameterError
from .golden.dtypes import numpy_dtype
from .golden.layouts import from_bnsd, parse_layout
from .golden.masks import mask_template
from .st_cases import _page_contiguous, _random_tensor

__all__ = ["TinyRdvCase", "is_tiny_rdv", "is_tiny_rdv_path", "load_tiny_rdv", "KV_STORAGE_MODES", "API_NAME",
           "TARGETS"]

#: the paged cache layouts of the harness' ``kv_storage_mode``
KV_STORAGE_MODES = ("continue", "pa_bbh", "pa_bnbd", "pa_nz")
#: the operator API the harness calls (torch_npu V1)
API_NAME = "npu_fused_infer_attention_score"
#: the fields that mark a tiny_rdv object
_MARKERS = ("case_name", "kv_storage_mode", "n2", "g", "qk_d")
_FLOAT_DTYPES = ("float16", "bfloat16")
#: the platforms a case may run on, in order of preference (see ``TinyRdvCase.target_for``)
TARGETS = ("Ascend910B1", "Ascend950")
_VALUE_RANGE = [-10.0, 10.0]


def is_tiny_rdv(data) -> bool:
    """True when ``data`` (parsed JSON) is one tiny_rdv case."""
    return isinstance(data, dict) and all(k in data for k in _MARKERS)


def is_tiny_rdv_path(path) -> bool:
    """A tiny_rdv file, or a folder whose JSON files are tiny_rdv cases (judged by its first one)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        return bool(files) and is_tiny_rdv_path(files[0])
    try:
        return is_tiny_rdv(json.loads(path.read_text()))
    except (OSError, ValueError):
        return False


def load_tiny_rdv(path) -> list["TinyRdvCase"]:
    """The case of a tiny_rdv file, or the cases of every ``*.json`` in a folder (sorted by name)."""
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    cases = []
    for f in files:
        data = json.loads(f.read_text())
        if not is_tiny_rdv(data):
            raise ValueError(f"{f}: not a tiny_rdv case (needs the fields {', '.join(_MARKERS)})")
        cases.append(TinyRdvCase.from_json(data, source=str(f)))
    return cases


def _lens(v) -> list[int] | None:
    return [int(x) for x in v] if v else None


@dataclass(frozen=True)
class TinyRdvCase:
    """One tiny_rdv case (the file's fields, typed; see the module docstring)."""

    name: str
    input_layout: str
    b: int
    n2: int
    g: int
    s1: int
    s2: int
    qk_d: int
    v_d: int
    rope_d: int = 0
    kv_storage_mode: str = "continue"
    q_dtype: str = "float16"
    kv_dtype: str = "float16"
    out_dtype: str = "float16"
    rope_dtype: str = "float16"
    block_size: int = 0
    act_seq_lens_q: tuple | None = None
    act_seq_lens_kv: tuple | None = None
    enable_softmax_lse: bool = False
    enable_mask: bool = False
    mask_shape: tuple = ()
    sparse_mode: int = 0
    pre_tokens: int = 2147483647
    next_tokens: int = 2147483647
    enable_learnable_sink: bool = False
    inner_precise: int = 0
    source: str = field(default="", compare=False)

    @classmethod
    def from_json(cls, d: dict, source: str = "") -> "TinyRdvCase":
        q_dtype = str(d.get("q_dtype") or "bfloat16")
        lens_q, lens_kv = _lens(d.get("act_seq_lens_q")), _lens(d.get("act_seq_lens_kv"))
        return cls(name=str(d["case_name"]), input_layout=str(d.get("input_layout") or "BSH"), b=int(d["b"]),
                   n2=int(d["n2"]), g=int(d["g"]), s1=int(d["s1"]), s2=int(d["s2"]), qk_d=int(d["qk_d"]),
                   v_d=int(d.get("v_d") or d["qk_d"]), rope_d=int(d.get("rope_d") or 0),
                   kv_storage_mode=str(d.get("kv_storage_mode") or "continue"), q_dtype=q_dtype,
                   kv_dtype=str(d.get("kv_dtype") or q_dtype), out_dtype=str(d.get("out_dtype") or q_dtype),
                   rope_dtype=str(d.get("rope_dtype") or q_dtype), block_size=int(d.get("block_size") or 0),
                   act_seq_lens_q=tuple(lens_q) if lens_q else None,
                   act_seq_lens_kv=tuple(lens_kv) if lens_kv else None,
                   enable_softmax_lse=bool(d.get("enable_softmax_lse", False)),
                   enable_mask=bool(d.get("enable_mask", False)),
                   mask_shape=tuple(int(x) for x in d.get("mask_shape") or ()),
                   sparse_mode=int(d.get("sparse_mode") or 0),
                   pre_tokens=int(d.get("pre_tokens", 2147483647)),
                   next_tokens=int(d.get("next_tokens", 2147483647)),
                   enable_learnable_sink=bool(d.get("enable_learnable_sink", False)),
                   inner_precise=int(d.get("inner_precise") or 0), source=source)

    # ---- the interface of an st case ----------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.name

    @property
    def label(self) -> str:
        return self.name

    @property
    def aclnn_name(self) -> str:
        return self.name.split("_", 1)[0]

    is_ring_attention_update = False
    expected_error = None

    @property
    def paged(self) -> bool:
        return self.kv_storage_mode != "continue"

    @property
    def query_layout(self) -> str:
        return parse_layout(self.input_layout).qkv

    def features(self) -> list[str]:
        """torch_npu names of the optional inputs the call gives."""
        names = []
        if self.enable_mask:
            names.append("atten_mask")
        if self.act_seq_lens_q:
            names.append("actual_seq_lengths")
        if self.act_seq_lens_kv:
            names.append("actual_seq_lengths_kv")
        if self.paged:
            names.append("block_table")
        if self.rope_d:
            names += ["query_rope", "key_rope"]
        return names

    def elements(self) -> int:
        """Element count of query, key and value (and rope) before paging."""
        n1 = self.n2 * self.g
        return (self.b * n1 * self.s1 * (self.qk_d + self.rope_d)
                + self.b * self.n2 * self.s2 * (self.qk_d + self.rope_d + self.v_d))

    def kv_lens(self) -> list[int]:
        """Per-batch kv lengths (``act_seq_lens_kv`` broadcast, else s2)."""
        lens = self.act_seq_lens_kv
        if not lens:
            return [self.s2] * self.b
        return [lens[0]] * self.b if len(lens) == 1 else list(lens[:self.b])

    # ---- inputs -------------------------------------------------------------------------------------
    def check_buildable(self) -> None:
        """Raise ``UnsupportedParameterError`` for a field value the reader cannot build inputs for."""
        for name, dt in (("q_dtype", self.q_dtype), ("kv_dtype", self.kv_dtype)):
            if dt not in _FLOAT_DTYPES:
                raise UnsupportedParameterError(name, dt, "only float16/bfloat16 inputs are built (int8 inputs "
                                                "need quantisation scales the simulator does not model)")
        if self.rope_d and self.rope_dtype not in _FLOAT_DTYPES:
            raise UnsupportedParameterError("rope_dtype", self.rope_dtype, "rope inputs must be float16/bfloat16")
        if parse_layout(self.input_layout).token:
            raise UnsupportedParameterError("input_layout", self.input_layout,
                                            "the tiny_rdv reader builds batch layouts (BSH/BSND/BNSD) only")
        if self.kv_storage_mode not in KV_STORAGE_MODES:
            raise ValueError(f"{self.name}: kv_storage_mode={self.kv_storage_mode!r} is not one of "
                             f"{', '.join(KV_STORAGE_MODES)}")
        if self.paged and self.block_size <= 0:
            raise ValueError(f"{self.name}: kv_storage_mode {self.kv_storage_mode} needs block_size > 0")

    def make_inputs(self, rng: np.random.Generator) -> dict[str, Any]:
        """The torch_npu keyword arguments of the call (seeded random data; see the module docstring)."""
        self.check_buildable()
        n1 = self.n2 * self.g
        qlay = self.query_layout
        kw: dict[str, Any] = dict(num_heads=n1, num_key_value_heads=self.n2, scale=1.0 / math.sqrt(self.qk_d),
                                  input_layout=self.input_layout, sparse_mode=self.sparse_mode,
                                  pre_tokens=self.pre_tokens, next_tokens=self.next_tokens,
                                  inner_precise=self.inner_precise, block_size=self.block_size,
                                  softmax_lse_flag=self.enable_softmax_lse)
        draw = lambda shape, dt: _random_tensor(shape, dt, _VALUE_RANGE, rng)  # noqa: E731
        q = draw((self.b, n1, self.s1, self.qk_d), self.q_dtype)
        k = draw((self.b, self.n2, self.s2, self.qk_d), self.kv_dtype)
        v = draw((self.b, self.n2, self.s2, self.v_d), self.kv_dtype)
        kw["query"] = from_bnsd(q, qlay)
        kv = {"key": k, "value": v}
        if self.rope_d:
            kw["query_rope"] = from_bnsd(draw((self.b, n1, self.s1, self.rope_d), self.rope_dtype), qlay)
            kv["key_rope"] = draw((self.b, self.n2, self.s2, self.rope_d), self.rope_dtype)
        if self.paged:
            table = self.block_table(rng)
            for name, x in kv.items():
                kw[name] = self._page(x, table)
            kw["block_table"] = table
        else:
            for name, x in kv.items():
                kw[name] = from_bnsd(x, qlay)
        if self.act_seq_lens_q:
            kw["actual_seq_lengths"] = list(self.act_seq_lens_q)
        if self.act_seq_lens_kv:
            kw["actual_seq_lengths_kv"] = list(self.act_seq_lens_kv)
        if self.enable_mask:
            kw["atten_mask"] = self.mask(rng)
        kw["target"] = self.target_for(kw)
        return kw

    def target_for(self, kw: dict) -> str:
        """The platform the call runs on: the first of :data:`TARGETS` whose op_host accepts it (the file
        names none; the upstream suite runs on A2/A3 and 950 machines, and some cases are valid on 950
        only, e.g. a head dim of 259 or D 15 < Dv 80). A call no target accepts stays on the first, where
        the API names the rule it breaks."""
        from .fia.api import npu_fused_infer_attention_score, prepare_fia, v1_call_parts

        bound = inspect.signature(npu_fused_infer_attention_score).bind(**{k: v for k, v in kw.items()
                                                                          if k != "target"})
        bound.apply_defaults()
        for target in TARGETS:
            given = dict(bound.arguments)
            optional, attrs = v1_call_parts(given)
            try:
                prepare_fia(given["query"], given["key"], given["value"], optional, attrs, target)
            except UnsupportedParameterError:
                return target        # op_host accepts it; the simulator names what it does not model
            except ParamError:
                continue
            return target
        return TARGETS[0]

    def block_table(self, rng: np.random.Generator) -> np.ndarray:
        """``(B, ceil(max kv / block_size))`` int32: batch b's blocks from one permutation, unused -1."""
        bs = self.block_size
        need = [math.ceil(max(0, n) / bs) for n in self.kv_lens()]
        table = np.full((self.b, max(1, math.ceil(max(self.kv_lens()) / bs))), -1, dtype=np.int32)
        perm = rng.permutation(sum(need)).astype(np.int32)
        pos = 0
        for bi, n in enumerate(need):
            table[bi, :n] = perm[pos:pos + n]
            pos += n
        return table

    def _page(self, x_bnsd: np.ndarray, table: np.ndarray) -> np.ndarray:
        bs = self.block_size
        blocks = int(table.max()) + 1 if table.size and table.max() >= 0 else 1
        per = table.shape[1]
        if self.kv_storage_mode == "pa_bbh":
            return _page_contiguous(x_bnsd, table, per, bs, blocks, cache_bnsd=False)
        cache = _page_contiguous(x_bnsd, table, per, bs, blocks, cache_bnsd=True)
        if self.kv_storage_mode == "pa_bnbd":
            return cache
        frac = 32 // np.dtype(numpy_dtype(self.kv_dtype)).itemsize   # pa_nz: 32-byte fractals along D
        nb, n, _, d = cache.shape
        return np.ascontiguousarray(cache.reshape(nb, n, bs, d // frac, frac).transpose(0, 1, 3, 2, 4))

    def mask(self, rng: np.random.Generator) -> np.ndarray:
        """The attention mask the harness builds for ``sparse_mode`` (True = masked out)."""
        if self.sparse_mode in (2, 3, 4):
            return mask_template()
        m = rng.random((self.b, self.s1, self.s2)) < 0.5
        if self.sparse_mode == 0:
            d = np.arange(self.s2)[None, :] - np.arange(self.s1)[:, None]
            m |= ((d > self.next_tokens) | (d < -self.pre_tokens))[None]
        return m
