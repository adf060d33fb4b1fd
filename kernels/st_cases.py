"""Reader of the upstream ATK system-test corpus (``st/*.json``) and random input builder.

Model
-----
A corpus file is a JSON list of cases. Each case has an ``id``, a ``name``, an
``aclnn_name`` and ``inputs``: a list whose items are either one dict or a list
of dicts. Every dict describes one aclnn parameter (camelCase name such as
``attenMaskOptional``) with ``type`` (``tensor``, ``tensors`` = tensor list,
``attr``, ``attrs`` = one element of an int list, ``attr_tuple`` = a whole int
list), ``dtype``, ``shape``, ``required`` and ``range_values``:

* ``["None"]`` — the optional parameter is absent;
* ``[lo, hi]`` — a tensor's values are drawn uniformly from ``[lo, hi]``
  (integers inclusive), ``[v]`` — filled with ``v``;
* ``{"name": "nd", "mean": [a, b], "std": [c, d]}`` — normal values;
* for attributes the value itself (``1.0``, ``"BSH"``) or a 1-element list of it.

Dicts of one list that share a name form one parameter: a tensor list
(``tensors``) or an int list whose i-th element is the i-th dict's value
(``attrs``). :class:`StCase` exposes the parameters by aclnn name, maps them
to torch_npu keyword names (``attenMaskOptional`` → ``atten_mask``,
``scaleValue`` → ``scale`` ...; unknown names fall back to snake_case without
``Optional``) and builds random numpy inputs with :meth:`StCase.make_inputs`.

RingAttentionUpdate specifics in ``make_inputs`` (cases recognised by ``aclnn_name`` /
``api_type``): the softmax statistics get 8 equal trailing values and TND ``actual_seq_qlen`` is rebuilt
as cumulative lengths from 0 to T (the corpus draws it like any tensor).

FusedInferAttentionScore specifics in ``make_inputs``:

* sparse modes 2/3/4 with a ``(…, 2048, 2048)`` mask get the compressed
  template ``triu(ones, 1)``; any other mask is random (half masked);
* paged attention: ``block_table`` is rebuilt as ``[B, max_blocks]`` int32 that
  maps each batch's needed blocks (``ceil(kv_len / block_size)``) to distinct
  random blocks, unused entries ``-1`` (as the upstream harness does). When the
  case describes key/value (and key_rope) as contiguous tensors (the older IFA
  cases) they are paged alike into a cache first (BnBsH for BSH/BSND, BnNBsD
  for BNSD);
* outputs (``attentionOut``, ``softmaxLse``) are not inputs; they only tell
  the expected output shape/dtype.

Invariants
----------
* Parsing never needs numpy data; only ``make_inputs`` draws values.
* Values are drawn chunk by chunk straight into the target dtype, so a 1 GB
  fp16 tensor never has a 4 GB float64 twin.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .golden.dtypes import numpy_dtype
from .golden.masks import TEMPLATE_SIZE

__all__ = ["StInput", "StCase", "load_st_cases", "torch_name", "ACLNN_TO_TORCH", "OUTPUT_NAMES"]

#: aclnn parameter names → torch_npu keyword names (FusedInferAttentionScore V4, IFA, PFA).
ACLNN_TO_TORCH = {
    "query": "query", "key": "key", "value": "value",
    "pseShiftOptional": "pse_shift", "pseShift": "pse_shift",
    "attenMaskOptional": "atten_mask", "attenMask": "atten_mask",
    "actualSeqLengthsOptional": "actual_seq_lengths", "actualSeqLengths": "actual_seq_lengths",
    "actualSeqLengthsKvOptional": "actual_seq_lengths_kv", "actualSeqLengthsKv": "actual_seq_lengths_kv",
    "deqScale1Optional": "dequant_scale1", "deqScale1": "dequant_scale1",
    "quantScale1Optional": "quant_scale1", "quantScale1": "quant_scale1",
    "deqScale2Optional": "dequant_scale2", "deqScale2": "dequant_scale2",
    "quantScale2Optional": "quant_scale2", "quantScale2": "quant_scale2",
    "quantOffset2Optional": "quant_offset2", "quantOffset2": "quant_offset2",
    "antiquantScaleOptional": "antiquant_scale", "antiquantScale": "antiquant_scale",
    "antiquantOffsetOptional": "antiquant_offset", "antiquantOffset": "antiquant_offset",
    "blockTableOptional": "block_table", "blocktable": "block_table", "blockTable": "block_table",
    "queryPaddingSizeOptional": "query_padding_size",
    "kvPaddingSizeOptional": "kv_padding_size", "kvPaddingSize": "kv_padding_size",
    "keyAntiquantScaleOptional": "key_antiquant_scale", "keyAntiquantOffsetOptional": "key_antiquant_offset",
    "valueAntiquantScaleOptional": "value_antiquant_scale",
    "valueAntiquantOffsetOptional": "value_antiquant_offset",
    "keySharedPrefixOptional": "key_shared_prefix", "valueSharedPrefixOptional": "value_shared_prefix",
    "actualSharedPrefixLenOptional": "actual_shared_prefix_len",
    "queryRopeOptional": "query_rope", "keyRopeOptional": "key_rope",
    "keyRopeAntiquantScaleOptional": "key_rope_antiquant_scale",
    "dequantScaleQueryOptional": "dequant_scale_query",
    "learnableSinkOptional": "learnable_sink",
    "numHeads": "num_heads", "scaleValue": "scale", "preTokens": "pre_tokens", "nextTokens": "next_tokens",
    "inputLayout": "input_layout", "numKeyValueHeads": "num_key_value_heads", "sparseMode": "sparse_mode",
    "innerPrecise": "inner_precise", "blockSize": "block_size", "antiquantMode": "antiquant_mode",
    "softmaxLseFlag": "softmax_lse_flag", "keyAntiquantMode": "key_antiquant_mode",
    "valueAntiquantMode": "value_antiquant_mode", "queryQuantMode": "query_quant_mode",
    "attentionOut": "attention_out", "softmaxLse": "softmax_lse",
}

#: aclnn names that are operator outputs, not inputs.
OUTPUT_NAMES = frozenset({"attentionOut", "softmaxLse", "softmaxMaxOut", "softmaxSumOut", "attnOutOut",
                          "softmaxOut"})

_ST_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "float16": "float16",
              "bfloat16": "bfloat16", "float32": "float32", "float64": "float64", "int8": "int8",
              "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool",
              "double": "float64", "int": "int64", "int64_t": "int64"}


def torch_name(aclnn_name: str) -> str:
    """torch_npu keyword for an aclnn parameter name (table, else snake_case without ``Optional``)."""
    if aclnn_name in ACLNN_TO_TORCH:
        return ACLNN_TO_TORCH[aclnn_name]
    base = aclnn_name[:-len("Optional")] if aclnn_name.endswith("Optional") else aclnn_name
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", base).lower()


def _is_none(rv) -> bool:
    return rv is None or rv == "None" or (isinstance(rv, list) and len(rv) == 1 and rv[0] == "None")


def _scalar(rv):
    """An attribute's value: unwrap 1-element lists."""
    if isinstance(rv, list) and len(rv) == 1:
        return rv[0]
    return rv


@dataclass
class StInput:
    """One aclnn parameter of a case (possibly made of several corpus dicts)."""

    name: str
    type: str
    dtype: str | None
    items: list[dict]

    @property
    def kwarg(self) -> str:
        return torch_name(self.name)

    @property
    def required(self) -> bool:
        return bool(self.items[0].get("required", False))

    @property
    def optional(self) -> bool:
        """An optional parameter: its aclnn name ends in ``Optional`` or the corpus marks it not required."""
        return self.name.endswith("Optional") or not self.required

    @property
    def is_output(self) -> bool:
        return self.name in OUTPUT_NAMES

    @property
    def is_tensor(self) -> bool:
        return self.type in ("tensor", "tensors")

    @property
    def present(self) -> bool:
        return not all(_is_none(it.get("range_values")) for it in self.items)

    @property
    def range_values(self):
        return self.items[0].get("range_values")

    @property
    def shape(self) -> tuple | None:
        s = self.items[0].get("shape")
        return tuple(int(v) for v in s) if isinstance(s, list) else None

    @property
    def shapes(self) -> list[tuple]:
        return [tuple(int(v) for v in it.get("shape") or ()) for it in self.items]

    @property
    def np_dtype_name(self) -> str | None:
        if self.dtype is None:
            return None
        return _ST_DTYPES.get(str(self.dtype).lower(), str(self.dtype).lower())

    @property
    def value(self):
        """An attribute's value (scalar, string or int list); ``None`` when absent. Not for tensors."""
        if not self.present:
            return None
        if self.type == "attrs" or len(self.items) > 1:
            vals = [_scalar(it.get("range_values")) for it in self.items if not _is_none(it.get("range_values"))]
            return [_cast_attr(v, self.dtype) for v in vals]
        rv = self.range_values
        if self.type == "attr_tuple":
            return [_cast_attr(v, self.dtype) for v in (rv if isinstance(rv, list) else [rv])]
        return _cast_attr(_scalar(rv), self.dtype)

    def elements(self) -> int:
        return sum(int(np.prod(s)) if s else 1 for s in self.shapes)


def _cast_attr(v, dtype):
    if isinstance(v, list):
        return [_cast_attr(x, dtype) for x in v]
    d = str(dtype).lower() if dtype is not None else ""
    if d == "bool" or isinstance(v, bool):
        return bool(v) if not isinstance(v, str) else v.lower() == "true"
    if d in ("double", "float", "fp32", "fp64", "float32"):
        return float(v)
    if d.startswith("int") and not isinstance(v, str):
        return int(v)
    return v


@dataclass
class StCase:
    """One corpus case: its parameters by aclnn name, in corpus order."""

    id: Any
    name: str
    aclnn_name: str
    params: list[StInput]
    raw: dict = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, d: dict) -> "StCase":
        params: list[StInput] = []
        index: dict[str, StInput] = {}
        for item in d.get("inputs") or []:
            dicts = item if isinstance(item, list) else [item]
            for it in dicts:
                if not isinstance(it, dict) or "name" not in it:
                    raise ValueError(f"case {d.get('id')}: malformed input entry {it!r:.80}")
                name = it["name"]
                if name in index and isinstance(item, list):
                    index[name].items.append(it)
                    continue
                p = StInput(name=name, type=str(it.get("type", "tensor")), dtype=it.get("dtype"), items=[it])
                if name in index:  # a repeated plain dict: keep the first, note the rest
                    index[name].items.append(it)
                    continue
                index[name] = p
                params.append(p)
        return cls(id=d.get("id"), name=str(d.get("name", "")), aclnn_name=str(d.get("aclnn_name", "")),
                   params=params, raw=d)

    # ---- access --------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return f"{self.id}:{self.name}"

    @property
    def expected_error(self):
        return self.raw.get("expected_error_msg")

    @property
    def accuracy_standard(self):
        """How the upstream harness judges the case (``standard["acc"]``): ``"default"`` (one golden) or a dict
        such as ``{"cv_fused_double_benchmark": {"max_re_ratio": 2, ...}}`` (the double benchmark)."""
        std = self.raw.get("standard")
        return std.get("acc", "default") if isinstance(std, dict) else "default"

    def param(self, name: str) -> StInput | None:
        for p in self.params:
            if p.name == name or p.kwarg == name:
                return p
        return None

    def inputs(self) -> list[StInput]:
        return [p for p in self.params if not p.is_output]

    def outputs(self) -> list[StInput]:
        return [p for p in self.params if p.is_output]

    def attrs(self) -> dict[str, Any]:
        """Present attributes and int lists as torch_npu keywords."""
        out = {}
        for p in self.inputs():
            if not p.is_tensor and p.present:
                out[p.kwarg] = p.value
        return out

    def features(self) -> list[str]:
        """torch_npu names of the optional inputs this case gives (tensors and int lists)."""
        return [p.kwarg for p in self.inputs() if p.optional and p.present
                and (p.is_tensor or p.type in ("attrs", "attr_tuple"))]

    def elements(self) -> int:
        """Total element count of the present input tensors (a size measure for budgets)."""
        return sum(p.elements() for p in self.inputs() if p.is_tensor and p.present)

    # ---- inputs --------------------------------------------------------------------------------
    def make_inputs(self, rng: np.random.Generator) -> dict[str, Any]:
        """Random numpy inputs and attribute keywords for this case (torch_npu keyword names)."""
        kwargs = self.attrs()
        for p in self.inputs():
            if not p.is_tensor or not p.present:
                continue
            arrays = [_random_tensor(shape, p.np_dtype_name, it.get("range_values"), rng)
                      for shape, it in zip(p.shapes, p.items)]
            kwargs[p.kwarg] = arrays[0] if (p.type == "tensor" or len(arrays) == 1) else arrays
        if self.aclnn_name.startswith("aclnnFusedInferAttentionScore") or \
                self.aclnn_name.startswith("aclnnIncreFlashAttention") or \
                self.aclnn_name.startswith("aclnnPromptFlashAttention"):
            _fia_fixups(self, kwargs, rng)
        if self.is_ring_attention_update:
            _rau_fixups(kwargs, rng)
        if self.is_flash_attention_score:
            _fas_fixups(kwargs, rng)
        return kwargs

    @property
    def is_flash_attention_score(self) -> bool:
        """A FlashAttentionScore (training forward) case, fixed-length or varlen (by ``aclnn_name``)."""
        return self.aclnn_name.startswith(("aclnnFlashAttentionScore", "aclnnFlashAttentionVarLenScore"))

    @property
    def is_ring_attention_update(self) -> bool:
        """A RingAttentionUpdate case (by ``aclnn_name`` or ``api_type``)."""
        api_type = str(self.raw.get("api_type", ""))
        return self.aclnn_name in ("RingAttentionUpdate", "aclnnRingAttentionUpdate") or \
            api_type.startswith("aclnn_ring_attention_update")


def load_st_cases(path) -> list[StCase]:
    """All cases of a corpus JSON file (a list of case dicts, or a dict holding one under ``cases``)."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict):
        data = data.get("cases", [data])
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of cases")
    for i, d in enumerate(data):
        if not isinstance(d, dict) or not isinstance(d.get("inputs"), list):
            raise ValueError(f"case {i} has no 'inputs' list: neither an st corpus (a list of case dicts, each with "
                             f"its 'inputs') nor a tiny_rdv case (fields b, n2, g, s1, s2, qk_d, ...)")
    return [StCase.from_json(d) for d in data]


# ---- random tensors -------------------------------------------------------------------------------
_CHUNK = 1 << 22


def _random_tensor(shape: tuple, dtype: str | None, spec, rng: np.random.Generator) -> np.ndarray:
    dtype = dtype or "float32"
    npd = numpy_dtype(dtype)
    out = np.empty(shape, dtype=npd)
    flat = out.reshape(-1)
    n = flat.size
    if dtype == "bool":
        for i in range(0, n, _CHUNK):
            flat[i:i + _CHUNK] = rng.random(min(_CHUNK, n - i)) < 0.5
        return out
    integer = np.issubdtype(npd, np.integer)
    if isinstance(spec, dict):
        mean = _pick(spec.get("mean", [0.0, 0.0]), rng)
        std = abs(_pick(spec.get("std", [1.0, 1.0]), rng))
        gen = lambda k: rng.normal(mean, std, k)  # noqa: E731
    else:
        vals = spec if isinstance(spec, list) else [spec]
        vals = [float(v) for v in vals if not _is_none(v)] or [0.0]
        lo, hi = (vals[0], vals[0]) if len(vals) == 1 else (min(vals[0], vals[1]), max(vals[0], vals[1]))
        if integer:
            info = np.iinfo(npd)
            lo, hi = (_int_bound(v, info) for v in (lo, hi))   # ["inf"] / ["nan"] ranges of an int tensor
            lo_i = min(max(int(math.ceil(lo)), info.min), info.max - 1)
            hi_i = min(int(math.floor(hi)), info.max - 1)
            gen = lambda k: rng.integers(lo_i, max(lo_i, hi_i) + 1, k)  # noqa: E731
        else:
            fmax = float(np.finfo(np.float32 if dtype == "bfloat16" else npd).max)
            lo, hi = max(lo, -fmax), min(hi, fmax)
            gen = lambda k: rng.uniform(lo, hi, k) if hi > lo else np.full(k, lo)  # noqa: E731
    for i in range(0, n, _CHUNK):
        k = min(_CHUNK, n - i)
        chunk = gen(k)
        if not integer:
            chunk = chunk.astype(np.float32)
        flat[i:i + k] = chunk.astype(npd)
    return out


def _int_bound(v: float, info) -> float:
    """A float range bound usable for an integer dtype: ±inf to the dtype's extreme, NaN to 0."""
    if math.isnan(v):
        return 0.0
    return float(info.max if v > 0 else info.min) if math.isinf(v) else v


def _pick(v, rng) -> float:
    if isinstance(v, list):
        return float(rng.uniform(float(v[0]), float(v[-1]))) if len(v) > 1 else float(v[0])
    return float(v)


# ---- RingAttentionUpdate fix-ups --------------------------------------------------------------------
def _rau_fixups(kw: dict, rng: np.random.Generator):
    """The operator's contract on top of the drawn values: the 8 trailing softmax statistics of a row are equal
    (lane 0 is kept), and TND ``actual_seq_qlen`` is cumulative from 0 to T with the case's length (random
    batch borders; zero-length batches only when there are more batches than tokens)."""
    for name in ("prev_softmax_max", "prev_softmax_sum", "cur_softmax_max", "cur_softmax_sum"):
        x = kw.get(name)
        if isinstance(x, np.ndarray) and x.ndim >= 1 and x.shape[-1] > 1:
            x[...] = x[..., :1]
    q = kw.get("actual_seq_qlen")
    out = kw.get("prev_attn_out")
    if isinstance(q, np.ndarray) and isinstance(out, np.ndarray) and str(kw.get("input_layout", "SBH")) == "TND":
        t, cuts = int(out.shape[0]), max(0, q.size - 2)
        if cuts <= t - 1:
            inner = np.sort(rng.choice(np.arange(1, t), size=cuts, replace=False)) if cuts else np.zeros(0, int)
        else:
            inner = np.sort(rng.integers(0, t + 1, size=cuts))
        kw["actual_seq_qlen"] = np.concatenate([[0], inner, [t]]).astype(np.int64)[:max(q.size, 2)]


def _fas_fixups(kw: dict, rng: np.random.Generator):
    """FlashAttentionScore: the compressed masks the sparse mode prescribes (2048x2048 ``triu(ones, 1)`` for
    2/3/4/7/8, sparse 6's 3072x2048 prefix template) replace the drawn values (only their shape is given); a
    float attribute given as a range ``[lo, hi]`` (the varlen corpus' ``scaleValue``) is drawn uniformly in it."""
    from .fas.host import prefix_template

    for name in ("scale", "keep_prob"):
        v = kw.get(name)
        if isinstance(v, (list, tuple)) and len(v) == 2:
            kw[name] = float(rng.uniform(float(v[0]), float(v[1])))

    sparse = int(kw.get("sparse_mode", 0) or 0)
    m = kw.get("atten_mask")
    if not isinstance(m, np.ndarray) or m.ndim < 2:
        return
    if sparse in (2, 3, 4, 7, 8) and tuple(m.shape[-2:]) == (TEMPLATE_SIZE, TEMPLATE_SIZE):
        kw["atten_mask"] = np.triu(np.ones(m.shape, dtype=m.dtype), k=1)
    elif sparse == 6 and m.shape[-2] == 3072:
        kw["atten_mask"] = prefix_template(m.dtype).reshape(m.shape)


# ---- FusedInferAttentionScore fix-ups --------------------------------------------------------------
def _fia_fixups(case: StCase, kw: dict, rng: np.random.Generator):
    sparse = int(kw.get("sparse_mode", 0) or 0)
    mask_p = case.param("atten_mask")
    if "atten_mask" in kw and sparse in (2, 3, 4) and mask_p is not None and mask_p.shape \
            and tuple(mask_p.shape[-2:]) == (TEMPLATE_SIZE, TEMPLATE_SIZE):
        dt = numpy_dtype(mask_p.np_dtype_name or "bool")
        kw["atten_mask"] = np.triu(np.ones(mask_p.shape, dtype=dt), k=1)
    if "block_table" in kw:
        _page_kv(case, kw, rng)
    for name in ("query_padding_size", "kv_padding_size"):
        if name in kw:
            kw[name] = np.asarray(kw[name]).astype(np.int64).reshape(-1)


def _list_int(v) -> list[int] | None:
    if v is None:
        return None
    return [int(x) for x in (v if isinstance(v, list) else [v])]


def _page_contiguous(t_bnsd: np.ndarray, table: np.ndarray, per: int, bs: int, num_blocks: int, *,
                     cache_bnsd: bool) -> np.ndarray:
    """A contiguous (B, N, S, D) tensor written into a block cache through ``table`` (its first ``per``
    columns; entries < 0 are unused): BnNBsD when ``cache_bnsd``, else BnBsH; unused cache rows stay zero."""
    b, n2, s, d = t_bnsd.shape
    cache = np.zeros((num_blocks, n2, bs, d) if cache_bnsd else (num_blocks, bs, n2 * d), dtype=t_bnsd.dtype)
    for bi in range(min(b, table.shape[0])):
        for i in range(per):
            blk = int(table[bi, i])
            if blk < 0:      # an unused entry (a batch with fewer blocks)
                continue
            t0, t1 = i * bs, min(s, (i + 1) * bs)
            if cache_bnsd:
                cache[blk, :, :t1 - t0] = t_bnsd[bi, :, t0:t1]
            else:
                cache[blk, :t1 - t0] = t_bnsd[bi, :, t0:t1].transpose(1, 0, 2).reshape(t1 - t0, -1)
    return cache


def _page_kv(case: StCase, kw: dict, rng: np.random.Generator):
    """Rebuild ``block_table`` (and page contiguous key/value) so every needed block is valid and distinct."""
    bs = int(kw.get("block_size", 0) or 0)
    table_p = case.param("block_table")
    if bs <= 0 or table_p is None or not table_p.shape or len(table_p.shape) != 2:
        kw["block_table"] = np.asarray(kw["block_table"]).astype(np.int32)
        return
    batch, max_blocks = table_p.shape
    layout = str(kw.get("input_layout", "BSH")).upper().split("_")[0]
    nkv = int(kw.get("num_key_value_heads", 0) or 0) or int(kw.get("num_heads", 1))
    key, value = kw["key"], kw["value"]
    if isinstance(key, list) or isinstance(value, list):
        kw["block_table"] = np.asarray(kw["block_table"]).astype(np.int32)
        return
    is_cache = (key.ndim == 3 and key.shape[1] == bs) or (key.ndim == 4 and key.shape[2] == bs
                                                           and key.shape[1] == nkv)
    kv_lens = _list_int(kw.get("actual_seq_lengths_kv"))
    if not is_cache:
        # Older cases give contiguous K/V (and key_rope): page them alike (batch b's block i → a distinct
        # random block).
        from .golden.layouts import to_bnsd

        b, _, s, _ = to_bnsd(key, layout, nkv, "key").shape
        per = math.ceil(s / bs)
        if per > max_blocks:
            raise ValueError(f"block_table: {max_blocks} columns cannot hold S={s} with block_size={bs}")
        num_blocks = b * per
        perm = rng.permutation(num_blocks)
        table = np.full((batch, max_blocks), -1, dtype=np.int32)
        for bi in range(min(b, batch)):
            table[bi, :per] = perm[bi * per:(bi + 1) * per]
        for name in ("key", "value", "key_rope"):
            if isinstance(kw.get(name), np.ndarray):
                kw[name] = _page_contiguous(to_bnsd(kw[name], layout, nkv, name), table, per, bs, num_blocks,
                                            cache_bnsd=layout == "BNSD")
        kw["block_table"] = table
        return
    num_blocks = key.shape[0]
    if kv_lens is None:
        lens = [max_blocks * bs] * batch
    elif len(kv_lens) == 1:
        lens = kv_lens * batch
    else:
        lens = kv_lens[:batch]
    need = [math.ceil(max(0, v) / bs) for v in lens]
    if any(n > max_blocks for n in need):
        raise ValueError(f"block_table: {max_blocks} columns cannot hold kv lengths {lens} with block_size={bs}")
    if sum(need) > num_blocks:
        raise ValueError(f"block_table: the cache holds {num_blocks} blocks, the kv lengths {lens} need "
                         f"{sum(need)}")
    perm = rng.permutation(num_blocks)
    table = np.full((batch, max_blocks), -1, dtype=np.int32)
    pos = 0
    for bi, n in enumerate(need):
        table[bi, :n] = perm[pos:pos + n]
        pos += n
    kw["block_table"] = table
