"""Key/value tensor lists (one tensor per batch, each with its own S): the simulated kernel against the golden,
and the operator's rules as typed errors (``kernels.fia.kv_list``)."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels import UnsupportedParameterError, compare, npu_fused_infer_attention_score as fia
from cvtile.kernels.fia.kv_list import kv_arrays, list_arena
from cvtile.kernels.golden.fia import fia_golden_lowp
from cvtile.tiling.errors import ParamError

N, N2, D = 4, 2, 64
LENGTHS = (40, 130, 77)


def _rand(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float16)


def _list_call(layout: str, s1: int, seed: int = 0, lengths=LENGTHS, **extra):
    rng = np.random.default_rng(seed)
    b = len(lengths)
    if layout == "BSND":
        q, kv = _rand(rng, (b, s1, N, D)), [(1, s, N2, D) for s in lengths]
    elif layout == "BNSD":
        q, kv = _rand(rng, (b, N, s1, D)), [(1, N2, s, D) for s in lengths]
    else:
        q, kv = _rand(rng, (b, s1, N * D)), [(1, s, N2 * D) for s in lengths]
    keys, values = [_rand(rng, s) for s in kv], [_rand(rng, s) for s in kv]
    return dict(query=q, key=keys, value=values, num_heads=N, num_key_value_heads=N2, input_layout=layout,
                scale=0.125, softmax_lse_flag=True, **extra)


def _check(kw):
    out, lse = fia(**kw)
    g_out, g_lse = fia_golden_lowp(**kw)
    rep = compare(out, g_out, "float16")
    assert rep.passed, str(rep)
    assert compare(lse, g_lse, "float16").passed
    return out


def test_prefill_reads_each_batch_from_its_own_tensor():
    """BSND prefill, GQA 2, three batches of KV lengths 40/130/77 (one S2 block, three, two): each batch's
    output is the golden's, and a batch's result depends on its own tensor only."""
    kw = _list_call("BSND", 5, actual_seq_lengths_kv=[40, 100, 77])
    out = _check(kw)
    changed = dict(kw, key=[kw["key"][0], kw["key"][1] * 0.5, kw["key"][2]])
    again, _ = fia(**changed)
    assert np.array_equal(again[0], out[0]) and np.array_equal(again[2], out[2])
    assert not np.array_equal(again[1], out[1])


@pytest.mark.slow
@pytest.mark.parametrize("layout,s1", [("BNSD", 5), ("BSH", 3), ("BSND", 1)], ids=["bnsd", "bsh", "bsnd-decode"])
def test_layouts_and_the_decode_route(layout, s1):
    _check(_list_call(layout, s1, seed=1))


def test_list_arena_lays_the_tensors_one_after_the_other():
    keys = [np.full((1, s, 2, 4), i, np.float16) for i, s in enumerate((3, 5, 2))]
    k, v, off = list_arena(keys, keys, lambda t: t, 1)
    assert k.shape == (1, 10, 2, 4) and off.tolist() == [0, 3, 8]
    assert [int(k[0, o, 0, 0]) for o in off] == [0, 1, 2]


@pytest.mark.parametrize("extra,param,status,fragment", [
    (dict(actual_seq_lengths_kv=[41, 100, 77]), "actual_seq_lengths_kv", 161002, "holds 40"),
    (dict(block_table=np.zeros((3, 2), np.int32), block_size=128, actual_seq_lengths_kv=[10, 10, 10]),
     "block_table", 561002, "tensor lists"),
    (dict(key_shared_prefix=np.zeros((1, 8, N2, D), np.float16),
          value_shared_prefix=np.zeros((1, 8, N2, D), np.float16)), "key_shared_prefix", 561002, "tensor lists"),
], ids=["kv length beyond its tensor", "paged", "prefix in prefill"])
def test_operator_rules_are_param_errors(extra, param, status, fragment):
    with pytest.raises(ParamError) as info:
        fia(**_list_call("BSND", 5, **extra))
    err = info.value
    assert (err.param, int(err.status)) == (param, status) and fragment in str(err), str(err)


def test_list_shape_rules_are_param_errors():
    kw = _list_call("BSND", 5)
    with pytest.raises(ParamError, match="the number of key tensors must equal B"):
        fia(**dict(kw, key=kw["key"][:2], value=kw["value"][:2]))
    with pytest.raises(ParamError, match="S of key tensor 1 must equal S of value tensor 1"):
        fia(**dict(kw, value=[kw["value"][0], kw["value"][2], kw["value"][2]]))
    with pytest.raises(ParamError) as info:
        fia(**dict(kw, key=[np.concatenate([kw["key"][0]] * 2)] + kw["key"][1:]))
    assert info.value.param == "key[0]" and "batch 1" in str(info.value)
    many = dict(kw, query=np.zeros((257, 1, N, D), np.float16), key=[np.zeros((1, 4, N2, D), np.float16)] * 257,
                value=[np.zeros((1, 4, N2, D), np.float16)] * 257)
    with pytest.raises(ParamError, match="at most 256"):
        fia(**many)


@pytest.mark.parametrize("extra,param", [
    (dict(kv_padding_size=np.array([1]), actual_seq_lengths_kv=[10, 10, 10]), "kv_padding_size"),
    (dict(query_padding_size=np.array([1]), actual_seq_lengths=[2, 2, 2]), "query_padding_size"),
], ids=["kv left padding", "query left padding"])
def test_unmodelled_combinations_are_refused_by_name(extra, param):
    with pytest.raises(UnsupportedParameterError) as info:
        fia(**_list_call("BSND", 5, **extra))
    assert info.value.param == param and "tensor list" in str(info.value)


def test_a_list_of_one_is_the_contiguous_form():
    x = np.zeros((1, 4, 2, 8), np.float16)
    assert kv_arrays([x]) is x
    two = kv_arrays((x, x))
    assert isinstance(two, list) and len(two) == 2 and all(t is x for t in two)


@pytest.mark.parametrize("feature", ["atten_mask", "pse_shift"])
def test_a_list_reads_its_mask_and_pse_from_column_0_regression(feature):
    """Regression: the kernel read a batch's mask and pse columns from its KV offset, which for a tensor list is
    the place of the batch's tensor in the list's arena: batch 1 (arena offset 40) read [40, 170) of a 130-wide
    mask and the checks stopped the launch (a shorter offset would have read another batch's columns)."""
    rng = np.random.default_rng(5)
    extra = (dict(atten_mask=rng.uniform(0, 1, (3, 5, 130)) > 0.7, sparse_mode=0) if feature == "atten_mask"
             else dict(pse_shift=rng.uniform(-1, 1, (3, N, 5, 130)).astype(np.float16)))
    _check(_list_call("BSND", 5, **extra))


@pytest.mark.parametrize("layout, lengths, prefix", [("BSND", LENGTHS, 50), ("BNSD", (3000, 6000), 500)],
                         ids=["split-fuse", "flash-decode"])
def test_a_shared_prefix_in_decode_precedes_each_batchs_own_tensor(layout, lengths, prefix):
    """op_host takes a shared prefix with a tensor list in a decode on Atlas A2/A3: every batch attends to the
    prefix's first actual_shared_prefix_len positions, then to its own tensor's KV (the split-fuse route counts
    the prefix in the batch's KV length; the launch reads the batch's own length from its region of the arena).
    The long KV takes the flash-decode split, whose pieces span the prefix and the own KV."""
    rng = np.random.default_rng(11)
    plen = prefix + 8
    shape = (1, plen, N2, D) if layout == "BSND" else (1, N2, plen, D)
    kw = _list_call(layout, 1, seed=3, lengths=lengths, key_shared_prefix=_rand(rng, shape),
                    value_shared_prefix=_rand(rng, shape), actual_shared_prefix_len=[prefix],
                    actual_seq_lengths_kv=[n - 1 for n in lengths])
    _check(kw)


def test_a_shared_prefix_with_a_list_on_ascend950_is_op_hosts_error():
    rng = np.random.default_rng(12)
    kw = _list_call("BSND", 1, key_shared_prefix=_rand(rng, (1, 16, N2, D)),
                    value_shared_prefix=_rand(rng, (1, 16, N2, D)), target="Ascend950")
    with pytest.raises(ParamError) as info:
        fia(**kw)
    assert info.value.param == "key_shared_prefix"
