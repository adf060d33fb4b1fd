"""FlashAttentionScore forward operator APIs on the simulated chip: torch_npu's ``npu_fusion_attention`` (and
its ``_v2``), and the aclnn V3/V4/varlen parameter set the st corpora call.

Model
-----
Each call is normalised once (:func:`.host.prepare_call`: checks, layouts, sparse modes, pse, dropout,
sink), tiled by the FAS op_host mirror (:func:`cvtile.tiling.fas.tile_fas`: template, S1/S2 bases, core
split) and run by ``fas_attention`` (:mod:`.launch`). ``fas_golden_api`` is the float64 golden with the same
keywords and returns, so a corpus runner compares like with like.

Returns (torch_npu): ``(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset, numels)``;
softmax_out is reserved by the operator and returned empty; seed / offset are the call's, numels is the
element count the dropout draws (:func:`.dropout.dropout_numels`; 0 without dropout).

Invariants
----------
* The API, the kernel and the golden read one ``FasCall``: a rule (a sparse mode, the pse order) is written once.
* ``score_mod`` / ``mask_mod`` (cvtile extensions, :mod:`cvtile.kernels.variants`) compile into the kernel's
  V1; the golden applies the same hooks evaluated in numpy.
"""

from __future__ import annotations

import numpy as np

from ...tiling.platform import DEFAULT_TARGET, get_platform
from ..golden.dtypes import native_order
from ..golden.masks import INT_MAX
from .host import FasCall, prepare_call
from .launch import run_fas

__all__ = ["npu_fusion_attention", "npu_fusion_attention_v2", "flash_attention_score", "fas_golden_api",
           "fas_tiling", "fas_params", "dropout_source"]


def fas_params(call: FasCall, inner_precise: int = 0):
    """The tiling mirror's parameter record of a normalised call."""
    from ...tiling.fas import FasParams

    token = call.token
    s1 = call.q_shape[0] if token else call.s1_full          # TND: the tensors' T (op_host reads the shapes)
    s2 = int(call.kvlen.sum()) if token else call.s2_full
    return FasParams(b=call.b, n1=call.n1, n2=call.n2, s1=s1, s2=s2, d=call.d, dv=call.dv,
                     dtype=call.dtype, layout=call.layout, sparse_mode=call.sparse_mode, pre_tokens=call.pre_tokens,
                     next_tokens=call.next_tokens, has_mask=call.band or call.mask is not None,
                     has_pse=call.pse_kind != "none", pse_type=call.pse_type, keep_prob=call.keep_prob,
                     has_drop_mask=call.keep is not None,
                     actual_seq_qlen=tuple(int(x) for x in call.qlen) if token else None,
                     actual_seq_kvlen=tuple(int(x) for x in call.kvlen) if token else None,
                     prefix=None if call.prefix is None else tuple(int(x) for x in call.prefix),
                     has_sink=call.sink is not None, inner_precise=int(inner_precise))


def fas_tiling(call: FasCall, target: str = DEFAULT_TARGET, inner_precise: int = 0):
    """The FAS op_host mirror's tiling of a normalised call. The mirror covers arch22 (Atlas A2/A3): another
    target is ``UnsupportedParameterError`` naming ``target`` (the real operator runs there; cvtile does not
    model its tiling)."""
    from ...tiling.fas import tile_fas

    plat = get_platform(target)
    if plat.arch != "arch22":
        from ..errors import UnsupportedParameterError

        raise UnsupportedParameterError("target", plat.name, f"the FlashAttentionScore tiling mirror covers arch22 "
                                        f"(Atlas A2/A3) only; {plat.name} is {plat.arch}")
    return tile_fas(fas_params(call, inner_precise), target=target)


def dropout_source(target: str) -> str:
    """The keep-mask generator of a target: Ascend 950 draws it in the kernel; on A2/A3 torch_npu makes an explicit
    mask with the mask-generation op first (modelled by the public StatelessDropOutGenMask, ``.dropout``)."""
    return "kernel" if "950" in str(target) else "gen_mask"


def _hooks(score_mod, mask_mod, mod_args):
    """The variant's ``Hooks`` (no block skipping: the FAS tiling's tasks run as planned), or None."""
    if score_mod is None and mask_mod is None:
        if mod_args:
            from ..variants.hooks import VariantError

            raise VariantError("mod_args", f"{len(mod_args)} arrays", "captured tensors need a score_mod or mask_mod")
        return None
    from ..variants.attention import variant_hooks

    return variant_hooks(score_mod, mask_mod, mod_args, block_sparse=False)


def _forward(query, key, value, kw: dict, *, target, score_mod=None, mask_mod=None, mod_args=(), order="program",
             serial=False):
    inner = int(kw.pop("inner_precise", 0) or 0)
    query, key, value = (native_order(x) for x in (query, key, value))
    kw = {name: native_order(x) for name, x in kw.items()}
    call = prepare_call(query, key, value, dropout_source=dropout_source(target), **kw)
    hooks = _hooks(score_mod, mask_mod, mod_args)
    tiling = fas_tiling(call, target, inner)
    out, smax, ssum, _ = run_fas(call, query, key, value, tiling, get_platform(target), hooks=hooks, order=order,
                                 serial=serial)
    return call, out, smax, ssum


def _numels(call: FasCall) -> int:
    if call.keep_prob >= 1.0:
        return 0
    from .dropout import dropout_numels

    return int(dropout_numels(call))


def npu_fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                         scale=1.0, keep_prob=1.0, pre_tockens=INT_MAX, next_tockens=INT_MAX, inner_precise=0,
                         prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                         gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None, seed=0,
                         offset=0, *, pse_type=1, q_start_idx=None, kv_start_idx=None, target=DEFAULT_TARGET,
                         score_mod=None, mask_mod=None, mod_args=(), order="program"):
    """torch_npu.npu_fusion_attention on the simulated chip (pse type 1, "add then mul", unless ``pse_type``).

    ``gen_mask_parallel`` and ``sync`` schedule the device's mask generation and change no value."""
    kw = dict(head_num=head_num, input_layout=input_layout, pse=pse, padding_mask=padding_mask,
              atten_mask=atten_mask, scale=scale, keep_prob=keep_prob, pre_tockens=pre_tockens,
              next_tockens=next_tockens, inner_precise=inner_precise, prefix=prefix, actual_seq_qlen=actual_seq_qlen,
              actual_seq_kvlen=actual_seq_kvlen, sparse_mode=sparse_mode, softmax_layout=softmax_layout, sink=sink,
              dropout_mask=dropout_mask, seed=seed, offset=offset, pse_type=pse_type, q_start_idx=q_start_idx,
              kv_start_idx=kv_start_idx)
    call, out, smax, ssum = _forward(query, key, value, kw, target=target, score_mod=score_mod, mask_mod=mask_mod,
                                     mod_args=mod_args, order=order)
    return out, smax, ssum, np.zeros(0, out.dtype), int(seed), int(offset), _numels(call)


def npu_fusion_attention_v2(query, key, value, head_num, input_layout, *, pse=None, padding_mask=None,
                            atten_mask=None, query_rope=None, key_rope=None, scale=1.0, keep_prob=1.0,
                            pre_tokens=INT_MAX, next_tokens=INT_MAX, inner_precise=0, prefix=None,
                            actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                            sync=False, pse_type=1, q_start_idx=None, kv_start_idx=None, softmax_layout="",
                            sink=None, dropout_mask=None, seed=0, offset=0, target=DEFAULT_TARGET, score_mod=None,
                            mask_mod=None, mod_args=(), order="program"):
    """torch_npu.npu_fusion_attention_v2 (keyword-only, ``pre_tokens`` spelling, rope inputs refused)."""
    _no_rope(query_rope, key_rope)
    return npu_fusion_attention(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale,
                                keep_prob, pre_tokens, next_tokens, inner_precise, prefix, actual_seq_qlen,
                                actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync, softmax_layout, sink,
                                dropout_mask, seed, offset, pse_type=pse_type, q_start_idx=q_start_idx,
                                kv_start_idx=kv_start_idx, target=target, score_mod=score_mod, mask_mod=mask_mod,
                                mod_args=mod_args, order=order)


def _absent(t) -> bool:
    """An optional tensor the aclnn corpora leave out: None, empty, or a 0-d placeholder (shape [])."""
    return t is None or (hasattr(t, "shape") and (np.ndim(t) == 0 or np.size(t) == 0))


def _no_rope(query_rope, key_rope):
    from ..errors import UnsupportedParameterError

    for name, t in (("query_rope", query_rope), ("key_rope", key_rope)):
        if not _absent(t):
            raise UnsupportedParameterError(name, t, "FlashAttentionScore with split rope inputs is not simulated")


def _aclnn_keywords(head_num, input_layout, real_shift, drop_mask, padding_mask, atten_mask, sink, prefix,
                    q_start_idx, kv_start_idx, scale, keep_prob, pre_tokens, next_tokens, inner_precise, sparse_mode,
                    pse_type, actual_seq_qlen, actual_seq_kvlen, softmax_out_layout, seed, offset) -> dict:
    """prepare_call's keywords from the aclnn parameter set (empty optional tensors are absent ones)."""
    def present(t):
        return None if _absent(t) else t

    return dict(head_num=int(head_num), input_layout=input_layout, pse=present(real_shift),
                padding_mask=present(padding_mask), atten_mask=present(atten_mask), scale=float(scale),
                keep_prob=float(keep_prob), pre_tockens=int(pre_tokens), next_tockens=int(next_tokens),
                inner_precise=int(inner_precise), prefix=present(prefix), actual_seq_qlen=actual_seq_qlen,
                actual_seq_kvlen=actual_seq_kvlen, sparse_mode=int(sparse_mode),
                softmax_layout="TND" if softmax_out_layout in ("TND", "same_as_input") and input_layout == "TND"
                else "", sink=present(sink), dropout_mask=present(drop_mask), seed=int(seed), offset=int(offset),
                pse_type=int(pse_type), q_start_idx=present(q_start_idx), kv_start_idx=present(kv_start_idx))


def flash_attention_score(query, key, value, *, head_num, input_layout, real_shift=None, drop_mask=None,
                          padding_mask=None, atten_mask=None, sink=None, prefix=None, q_start_idx=None,
                          kv_start_idx=None, scale=1.0, keep_prob=1.0, pre_tokens=INT_MAX, next_tokens=INT_MAX,
                          inner_precise=0, sparse_mode=0, pse_type=1, query_rope=None, key_rope=None,
                          actual_seq_qlen=None, actual_seq_kvlen=None, softmax_out_layout="", seed=0, offset=0,
                          target=DEFAULT_TARGET, order="program"):
    """aclnnFlashAttentionScore V3 / V4 and FlashAttentionVarLenScore V5 (torch-style names of their
    parameters); returns ``(attention_out, softmax_max, softmax_sum)``."""
    _no_rope(query_rope, key_rope)
    kw = _aclnn_keywords(head_num, input_layout, real_shift, drop_mask, padding_mask, atten_mask, sink, prefix,
                         q_start_idx, kv_start_idx, scale, keep_prob, pre_tokens, next_tokens, inner_precise,
                         sparse_mode, pse_type, actual_seq_qlen, actual_seq_kvlen, softmax_out_layout, seed, offset)
    _, out, smax, ssum = _forward(query, key, value, kw, target=target, order=order)
    return out, smax, ssum


def fas_golden_api(query, key, value, *, p_dtype="input", **kwargs):
    """``flash_attention_score``'s float64 golden: the same keywords, ``(attention_out, softmax_max,
    softmax_sum)`` (P rounded to the input dtype before P·V unless ``p_dtype=None``)."""
    from ..golden.fas import fas_golden

    names = ("head_num", "input_layout", "real_shift", "drop_mask", "padding_mask", "atten_mask", "sink", "prefix",
             "q_start_idx", "kv_start_idx", "scale", "keep_prob", "pre_tokens", "next_tokens", "inner_precise",
             "sparse_mode", "pse_type", "actual_seq_qlen", "actual_seq_kvlen", "softmax_out_layout", "seed",
             "offset")
    defaults = dict(real_shift=None, drop_mask=None, padding_mask=None, atten_mask=None, sink=None, prefix=None,
                    q_start_idx=None, kv_start_idx=None, scale=1.0, keep_prob=1.0, pre_tokens=INT_MAX,
                    next_tokens=INT_MAX, inner_precise=0, sparse_mode=0, pse_type=1, actual_seq_qlen=None,
                    actual_seq_kvlen=None, softmax_out_layout="", seed=0, offset=0)
    args = {**defaults, **{k: v for k, v in kwargs.items() if k in names}}
    _no_rope(kwargs.get("query_rope"), kwargs.get("key_rope"))
    kw = _aclnn_keywords(*(args[n] for n in names))
    kw.pop("inner_precise")
    call = prepare_call(query, key, value, dropout_source=dropout_source(kwargs.get("target", DEFAULT_TARGET)), **kw)
    return fas_golden(call, query, key, value, p_dtype=call.dtype if p_dtype == "input" else p_dtype)
