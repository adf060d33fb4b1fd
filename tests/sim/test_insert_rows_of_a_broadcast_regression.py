"""Regression: a pipelined program that assembles a broadcast chunk into a full tile crashed the numba backend.

chunk_rows assembles a row-wise tile used after a chunked pass from its chunks (``insert_rows``). When that
tile is a broadcast (``expand`` of a per-row value defined before the pass, as the antiquant kernel's per-token
scale ``amax[:, None]`` is), the chunk is ``expand(slice_rows(x))``. The generator inlines every ``expand``
into the elementwise loops that read it and so never gave it a variable; ``insert_rows`` reads its chunk whole
and raised ``KeyError: tile ... is not materialised (codegen ordering bug)``. Met on st case 75 of
``fia_v4.json`` (bf16 query, int8 BSH KV with per-token scale and offset, G = 11) in pipelined order: the
program-order kernel has no chunked pass there and ran. An inlined value that an op reads whole is now
materialised where that op reads it (``codegen._Gen.tile``).

Found by generating the pipelined module of every launch of the st corpora (the ``corpus`` test below does
that for the three of them).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import cvtile
from cvtile.dsl.jit import record_launches
from cvtile.sim.codegen import generate


def _per_token_antiquant_decode():
    """The smallest call of case 75's kind: one batch, 11 query heads on one KV head, int8 BSH KV of 1024
    positions with per-token scale and offset (key/value_antiquant_mode 1), an explicit mask."""
    rng = np.random.default_rng(0)
    b, n, s2, d = 1, 11, 1024, 128
    q = rng.uniform(-1, 1, (b, 1, n * d)).astype(ml_dtypes.bfloat16)
    k = rng.integers(-128, 128, (b, s2, d)).astype(np.int8)
    v = rng.integers(-128, 128, (b, s2, d)).astype(np.int8)
    scale = rng.uniform(0.001, 0.01, (1, b, s2)).astype(np.float32)
    offset = rng.uniform(-1, 1, (1, b, s2)).astype(np.float32)
    kwargs = dict(num_heads=n, num_key_value_heads=1, input_layout="BSH", scale=0.0884,
                  atten_mask=np.zeros((b, 1, 1, s2), np.bool_), actual_seq_lengths_kv=[s2] * b,
                  key_antiquant_mode=1, value_antiquant_mode=1,
                  key_antiquant_scale=scale, key_antiquant_offset=offset,
                  value_antiquant_scale=scale.copy(), value_antiquant_offset=offset.copy())
    return (q, k, v), kwargs


def _inserts_a_broadcast(kernel) -> bool:
    def ops(block):
        for op in block.ops:
            yield op
            for inner in op.blocks:
                yield from ops(inner)

    return any(op.kind == "insert_rows" and op.operands[1].owner is not None
               and op.operands[1].owner.kind == "expand"
               for body in kernel.programs().values() for op in ops(body))


def test_pipelined_module_of_a_chunked_broadcast_generates():
    args, kwargs = _per_token_antiquant_decode()
    with record_launches(run=False) as rec:
        cvtile.npu_fused_infer_attention_score(*args, **kwargs)
    (launch,) = rec.launches
    final = launch.kernel.compilation.final
    assert _inserts_a_broadcast(final), "the call no longer assembles a broadcast chunk: pick another one"
    text = generate(final).text
    assert "def prog_aiv(" in text


@pytest.mark.slow
def test_pipelined_order_of_a_chunked_broadcast_matches_program_order():
    """About a minute on a cold kernel cache: the antiquant kernel compiled in both orders."""
    args, kwargs = _per_token_antiquant_decode()
    out = {order: np.asarray(cvtile.npu_fused_infer_attention_score(*args, **kwargs, order=order)[0])
           for order in ("program", "pipelined")}
    assert np.isfinite(out["program"].astype(np.float32)).all()
    assert np.array_equal(out["program"].view(np.uint16), out["pipelined"].view(np.uint16))


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["fia_v4.json", "ifa_v4.json", "pfa_v3.json"])
def test_every_st_corpus_launch_generates_both_orders(name, corpus_file):
    """Every kernel specialisation an st corpus launches generates its program-order and pipelined-order
    modules (tracing and generation only, no numba compile: about a minute per corpus)."""
    from cvtile.kernels.st_runner import corpus_launches

    kernels = {}
    for _, recorded in corpus_launches(str(corpus_file(f"st/{name}"))):
        if isinstance(recorded, (cvtile.ParamError, cvtile.UnsupportedParameterError)):
            continue
        assert not isinstance(recorded, Exception), recorded
        for launch in recorded:
            kernels.setdefault(launch.kernel.key, launch.kernel)
    assert kernels
    for kernel in kernels.values():
        generate(kernel.ir)
        generate(kernel.compilation.final)
