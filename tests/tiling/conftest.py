"""Fixtures of the verdict tests: small hand-made FusedInferAttentionScore calls and a way to run them.

``verdict_kit.call(arch, base="gqa", **overrides)`` builds a call from a valid base (see ``BASES``) with
tensors replaced (a ``TensorMeta``, a shape tuple keeping the base dtype, a Python int list for host
lists, or ``None`` to drop the input) and attributes overridden; ``verdict_kit.reject(...)`` runs
``check_fia`` on the unit-test platform of ``arch`` and returns the ``ParamError``; ``expect(...)`` also
checks its parameter, status, rule fragment and checker family; ``accept(...)`` returns the ``FiaInfo``.
"""

from __future__ import annotations

import pytest

from cvtile.tiling.errors import ParamError
from cvtile.tiling.params import FiaParams, TensorMeta
from cvtile.tiling.platform import ut_platform
from cvtile.tiling.verdict import check_fia

T = TensorMeta

#: valid calls (tensors, attrs) the rule tests start from
BASES = {
    # GQA prefill, fp16, BNSD, 8 query heads on 2 kv heads, D 128
    "gqa": (dict(query=T((2, 8, 128, 128), "float16"), key=T((2, 2, 256, 128), "float16"),
                 value=T((2, 2, 256, 128), "float16"), attention_out=T((2, 8, 128, 128), "float16")),
            dict(num_heads=8, num_key_value_heads=2, input_layout="BNSD")),
    # the same in BSH
    "gqa_bsh": (dict(query=T((2, 128, 1024), "float16"), key=T((2, 256, 256), "float16"),
                     value=T((2, 256, 256), "float16"), attention_out=T((2, 128, 1024), "float16")),
                dict(num_heads=8, num_key_value_heads=2, input_layout="BSH")),
    # TND with cumulative lengths (3 batches)
    "tnd": (dict(query=T((96, 8, 128), "float16"), key=T((192, 2, 128), "float16"),
                 value=T((192, 2, 128), "float16"), attention_out=T((96, 8, 128), "float16"),
                 actual_seq_lengths=[32, 64, 96], actual_seq_lengths_kv=[64, 128, 192]),
            dict(num_heads=8, num_key_value_heads=2, input_layout="TND")),
    # paged GQA decode-ish prefill, bf16, BNSD query, BnBsH cache of 8 blocks of 128
    "paged": (dict(query=T((2, 8, 16, 128), "bfloat16"), key=T((8, 128, 256), "bfloat16"),
                   value=T((8, 128, 256), "bfloat16"), attention_out=T((2, 8, 16, 128), "bfloat16"),
                   block_table=T((2, 4), "int32"), actual_seq_lengths_kv=[300, 512]),
              dict(num_heads=8, num_key_value_heads=2, input_layout="BNSD", block_size=128)),
    # split-rope MLA decode: D 512 + rope 64, one kv head, paged BnBsH cache
    "mla": (dict(query=T((2, 1, 32, 512), "bfloat16"), key=T((8, 128, 512), "bfloat16"),
                 value=T((8, 128, 512), "bfloat16"), attention_out=T((2, 1, 32, 512), "bfloat16"),
                 query_rope=T((2, 1, 32, 64), "bfloat16"), key_rope=T((8, 128, 64), "bfloat16"),
                 block_table=T((2, 4), "int32"), actual_seq_lengths_kv=[300, 512]),
            dict(num_heads=32, num_key_value_heads=1, input_layout="BSND", block_size=128)),
    # arch22 legacy IFA: MHA decode with D 256 (BSH)
    "ifa": (dict(query=T((2, 1, 2048), "float16"), key=T((2, 1024, 2048), "float16"),
                 value=T((2, 1024, 2048), "float16"), attention_out=T((2, 1, 2048), "float16")),
            dict(num_heads=8, input_layout="BSH")),
    # arch22 legacy PFA: fp16 prefill on an int8 cache (BSH, combined antiquant scale)
    "pfa": (dict(query=T((2, 128, 1024), "float16"), key=T((2, 512, 1024), "int8"),
                 value=T((2, 512, 1024), "int8"), antiquant_scale=T((2, 1024), "float16"),
                 attention_out=T((2, 128, 1024), "float16")),
            dict(num_heads=8, input_layout="BSH")),
}


class VerdictKit:
    """Builds calls from ``BASES`` and runs them through ``check_fia``."""

    T = TensorMeta

    def call(self, base: str = "gqa", **overrides) -> FiaParams:
        tensors, attrs = BASES[base]
        tensors, attrs = dict(tensors), dict(attrs)
        for name, value in overrides.items():
            if name in tensors or name in _TENSOR_NAMES:
                if value is None:
                    tensors.pop(name, None)
                elif isinstance(value, tuple) and all(isinstance(d, int) for d in value):
                    old = tensors.get(name)
                    tensors[name] = T(value, old.dtype if isinstance(old, TensorMeta) else "float16")
                else:
                    tensors[name] = value
            else:
                attrs[name] = value
        return FiaParams.from_api(tensors, attrs)

    def run(self, arch: str, base: str = "gqa", **overrides):
        return check_fia(self.call(base, **overrides), ut_platform(arch))

    def accept(self, arch: str, base: str = "gqa", **overrides):
        return self.run(arch, base, **overrides)

    def reject(self, arch: str, base: str = "gqa", **overrides) -> ParamError:
        with pytest.raises(ParamError) as exc:
            self.run(arch, base, **overrides)
        return exc.value

    def expect(self, arch: str, base: str, param: str, status: int, fragment: str, checker: str | None,
               **overrides) -> ParamError:
        """Reject the call and check the error names ``param``, has ``status``, a rule text containing
        ``fragment`` and (when given) the checker family ``checker``."""
        err = self.reject(arch, base, **overrides)
        assert err.param == param, (err.param, str(err))
        assert int(err.status) == status, (int(err.status), str(err))
        assert fragment in err.rule, (fragment, err.rule)
        if checker is not None:
            assert err.checker == checker, (err.checker, str(err))
        return err


_TENSOR_NAMES = set(FiaParams.__dataclass_fields__) - {
    "num_heads", "scale", "pre_tokens", "next_tokens", "input_layout", "num_key_value_heads", "sparse_mode",
    "inner_precise", "block_size", "antiquant_mode", "softmax_lse_flag", "key_antiquant_mode",
    "value_antiquant_mode", "query_quant_mode", "pse_type", "out_dtype", "source", "key_list", "value_list"}


@pytest.fixture(scope="session")
def verdict_kit() -> VerdictKit:
    return VerdictKit()
