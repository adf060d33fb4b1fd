"""Cross-check of fia_golden against torch's scaled_dot_product_attention (skipped without torch)."""

from __future__ import annotations

import numpy as np
import pytest

from cvtile.kernels.golden import fia_golden, mask_template

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _sdpa(q, k, v, scale, mask=None):
    qt, kt, vt = (torch.from_numpy(x.astype(np.float64)) for x in (q, k, v))
    group = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(group, dim=1), vt.repeat_interleave(group, dim=1)
    attn = None if mask is None else torch.from_numpy(~mask)
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=attn, scale=scale).numpy()


@pytest.mark.parametrize("n,n2", [(4, 4), (8, 2)])
def test_full_attention_matches_sdpa(n, n2):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, n, 5, 16)).astype(np.float16)
    k = rng.standard_normal((2, n2, 9, 16)).astype(np.float16)
    v = rng.standard_normal((2, n2, 9, 16)).astype(np.float16)
    out, _ = fia_golden(q, k, v, input_layout="BNSD", num_heads=n, num_key_value_heads=n2, scale=0.25)
    np.testing.assert_allclose(out, _sdpa(q, k, v, 0.25), rtol=1e-12, atol=1e-12)


def test_right_down_causal_matches_sdpa_bottom_right_mask():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float16)
    k = rng.standard_normal((1, 2, 7, 8)).astype(np.float16)
    v = rng.standard_normal((1, 2, 7, 8)).astype(np.float16)
    out, _ = fia_golden(q, k, v, input_layout="BNSD", num_heads=2, scale=0.3, sparse_mode=3,
                        atten_mask=mask_template())
    masked = np.triu(np.ones((4, 7), bool), k=1 + 7 - 4)
    np.testing.assert_allclose(out, _sdpa(q, k, v, 0.3, masked), rtol=1e-12, atol=1e-12)


def test_torch_tensors_are_accepted_bit_exactly():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    qt, kt = torch.from_numpy(q).to(torch.bfloat16), torch.from_numpy(k).to(torch.bfloat16)
    out_t, _ = fia_golden(qt, kt, kt, input_layout="BNSD", num_heads=2, scale=0.3)
    out_n, _ = fia_golden(qt.float().numpy(), kt.float().numpy(), kt.float().numpy(), input_layout="BNSD",
                          num_heads=2, scale=0.3)
    np.testing.assert_array_equal(out_t, out_n)
