"""Random FusedInferAttentionScore calls as op_host tiling UT rows, for comparing the mirror with op_host.

Model
-----
A call is one row of the upstream tiling UT CSV (the columns of
``cases/ut_tiling/fia_arch22.csv``; arch35 adds the stride columns), so the same row
can go to ``FiaParams.from_csv_row`` and to the real op_host built on x86
(``tiling.oracle``). Rows come from two sources, mixed half and half:

* **synthetic** calls built from their parts: layout (every ``input_layout``),
  dtypes (mostly matching fp16/bf16, sometimes a mismatched key/value, fp32, int8
  or fp8 on arch35), batch, heads and GQA ratio (sometimes not a divisor), query
  and KV lengths (decode S1 = 1, prefill, 0, long KV), head dims (64/128 mostly,
  16 to 512, a different value head dim), host length lists (some longer than B,
  some above S), TND cumulative lengths, paged KV (BnBsH / BnNBsD caches, block
  sizes, block tables), masks with every sparse mode 0-4 and 9 and their shapes,
  pre/next tokens (negative included), pse, softmax_lse, a learnable sink,
  inner_precise 0-3, paddings;
* **mutated** rows of the UT corpus of the arch (quant, antiquant, rope, shared
  prefix, tensor lists: the features whose valid shapes the corpus spells out),
  each with one to three mutations: a dimension changed (+-1, x2, halved, 0), a
  dtype swapped, an attribute changed, an optional tensor dropped, a host list
  changed.

Besides, 3% of the rows (``MLA_NZ_SHARE``, picked by a generator of their own, so
that every other row is what the two sources above give) are **MLA calls with a
paged NZ cache**, which neither source builds (the corpora have none): D 512 + rope
64 on one KV head, mostly MLA FA quant (int8 query and cache, bf16 ropes, the query
and KV scales), else fp16/bf16 or an int8 cache under a bf16 query; BSND/BSH/TND
(rarely BNSD), G 1-128, decode or 2-16 query tokens (the causal mask mostly), block
sizes 32-512, per-batch KV lengths equal, unequal or 0; a fifth of them mutated.
Another 3% (``KV_ANTIQUANT_SHARE``, likewise) are **KV-antiquant calls**
(``kv_antiquant_row``): an int8 (or int4) cache under an fp16/bf16 query of S 1-128 (the IFA
decode, and the PFA route's KvAntiquant and MSD paths), dense, paged, a tensor list or
left padding, the stacked or the key's and the value's own parameters per channel or
per token, in the shapes and dtypes op_host takes and some it does not.

Invariants
----------
* ``random_rows(arch, n, seed)`` is a pure function of its arguments: the same
  rows, in the same order, on every machine (one ``numpy`` Generator per call).
* Every row has every column of the arch's header, ``expectResult`` is empty
  (nothing is expected: the oracle decides), ``case_name`` is unique and no cell
  holds a comma (the upstream UT loader does not read CSV quoting).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from .layouts import INPUT_LAYOUTS

__all__ = ["random_rows", "write_rows", "header", "synthetic_row", "mutated_row", "mla_nz_row", "MLA_NZ_SHARE",
           "kv_antiquant_row", "KV_ANTIQUANT_SHARE"]

_TENSORS = (
    "query", "key", "value", "pse_shift", "atten_mask", "actual_seq_lengths", "actual_seq_lengths_kv",
    "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2", "antiquant_scale",
    "antiquant_offset", "block_table", "query_padding_size", "kv_padding_size", "key_antiquant_scale",
    "key_antiquant_offset", "value_antiquant_scale", "value_antiquant_offset", "key_shared_prefix",
    "value_shared_prefix", "actual_shared_prefix_len", "query_rope", "key_rope", "key_rope_antiquant_scale",
    "dequant_scale_query", "learnable_sink", "q_start_idx", "kv_start_idx", "attention_out", "softmax_lse",
)
_DATA = ("actual_seq_lengths", "actual_seq_lengths_kv", "actual_shared_prefix_len")
_ATTRS = ("num_heads", "scale", "pre_tokens", "next_tokens", "input_layout", "num_key_value_heads",
          "sparse_mode", "inner_precise", "block_size", "antiquant_mode", "softmax_lse_flag",
          "key_antiquant_mode", "value_antiquant_mode", "query_quant_mode", "pse_type", "out_dtype")
_STRIDES = ("key_stride", "value_stride", "key_antiquant_scale_stride", "value_antiquant_scale_stride",
            "key_rope_stride")
_INT_MAX = 2147483647


def header(arch: str) -> list[str]:
    """The UT CSV columns of ``arch`` (arch35 adds the stride columns)."""
    cols = ["case_name", "expectResult"]
    for t in _TENSORS:
        cols += [f"{t}_shape", f"{t}_dtype", f"{t}_format"]
        if t in _DATA:
            cols.append(f"{t}_data")
    cols += list(_ATTRS) + ["expectTilingKey", "expectTilingDataHash", "case_annotation"]
    if arch == "arch35":
        cols += list(_STRIDES)
    return cols


def _cells(shape) -> str:
    return " ".join(str(int(d)) for d in shape)


class _Row(dict):
    def tensor(self, name: str, shape, dtype: str, data=None, fmt: str = "ND") -> None:
        self[f"{name}_shape"] = _cells(shape)
        self[f"{name}_dtype"] = dtype
        self[f"{name}_format"] = fmt
        if data is not None:
            self[f"{name}_data"] = _cells(data)


def _pick(rng, items, p=None):
    return items[int(rng.choice(len(items), p=p))]


def _lengths(rng, n: int, hi: int) -> list[int]:
    return [int(x) for x in rng.integers(0, hi + 1, size=n)]


def synthetic_row(rng: np.random.Generator, arch: str) -> dict:
    """One call built from its parts (see the module docstring)."""
    r = _Row()
    layouts = sorted(INPUT_LAYOUTS)
    # the *_NBSD outputs need rope: rarer, so that most calls are ones the operator can accept
    weights = np.array([0.2 if lay.endswith("NBSD") else 1.0 for lay in layouts])
    layout = _pick(rng, layouts, p=weights / weights.sum())
    q_layout, out_layout = INPUT_LAYOUTS[layout]
    dts = ["FLOAT16", "BF16"]
    q_choices = dts + ["FLOAT", "INT8"] + (["FLOAT8_E4M3FN"] if arch == "arch35" else [])
    q_weights = [0.45, 0.45, 0.04, 0.03, 0.03] if arch == "arch35" else [0.46, 0.46, 0.04, 0.04]
    qd = _pick(rng, q_choices, p=q_weights)
    kd = qd if rng.random() < 0.85 else _pick(rng, ["FLOAT16", "BF16", "FLOAT", "INT8"])
    vd = kd if rng.random() < 0.95 else _pick(rng, ["FLOAT16", "BF16", "INT8"])
    b = int(_pick(rng, [1, 2, 3, 4, 8, 16, 65], p=[.3, .2, .1, .2, .1, .07, .03]))
    n = int(_pick(rng, [1, 2, 4, 8, 16, 32, 40, 64, 128], p=[.1, .1, .15, .15, .15, .15, .05, .1, .05]))
    g = int(_pick(rng, [1, 2, 4, 8, 16, 3], p=[.35, .2, .2, .1, .1, .05]))
    kvn = max(n // g, 1) if rng.random() < 0.95 else int(rng.integers(1, n + 2))
    decode = rng.random() < 0.4
    s1 = 1 if decode else int(_pick(rng, [2, 7, 16, 64, 128, 300, 1024, 2048, 4096, 0],
                                    p=[.1, .1, .1, .15, .15, .1, .1, .1, .05, .05]))
    s2 = int(_pick(rng, [1, 16, 100, 128, 512, 1000, 2048, 4096, 8192, 32768, 0],
                   p=[.05, .05, .1, .1, .15, .1, .15, .1, .1, .05, .05]))
    d = int(_pick(rng, [64, 128, 16, 32, 80, 96, 192, 256, 512, 72], p=[.3, .35, .03, .04, .04, .04, .04, .08, .05, .03]))
    dv = d if rng.random() < 0.9 else int(_pick(rng, [64, 128, 256, 512]))
    paged = rng.random() < 0.3
    tnd = q_layout in ("TND", "NTD")

    # host length lists
    qlens = kvlens = None
    if tnd:
        per = _lengths(rng, b, max(s1, 1))
        qlens = list(np.cumsum(per)) if rng.random() < 0.9 else per
        t = int(qlens[-1]) if qlens else 0
        if rng.random() < 0.1:
            t += int(rng.integers(-1, 3))
        kper = _lengths(rng, b, max(s2, 1))
        kvlens = list(np.cumsum(kper)) if not paged and rng.random() < 0.9 else kper
        tk = int(kvlens[-1]) if kvlens else 0
    else:
        if rng.random() < 0.2:
            qlens = _lengths(rng, b if rng.random() < 0.9 else b + 1, s1 + (1 if rng.random() < 0.1 else 0))
        if paged or rng.random() < 0.45:
            kvlens = _lengths(rng, b if rng.random() < 0.85 else _pick(rng, [1, b + 1]), s2 + (1 if rng.random() < 0.1 else 0))

    def shape_of(lay: str, bb, heads, s, dd, tt=None):
        return {"BSH": (bb, s, heads * dd), "BSND": (bb, s, heads, dd), "BNSD": (bb, heads, s, dd),
                "NBSD": (heads, bb, s, dd), "TND": (tt, heads, dd), "NTD": (heads, tt, dd)}[lay]

    r.tensor("query", shape_of(q_layout, b, n, s1, d, t if tnd else None), qd)
    r.tensor("attention_out", shape_of(out_layout, b, n, s1, dv, t if tnd else None),
             qd if qd in dts else "FLOAT16")
    kv_layout = q_layout if q_layout != "NBSD" else "BNSD"
    block_size = 0
    if paged:
        block_size = int(_pick(rng, [128, 64, 16, 256, 512, 32, 100, 0], p=[.35, .15, .1, .1, .1, .08, .07, .05]))
        bs = max(block_size, 1)
        max_blocks = max(-(-max(kvlens or [s2]) // bs), 1)
        nblocks = b * max_blocks + int(rng.integers(0, 3))
        if rng.random() < 0.5 and q_layout != "BNSD":
            kshape, vshape = (nblocks, bs, kvn * d), (nblocks, bs, kvn * dv)
        else:
            kshape, vshape = (nblocks, kvn, bs, d), (nblocks, kvn, bs, dv)
        r.tensor("block_table", (b, max_blocks + int(rng.integers(0, 2))), "INT32" if rng.random() < 0.95 else "INT64")
    elif tnd:
        kshape, vshape = shape_of(kv_layout, b, kvn, s2, d, tk), shape_of(kv_layout, b, kvn, s2, dv, tk)
    else:
        lay = kv_layout if kv_layout != "NBSD" else "BNSD"
        kshape, vshape = shape_of(lay, b, kvn, s2, d), shape_of(lay, b, kvn, s2, dv)
    r.tensor("key", kshape, kd)
    r.tensor("value", vshape, vd)
    if qlens is not None:
        r.tensor("actual_seq_lengths", (len(qlens),), "INT64", qlens)
    if kvlens is not None:
        r.tensor("actual_seq_lengths_kv", (len(kvlens),), "INT64", kvlens)

    sparse = 0
    if rng.random() < 0.35:
        sparse = int(_pick(rng, [0, 1, 2, 3, 4, 9, 5], p=[.3, .15, .1, .25, .12, .04, .04]))
        md = _pick(rng, ["BOOL", "INT8", "UINT8", "FLOAT16"], p=[.5, .3, .15, .05])
        if sparse in (2, 3, 4, 9) and rng.random() < 0.85:
            ms = (2048, 2048)
        else:
            ms = _pick(rng, [(b, s1, s2), (s1, s2), (b, 1, s1, s2), (1, s1, s2), (b, n, s1, s2)])
        r.tensor("atten_mask", ms, md)
    elif rng.random() < 0.05:
        sparse = int(_pick(rng, [1, 2, 3, 4]))
    pre, nxt = _INT_MAX, _INT_MAX
    if sparse in (1, 4) or rng.random() < 0.2:
        pre = int(_pick(rng, [_INT_MAX, 0, 10, 128, 1000, -5, 65536]))
        nxt = int(_pick(rng, [_INT_MAX, 0, 10, 128, 1000, -5, 65536]))

    if rng.random() < 0.1:
        pd = qd if qd in dts and rng.random() < 0.9 else _pick(rng, ["FLOAT16", "BF16", "FLOAT"])
        r.tensor("pse_shift", _pick(rng, [(b, n, s1, s2), (1, n, s1, s2), (b, n, 1, s2), (1, n, s1, s2 + 1)]), pd)
    lse = rng.random() < 0.2
    if lse or rng.random() < 0.03:
        ls = (t, n, 1) if tnd else (b, n, s1, 1)
        r.tensor("softmax_lse", ls, "FLOAT" if rng.random() < 0.95 else "FLOAT16")
    if rng.random() < 0.06:
        r.tensor("learnable_sink", (n if rng.random() < 0.9 else n * 2,), "FLOAT" if rng.random() < 0.5 else qd)
    if rng.random() < 0.04:
        r.tensor("query_padding_size", (1,), "INT64")
    if rng.random() < 0.04:
        r.tensor("kv_padding_size", (1,), "INT64")

    r.update(num_heads=n, scale=_pick(rng, ["0.088388", "0.125", "1.0"]), pre_tokens=pre, next_tokens=nxt,
             input_layout=layout if rng.random() < 0.98 else "BSHD",
             num_key_value_heads=kvn if (kvn != n or rng.random() < 0.5) else 0, sparse_mode=sparse,
             inner_precise=int(_pick(rng, [0, 1, 2, 3], p=[.4, .3, .1, .2])), block_size=block_size,
             antiquant_mode=0, softmax_lse_flag=int(lse), key_antiquant_mode=0, value_antiquant_mode=0,
             query_quant_mode=0, pse_type=0, out_dtype=0)
    return dict(r)


_MUTABLE_ATTRS = {
    "num_heads": lambda rng, v: max(int(v) * int(_pick(rng, [2, 0])) or int(v) + 1, 0),
    "num_key_value_heads": lambda rng, v: int(_pick(rng, [0, 1, 2, 3, 8])),
    "sparse_mode": lambda rng, v: int(_pick(rng, [0, 1, 2, 3, 4, 5, 9])),
    "inner_precise": lambda rng, v: int(_pick(rng, [0, 1, 2, 3, 4])),
    "block_size": lambda rng, v: int(_pick(rng, [0, 16, 64, 128, 100, 512, 1024])),
    "pre_tokens": lambda rng, v: int(_pick(rng, [_INT_MAX, 0, -1, 100])),
    "next_tokens": lambda rng, v: int(_pick(rng, [_INT_MAX, 0, -1, 100])),
    "softmax_lse_flag": lambda rng, v: 1 - int(v or 0),
    "antiquant_mode": lambda rng, v: int(_pick(rng, [0, 1, 2, 3])),
    "key_antiquant_mode": lambda rng, v: int(_pick(rng, [0, 1, 2, 3, 4, 5])),
    "value_antiquant_mode": lambda rng, v: int(_pick(rng, [0, 1, 2, 3, 4, 5])),
    "out_dtype": lambda rng, v: int(_pick(rng, [0, 1, 2])),
    "input_layout": lambda rng, v: _pick(rng, sorted(INPUT_LAYOUTS)),
}
_SWAP_DTYPES = ["FLOAT16", "BF16", "FLOAT", "INT8", "INT32", "INT64", "BOOL", "UINT8"]


def mutated_row(rng: np.random.Generator, arch: str, base_rows: list[dict]) -> dict:
    """A corpus row of ``arch`` with one to three mutations (see the module docstring)."""
    r = dict(base_rows[int(rng.integers(len(base_rows)))])
    present = [t for t in _TENSORS if (r.get(f"{t}_shape") or "").strip()]
    for _ in range(int(rng.integers(1, 4))):
        kind = _pick(rng, ["dim", "dtype", "attr", "drop", "data"], p=[.35, .15, .3, .1, .1])
        if kind == "dim" and present:
            t = _pick(rng, present)
            cell = r[f"{t}_shape"]
            if "|" in cell:
                continue
            dims = [int(x) for x in cell.split()]
            if not dims:
                continue
            i = int(rng.integers(len(dims)))
            dims[i] = int(_pick(rng, [dims[i] + 1, max(dims[i] - 1, 0), dims[i] * 2, dims[i] // 2, 0, 1]))
            r[f"{t}_shape"] = _cells(dims)
        elif kind == "dtype" and present:
            t = _pick(rng, present)
            r[f"{t}_dtype"] = _pick(rng, _SWAP_DTYPES)
        elif kind == "attr":
            a = _pick(rng, sorted(_MUTABLE_ATTRS))
            r[a] = _MUTABLE_ATTRS[a](rng, r.get(a) or 0)
        elif kind == "drop":
            opt = [t for t in present if t not in ("query", "key", "value", "attention_out")]
            if opt:
                t = _pick(rng, opt)
                r[f"{t}_shape"] = ""
                present.remove(t)
        elif kind == "data":
            t = _pick(rng, ["actual_seq_lengths", "actual_seq_lengths_kv"])
            if (r.get(f"{t}_data") or "").strip():
                vals = [int(x) for x in r[f"{t}_data"].split()]
                i = int(rng.integers(len(vals)))
                vals[i] = int(_pick(rng, [0, vals[i] + 1, max(vals[i] - 1, 0), vals[i] * 2, -1]))
                r[f"{t}_data"] = _cells(vals)
    return r


def mla_nz_row(rng: np.random.Generator, arch: str) -> dict:
    """One MLA call (query_rope / key_rope, D 512 + rope 64, one KV head) with a paged NZ cache (see the module
    docstring); a fifth of them get one to three mutations (``mutated_row``)."""
    r = _Row()
    kind = _pick(rng, ["quant", "same", "anti"], p=[.6, .25, .15])
    qd = {"quant": "INT8", "same": _pick(rng, ["FLOAT16", "BF16"]), "anti": "BF16"}[kind]
    kd = qd if kind == "same" else "INT8"
    rd = qd if kind == "same" else "BF16"
    layout = _pick(rng, ["BSND", "BSH", "TND", "BNSD"], p=[.35, .3, .3, .05])
    b = int(_pick(rng, [1, 2, 3, 4, 8, 24, 48], p=[.25, .15, .15, .15, .15, .1, .05]))
    g = int(_pick(rng, [1, 2, 4, 8, 16, 32, 64, 128], p=[.05, .05, .1, .2, .2, .15, .1, .15]))
    s1 = 1 if rng.random() < 0.6 else int(_pick(rng, [2, 3, 4, 8, 16]))
    bs = int(_pick(rng, [128, 16, 64, 256], p=[.85, .05, .05, .05]))
    hi = int(_pick(rng, [300, 2048, 8192, 40000], p=[.3, .3, .3, .1]))
    kv = [int(x) for x in rng.integers(0, hi + 1, size=b)]
    if rng.random() < 0.4:
        kv = [kv[0]] * b
    per = max(-(-max(kv) // bs), 1)
    nblocks = b * per + int(rng.integers(0, 2))
    d, dr = 512, 64
    c0 = 32 if kd == "INT8" else 16
    if layout == "TND":
        qper = [int(x) for x in rng.integers(1 if rng.random() < 0.8 else 0, s1 + 1, size=b)]
        qlens = [int(x) for x in np.cumsum(qper)]
        t = qlens[-1]
        qs, qrs, ds = (t, g, d), (t, g, dr), (t, g)
        r.tensor("actual_seq_lengths", (b,), "INT64", qlens)
    elif layout == "BSH":
        qs, qrs, ds = (b, s1, g * d), (b, s1, g * dr), (b, s1, g)
    elif layout == "BNSD":
        qs, qrs, ds = (b, g, s1, d), (b, g, s1, dr), (b, g, s1)
    else:
        qs, qrs, ds = (b, s1, g, d), (b, s1, g, dr), (b, s1, g)
    r.tensor("query", qs, qd)
    r.tensor("query_rope", qrs, rd)
    r.tensor("key", (nblocks, 1, d // c0, bs, c0), kd)
    r.tensor("value", (nblocks, 1, d // c0, bs, c0), kd)
    r.tensor("key_rope", (nblocks, 1, dr // 16, bs, 16), rd)
    r.tensor("block_table", (b, per), "INT32")
    r.tensor("actual_seq_lengths_kv", (b,), "INT64", kv)
    if kind == "quant":
        r.tensor("dequant_scale_query", ds, "FLOAT")
        r.tensor("key_antiquant_scale", (1,), "FLOAT")
        r.tensor("value_antiquant_scale", (1,), "FLOAT")
    elif kind == "anti":
        r.tensor("antiquant_scale", (2, d), "BF16")
    sparse = 0
    if s1 > 1 or layout == "TND":
        sparse = int(_pick(rng, [3, 0], p=[.85, .15]))
        if sparse:
            r.tensor("atten_mask", (2048, 2048), "INT8")
    r.tensor("attention_out", qs, "BF16" if kind != "same" else qd)
    if rng.random() < 0.2:
        r.tensor("softmax_lse", (qs[0], g, 1) if layout == "TND" else (b, g, s1, 1), "FLOAT")
    r.update(num_heads=g, scale="0.04166", pre_tokens=_INT_MAX, next_tokens=0 if sparse else _INT_MAX,
             input_layout=layout, num_key_value_heads=1, sparse_mode=sparse,
             inner_precise=int(_pick(rng, [0, 1])), block_size=bs, antiquant_mode=0,
             softmax_lse_flag=int("softmax_lse_shape" in r), key_antiquant_mode=0, value_antiquant_mode=0,
             query_quant_mode=3 if kind == "quant" else 0, pse_type=0, out_dtype=0)
    row = dict(r)
    if rng.random() < 0.2:
        row = mutated_row(rng, arch, [row])
    return row


def kv_antiquant_row(rng: np.random.Generator, arch: str) -> dict:
    """One call with an int8 key/value cache (a fifth of them int4, as it is or packed 8 per int32) and
    KV-antiquant parameters, dense (rarely paged, a tensor list or left padding): a fp16 or bf16 query of S 1-128 (the decode route, and on Atlas A2/A3 the
    PromptFlashAttention route's KvAntiquant and MSD paths), the stacked ``antiquant_scale`` or the key's and
    the value's own parameters per channel or per token in the shapes and dtypes op_host takes and a few it
    does not, an offset on both, one or neither."""
    r = _Row()
    qd = _pick(rng, ["FLOAT16", "BF16"])
    layout = _pick(rng, ["BSH", "BSND", "BNSD"])
    b = int(_pick(rng, [1, 2, 3, 4]))
    kvn = int(_pick(rng, [1, 2, 4]))
    n = kvn * int(_pick(rng, [1, 2, 4, 8]))
    d = int(_pick(rng, [64, 128], p=[.3, .7]))
    s1 = int(_pick(rng, [1, 4, 8, 16, 17, 40, 128], p=[.15, .1, .2, .15, .1, .15, .15]))
    s2 = int(_pick(rng, [64, 300, 1024, 2048]))
    shape = {"BSH": lambda bb, hh, ss: (bb, ss, hh * d), "BSND": lambda bb, hh, ss: (bb, ss, hh, d),
             "BNSD": lambda bb, hh, ss: (bb, hh, ss, d)}[layout]
    r.tensor("query", shape(b, n, s1), qd)
    r.tensor("attention_out", shape(b, n, s1), qd)
    kind = _pick(rng, ["dense", "list", "paged", "padding"], p=[.7, .1, .1, .1])
    cache = _pick(rng, ["INT8", "INT4", "INT32"], p=[.8, .1, .1])   # int4 as it is, or packed 8 per int32
    d_cache = d // 8 if cache == "INT32" else d
    block_size = 0
    kv_shape = {"BSH": lambda bb, ss: (bb, ss, kvn * d_cache), "BSND": lambda bb, ss: (bb, ss, kvn, d_cache),
                "BNSD": lambda bb, ss: (bb, kvn, ss, d_cache)}[layout]
    if kind == "list":
        cell = "|".join(_cells(kv_shape(1, s2)) for _ in range(b))
        for name in ("key", "value"):
            r[f"{name}_shape"], r[f"{name}_dtype"], r[f"{name}_format"] = cell, cache, "ND"
    elif kind == "paged":
        block_size = 128
        per = -(-s2 // block_size)
        for name in ("key", "value"):
            r.tensor(name, (b * per, block_size, kvn * d_cache), cache)
        r.tensor("block_table", (b, per), "INT32")
        r.tensor("actual_seq_lengths_kv", (b,), "INT64", [s2] * b)
    else:
        for name in ("key", "value"):
            r.tensor(name, kv_shape(b, s2), cache)
        if kind == "padding":
            r.tensor("kv_padding_size", (1,), "INT64", [0])
            r.tensor("actual_seq_lengths_kv", (b,), "INT64", [s2] * b)
    pdt = lambda: _pick(rng, [qd, "BF16", "FLOAT16", "FLOAT"], p=[.55, .15, .15, .15])   # noqa: E731
    offset = _pick(rng, ["both", "none", "key", "value"], p=[.45, .45, .05, .05])
    mode = 0
    if rng.random() < 0.35:   # the stacked parameters, per channel or per tensor
        dt = pdt()
        ps = _pick(rng, [{"BSH": (2, kvn * d), "BSND": (2, kvn, d), "BNSD": (2, kvn, 1, d)}[layout], (2,),
                         (2, kvn, d)])
        r.tensor("antiquant_scale", ps, dt)
        if offset == "both":
            r.tensor("antiquant_offset", ps, dt)
    else:
        mode = int(_pick(rng, [0, 1, 2], p=[.55, .4, .05]))
        dt = pdt() if mode != 1 else _pick(rng, ["FLOAT", "BF16"], p=[.9, .1])
        if mode == 1:
            ps = _pick(rng, [(1, b, s2), (b, s2), (1, b, s2 + 8)], p=[.45, .45, .1])
        else:
            ps = _pick(rng, [(kvn, 1, d), (kvn, d), (kvn * d,), (1,)], p=[.35, .35, .2, .1])
        for name in ("key", "value"):
            r.tensor(f"{name}_antiquant_scale", ps, dt)
            if offset in ("both", name):
                r.tensor(f"{name}_antiquant_offset", ps, dt)
    sparse = 0
    if s1 > 1 and rng.random() < 0.4:
        sparse = 3
        r.tensor("atten_mask", (2048, 2048), "BOOL")
    lse = rng.random() < 0.3
    if lse:
        r.tensor("softmax_lse", (b, n, s1, 1), "FLOAT")
    r.update(num_heads=n, scale="0.088388", pre_tokens=_INT_MAX, next_tokens=0 if sparse else _INT_MAX,
             input_layout=layout, num_key_value_heads=kvn, sparse_mode=sparse,
             inner_precise=int(_pick(rng, [0, 1])), block_size=block_size, antiquant_mode=0,
             softmax_lse_flag=int(lse), key_antiquant_mode=mode,
             value_antiquant_mode=mode if rng.random() < 0.97 else 1 - min(mode, 1), query_quant_mode=0,
             pse_type=0, out_dtype=0)
    return dict(r)


#: the share of rows that are MLA calls with an NZ cache (``mla_nz_row``), drawn from a stream of their own
MLA_NZ_SHARE = 0.03
#: the keys (after the seed and the arch) of the two streams that pick and build those rows; the picking key
#: is the first that replaces none of the rows tests/tiling/test_ophost_rows_regression.py pins from seeds 0-4
#: of the two-source generator
_MLA_NZ_PICK, _MLA_NZ_BUILD = 10, 512
#: the share of rows that are KV-antiquant calls (``kv_antiquant_row``), from streams of their own; the picking
#: key (offset 4096) is the first that replaces none of the rows tests/tiling/test_ophost_rows_regression.py pins
KV_ANTIQUANT_SHARE = 0.03
_KV_ANTIQUANT_PICK, _KV_ANTIQUANT_BUILD = 3, 8192


def random_rows(arch: str, n: int, seed: int = 0, corpus_rows: list[dict] | None = None) -> list[dict]:
    """``n`` calls for ``arch`` (half synthetic, half mutated corpus rows when ``corpus_rows`` is given; a
    ``MLA_NZ_SHARE`` of them replaced by MLA calls with an NZ cache and a ``KV_ANTIQUANT_SHARE`` by KV-antiquant
    calls, each from generators of their own, so that the other rows are the ones the two-source generator
    gave)."""
    if arch not in ("arch22", "arch35"):
        raise ValueError(f"arch must be 'arch22' or 'arch35', not {arch!r}")
    rng = np.random.default_rng([seed, 22 if arch == "arch22" else 35])
    pick_rng = np.random.default_rng([seed, 22 if arch == "arch22" else 35, 1024 + _MLA_NZ_PICK])
    mla_rng = np.random.default_rng([seed, 22 if arch == "arch22" else 35, _MLA_NZ_BUILD])
    aq_pick = np.random.default_rng([seed, 22 if arch == "arch22" else 35, 4096 + _KV_ANTIQUANT_PICK])
    aq_rng = np.random.default_rng([seed, 22 if arch == "arch22" else 35, _KV_ANTIQUANT_BUILD])
    cols = header(arch)
    base = [{k: v for k, v in row.items() if k in cols} for row in (corpus_rows or [])]
    out = []
    for i in range(n):
        row = mutated_row(rng, arch, base) if base and rng.random() < 0.5 else synthetic_row(rng, arch)
        if pick_rng.random() < MLA_NZ_SHARE:
            row = mla_nz_row(mla_rng, arch)
        if aq_pick.random() < KV_ANTIQUANT_SHARE:
            row = kv_antiquant_row(aq_rng, arch)
        full = {c: "" for c in cols}
        # the UT loader splits on every comma (no CSV quoting): a comma in a copied annotation would shift
        # the columns, so it becomes a semicolon
        full.update({k: ("" if v is None else str(v)).replace(",", ";") for k, v in row.items() if k in full})
        full["case_name"] = f"rand_{arch}_{seed}_{i:05d}"
        full["expectResult"] = ""
        full["expectTilingKey"] = ""
        full["expectTilingDataHash"] = ""
        out.append(full)
    return out


def write_rows(rows: list[dict], path: str | Path, arch: str) -> Path:
    """Write rows as a UT CSV with the header of ``arch``."""
    path = Path(path)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=header(arch))
        w.writeheader()
        for row in rows:
            w.writerow(row)
    return path
