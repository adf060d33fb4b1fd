"""Regression: a score_mod ran after the mask, so a soft-capped masked score became -cap instead of -inf.

The FIA kernel applied ``score_mod`` after the band and the mask: ``cap·tanh(-inf / cap) = -cap`` gave every
masked key a weight ``exp(-cap - max)`` (small, but not zero), unlike the golden (and FlexAttention), where a
masked pair stays out of the softmax. The mod now runs before the masks. A small cap (2) makes the leaked
weight large enough to fail the comparison.
"""

from __future__ import annotations

import numpy as np

from cvtile.kernels import compare
from cvtile.kernels.golden.masks import mask_template
from cvtile.kernels.variants import attention, variant_golden
from cvtile.kernels.variants.gallery import soft_cap


def test_soft_cap_with_a_causal_mask_keeps_masked_keys_out():
    rng = np.random.default_rng(3)
    b, n, s, d = 1, 2, 96, 64
    q = rng.standard_normal((b, n, s, d)).astype(np.float16)
    k = rng.standard_normal((b, n, s, d)).astype(np.float16)
    v = rng.standard_normal((b, n, s, d)).astype(np.float16)
    kw = dict(num_heads=n, input_layout="BNSD", scale=1.0 / np.sqrt(d), atten_mask=mask_template(), sparse_mode=3)
    out = attention(q, k, v, score_mod=soft_cap(2.0), **kw)[0]
    golden = variant_golden(q, k, v, score_mod=soft_cap(2.0), **kw)[0]
    rep = compare(out, golden, np.float16, name="attention_out")
    assert rep.passed, rep
    # row 0 sees key 0 only: its output is v[0] exactly as the chip rounds it
    np.testing.assert_allclose(out[0, :, 0].astype(np.float64), v[0, :, 0].astype(np.float64), rtol=2e-3, atol=1e-3)
