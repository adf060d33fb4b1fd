"""arch22 TND calls on the split-fuse ("FAI") route, run on the simulator against the float64 golden.

These calls used to be refused (the split-fuse tiling was not mirrored). Each case asserts the route is
``fai`` and then checks the result like the kernel grid does (``fia_kit.check``: P-rounded golden, the
upstream tolerance classes, output 0 and lse +inf on rows without a visible key).

Flash decode and the one-token "decoding" split of this route need a paged cache: those two cases build a
paged BnBsH call by hand (shuffled block table, per-batch KV lengths) and compare the API's result with
the golden of the same call.

Compile budget: five attention specialisations (fp16 prefill, bf16 band, fp16 one-token decode, paged
decoding, paged FD) plus the combine; the sparse 4 case shares the sparse 3 one. bf16 cases keep the KV
within one 512-block (the kernel grid's rule, see test_fia_kernel_grid.py); the fp16 ones span several.
"""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels import compare, fia_golden_lowp, npu_fused_infer_attention_score
from cvtile.tiling.fia import tile_fia
from cvtile.tiling.params import FiaParams

A2 = "Ascend910B1"


def case(id_, marks=(), **kw):
    return pytest.param(kw, id=id_, marks=marks)


CASES = [
    # GQA prefill, fp16: one long batch (1 head x 128 tokens per task), an empty-query batch, an empty-KV batch
    case("fp16-prefill-sparse0", marks=pytest.mark.slow, layout="TND", b=3, n=8, nkv=2, d=64, q_lens=(150, 0, 60), kv_lens=(600, 300, 0)),
    # bf16 right-down causal, with S1 > S2 in one batch (rows with no visible key); bf16 cases keep the KV in
    # one 512-block (see test_fia_kernel_grid.py: several blocks round P against running maxima, beyond the
    # bf16 budget against the golden)
    case("bf16-prefill-sparse3", layout="TND", b=2, n=8, nkv=2, d=64, dtype="bfloat16", sparse=3,
         q_lens=(300, 40), kv_lens=(500, 24)),
    # bf16 band (sparse 4): same kernel specialisation as the causal case
    case("bf16-prefill-sparse4", layout="TND", b=2, n=8, nkv=2, d=64, dtype="bfloat16", sparse=4, pre=200, nxt=16,
         q_lens=(300, 40), kv_lens=(500, 100)),
    # decode: every query one token, G 8 (one task holds the 8 heads), one batch without KV
    case("fp16-decode-sparse0", marks=pytest.mark.slow, layout="TND", b=3, n=8, nkv=1, d=64, q_lens=(1, 1, 1), kv_lens=(700, 1500, 0),
         lse=False),
]


@pytest.mark.parametrize("params", CASES)
def test_split_fuse_route_runs(fia_kit, params):
    c = fia_kit.Case(**params)
    t = fia_kit.tiling(c)
    assert (t.route, t.m_order) == ("fai", "GS1"), t.explain()
    assert t.q_seqlens == tuple(c.q_lens) and t.kv_seqlens == tuple(c.kv_lens)
    assert not t.fd
    fia_kit.check(c)


def _paged_call(seed, q_lens, kv_lens, *, n, nkv, d=64, bs=128, lse=True):
    """torch_npu keywords of a TND call on a paged BnBsH cache (blocks shuffled in the table)."""
    rng = np.random.default_rng(seed)
    blocks = [max(1, -(-k // bs)) for k in kv_lens]
    table = np.full((len(kv_lens), max(blocks)), -1, np.int32)
    order = rng.permutation(sum(blocks)).astype(np.int32)
    at = 0
    for b, nb in enumerate(blocks):
        table[b, :nb] = order[at:at + nb]
        at += nb
    rand = lambda shape: rng.standard_normal(shape).astype(np.float32).astype(np.float16)  # noqa: E731
    return dict(query=rand((sum(q_lens), n, d)), key=rand((sum(blocks), bs, nkv * d)),
                value=rand((sum(blocks), bs, nkv * d)), block_table=table,
                actual_seq_lengths=[int(x) for x in np.cumsum(q_lens)], actual_seq_lengths_kv=list(kv_lens),
                num_heads=n, num_key_value_heads=nkv, input_layout="TND", scale=d ** -0.5, softmax_lse_flag=lse,
                block_size=bs)


def _tiling(kw):
    tensors = {k: kw[k] for k in ("query", "key", "value", "block_table", "actual_seq_lengths",
                                  "actual_seq_lengths_kv")}
    tensors["attention_out"] = kw["query"]
    if kw["softmax_lse_flag"]:
        tensors["softmax_lse"] = np.zeros((kw["query"].shape[0], kw["num_heads"], 1), np.float32)
    attrs = {k: kw[k] for k in ("num_heads", "num_key_value_heads", "input_layout", "scale", "softmax_lse_flag",
                                "block_size")}
    return tile_fia(FiaParams.from_api(tensors, attrs), A2)


def _check_against_golden(kw):
    out, lse = npu_fused_infer_attention_score(**kw, target=A2)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16", name="attention_out")
    assert rep.passed, rep
    if kw["softmax_lse_flag"]:
        rep = compare(lse, g_lse, "float16", name="softmax_lse")
        assert rep.passed, rep


def test_split_fuse_flash_decode_runs():
    """Paged fp16 call with 4-token queries and KV 3000 / 1500: the split-fuse flash-decode split cuts every
    (batch, kv head) row into KV pieces on 18 cores (the paged KV list is per batch); the combine merges them."""
    kw = _paged_call(11, [4, 4], [3000, 1500], n=8, nkv=2)
    t = _tiling(kw)
    assert t.route == "fai" and t.fd and t.key_fields["fd"] and t.used_cores == 18, t.explain()
    assert t.kv_seqlens == (3000, 1500) and all(ft.splits >= 2 for ft in t.fd_tasks)
    _check_against_golden(kw)


@pytest.mark.slow
def test_split_fuse_decoding_split_runs():
    """24 one-token batches on a paged cache with block size 128, no mask, no lse: the decoding split (tasks of
    whole kv heads round-robin over the 24 cores), one batch without KV."""
    kv = [37 * (i + 1) % 700 for i in range(24)]
    kv[5] = 0
    kw = _paged_call(12, [1] * 24, kv, n=16, nkv=2, lse=False)
    t = _tiling(kw)
    assert t.route == "fai" and t.key_fields["decoding"] and not t.fd, t.explain()
    assert t.kv_seqlens == tuple(kv)
    _check_against_golden(kw)
