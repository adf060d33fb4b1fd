"""Hypothesis strategies for ``npu_fused_infer_attention_score`` calls: valid calls over the API's features
and malformed values of each parameter.

Model
-----
``fia_calls()`` draws one keyword call: a layout (BSH, BSND, BNSD, TND and the transposing in/out pairs),
dtype (fp16 / bf16, sometimes fp32 or int8), batch, heads and a GQA ratio, query and KV lengths (decode
S1 = 1, prefill, 0), head dim, an optional per-batch KV length list (0 and full included), a mask with a
sparse mode and pre/next tokens, a pse shift, softmax_lse, a paged KV cache (block
table + block size), an int8 KV cache with KV-antiquant parameters (per channel, per tensor, per token or the
key's and value's own), and a target. With probability ``bad`` one parameter is replaced by a malformed value
(a wrong type, a negative or non-integral number, a wrong dtype, a shape off by one, an unknown string).
Arrays are small (at most a few thousand elements per tensor) so a check-only property runs hundreds of
calls a second.

Invariants
----------
* Every draw is a complete keyword dict for ``cvtile.npu_fused_infer_attention_score``; ``_malformed``
  names the parameter it broke (``None`` for a valid-looking call); only V1 (torch_npu) keywords are drawn
  (the learnable sink is a V2 parameter).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

BF16 = ml_dtypes.bfloat16
LAYOUTS = ("BSH", "BSND", "BNSD", "TND", "BNSD_BSND", "BSND_BNSD", "BSH_BNSD")
TARGETS = ("Ascend910B1", "Ascend910B3", "Ascend950")


def _shape(layout: str, b: int, n: int, s: int, d: int, t: int) -> tuple:
    return {"BSH": (b, s, n * d), "BSND": (b, s, n, d), "BNSD": (b, n, s, d), "TND": (t, n, d)}[layout]


@st.composite
def fia_calls(draw, bad: float = 0.3):
    layout = draw(st.sampled_from(LAYOUTS))
    q_lay = layout.split("_")[0]
    dtype = draw(st.sampled_from([np.float16, BF16, np.float16, BF16, np.float32, np.int8]))
    b = draw(st.integers(1, 3))
    n2 = draw(st.sampled_from([1, 2]))
    g = draw(st.sampled_from([1, 2, 4]))
    n1 = n2 * g
    s1 = draw(st.sampled_from([1, 1, 3, 16, 33, 0]))
    s2 = draw(st.sampled_from([1, 16, 64, 130, 0]))
    d = draw(st.sampled_from([16, 32, 64]))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))

    def arr(shape, dt=dtype):
        return rng.standard_normal(shape).astype(np.float32).astype(dt)

    kw: dict = {"num_heads": n1, "num_key_value_heads": n2, "input_layout": layout,
                "scale": draw(st.sampled_from([1.0, 0.125, 1 / np.sqrt(d)]))}
    if q_lay == "TND":
        qlens = draw(st.lists(st.integers(0, max(s1, 1)), min_size=b, max_size=b))
        kvlens = draw(st.lists(st.integers(0, max(s2, 1)), min_size=b, max_size=b))
        kw["actual_seq_lengths"] = list(np.cumsum(qlens).astype(int))
        kw["actual_seq_lengths_kv"] = list(np.cumsum(kvlens).astype(int))
        t, tk = int(sum(qlens)), int(sum(kvlens))
        kw["query"] = arr(_shape("TND", b, n1, s1, d, t))
        kw["key"] = arr(_shape("TND", b, n2, s2, d, tk))
        kw["value"] = arr(_shape("TND", b, n2, s2, d, tk))
    else:
        kw["query"] = arr(_shape(q_lay, b, n1, s1, d, 0))
        kv_lay = q_lay
        paged = s1 == 1 and s2 > 0 and draw(st.booleans())
        if paged:
            bs = draw(st.sampled_from([16, 128]))
            blocks = -(-s2 // bs)
            kw["key"] = arr((b * blocks, bs, n2 * d))
            kw["value"] = arr((b * blocks, bs, n2 * d))
            kw["block_table"] = np.arange(b * blocks, dtype=np.int32).reshape(b, blocks)
            kw["block_size"] = bs
            kw["actual_seq_lengths_kv"] = draw(st.lists(st.integers(0, s2), min_size=b, max_size=b))
        else:
            kw["key"] = arr(_shape(kv_lay, b, n2, s2, d, 0))
            kw["value"] = arr(_shape(kv_lay, b, n2, s2, d, 0))
            if draw(st.booleans()):
                kw["actual_seq_lengths_kv"] = draw(st.lists(st.integers(0, s2), min_size=b, max_size=b))
    if draw(st.integers(0, 3)) == 0 and q_lay != "TND":
        sparse = draw(st.sampled_from([0, 1, 2, 3, 4]))
        kw["sparse_mode"] = sparse
        if sparse in (2, 3, 4):
            kw["atten_mask"] = np.triu(np.ones((2048, 2048), np.bool_), 1)
        else:
            kw["atten_mask"] = rng.random((b, max(s1, 1), max(s2, 1))) < 0.3
        if sparse in (0, 4):
            kw["pre_tokens"] = draw(st.sampled_from([2147483647, 8, 0, -3]))
            kw["next_tokens"] = draw(st.sampled_from([2147483647, 0, 5, -2]))
    if draw(st.integers(0, 5)) == 0 and q_lay != "TND" and dtype in (np.float16, BF16):
        kw["pse_shift"] = arr((1, n1, max(s1, 1), max(s2, 1)))
    if draw(st.integers(0, 3)) == 0 and q_lay != "TND" and dtype in (np.float16, BF16):
        _draw_antiquant(draw, kw, rng, q_lay, dtype, b, n2, d)
    if draw(st.booleans()):
        kw["softmax_lse_flag"] = True
    kw["inner_precise"] = draw(st.sampled_from([0, 0, 1, 2, 3]))
    kw["_target"] = draw(st.sampled_from(TARGETS))
    kw["_malformed"] = None
    if draw(st.floats(0, 1)) < bad:
        name, value = draw(_malformed(kw))
        kw[name] = value
        kw["_malformed"] = name
    return kw


def _draw_antiquant(draw, kw: dict, rng, layout: str, dtype, b: int, n2: int, d: int) -> None:
    """Turn ``kw``'s key/value into an int8 cache with KV-antiquant parameters of one kind: per channel
    (``antiquant_scale`` stacked for key and value, in the layout's shape), per tensor ((2,)), per token
    (``antiquant_mode`` 1, (2, B, S') fp32, S' the cache's S) or the key's and value's own parameters, per channel
    or per token (``key/value_antiquant_mode`` 1, (1, B, S') fp32: on the A2/A3 PromptFlashAttention route its MSD
    path); an offset half of the time."""
    kw["key"], kw["value"] = (rng.integers(-128, 128, np.shape(kw[n])).astype(np.int8) for n in ("key", "value"))
    kind = draw(st.sampled_from(["channel", "tensor", "token", "separate", "separate_token"]))
    offset = draw(st.booleans())
    if kw.get("block_table") is not None:
        s2 = np.shape(kw["block_table"])[1] * kw["block_size"]
    else:
        s2 = np.shape(kw["key"])[2 if layout == "BNSD" else 1]
    shape = {"channel": {"BNSD": (2, n2, 1, d), "BSND": (2, n2, d), "BSH": (2, n2 * d)}[layout],
             "tensor": (2,), "token": (2, b, s2), "separate": (n2, 1, d), "separate_token": (1, b, s2)}[kind]
    pdt = np.float32 if kind in ("token", "separate_token") else dtype

    def params(lo, hi):
        return rng.uniform(lo, hi, shape).astype(np.float32).astype(pdt)

    if kind.startswith("separate"):
        kw.update(key_antiquant_scale=params(0.001, 0.05), value_antiquant_scale=params(0.001, 0.05))
        if offset:
            kw.update(key_antiquant_offset=params(-3, 3), value_antiquant_offset=params(-3, 3))
        if kind == "separate_token":
            kw.update(key_antiquant_mode=1, value_antiquant_mode=1)
        return
    kw["antiquant_scale"] = params(0.001, 0.05)
    if offset:
        kw["antiquant_offset"] = params(-3, 3)
    if kind == "token":
        kw["antiquant_mode"] = 1


@st.composite
def _malformed(draw, kw: dict):
    name = draw(st.sampled_from(["num_heads", "num_key_value_heads", "scale", "input_layout",
                                 "actual_seq_lengths_kv", "sparse_mode", "pre_tokens", "block_size",
                                 "softmax_lse_flag", "query", "key", "inner_precise"]))
    q = kw["query"]
    bad = {
        "num_heads": [0, -1, 4.0, "8", kw["num_heads"] + 1, None],
        "num_key_value_heads": [-1, 3, 2.5, kw["num_heads"] * 2],
        "scale": ["0.125", float("nan"), float("inf"), None],
        "input_layout": ["BSHD", "", None, "bsh", "NTD"],
        "actual_seq_lengths_kv": [[-1], [None], "100", [50.7], [10 ** 6] * 4, [1, 2, 3, 4, 5, 6, 7]],
        "sparse_mode": [5, 7, -1, 9, "0"],
        "pre_tokens": [-2 ** 40, 2 ** 40, 1.5],
        "block_size": [0, -16, 100, 7],
        "softmax_lse_flag": ["no", 2, None],
        "query": [q.astype(np.float64), q.reshape(-1), [q], q[..., :-1] if q.shape[-1] > 1 else q],
        "key": [kw["key"].astype(np.int32), kw["key"][:, :0] if kw["key"].ndim > 1 else kw["key"]],
        "inner_precise": [4, -1, 7],
    }[name]
    return name, draw(st.sampled_from(bad))


#: the kernel shapes ``fia_runtime_calls`` draws within: (name, layout, dtype, S1, S2, G, D, cache, sparse modes,
#: target), the cache being dense (False), paged (True), a tensor list ("list"), an int8 cache with KV antiquant
#: ("int8") or dense with a pse shift ("pse"). Each fixes what the FIA kernel takes as compile-time constants (the dtype, layout, G, D, the tiling's M
#: and S2 bases, which follow the longest query and KV lengths, the cache kind, the band and mask flags, and the
#: target, whose buffers the memory plan fits), so the draws of one envelope share one kernel specialisation. The
#: decode, prefill and band ones are the kernel grid's default families (``test_fia_kernel_grid``: D22, P22 and
#: its sparse 2/3/4 band), whose specialisations the default tier compiles anyway.
RUNTIME_ENVELOPES = (
    ("decode", "BSND", np.float16, 1, 256, 4, 64, False, (), "Ascend910B1"),
    ("prefill", "BNSD", np.float16, 64, 512, 4, 64, False, (), "Ascend910B1"),
    ("prefill_band", "BNSD", np.float16, 64, 512, 4, 64, False, (2, 3, 4), "Ascend910B1"),
    ("decode_paged", "BSH", BF16, 1, 160, 4, 64, True, (), "Ascend910B1"),
    # key/value tensor lists (one (1, S_b, ...) tensor per batch, S_b <= 512) with a full (B, S1, S2) mask, whose
    # columns are the batch's own KV positions, not its tensor's place in the list's arena
    ("prefill_mask_list", "BSND", np.float16, 64, 512, 4, 64, "list", (0,), "Ascend910B1"),
    # an int8 cache dequantised per channel (scale and offset) by the A2/A3 MSD kernel, and on the prefill route by
    # PromptFlashAttention's KvAntiquant path (the vector dequantises in sub-blocks through the GM workspace)
    ("decode_antiquant", "BSND", np.float16, 1, 256, 4, 64, "int8", (), "Ascend910B1"),
    ("prefill_antiquant", "BNSD", np.float16, 64, 512, 4, 64, "int8", (), "Ascend910B1"),
    # Ascend950's kernel with a pse shift (one row per query position) under the causal band
    ("prefill_pse_950", "BNSD", BF16, 64, 512, 4, 64, "pse", (3,), "Ascend950"),
)


def envelope_reference_call(name: str) -> tuple[dict, str]:
    """(keywords, target) of envelope ``name``'s plainest call: one batch, one KV head, every length full, its
    first sparse mode. Its tiling's M and S2 bases are the envelope's (what its one specialisation is built
    for)."""
    _, layout, dtype, s1, s2, g, d, paged, sparse_modes, target = next(e for e in RUNTIME_ENVELOPES if e[0] == name)
    shape = {"BSH": lambda s, n: (1, s, n * d), "BSND": lambda s, n: (1, s, n, d),
             "BNSD": lambda s, n: (1, n, s, d)}[layout]
    kw: dict = {"num_heads": g, "num_key_value_heads": 1, "input_layout": layout, "softmax_lse_flag": True,
                "scale": 0.125, "query": np.zeros(shape(s1, g), dtype)}
    if paged == "int8":
        kw.update(key=np.zeros(shape(s2, 1), np.int8), value=np.zeros(shape(s2, 1), np.int8),
                  antiquant_scale=np.ones((2, 1, 1, d), dtype), antiquant_offset=np.zeros((2, 1, 1, d), dtype))
    elif paged == "pse":
        kw.update(key=np.zeros(shape(s2, 1), dtype), value=np.zeros(shape(s2, 1), dtype),
                  pse_shift=np.zeros((1, g, s1, s2), dtype))
    elif paged == "list":   # two batches of full-length tensors (a list of one is the contiguous form)
        kw["query"] = np.zeros((2,) + kw["query"].shape[1:], dtype)
        kw["key"] = [np.zeros(shape(s2, 1), dtype)] * 2
        kw["value"] = [np.zeros(shape(s2, 1), dtype)] * 2
    elif paged:
        blocks = -(-s2 // 16)
        kw.update(key=np.zeros((blocks, 16, d), dtype), value=np.zeros((blocks, 16, d), dtype), block_size=16,
                  block_table=np.arange(blocks, dtype=np.int32).reshape(1, blocks), actual_seq_lengths_kv=[s2])
    else:
        kw.update(key=np.zeros(shape(s2, 1), dtype), value=np.zeros(shape(s2, 1), dtype))
    if sparse_modes == (0,):   # a full mask, (B, S1, S2)
        kw.update(sparse_mode=0, atten_mask=np.zeros((kw["query"].shape[0], s1, s2), np.bool_))
    elif sparse_modes:
        kw.update(sparse_mode=sparse_modes[0], atten_mask=np.triu(np.ones((2048, 2048), np.bool_), 1))
    return kw, target


@st.composite
def fia_runtime_calls(draw):
    """One valid call inside one of ``RUNTIME_ENVELOPES``: what varies is what the kernel reads at run time.

    Drawn: the batch (1-3), the KV heads (1-2, so N1 = G * N2), the actual query and KV lengths per batch (0,
    1, the full length and everything between; a TND-free layout, so a shorter length is a padded tail), the
    data (standard normal, sometimes scaled by 100 or by 1e-3, sometimes with a row of large equal values),
    the softmax scale, inner_precise 0/1, the band's pre/next tokens (sparse 4) and the block table's order.
    A "list" envelope draws key/value tensor lists: each batch its own tensor, as long as its KV length or longer;
    sparse mode 0 draws a full (B, S1, S2) mask. An "int8" envelope draws an int8 cache with a per-channel
    antiquant scale (scaled with the data) and an offset (sometimes all 0); a "pse" one a pse shift of one batch
    or B, over every query head.
    The lse is always requested (a constant of the kernel). Returns the keyword call with ``_target`` (the
    envelope's) and ``_envelope`` (its name) set."""
    name, layout, dtype, s1, s2, g, d, paged, sparse_modes, target = draw(st.sampled_from(RUNTIME_ENVELOPES))
    b = draw(st.integers(2 if paged == "list" else 1, 3))
    n2 = draw(st.integers(1, 2))
    n1 = n2 * g
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    gain = draw(st.sampled_from([1.0, 1.0, 100.0, 1e-3]))

    def arr(shape):
        x = rng.standard_normal(shape).astype(np.float32) * gain
        if draw(st.integers(0, 7)) == 0:     # a run of equal large values: ties in the max, exp(0) terms
            x.reshape(-1)[: x.shape[-1]] = 30.0
        return x.astype(dtype)

    def lengths(full: int) -> list:
        # one batch at the full length: op_host sizes the M and S2 bases from the longest one
        out = draw(st.lists(st.one_of(st.sampled_from([0, 1, full]), st.integers(0, full)), min_size=b,
                            max_size=b))
        out[draw(st.integers(0, b - 1))] = full
        return out

    kw: dict = {"num_heads": n1, "num_key_value_heads": n2, "input_layout": layout, "softmax_lse_flag": True,
                "scale": draw(st.sampled_from([1 / np.sqrt(d), 0.125, 1.0, 0.01])),
                "inner_precise": draw(st.sampled_from([0, 1]))}
    shape = {"BSH": (b, s1, n1 * d), "BSND": (b, s1, n1, d), "BNSD": (b, n1, s1, d)}
    kw["query"] = arr(shape[layout])
    if paged == "list":   # batch i's own (1, S_i, ...) tensor, S_i from its KV length up to the envelope's S2
        kw["actual_seq_lengths_kv"] = kv_lengths = lengths(s2)
        sizes = [draw(st.integers(max(n, 1), s2)) for n in kv_lengths]
        sizes[kv_lengths.index(s2)] = s2   # the longest tensor sizes op_host's blocks, as the longest length does
        kv_shape = {"BSH": lambda s: (1, s, n2 * d), "BSND": lambda s: (1, s, n2, d),
                    "BNSD": lambda s: (1, n2, s, d)}[layout]
        kw["key"] = [arr(kv_shape(s)) for s in sizes]
        kw["value"] = [arr(kv_shape(s)) for s in sizes]
    elif paged == "int8":   # an int8 cache, its per-channel scale and offset ((2, N2, 1, D); offset 0 or not)
        kv_shape = {"BSH": (b, s2, n2 * d), "BSND": (b, s2, n2, d), "BNSD": (b, n2, s2, d)}[layout]
        kw["key"], kw["value"] = (rng.integers(-128, 128, kv_shape).astype(np.int8) for _ in range(2))
        kw["antiquant_scale"] = (rng.uniform(0.001, 0.05, (2, n2, 1, d)) * gain).astype(dtype)
        kw["antiquant_offset"] = (rng.uniform(-3, 3, (2, n2, 1, d)) * draw(st.sampled_from([0, 1]))).astype(dtype)
        if draw(st.booleans()):
            kw["actual_seq_lengths_kv"] = lengths(s2)
    elif paged == "pse":   # a pse shift over every query head, one row per query position
        kv_shape = {"BSH": (b, s2, n2 * d), "BSND": (b, s2, n2, d), "BNSD": (b, n2, s2, d)}[layout]
        kw["key"], kw["value"] = arr(kv_shape), arr(kv_shape)
        kw["pse_shift"] = (rng.standard_normal((draw(st.sampled_from([1, b])), n1, s1, s2)) *
                           draw(st.sampled_from([1.0, 10.0]))).astype(dtype)
        if draw(st.booleans()):
            kw["actual_seq_lengths_kv"] = lengths(s2)
    elif paged:
        bs = 16
        blocks = -(-s2 // bs)
        kw["key"] = arr((b * blocks, bs, n2 * d))
        kw["value"] = arr((b * blocks, bs, n2 * d))
        kw["block_table"] = rng.permutation(b * blocks).astype(np.int32).reshape(b, blocks)
        kw["block_size"] = bs
        kw["actual_seq_lengths_kv"] = lengths(s2)
    else:
        kv_shape = {"BSH": (b, s2, n2 * d), "BSND": (b, s2, n2, d), "BNSD": (b, n2, s2, d)}[layout]
        kw["key"], kw["value"] = arr(kv_shape), arr(kv_shape)
        if draw(st.booleans()):
            kw["actual_seq_lengths_kv"] = lengths(s2)
    if s1 > 1 and draw(st.booleans()):
        kw["actual_seq_lengths"] = lengths(s1)
    if sparse_modes:
        sparse = draw(st.sampled_from(sparse_modes))
        kw["sparse_mode"] = sparse
        kw["atten_mask"] = np.triu(np.ones((2048, 2048), np.bool_), 1)
        if sparse == 0:   # a full (B, S1, S2) mask: a random quarter of the positions masked
            kw["atten_mask"] = rng.uniform(0, 1, (b, s1, s2)) < 0.25
        if sparse == 4:
            kw["pre_tokens"] = draw(st.integers(0, s2))
            kw["next_tokens"] = draw(st.integers(-s1 // 2, s2))
    kw["_target"] = target
    kw["_envelope"] = name
    return kw
