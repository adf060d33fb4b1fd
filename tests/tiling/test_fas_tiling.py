"""The FlashAttentionScore (training forward) arch22 tiling mirror: checks, routes, keys, coverage, split.

The rules are op_host's (``attention/flash_attention_score/op_host/flash_attention_score_tiling*.cpp``,
``op_api/aclnn_flash_attention_score.cpp``, the kernels' ``GetS2LoopRange`` / ``Process``), restated in
``cvtile.tiling.fas*``. The key corpus is every successful case of op_host's own tiling unit tests
(``tests/utest/ts_fas/ts_fas_tc_redline.cpp``, platform Ascend910B2, raw shapes: ``aclnn=False``) whose call is
not modified after construction, with its expected tiling key.

Visibility (the brute-force oracle of the coverage tests), keep iff ``lo <= j - i <= hi`` with
``off = S2 - S1`` of the batch: mode 0 ``[-pre, next]``; 1 all; 2 ``(-inf, 0]``; 3 ``(-inf, off]``;
4 ``[off - pre, off + next]``; 5/6 ``(-inf, off]`` or ``j < prefix[b]``; 7 mode 3 per batch, the last
non-empty batch mode 4; 8 mode 2 per batch, the first non-empty batch mode 4; no mask: all.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from cvtile.tiling.errors import AclnnStatus, ParamError
from cvtile.tiling.fas import FasParams, FasTask, FasTiling, format_fas_tiling, tile_fas
from cvtile.tiling.fas_key import FAS_KEY_FIELDS, decode_fas_key, encode_fas_key
from cvtile.tiling.fas_params import tiling_view
from cvtile.tiling.fas_split import partition_starts, prefix_starts, varlen_starts

INT = 2 ** 31 - 1
INVALID, TILING, NULL = AclnnStatus.PARAM_INVALID, AclnnStatus.INNER_TILING_ERROR, AclnnStatus.PARAM_NULLPTR


def P(**kw):
    base = dict(b=1, n1=2, n2=2, s1=256, s2=256, d=128)
    base.update(kw)
    return FasParams(**base)


def tnd(q, kv, **kw):
    return P(layout="TND", b=len(q), s1=sum(q), s2=sum(kv), actual_seq_qlen=tuple(q), actual_seq_kvlen=tuple(kv), **kw)


# ---- checks ----------------------------------------------------------------------------------------------------
REJECT = [
    # (params, status, param, a fragment of the rule)
    (P(dtype="int8"), INVALID, "query", "dtype"),
    (P(layout="NSD"), INVALID, "input_layout", "must be one of"),
    (P(n1=0, n2=1), INVALID, "head_num", "> 0"),
    (P(d=64, dv=128), INVALID, "value", "kD >= vD"),
    (P(d=769), INVALID, "query", "<= 768"),
    (P(n1=6, n2=4), TILING, "head_num", "multiple of N2"),
    (P(n1=257, n2=1), INVALID, "head_num", "1..256"),
    (P(keep_prob=0.0), TILING, "keep_prob", "(0, 1]"),
    (P(keep_prob=1.5), TILING, "keep_prob", "(0, 1]"),
    (P(has_pse=True, pse_type=4), TILING, "pse_type", "0, 1, 2 or 3"),
    (P(pse_type=0), TILING, "pse_type", "without a pse tensor"),
    (P(pse_type=2), INVALID, "pse_type", "slope"),
    (P(has_pse=True, pse_type=3, s2=512), TILING, "pse_type", "S1 == S2"),
    (P(sparse_mode=9), INVALID, "sparse_mode", "0..8"),
    (P(has_mask=True, sparse_mode=7), TILING, "sparse_mode", "varlen"),
    (P(has_mask=True, pre_tokens=-10, next_tokens=-10), TILING, "pre_tockens", "both negative"),
    (P(has_mask=True, pre_tokens=10, next_tokens=-20), TILING, "next_tockens", "pre_tokens >= |next|"),
    (P(has_mask=True, pre_tokens=-300, next_tokens=400), TILING, "pre_tockens", "|pre| < S2"),
    (P(has_mask=True, sparse_mode=4, s1=512, pre_tokens=0, next_tokens=-300), TILING, "next_tockens", "overlap"),
    (P(has_mask=True, sparse_mode=6), TILING, "prefix", "missing"),
    (P(has_mask=True, sparse_mode=6, s1=128, prefix=(300,)), TILING, "prefix", "[128, 256]"),
    (P(has_mask=True, sparse_mode=6, b=2, prefix=(100,)), TILING, "prefix", "B = 2"),
    (P(actual_seq_qlen=(256,), actual_seq_kvlen=(256,)), INVALID, "actual_seq_qlen", "TND layout"),
    (P(layout="TND", s1=10, s2=10, actual_seq_kvlen=(10,)), NULL, "actual_seq_qlen", "needs"),
    (P(layout="TND", b=2, s1=10, s2=10, actual_seq_qlen=(5, 5), actual_seq_kvlen=(10,)), TILING,
     "actual_seq_kvlen", "as many batches"),
    (P(layout="TND", b=1, s1=10, s2=10, actual_seq_qlen=(-1,), actual_seq_kvlen=(10,)), INVALID,
     "actual_seq_qlen", ">= 0"),
    (P(layout="TND", b=2, s1=10, s2=10, actual_seq_qlen=(10,), actual_seq_kvlen=(10,)), INVALID, "b", "TND"),
    (P(layout="TND", b=1, s1=5, s2=10, actual_seq_qlen=(10,), actual_seq_kvlen=(10,)), TILING, "s1", "sum"),
    (tnd((300, 100), (200, 400), has_mask=True, sparse_mode=3), TILING, "actual_seq_qlen", "S1 300 > S2 200"),
    (tnd((100,), (100,), has_mask=True, sparse_mode=5), TILING, "sparse_mode", "mode 5"),
    (tnd((100,), (100,), has_mask=True, sparse_mode=0, pre_tokens=10, next_tokens=-1), TILING, "next_tockens",
     ">= 0"),
    (tnd((300,), (100,), has_mask=True, sparse_mode=0, pre_tokens=10, next_tokens=10), TILING, "pre_tockens",
     "without a visible key"),
    (tnd((100,), (100,), has_mask=True, sparse_mode=4, pre_tokens=-1, next_tokens=10), TILING, "pre_tockens",
     ">= 0"),
    (tnd((100, 50), (100, 50), has_mask=True, sparse_mode=7, pre_tokens=10, next_tokens=0), TILING,
     "pre_tockens", "band batch 1"),
    (tnd((100, 50), (100, 50), has_mask=True, sparse_mode=8, pre_tokens=10, next_tokens=0), TILING,
     "pre_tockens", "band batch 0"),
    (tnd((100,), (80,), has_mask=True, sparse_mode=6, prefix=(90,)), TILING, "prefix", "[0, 80]"),
    (tnd((100,), (100,), has_mask=True, sparse_mode=7, has_pse=True, pse_type=2, pre_tokens=INT, next_tokens=0),
     TILING, "pse_type", "sparse_mode 7"),
]


@pytest.mark.parametrize("params,status,param,fragment", REJECT)
def test_rejections_carry_the_aclnn_status_parameter_value_and_rule(params, status, param, fragment):
    with pytest.raises(ParamError) as ei:
        tile_fas(params)
    e = ei.value
    assert (e.status, e.param) == (status, param), str(e)
    assert fragment in e.rule, str(e)
    assert param in str(e) and repr(e.value) in str(e)


def test_arch35_target_is_refused_naming_it():
    with pytest.raises(ParamError) as ei:
        tile_fas(P(), "Ascend950")
    assert ei.value.param == "target" and "Ascend950" in str(ei.value) and "arch35" in str(ei.value)


def test_without_a_mask_sparse_mode_and_the_window_are_ignored():
    t = tile_fas(P(sparse_mode=4, pre_tokens=-5, next_tokens=-5))
    assert t.sparse_type == "ALL"
    assert all((x.s2_lo, x.s2_hi) == (0, 2) for c in t.core_tasks for x in c)     # S2 256: two 128-blocks


def test_mode5_out_of_range_prefix_falls_back_to_full_attention():
    t = tile_fas(P(has_mask=True, sparse_mode=5, s1=128, prefix=(300,)))
    assert t.sparse_type == "ALL" and "falls back to ALL" in t.decision("sparse").rule


# ---- routes ----------------------------------------------------------------------------------------------------
ROUTES = [
    # params, template, priority, (s1_base, s2_base), split unit
    (tnd((300, 700), (400, 700), has_mask=True, sparse_mode=3), "VarLen", 94, (128, 128), "aiv"),
    (tnd((2600,) * 4, (2600,) * 4, n1=4, n2=4), "VarLen", 94, (256, 128), "aic"),
    (P(d=72, s1=2048, s2=2048), "S1s2Bn2gs1SameAB", 95, (256, 128), "aic"),
    (P(n1=1, n2=1, s1=2048, s2=2048, has_mask=True, sparse_mode=2), "S1s2Bn2gs1", 96, (64, 128), "aiv"),
    (P(b=4, n1=8, n2=2, s1=2048, s2=2048), "S1s2Bn2gs1", 96, (128, 128), "aiv"),
    (P(s1=1000, s2=600), "S1Bn2gs1", 97, (128, 128), "aiv"),
    (P(b=3, n1=4, n2=4, s1=128, s2=128), "Bn2gs1s2_B", 98, (64, 128), "aiv"),
]


@pytest.mark.parametrize("params,template,prio,bases,unit", ROUTES)
def test_each_template_route(params, template, prio, bases, unit):
    t = tile_fas(params)
    assert (t.template, t.priority, (t.s1_base, t.s2_base), t.split_unit) == (template, prio, bases, unit)
    assert t.decision("template").value.startswith(template)
    assert 0 < t.core_num <= 24 and isinstance(t.tiling_key, int)
    assert t.same_ab == (unit == "aic")
    assert decode_fas_key(t.tiling_key) == t.key_fields


def test_empty_routes_and_the_drop_mask_pass():
    e = tile_fas(P(s2=0))
    assert (e.template, e.priority, e.tiling_key, e.core_tasks, e.core_num) == ("EmptyTensor", None, 90, (), 0)
    assert tile_fas(P(s2=0, dtype="bfloat16")).tiling_key == 94
    assert tile_fas(P(s2=0, dtype="float32")).tiling_key == 92
    n = tile_fas(P(b=0))
    assert (n.template, n.tiling_key, n.core_tasks) == ("Empty", None, ())
    t = tile_fas(P(s2=1001, has_drop_mask=True, keep_prob=0.9))       # S2 % 8 != 0: the DropMask pass runs
    assert t.drop_mask_pass and t.template == "S1Bn2gs1" and t.block_dim == 24
    assert t.key_fields["HasDropOut"] == 1
    assert not tile_fas(P(s2=128, has_drop_mask=True, keep_prob=0.9)).drop_mask_pass
    k = tile_fas(P(keep_prob=0.9))                                      # no mask tensor: no dropout in the key
    assert k.key_fields["HasDropOut"] == 0 and k.decision("dropout") is not None


def test_aclnn_pad_and_transpose():
    v = tiling_view(P(d=72, n1=4, n2=2))                    # N1 != N2: padded to 80
    assert (v.d, v.dv) == (80, 80)
    v = tiling_view(P(d=72, n1=4, n2=4))                    # N1 == N2, D and Dv 72: no pad
    assert (v.d, v.dv) == (72, 72)
    v = tiling_view(P(d=128, dv=64, s2=512))                # D != Dv on S1Bn2gs1: V padded to D
    assert (v.d, v.dv) == (128, 128)
    v = tiling_view(P(d=128, dv=64, s2=2048))               # S2 > 1024 takes D != Dv
    assert (v.d, v.dv) == (128, 64)
    v = tiling_view(P(d=128, n1=256, n2=256, layout="BSH"))  # H = 32768 fits the stride
    assert v.layout == "BSH" and not v.transposed
    v = tiling_view(P(d=512, n1=256, n2=256, layout="BSND"))
    assert v.layout == "BNSD" and v.transposed
    assert tiling_view(P(d=72, n1=4, n2=2), aclnn=False).d == 72
    t = tile_fas(P(d=72, n1=4, n2=2))
    assert t.d == 80 and any(d.what == "aclnn" for d in t.decisions)


def test_sink_is_accepted_and_reported():
    t = tile_fas(P(has_sink=True))
    assert t.decision("sink").value == "ignored"


# ---- the op_host unit tests' tiling keys ---------------------------------------------------------------------
UT_KEYS = [
    ("Redline_FullCore_Case_001", 33365189680, dict(b=234, n1=227, n2=1, s1=25283, s2=2133, d=32, dtype='bfloat16',
        layout='BNSD', pre_tokens=861021531, next_tokens=278722863, has_mask=True, has_pse=True, keep_prob=0.9,
        has_drop_mask=True, inner_precise=1)),
    ("Redline_FullCore_Case_002", 22618596400, dict(b=1, n1=10, n2=10, s1=4096, s2=4096, d=128, layout='SBH',
        pre_tokens=4096, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_003", 31208530992, dict(b=2, n1=8, n2=8, s1=2048, s2=2048, d=128, layout='SBH',
        sparse_mode=3, pre_tokens=2048, next_tokens=0, has_mask=True, has_pse=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_004", 33354966064, dict(b=1, n1=10, n2=10, s1=2304, s2=2304, d=128,
        pre_tokens=1350490028, next_tokens=783368691, has_mask=True, has_pse=True, keep_prob=0.9, has_drop_mask=True)),
    ("Redline_FullCore_Case_005", 22618596400, dict(b=1, n1=16, n2=16, s1=4096, s2=4096, d=128, layout='SBH',
        sparse_mode=3, pre_tokens=2048, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_006", 22618596400, dict(b=1, n1=16, n2=16, s1=4096, s2=4096, d=128, layout='SBH',
        sparse_mode=2, pre_tokens=2048, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_007", 5438727216, dict(b=1, n1=4, n2=4, s1=4096, s2=4096, d=256, layout='SBH',
        has_mask=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_008", 9741034800, dict(b=210, n1=76, n2=2, s1=30063, s2=85, d=65, pre_tokens=2137226131,
        next_tokens=848857676, has_pse=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_009", 22618596656, dict(b=24, n1=10, n2=10, s1=1024, s2=1024, d=128, layout='SBH',
        sparse_mode=5, pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(512, 1024, 1536))),
    ("Redline_FullCore_Case_010", 22618596656, dict(b=33, n1=10, n2=10, s1=1024, s2=1024, d=128, layout='SBH',
        sparse_mode=5, pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(512,) * 33)),
    ("Redline_FullCore_Case_011", 5437678896, dict(b=128, n1=5, n2=5, s1=256, s2=256, d=128, layout='BSH',
        pre_tokens=65, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("Redline_FullCore_Case_012", 1159488816, dict(b=128, n1=5, n2=5, s1=1024, s2=512, d=64, layout='BSH',
        pre_tokens=65535, next_tokens=65535, keep_prob=0.9)),
    ("Redline_FullCore_Case_013", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, actual_seq_qlen=(2048, 2048, 2048),
        actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_014", 7588308016, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, has_drop_mask=True,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_015", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        pre_tokens=1, next_tokens=100, has_mask=True, keep_prob=0.9, actual_seq_qlen=(2048, 2048, 2048),
        actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_016", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        pre_tokens=100, next_tokens=1, has_mask=True, keep_prob=0.9, actual_seq_qlen=(2048, 2048, 2048),
        actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_017", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=1, pre_tokens=100, next_tokens=1, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_018", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=2, pre_tokens=2048, next_tokens=2048, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_019", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=3, pre_tokens=1024, next_tokens=4, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_020", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=4, pre_tokens=256, next_tokens=128, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_021", 5440824368, dict(b=3, n1=40, n2=40, s1=6000, s2=6144, d=128, layout='TND',
        sparse_mode=7, pre_tokens=65536, next_tokens=-100, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 1904), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_022", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=8, pre_tokens=65536, next_tokens=128, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_023", 5440824368, dict(b=3, n1=40, n2=40, s1=4800, s2=6144, d=128, layout='TND',
        pre_tokens=-100, next_tokens=256, has_mask=True, keep_prob=0.9, actual_seq_qlen=(1600, 1600, 1600),
        actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_026", 5440824368, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=4, pre_tokens=65536, next_tokens=0, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_028", 14030758960, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        sparse_mode=3, pre_tokens=256, next_tokens=8, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_029", 31207482416, dict(b=3, n1=40, n2=40, s1=2048, s2=2048, d=128, sparse_mode=3,
        pre_tokens=256, next_tokens=8, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9)),
    ("Redline_FullCore_Case_030", 13994034784, dict(b=3, n1=1, n2=1, s1=16, s2=16, d=128, pre_tokens=256,
        next_tokens=8, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9)),
    ("Redline_FullCore_Case_031", 14027613488, dict(b=3, n1=40, n2=40, s1=256, s2=256, d=128, pre_tokens=256,
        next_tokens=8, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9)),
    ("Redline_FullCore_Case_038", 14030758960, dict(b=3, n1=40, n2=40, s1=6144, s2=6144, d=128, layout='TND',
        pre_tokens=256, next_tokens=8, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9,
        actual_seq_qlen=(2048, 2048, 2048), actual_seq_kvlen=(2048, 2048, 2048))),
    ("Redline_FullCore_Case_042", 31215871024, dict(b=1, n1=1, n2=1, s1=1025, s2=1025, d=128, pre_tokens=65536,
        next_tokens=65536, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9)),
    ("Redline_FullCore_Case_043", 14036002352, dict(b=1, n1=1, n2=1, s1=1025, s2=1025, d=160, pre_tokens=65536,
        next_tokens=65536, has_mask=True, has_pse=True, pse_type=3, keep_prob=0.9)),
    ("SpecCore_Case_001", 1111230048, dict(b=2, n1=1, n2=1, s1=128, s2=128, d=128, layout='BNSD', keep_prob=0.9,
        inner_precise=1)),
    ("SpecCore_Case_002", 16141518432, dict(b=2, n1=2, n2=2, s1=256, s2=80, d=64, layout='BSH',
        pre_tokens=2137226131, next_tokens=848857676, has_mask=True, has_pse=True, keep_prob=0.9,
        has_drop_mask=True, inner_precise=1)),
    ("SpecCore_Case_003", 5406197344, dict(b=2, n1=1, n2=1, s1=128, s2=128, d=128, layout='BNSD', pre_tokens=128,
        next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_004", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=1024,
        next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_005", 22618596400, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=5,
        pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_006", 16175097392, dict(b=4, n1=4, n2=4, s1=128, s2=1024, d=125, sparse_mode=4, pre_tokens=500,
        next_tokens=300, has_mask=True, has_pse=True, keep_prob=0.9, has_drop_mask=True, inner_precise=1)),
    ("SpecCore_Case_007", 16175097392, dict(b=4, n1=4, n2=4, s1=128, s2=1024, d=125, sparse_mode=3, pre_tokens=500,
        next_tokens=300, has_mask=True, has_pse=True, keep_prob=0.9, has_drop_mask=True, inner_precise=1)),
    ("SpecCore_Case_008", 16175097392, dict(b=4, n1=4, n2=4, s1=128, s2=1024, d=125, sparse_mode=5, pre_tokens=500,
        next_tokens=300, has_mask=True, has_pse=True, keep_prob=0.9, has_drop_mask=True, prefix=(512, 1024, 1536),
        inner_precise=1)),
    ("SpecCore_Case_010", 16175097392, dict(b=1, n1=1, n2=1, s1=64, s2=1024, d=125, sparse_mode=5, pre_tokens=500,
        next_tokens=300, has_mask=True, has_pse=True, keep_prob=0.9, has_drop_mask=True, prefix=(512, 1024, 1536),
        inner_precise=1)),
    ("SpecCore_Case_011", 14036002352, dict(b=1, n1=1, n2=1, s1=64, s2=1023, d=125, sparse_mode=5, pre_tokens=500,
        next_tokens=300, has_mask=True, has_pse=True, keep_prob=0.9, prefix=(512, 1024, 1536), inner_precise=1)),
    ("SpecCore_Case_013", 18323629104, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=2,
        pre_tokens=1024, next_tokens=0, keep_prob=0.9)),
    ("SpecCore_Case_014", 5438727472, dict(b=1, n1=2, n2=2, s1=2048, s2=1024, d=128, layout='SBH', sparse_mode=1,
        pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_015", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=2048,
        next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_016", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=2049,
        next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_017", 22618596400, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=2048,
        next_tokens=2049, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_018", 5438858288, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=1024,
        next_tokens=-900, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_019", 5438858288, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', pre_tokens=-900,
        next_tokens=1024, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_020", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=1,
        pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_021", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=1,
        pre_tokens=0, next_tokens=1024, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_022", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=2,
        pre_tokens=1024, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_023", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=3,
        pre_tokens=3096, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_024", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=2,
        pre_tokens=2048, next_tokens=100, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_025", 5438727216, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=4,
        pre_tokens=1024, next_tokens=1024, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_026", 5438858288, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=4,
        pre_tokens=1024, next_tokens=-900, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_027", 5438858288, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=4,
        pre_tokens=-900, next_tokens=1024, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_028", 22618596400, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, layout='SBH', sparse_mode=4,
        pre_tokens=2048, next_tokens=2049, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_029", 5440824368, dict(b=3, n1=40, n2=40, s1=4000, s2=5000, d=128, layout='TND', sparse_mode=6,
        pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, actual_seq_qlen=(2048, 1024, 928),
        actual_seq_kvlen=(1024, 1024, 2952), prefix=(1000, 0, 2952))),
    ("SpecCore_Case_030", 5437809968, dict(b=3, n1=14, n2=14, s1=968, s2=512, d=128, sparse_mode=6,
        pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(100, 0, 200))),
    ("SpecCore_Case_031", 5438334000, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, dtype='float32', layout='SBH',
        sparse_mode=4, pre_tokens=1024, next_tokens=-900, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_032", 5438334000, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, dtype='float32', layout='SBH',
        sparse_mode=4, pre_tokens=-900, next_tokens=1024, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_033", 5438202928, dict(b=1, n1=2, n2=2, s1=2048, s2=2048, d=128, dtype='float32', layout='SBH',
        sparse_mode=4, pre_tokens=2048, next_tokens=2049, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_034", 5440300080, dict(b=3, n1=40, n2=40, s1=4000, s2=5000, d=128, dtype='float32',
        layout='TND', sparse_mode=6, pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9,
        actual_seq_qlen=(2048, 1024, 928), actual_seq_kvlen=(1024, 1024, 2952), prefix=(1000, 0, 2952))),
    ("SpecCore_Case_035", 5437285680, dict(b=3, n1=14, n2=14, s1=968, s2=512, d=128, dtype='float32', sparse_mode=6,
        pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(100, 0, 200))),
    ("Redline_FullCore_Case_036", 5437678640, dict(b=2, n1=2, n2=2, s1=2048, s2=2048, d=64, layout='BSH',
        pre_tokens=4096, next_tokens=0, has_mask=True, keep_prob=0.9)),
    ("SpecCore_Case_037", 5440300080, dict(b=1, n1=1, n2=1, s1=1026, s2=1026, d=16, dtype='float32', layout='TND',
        sparse_mode=6, pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, actual_seq_qlen=(1026,),
        actual_seq_kvlen=(1026,), prefix=(300,))),
    ("SpecCore_Case_038", 5403575904, dict(b=1, n1=1, n2=1, s1=16, s2=16, d=16, dtype='float32', layout='BSH',
        sparse_mode=6, pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(8,))),
    ("SpecCore_Case_039", 5445542960, dict(b=1, n1=1, n2=1, s1=1, s2=1025, d=16, dtype='float32', layout='BSH',
        sparse_mode=6, pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(1025,))),
    ("SpecCore_Case_run_kernel_s1s2", 7594206256, dict(b=1, n1=1, n2=1, s1=256, s2=1025, d=32, dtype='float32',
        layout='SBH', sparse_mode=4, pre_tokens=-200, next_tokens=1024, has_mask=True, keep_prob=0.9,
        has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_B_unAlign", 7551583840, dict(b=49, n1=1, n2=1, s1=16, s2=16, d=15, layout='BSH',
        pre_tokens=65535, next_tokens=65535, has_mask=True, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_b_d_unAlign", 5403575904, dict(b=1, n1=1, n2=1, s1=16, s2=16, d=5, dtype='float32',
        layout='BSH', sparse_mode=6, pre_tokens=65535, next_tokens=0, has_mask=True, keep_prob=0.9, prefix=(8,))),
    ("SpecCore_Case_run_kernel_tnd_fp16", 9735792176, dict(b=1, n1=2, n2=2, s1=5121, s2=5121, d=16, layout='TND',
        pre_tokens=65535, next_tokens=0, has_pse=True, pse_type=3, keep_prob=0.9, actual_seq_qlen=(5121,),
        actual_seq_kvlen=(5121,))),
    ("SpecCore_Case_run_kernel_tnd_fp16_nz", 9735791664, dict(b=1, n1=1, n2=1, s1=1026, s2=64, d=16, layout='TND',
        pre_tokens=65535, next_tokens=0, has_pse=True, pse_type=3, keep_prob=0.9, actual_seq_qlen=(1026,),
        actual_seq_kvlen=(64,))),
    ("SpecCore_Case_run_kernel_tnd_kv0", 9735791664, dict(b=2, n1=1, n2=1, s1=1042, s2=64, d=16, layout='TND',
        pre_tokens=65535, next_tokens=0, has_pse=True, pse_type=3, keep_prob=0.9, actual_seq_qlen=(1026, 16),
        actual_seq_kvlen=(64, 0))),
    ("SpecCore_Case_run_kernel_tnd_basicBlock1", 1145332784, dict(b=3, n1=1, n2=1, s1=10011, s2=600, d=72,
        dtype='float32', layout='TND', pre_tokens=65535, next_tokens=65535, keep_prob=0.9,
        actual_seq_qlen=(10001, 9, 1), actual_seq_kvlen=(64, 23, 513))),
    ("SpecCore_Case_run_kernel_tnd_basicBlock2", 1145463856, dict(b=2, n1=1, n2=1, s1=16, s2=2113, d=72,
        dtype='float32', layout='TND', pre_tokens=65535, next_tokens=65535, keep_prob=0.9, actual_seq_qlen=(8, 8),
        actual_seq_kvlen=(64, 2049), inner_precise=2)),
    ("SpecCore_Case_run_kernel_B_ScalarConst_case01", 72706315257440, dict(b=2, n1=16, n2=16, s1=4, s2=4, d=88,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_B_ScalarConst_case02", 44531329795680, dict(b=4, n1=16, n2=16, s1=64, s2=64, d=72,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_B_ScalarConst_case03", 39858405377632, dict(b=8, n1=16, n2=16, s1=30, s2=30, d=72,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_S1_ScalarConst_case01", 53877220599088, dict(b=8, n1=4, n2=4, s1=234, s2=234, d=72,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_S1_ScalarConst_case02", 89061584299312, dict(b=2, n1=4, n2=4, s1=256, s2=256, d=88,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_S1_ScalarConst_case03", 89061593736496, dict(b=2, n1=4, n2=4, s1=348, s2=348, d=88,
        dtype='bfloat16', layout='SBH', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_sameAB_invalid_line", 16184665648, dict(b=1, n1=1, n2=1, s1=1025, s2=1025, d=129,
        layout='SBH', sparse_mode=4, pre_tokens=512, next_tokens=-256, has_mask=True, has_pse=True, keep_prob=0.9,
        has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_tnd_fp32", 9735267376, dict(b=1, n1=1, n2=1, s1=1026, s2=1026, d=16, dtype='float32',
        layout='TND', pre_tokens=65535, next_tokens=0, has_pse=True, pse_type=3, keep_prob=0.9,
        actual_seq_qlen=(1026,), actual_seq_kvlen=(1026,))),
    ("SpecCore_Case_run_kernel_s1s2_fp32_pse", 11889042480, dict(b=1, n1=1, n2=1, s1=130, s2=1025, d=32,
        dtype='float32', layout='SBH', sparse_mode=4, pre_tokens=-200, next_tokens=1024, has_pse=True,
        keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_s1s2_fp16_pse", 11889567280, dict(b=1, n1=1, n2=1, s1=80, s2=1025, d=1, layout='SBH',
        sparse_mode=4, pre_tokens=-200, next_tokens=1024, has_pse=True, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_s1s2_fp16", 3299632688, dict(b=1, n1=1, n2=1, s1=80, s2=1025, d=1, layout='SBH',
        sparse_mode=4, pre_tokens=-200, next_tokens=1024, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_sameAB_prefix", 5439776304, dict(b=1, n1=1, n2=1, s1=257, s2=1088, d=129,
        layout='BNSD', sparse_mode=6, pre_tokens=65535, next_tokens=65535, has_mask=True, prefix=(1088,))),
    ("SpecCore_Case_run_kernel_sameAB_normal", 5445805616, dict(b=1, n1=1, n2=1, s1=257, s2=513, d=129,
        dtype='bfloat16', layout='BSH', pre_tokens=65535, next_tokens=65535, has_mask=True)),
    ("SpecCore_Case_run_kernel_sameAB_causal", 16184534576, dict(b=1, n1=1, n2=1, s1=257, s2=1025, d=129,
        layout='SBH', sparse_mode=2, pre_tokens=65535, next_tokens=0, has_mask=True, has_pse=True, keep_prob=0.9,
        has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_sameAB_matmul_policy", 69864023600, dict(b=1, n1=1, n2=1, s1=256, s2=1152, d=192,
        dtype='bfloat16', layout='BNSD', pre_tokens=65535, next_tokens=65535)),
    ("SpecCore_Case_run_kernel_s1s2_d_unAlign", 7594206256, dict(b=1, n1=1, n2=1, s1=256, s2=1025, d=72,
        dtype='float32', layout='SBH', sparse_mode=4, pre_tokens=-200, next_tokens=1024, has_mask=True,
        keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_s1", 7586211120, dict(b=1, n1=1, n2=1, s1=256, s2=129, d=32, layout='SBH',
        sparse_mode=1, pre_tokens=65536, next_tokens=65536, has_mask=True, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_s1_unAlign", 7594599728, dict(b=1, n1=1, n2=1, s1=256, s2=257, d=15, layout='SBH',
        pre_tokens=65536, next_tokens=65536, has_mask=True, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_vector_s2_64_compute", 16174572848, dict(b=1, n1=1, n2=1, s1=15, s2=512, d=128,
        dtype='float32', layout='BSH', pre_tokens=65536, next_tokens=65536, has_mask=True, has_pse=True,
        keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_vector_s2_64_compute_unalign", 11888518448, dict(b=1, n1=1, n2=1, s1=15, s2=391,
        d=128, layout='BSH', pre_tokens=65536, next_tokens=65536, has_pse=True, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_vector_s2_64_compute_align", 11880129840, dict(b=1, n1=1, n2=1, s1=15, s2=512, d=128,
        layout='BSH', pre_tokens=65536, next_tokens=65536, has_pse=True, keep_prob=0.9, has_drop_mask=True)),
    ("SpecCore_Case_run_kernel_band_and_pse", 14038098992, dict(b=1, n1=1, n2=1, s1=256, s2=1025, d=128,
        layout='BNSD', sparse_mode=4, pre_tokens=128, next_tokens=128, has_mask=True, has_pse=True)),
]


@pytest.mark.parametrize("name,key,kw", UT_KEYS, ids=[c[0] for c in UT_KEYS])
def test_tiling_key_matches_the_op_host_unit_tests(name, key, kw):
    t = tile_fas(FasParams(**kw), "Ascend910B2", aclnn=False)
    assert t.tiling_key == key, (t.template, {k: (v, decode_fas_key(key)[k]) for k, v in t.key_fields.items()
                                              if v != decode_fas_key(key)[k]})


def test_key_round_trip_and_field_checks():
    rng = random.Random(3)
    for _ in range(200):
        f = {name: rng.choice(vals) for name, _, vals in FAS_KEY_FIELDS}
        assert decode_fas_key(encode_fas_key(f)) == f
    assert decode_fas_key(5440824368)["Block"] == 9 and decode_fas_key(5440824368)["Layout"] == 4
    with pytest.raises(ValueError):
        encode_fas_key({"DTemplateType": 7})


# ---- coverage against a brute-force visibility matrix -----------------------------------------------------------
def visible(p: FasParams, b: int) -> np.ndarray:
    q = p.actual_seq_qlen[b] if p.layout == "TND" else p.s1
    kv = p.actual_seq_kvlen[b] if p.layout == "TND" else p.s2
    dist = np.arange(kv)[None, :] - np.arange(q)[:, None]
    j = np.broadcast_to(np.arange(kv)[None, :], dist.shape)
    m, pre, nxt, off = p.sparse_mode, p.pre_tokens, p.next_tokens, kv - q
    if not p.has_mask or m == 1 or m == 0 and pre >= INT and nxt >= INT:
        return np.ones((q, kv), bool)
    band = (dist >= off - pre) & (dist <= off + nxt)
    if m == 0:
        return (dist >= -pre) & (dist <= nxt)
    if m in (2, 3):
        return dist <= (0 if m == 2 else off)
    if m == 4:
        return band
    if m in (5, 6):
        return (dist <= off) | (j < p.prefix[b])
    nonempty = [x for x in range(p.b) if p.actual_seq_qlen[x]]
    if b == (nonempty[-1] if m == 7 else nonempty[0]):
        return band
    return dist <= (off if m == 7 else 0)


def assert_covers(p: FasParams, t: FasTiling, exact: bool) -> None:
    """Every (b, n1, S1 block) in exactly one task; its S2 range covers the visible keys; ``exact``: the listed
    blocks of a full S1 block are exactly those holding a visible element."""
    owner = {}
    for c, tasks in enumerate(t.core_tasks):
        for x in tasks:
            key = (x.b, x.n1, x.m_start)
            assert key not in owner, f"{key} in cores {owner[key]} and {c}"
            owner[key] = (c, x)
    n_blocks = 0
    for b in range(p.b):
        vis = visible(p, b)
        for n1 in range(p.n1):
            for m0 in range(0, vis.shape[0], t.s1_base):
                n_blocks += 1
                c, x = owner[(b, n1, m0)]
                assert x.m_rows == min(t.s1_base, vis.shape[0] - m0)
                cols = np.nonzero(vis[m0:m0 + x.m_rows].any(axis=0))[0]
                if not cols.size:
                    continue
                assert x.kv_start <= cols[0] and x.kv_end > cols[-1], (x, cols[0], cols[-1])
                assert x.s2_lo * t.s2_base <= x.kv_start and x.kv_end <= x.s2_hi * t.s2_base
                if exact and x.m_rows == t.s1_base:
                    assert list(range(x.s2_lo, x.s2_hi)) == sorted(set(cols // t.s2_base)), (x, t.sparse_type)
    assert n_blocks == len(owner)


def grid():
    cases = []
    for (s1, s2), layout, mode in itertools.product([(256, 256), (300, 1100), (1000, 600), (100, 3000), (2048, 2048)],
                                                    ["BSND", "SBH"], [0, 2, 3, 4, 5, 6]):
        if mode == 0:
            kw = dict(pre_tokens=200, next_tokens=50)
        elif mode == 4:
            kw = dict(pre_tokens=100, next_tokens=-20)
        elif mode in (5, 6):
            kw = dict(prefix=(max(s2 - s1, 0) + 7,) * 2)
        else:
            kw = {}
        cases.append(P(b=2, n1=4, n2=2, s1=s1, s2=s2, layout=layout, has_mask=True, sparse_mode=mode, **kw))
    cases.append(P(b=2, n1=2, n2=1, s1=700, s2=1500, d=72))
    cases.append(P(b=40, n1=2, n2=2, s1=700, s2=600, has_mask=True, sparse_mode=2))     # S1Bn2gs1 L1 reuse
    q, kv = (300, 0, 700, 129, 1300), (400, 50, 700, 2100, 1400)
    for mode, kw in [(0, {}), (0, dict(pre_tokens=2000, next_tokens=0)), (1, {}), (2, {}), (3, {}),
                     (4, dict(pre_tokens=300, next_tokens=100)), (6, dict(prefix=(200, 50, 0, 1971, 1300))),
                     (7, dict(pre_tokens=1400, next_tokens=-30)), (8, dict(pre_tokens=400, next_tokens=60)),
                     (0, dict(pre_tokens=200, next_tokens=50))]:
        cases.append(tnd(q, kv, n1=3, n2=1, has_mask=bool(mode or kw), sparse_mode=mode, **kw))
    cases.append(tnd((2600, 2600, 2600, 2600), (2600, 2600, 2600, 2600), n1=4, n2=4, has_mask=True, sparse_mode=2))
    return cases


@pytest.mark.parametrize("p", grid())
def test_tasks_cover_the_visible_blocks_exactly_once(p):
    t = tile_fas(p)
    assert t.core_num == len(t.core_tasks) <= 24
    exact = t.sparse_type not in ("BAND",) and t.template != "Bn2gs1s2_B" and not (p.has_mask and p.sparse_mode == 1)
    assert_covers(p, t, exact)


def test_fixed_band_ranges_over_cover_by_at_most_one_block_per_side():
    p = P(b=1, n1=1, n2=1, s1=2048, s2=2048, has_mask=True, pre_tokens=200, next_tokens=50)
    t = tile_fas(p)
    assert t.sparse_type == "BAND" and t.template == "S1s2Bn2gs1"
    vis = visible(p, 0)
    for x in (y for c in t.core_tasks for y in c):
        cols = np.nonzero(vis[x.m_start:x.m_start + x.m_rows].any(axis=0))[0]
        lo, hi = cols[0] // 128, cols[-1] // 128 + 1
        assert lo - 1 <= x.s2_lo <= lo and hi <= x.s2_hi <= hi + 1


def test_causal_skips_the_blocks_above_the_diagonal():
    t = tile_fas(P(b=1, n1=1, n2=1, s1=2048, s2=2048, has_mask=True, sparse_mode=2))
    tasks = sorted((x for c in t.core_tasks for x in c), key=lambda x: x.m_start)
    assert t.s1_base == 64 and t.s2_base == 128 and len(tasks) == 32
    assert [(x.s2_lo, x.s2_hi) for x in tasks[:4]] == [(0, 1), (0, 1), (0, 2), (0, 2)]
    assert all(x.s2_hi == (x.m_start + x.m_rows - 1) // 128 + 1 and x.s2_lo == 0 for x in tasks)
    listed = sum(x.s2_hi - x.s2_lo for x in tasks)
    assert listed == sum(i // 2 + 1 for i in range(32))                 # about half of the 32 x 16 blocks
    r = tile_fas(P(b=1, n1=1, n2=1, s1=1000, s2=3000, has_mask=True, sparse_mode=3))   # right-down: a band
    assert r.sparse_type == "BAND" and r.pre_tokens == 1000 and r.next_tokens == 2000


# ---- the split ------------------------------------------------------------------------------------------------
def partition_literal(period, total, workers):
    """A line-by-line restatement of op_host's SetSparseStartIdx / PartitionSparseData (the oracle)."""
    if total <= workers:
        return list(range(total)) + [total] * (workers - total)
    s, n = sum(period), len(period)
    load_total = s * (total // n)

    def part(limit, res):
        cut = limit // s
        forced_load, forced_num = cut * s, cut * n
        core, r, load = 0, 0, forced_load
        res[0] = 0
        i = forced_num
        while i < total:
            r = 0 if r >= n else r
            more = load + period[r] > limit
            if more and core >= workers - 1:
                return False
            if more:
                core += 1
                res[core] = i
                i += forced_num
                load = forced_load
                continue
            load += period[r]
            i += 1
            r += 1
        for k in range(core + 1, workers):
            res[k] = total
        return True

    best, res = [total] * workers, [total] * workers
    lo, hi = load_total // workers - 1, -(-load_total // workers) + max(period)
    while lo + 1 < hi:
        mid = lo + (hi - lo) // 2
        if mid * workers >= load_total and part(mid, res):
            hi, best, res = mid, res, best
            continue
        lo = mid
    return best


def max_load(period, total, starts):
    runs = [(s, starts[i + 1] if i + 1 < len(starts) else total) for i, s in enumerate(starts)]
    return max(sum(period[j % len(period)] for j in range(a, b)) for a, b in runs if a < b)


def optimal(period, total, workers):
    loads = [period[j % len(period)] for j in range(total)]
    pre = [0] + list(itertools.accumulate(loads))
    lo, hi = max(loads), pre[-1]
    while lo < hi:              # the smallest L with a greedy partition into <= workers runs
        mid = (lo + hi) // 2
        runs, acc = 1, 0
        for x in loads:
            if acc + x > mid:
                runs, acc = runs + 1, x
            else:
                acc += x
        lo, hi = (lo, mid) if runs <= workers else (mid + 1, hi)
    return lo


def test_sparse_partition_is_op_hosts_and_optimal():
    rng = random.Random(7)
    for _ in range(150):
        period = [rng.randint(1, 20) for _ in range(rng.randint(1, 9))]
        total = len(period) * rng.randint(1, 12)
        workers = rng.randint(1, 20)
        got = partition_starts(period, total, workers)
        assert got == partition_literal(period, total, workers)
        if total > workers:
            assert max_load(period, total, got) == optimal(period, total, workers)


def test_prefix_and_varlen_splits():
    loads = [5, 1, 1, 9, 2, 2, 2, 7, 1, 3]
    starts = prefix_starts(lambda i: loads[i], len(loads), 4)
    assert starts[0] == 0 and starts == sorted(starts) and len(starts) == 4
    assert sum(loads[starts[0]:starts[1]]) >= -(-sum(loads) // 4)          # a run closes once it reaches the mean
    rng = random.Random(5)
    for _ in range(100):
        n = rng.randint(1, 60)
        vl = [rng.choice([0, 256, 384, 1024, 2048, 3000]) for _ in range(n)]
        workers = min(n, rng.randint(1, 48))
        sf = -(-n // workers)
        got = varlen_starts(vl, n, workers, sf)
        even = [min(i * sf, n) for i in range(48)]

        def mx(st):
            return max(sum(vl[st[i]:(st[i + 1] if i + 1 < workers else n)]) for i in range(workers))
        assert mx(got[:workers]) <= mx(even[:workers])


def test_dense_split_is_contiguous_equal_runs():
    t = tile_fas(P(b=4, n1=8, n2=2, s1=2048, s2=2048, d=256))      # D > 128: no L1 reuse
    assert not t.l1_reuse and t.split_unit == "aiv"
    sizes = [len(w) for w in t.worker_tasks]
    total, run = 4 * 8 * 2048 // 128, -(-4 * 8 * 2048 // 128 // 48)   # 512 blocks in runs of ceil(512 / 48) = 11
    assert sum(sizes) == total and sizes == [run] * (total // run) + [total % run] + [0] * (47 - total // run)
    flat = [x for w in t.worker_tasks for x in w]
    assert flat == sorted(flat, key=lambda x: (x.b, x.n1, x.m_start))


def test_causal_split_balances_the_s2_blocks():
    t = tile_fas(P(b=2, n1=8, n2=8, s1=4096, s2=4096, d=256, has_mask=True, sparse_mode=2))
    loads = [sum(x.s2_hi - x.s2_lo for x in w) for w in t.worker_tasks]
    assert len(loads) == 48 and max(loads) - min(loads) <= 32 + 2     # within one causal row of the mean
    assert max(loads) < 1.05 * sum(loads) / 48


def test_l1_reuse_pairs_alternate_blocks_of_a_row():
    t = tile_fas(P(b=1, n1=10, n2=10, s1=4096, s2=4096, layout="SBH", has_mask=True, pre_tokens=4096,
                   next_tokens=0))
    assert t.l1_reuse and t.sparse_type == "CAUSAL" and t.tiling_key == 22618596400
    w0, w1 = t.worker_tasks[0], t.worker_tasks[1]
    assert [x.m_start // t.s1_base for x in w0[:3]] == [0, 2, 4]
    assert [x.m_start // t.s1_base for x in w1[:3]] == [1, 3, 5]
    core0 = t.core_tasks[0]
    assert [x.m_start // t.s1_base for x in core0[:4]] == [0, 1, 2, 3]


def test_explain_lists_the_route_and_the_tasks():
    t = tile_fas(P(s1=2048, s2=2048, has_mask=True, sparse_mode=2))
    text = t.explain()
    assert text == format_fas_tiling(t)
    assert "S1s2Bn2gs1 (prio 96)" in text and "CAUSAL" in text and "core 0:" in text and "tiling_key" in text
    assert isinstance(t.core_tasks[0][0], FasTask)
    with pytest.raises(Exception):
        t.template = "x"                                               # frozen
