"""The FIA kernels against the float64 golden over a grid of small calls (``fia_kit`` in conftest.py).

Axes: layouts (BSH, BSND, BNSD, TND, NTD and the pairs the tiling accepts: BNSD_BSND, BSH_BNSD,
BSND_BNSD, NTD_TND; TND_NTD is refused without rope, see test_fia_api.py) x GQA ratio 1/4/8 x
decode/prefill x sparse 0 (with and without a mask, with pre/next) / 1 / 2 / 3 / 4 x lse on/off x
per-batch actual lengths (a batch with q length 0, one with kv length 0) x targets Ascend910B1 (arch22)
and Ascend950 (arch35) x fp16/bf16. Flash decode has its own file (test_fia_kernel_fd.py).

Every case is checked by ``fia_kit.check``: attention_out and softmax_lse against the golden with P
rounded to the input dtype (``fia_golden_lowp``: the chip multiplies P in fp16/bf16) under the upstream
tolerance classes, and the operator's promises on rows without a visible key (output 0; lse +inf, or
-3.4e38 on the arch22 legacy IFA decode class).

Compile budget: a case costs a numba compile only when its kernel specialisation is new (layout pair,
fold order, G, M, S2 base, D, band, mask, lse, FD, P dtype, empty-lse value, dtypes). The families
below pin those (e.g. prefill S1=64 with S2=512: M base 256 rows for G=4 and one 512-position S2
block on arch22) and vary lengths, batch counts and sparse modes 2/3/4 (one "band" specialisation)
inside them. bf16 cases keep the KV within one S2 block and without FD: with several blocks the kernel
rounds P against each block's running max, the golden against the final max, and for bf16 that
rounding noise alone exceeds the 0.5 % budget on zero-mean data (fp16 stays far inside it).
"""

from __future__ import annotations

import numpy as np
import pytest

A2, A5 = "Ascend910B1", "Ascend950"
#: arch22 prefill family: GQA 4, S1 64 -> M 256 rows; S2 512 -> one 512-position block, no FD
P22 = dict(layout="BNSD", b=2, n=8, nkv=2, s1=64, s2=512)
#: arch35 prefill family: M 64 rows, S2 base 256 (128 with sparse 1/2), no G/S1 merge (S1*G >= 64)
P35 = dict(P22, target=A5)
#: arch22 decode family: legacy IFA class (S1 == 1, D == Dv): empty rows' lse is -3.4e38
D22 = dict(layout="BSND", b=2, n=8, nkv=2, s1=1, s2=256)


def case(id_, base, marks=(), **kw):
    return pytest.param(dict(base, **kw), id=id_, marks=marks)


DEFAULT = [
    # no mask: full lengths, a q-length-0 batch, a kv-length-0 batch, a mix of all
    case("a2-bnsd", P22),
    case("a2-bnsd-q0", P22, q_lens=(64, 0), kv_lens=(512, 300)),
    case("a2-bnsd-kv0", P22, q_lens=(64, 64), kv_lens=(0, 333)),
    case("a2-bnsd-mixed", P22, b=3, q_lens=(64, 17, 0), kv_lens=(1, 512, 200)),
    # the band specialisation: sparse 2/3/4, with right-down rows that see nothing (q > kv)
    case("a2-sparse2", P22, sparse=2),
    case("a2-sparse3-kv0", P22, sparse=3, q_lens=(40, 64), kv_lens=(0, 512)),
    case("a2-sparse3-q>kv", P22, sparse=3, q_lens=(64, 64), kv_lens=(30, 512)),
    case("a2-sparse4", P22, sparse=4, pre=100, nxt=10, q_lens=(64, 50), kv_lens=(512, 100)),
    # an explicit mask: fully masked rows; sparse 1 (allMask) uses the same specialisation
    case("a2-mask-rows", P22, mask="rows"),
    case("a2-sparse1", P22, sparse=1, mask="random", q_lens=(64, 20), kv_lens=(300, 512)),
    # BSH (S1G fold), bf16, GQA 8, no lse: one specialisation
    case("a2-bsh-bf16-g8-nolse", P22, layout="BSH", nkv=1, dtype="bfloat16", lse=False),
    case("a2-bsh-bf16-g8-nolse-kv0", P22, layout="BSH", nkv=1, dtype="bfloat16", lse=False, q_lens=(64, 33),
         kv_lens=(512, 0)),
    # decode on the legacy IFA class (BSND and BSH share the kernel's view)
    case("a2-decode-bsnd", D22, kv_lens=(0, 256)),
    case("a2-decode-bsh", D22, layout="BSH", kv_lens=(200, 0)),
    # a token layout pair with cumulative lengths (q-length-0 and kv-length-0 batches)
    case("a2-ntd_tnd", P22, layout="NTD_TND", b=3, q_lens=(64, 0, 30), kv_lens=(512, 300, 0)),
    # arch35: band with a kv-length-0 batch and a q-length-0 batch
    case("a5-sparse3", P35, sparse=3),
    case("a5-sparse3-kv0", P35, sparse=3, kv_lens=(0, 512)),
    case("a5-sparse3-q0", P35, sparse=3, q_lens=(0, 64)),
    # arch35 decode: G folded into S1 (the "GS merge" of the catch-all template)
    case("a5-decode-bnsd", D22, target=A5, layout="BNSD", kv_lens=(0, 256)),
]


def _layouts(target: str):
    """Every layout the tiling accepts without rope, prefill, lengths with empty batches where allowed
    (BSH and BSND share the kernel's BSND view; BSH_BNSD and BSND_BNSD too)."""
    base = P22 if target == A2 else P35
    tag = "a2" if target == A2 else "a5"
    q2, q3 = (64, 0), (64, 0, 30)
    out = []
    for layout in ("BSH", "BSND", "BNSD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD"):
        out.append(case(f"{tag}-{layout}", base, layout=layout, q_lens=q2, kv_lens=(400, 0)))
    # NTD in / TND out is a default case on arch22 (NTD alone differs from it only in the output view)
    for layout in ("TND",):
        extra = {}
        if layout == "TND" and target == A2:
            # TND with inner_precise 0 and sparse 0/3/4 goes to the split-fuse route (not simulated)
            extra = dict(inner_precise=2)
        out.append(case(f"{tag}-{layout}", base, layout=layout, b=3, q_lens=q3, kv_lens=(512, 300, 0), **extra))
    return out


def _gqa(target: str):
    """G = 1, 4, 8 (N 8 on 8, 2, 1 kv heads), prefill and decode (G 4 prefill is the default family)."""
    base = P22 if target == A2 else P35
    tag = "a2" if target == A2 else "a5"
    # prefill G 4 is the default family, G 8 a default case on arch22 (BSH bf16)
    out = [case(f"{tag}-prefill-g1", base, nkv=8, kv_lens=(512, 0))]
    if target == A5:
        out.append(case(f"{tag}-prefill-g8", base, nkv=1, kv_lens=(0, 300)))
    # decode G 4 is a default case (arch22 BSND, arch35 BNSD)
    decode = [("BNSD", 8), ("BSND", 1)] if target == A2 else [("BSND", 1)]
    for layout, nkv in decode:
        out.append(case(f"{tag}-decode-{layout}-g{8 // nkv}", D22, target=target, layout=layout, nkv=nkv,
                        kv_lens=(0, 256)))
    return out


def _masks(target: str):
    """sparse 0 without a mask (pre/next ignored), with a mask, with a mask and a band; 1; 2; 3; 4."""
    base = P22 if target == A2 else P35
    tag = "a2" if target == A2 else "a5"
    q = (64, 37)
    return [
        case(f"{tag}-sparse0-nomask-prenext", base, pre=3, nxt=0),
        *([case(f"{tag}-sparse0-mask", base, mask="random", q_lens=q, kv_lens=(512, 100))] if target == A2 else []),
        case(f"{tag}-sparse0-mask-band", base, mask="rows", pre=40, nxt=2, q_lens=q, kv_lens=(512, 300)),
        *([case(f"{tag}-sparse1", base, sparse=1, mask="rows", kv_lens=(100, 512))] if target == A2 else []),
        case(f"{tag}-sparse2", base, sparse=2, q_lens=q, kv_lens=(512, 0)),
        case(f"{tag}-sparse3", base, sparse=3, q_lens=q, kv_lens=(20, 512)),
        case(f"{tag}-sparse4", base, sparse=4, pre=7, nxt=3, q_lens=q, kv_lens=(512, 60)),
        case(f"{tag}-sparse4-zero-band", base, sparse=4, pre=0, nxt=0),
    ]


def _lse_dtype(target: str):
    """lse off, and bf16 (one S2 block: see the module doc)."""
    if target == A2:
        # (lse off with bf16 is a default case)
        return [case("a2-bf16-sparse3", P22, dtype="bfloat16", sparse=3, q_lens=(64, 5), kv_lens=(40, 512))]
    return [case("a5-bf16-bsnd-nolse", P35, dtype="bfloat16", s2=256, lse=False, layout="BSND",
                 kv_lens=(256, 0))]


SLOW = (_layouts(A2) + _layouts(A5) + _gqa(A2) + _gqa(A5) + _masks(A2) + _masks(A5) + _lse_dtype(A2)
        + _lse_dtype(A5) + [
            # arch22 decode: a (B, 1, 1, S2) mask on the legacy route; bf16 with D 128
            case("a2-decode-mask", D22, layout="BNSD", mask="random", kv_lens=(100, 256)),
            case("a2-decode-bf16-d128", D22, dtype="bfloat16", d=128, kv_lens=(0, 200)),
            # arch22 MTP-like decode (1 < S1 <= 16): decode tiling class, but not the legacy lse value
            case("a2-mtp-s4", D22, layout="BNSD", s1=4, q_lens=(4, 2), kv_lens=(256, 0)),
            # prefill D 128
            case("a2-prefill-d128", P22, d=128, q_lens=(64, 10), kv_lens=(512, 0)),
            # arch22 MHA decode with D 256 goes to the legacy IFA tiling (IFATiling)
            case("a2-ifa-d256", D22, layout="BSH", nkv=8, d=256, kv_lens=(256, 0)),
            # arch35: a small prefill with G folded into S1 (S1*G < 64), and TND with unequal lengths
            case("a5-small-prefill-merge", P35, s1=8, q_lens=(8, 3), kv_lens=(512, 100)),
            case("a5-tnd-unequal", P35, layout="TND", q_lens=(64, 30), kv_lens=(512, 300)),
        ])


def _run(fia_kit, params):
    r = fia_kit.check(fia_kit.Case(**params))
    assert not r.tiling.fd, "this grid keeps FD off (FD cases live in test_fia_kernel_fd.py)\n" + r.describe()
    return r


@pytest.mark.parametrize("params", DEFAULT)
def test_fia_kernel_default(fia_kit, params):
    _run(fia_kit, params)


@pytest.mark.wide
@pytest.mark.parametrize("params", SLOW)
def test_fia_kernel_grid(fia_kit, params):
    _run(fia_kit, params)


def test_empty_rows_are_really_exercised(fia_kit):
    """The kit's promise checks must have rows to check: kv-length-0 rows on both lse classes and
    right-down causal rows with no visible key (run through the default cases' specialisations)."""
    r = fia_kit.check(fia_kit.Case(**P22, sparse=3, q_lens=(64, 64), kv_lens=(30, 512)))
    assert (0, 33) in r.empty_rows and (0, 34) not in r.empty_rows and r.empty_lse == np.inf
    assert np.all(r.lse[0, :, :34] == np.inf) and np.isfinite(r.lse[0, :, 34:]).all()
    d = fia_kit.check(fia_kit.Case(**D22, kv_lens=(0, 256)))
    assert d.tiling.extras["legacy_ifa"] and d.empty_rows == [(0, 0)]
    assert np.all(d.lse[0] == np.float32(-3.4e38)) and np.isfinite(d.lse[1]).all() and d.lse[1].max() < 1e3


def test_plain_golden_agrees_on_long_rows(fia_kit):
    """Without causal masking (hundreds of keys per row) fp16 also passes the plain float64 golden:
    the P-rounded golden is a refinement, not a loosening."""
    from cvtile.kernels import compare, fia_golden

    r = fia_kit.run(fia_kit.Case(**P22))
    rep = compare(r.out, fia_golden(**r.kwargs)[0], "float16")
    assert rep.passed, str(rep)


def test_regression_arch35_rows_fold_per_batch_s1(fia_kit):
    """The arch35 catch-all placed head g's rows at g * S1 (the tensor's S1) while the kernel
    folds a batch's heads at g * S1[b]: a batch shorter than S1 read out of bounds or the wrong heads."""
    r = fia_kit.check(fia_kit.Case(**P35, sparse=3, q_lens=(17, 64), kv_lens=(512, 300)))
    assert r.tiling.q_seqlens == (17, 64)
    assert any(t.b == 0 and t.m_start == 17 for c in r.tiling.cores for t in c.tasks)


def test_regression_arch35_gs_merge_q_seqlens(fia_kit):
    """With G folded into S1 (decode, S1*G < 64) the arch35 tiling reported q_seqlens as G*S1;
    the launcher read it as S1 and the kernel's view left the query tensor."""
    r = fia_kit.check(fia_kit.Case(**dict(D22, target=A5, layout="BNSD", kv_lens=(0, 256))))
    assert r.tiling.q_seqlens == (1, 1) and r.tiling.group == 4
