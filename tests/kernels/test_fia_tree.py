"""The tree mask (sparse_mode 9) and the split rope it takes on arch22, on the simulated GQA kernel against the
golden; the operator's rules as typed errors (``kernels.fia.tree``)."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels import compare, npu_fused_infer_attention_score as fia
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.tiling.errors import ParamError

N, N2, D, DR = 4, 2, 128, 64


def _rand(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float16)


def _tree(rng, n: int) -> np.ndarray:
    """A random draft tree of n nodes (node i's parent precedes it): node i sees itself and its ancestors."""
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    masked = np.ones((n, n), bool)
    for i in range(n):
        j = i
        while j >= 0:
            masked[i, j] = False
            j = parent[j]
    return masked


def _bsnd_call(seed=0, s1=6, lengths=(70, 300), **extra):
    rng = np.random.default_rng(seed)
    b, s2 = len(lengths), max(lengths)
    kw = dict(query=_rand(rng, (b, s1, N, D)), key=_rand(rng, (b, s2, N2, D)), value=_rand(rng, (b, s2, N2, D)),
              query_rope=_rand(rng, (b, s1, N, DR)), key_rope=_rand(rng, (b, s2, N2, DR)),
              atten_mask=np.stack([_tree(rng, s1) for _ in lengths]), sparse_mode=9, num_heads=N,
              num_key_value_heads=N2, input_layout="BSND", scale=0.07, softmax_lse_flag=True,
              actual_seq_lengths_kv=list(lengths))
    kw.update(extra)
    return kw


def _check(kw):
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16")
    assert rep.passed, str(rep)
    assert g_lse is None or compare(lse, g_lse, "float16").passed
    return out, g_out


def test_tree_mask_with_the_split_rope_on_the_gqa_kernel():
    """BSND, GQA 2, two batches (KV 70: the tree in the first S2 block; 300: in a later one): the kernel reads
    each batch's tree from its own start and adds the rope's dot product, as the golden does; the result is
    not the causal one."""
    kw = _bsnd_call()
    out, g_out = _check(kw)
    causal = fia_golden_lowp(**dict(kw, sparse_mode=3, atten_mask=np.triu(np.ones((2048, 2048), bool), 1)))[0]
    assert np.abs(g_out - causal).max() > 1e-2


@pytest.mark.slow
def test_tnd_tree_is_the_batches_trees_one_after_the_other():
    rng = np.random.default_rng(1)
    s1, s2 = [3, 5, 4], [50, 200, 9]
    t, tk = sum(s1), sum(s2)
    kw = dict(query=_rand(rng, (t, N, D)), key=_rand(rng, (tk, N2, D)), value=_rand(rng, (tk, N2, D)),
              query_rope=_rand(rng, (t, N, DR)), key_rope=_rand(rng, (tk, N2, DR)),
              atten_mask=np.concatenate([_tree(rng, n).ravel() for n in s1]), sparse_mode=9, num_heads=N,
              num_key_value_heads=N2, input_layout="TND", scale=0.07, softmax_lse_flag=True,
              actual_seq_lengths=list(np.cumsum(s1)), actual_seq_lengths_kv=list(np.cumsum(s2)))
    _check(kw)


@pytest.mark.slow
def test_bnsd_tree_and_paged_rope():
    rng = np.random.default_rng(2)
    b, s1, s2, bs = 3, 4, 64, 16
    q, qr = _rand(rng, (b, N, s1, D)), _rand(rng, (b, N, s1, DR))
    tree = np.stack([_tree(rng, s1) for _ in range(b)])
    dense = dict(query=q, key=_rand(rng, (b, N2, s2, D)), value=_rand(rng, (b, N2, s2, D)), query_rope=qr,
                 key_rope=_rand(rng, (b, N2, s2, DR)), atten_mask=tree, sparse_mode=9, num_heads=N,
                 num_key_value_heads=N2, input_layout="BNSD", scale=0.07)
    _check(dense)
    blocks = b * s2 // bs
    paged = dict(dense, key=_rand(rng, (blocks, N2, bs, D)), value=_rand(rng, (blocks, N2, bs, D)),
                 key_rope=_rand(rng, (blocks, N2, bs, DR)), block_size=bs, actual_seq_lengths_kv=[64, 40, 17],
                 block_table=rng.permutation(blocks).reshape(b, -1).astype(np.int32))
    _check(paged)


def test_tree_mask_rules_are_param_errors():
    kw = _bsnd_call()
    no_rope = {k: v for k, v in kw.items() if k not in ("query_rope", "key_rope")}
    with pytest.raises(ParamError) as info:           # op_host: arch22 takes the tree with the split rope only
        fia(**no_rope)
    assert (info.value.param, int(info.value.status)) == ("sparse_mode", 561002) and "query_rope" in str(info.value)
    with pytest.raises(ParamError) as info:           # the chip would read past a tree smaller than Q_S
        fia(**dict(kw, atten_mask=kw["atten_mask"][:, :4, :4]))
    assert (info.value.param, int(info.value.status)) == ("atten_mask", 161002)
    with pytest.raises(ParamError, match="query length <= its kv length"):   # op_host: query S vs key S
        fia(**dict(kw, key=kw["key"][:, :5], value=kw["value"][:, :5], key_rope=kw["key_rope"][:, :5],
                   actual_seq_lengths_kv=None))
    with pytest.raises(ParamError) as info:           # per batch: the chip's tree start would be negative
        fia(**dict(kw, actual_seq_lengths_kv=[5, 300]))
    assert (info.value.param, int(info.value.status)) == ("actual_seq_lengths_kv", 161002)
    with pytest.raises(ParamError) as info:
        fia(**dict(kw, pse_shift=np.zeros((2, N, 6, 300), np.float16)))
    assert info.value.param == "pse_shift"
