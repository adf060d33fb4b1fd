"""Block sizes of the arch35 (Ascend 950) FIA templates and the catch-all template's mode flags.

Model
-----
On arch35 a block is ``sOuter`` query rows per vector core and ``sInner`` KV
positions; the cube block is ``M base = sOuter * 2`` (two vector cores per cube).
The tiling key names a *config* by ``(M base, sInner, D bucket, Dv bucket)``.

``FiaTilingNonQuantArch35`` (GQA, priority 28) — :func:`gqa_blocks`:
default 64/128 (M 128). With ``Dv <= 128`` (not the rope-combined D128 MLA) and a
small query (S1 <= 64) over a long KV (S2 > 128): the *small-head* shape 32/256
(M 64) when the visible window is wide (sparse mode not 2 and ``pre + next > 128``
after clamping pre to <= 0 for sparse 0 and next to <= 0 for sparse 4; 32-bit sum).
``Dv > 128`` prefill: 32/256 for the small-query case with ``Dv <= 256``, else 64/128.
Config lookup by ``(M, sInner, D bucket, Dv bucket)`` (D buckets 64/128/256/512/576);
the rope-split D128 case uses the D192 config; no entry -> the D256/Dv128 config.

``FusedInferAttentionScoreTilingImpl`` (catch-all, priority 999) —
:func:`impl_flags` and :func:`impl_blocks`:

* ``ifa``: S1 == 1, no alibi, a non-transposed layout, not per-block full quant;
* ``pfa_merge``: S1*G < 64 and none of pse/alibi/rope-split D128/post-quant/left
  padding/tensor list/full quant/transposed layout, and every actual query length
  >= S1; ``gs_merge`` (G folded into S1) = pfa_merge (antiquant: its own rule;
  MLA D512 always; a prefix never; D > 256 not a multiple of 64 never), or ifa;
* blocks: 64/128; ``Dv <= 128``: small-head 32/256 (non-quant, not rope-split D128,
  not per-block quant), else 32/256 when pfa_merge with a BSH/BSND/TND query;
  ``Dv > 128`` prefill: 32/256 when pfa_merge and Dv <= 256; MLA D512: sOuter 32;
  MXFP8 64/512; the transposed-softmax "DN" path (no mask/pse/PA/rope/prefix,
  D, Dv <= 128, M > 64) with D = Dv = 64 and aligned lengths takes sInner 256;
* antiquant: sOuter 16 (32 when G is merged into S1 > 1); sInner by D: <=64 1024
  (512 with pse or a merged prefill), <=128 512, <=256 256, else 128; the config
  uses these, the split clips sInner to the longest KV.

Other templates: MLA D512 (``FiaTilingNonQuantMlaArch35``) 32/128 (config 9),
MXFP8 (``FiaTilingFullQuantMxArch35``) 64/512 (configs 27/28), per-token-head
full quant (``FiaTilingFullQuantGqaArch35``) 64/256 (config 17).

Invariants
----------
* Every function is pure on its arguments; returned reasons name the op_host rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from .view import TilingView

__all__ = ["CV_RATIO", "CONFIGS", "config_index", "d_bucket", "gqa_blocks", "gqa_config", "gqa_s1_outer_split",
           "ImplFlags", "impl_flags", "impl_blocks", "impl_config", "impl_s1_outer_split", "Arch35Blocks",
           "s1_outer_split_enabled", "impl_antiquant_blocks", "impl_dn"]

CV_RATIO = 2
INT32_MAX = 2147483647

#: The kernel's block configs, by index: (M base, sInner, D bucket, Dv bucket).
CONFIGS = (
    (64, 256, 64, 64), (64, 256, 128, 128), (128, 128, 64, 64), (128, 128, 128, 128), (128, 128, 192, 128),
    (128, 128, 256, 128), (128, 128, 256, 256), (128, 128, 512, 512), (128, 256, 64, 64), (64, 128, 576, 512),
    (64, 64, 256, 256), (64, 64, 512, 512), (16, 1024, 64, 64), (16, 512, 128, 128), (16, 256, 256, 256),
    (16, 128, 512, 512), (16, 512, 64, 64), (128, 256, 128, 128), (64, 256, 256, 256), (32, 512, 64, 64),
    (32, 512, 128, 128), (32, 256, 256, 256), (32, 128, 512, 512), (128, 128, 128, 64), (128, 128, 64, 128),
    (64, 256, 128, 64), (64, 256, 64, 128), (128, 512, 64, 64), (128, 512, 128, 128),
)
CONFIG_DEFAULT_GQA = 5           # the GQA template's fallback: (128, 128, 256, 128)
CONFIG_ROPE_SPLIT_D128 = 4       # (128, 128, 192, 128)
TRANSPOSED_LAYOUTS = ("BNSD_BSND", "BSND_BNSD", "BSH_BNSD", "NTD", "NTD_TND", "TND_NTD")
IFA_EXCLUDED_LAYOUTS = ("BNSD_BSND", "BSND_BNSD", "BSH_BNSD", "NTD", "NTD_TND")


def config_index(m: int, s_inner: int, d: int, dv: int) -> int | None:
    try:
        return CONFIGS.index((m, s_inner, d, dv))
    except ValueError:
        return None


def d_bucket(d: int, *, allow_576: bool = True) -> int:
    for c in (64, 128, 256, 512) + ((576,) if allow_576 else ()):
        if d <= c:
            return c
    return d


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= (1 << 31) else x


def _wide_window(sparse_mode: int, pre: int, nxt: int) -> tuple[bool, int]:
    """sparse != 2 and pre + next > 128 after the clamp (pre <= 0 for sparse 0, next <= 0 for sparse 4), int32."""
    pre, nxt = _i32(pre), _i32(nxt)
    if sparse_mode == 0:
        pre = 0 if pre > 0 else pre
    elif sparse_mode == 4:
        nxt = 0 if nxt > 0 else nxt
    window = _i32(pre + nxt)
    return sparse_mode != 2 and window > 128, window


@dataclass(frozen=True)
class Arch35Blocks:
    s_outer: int
    s_inner: int
    reason: str

    @property
    def m_base(self) -> int:
        return self.s_outer * CV_RATIO


# ------------------------------------------------------------------------------------------- GQA template
def gqa_blocks(v: TilingView) -> Arch35Blocks:
    small_q = v.s1 <= 64 and v.s2 > 128
    if v.v_dim <= 128 and v.mla_mode != "combine_d128":
        wide, window = _wide_window(v.sparse_mode, v.pre_tokens, v.next_tokens)
        if small_q and wide and v.mla_mode != "split_d128":
            return Arch35Blocks(32, 256, f"S1={v.s1}<=64, S2={v.s2}>128, window {window}>128: small-head 32/256 "
                                         "(FiaTilingNonQuantArch35::AdjustSinnerAndSouter)")
        why = "S1>64 or S2<=128" if not small_q else f"window {window}<=128 or sparse 2"
        return Arch35Blocks(64, 128, f"{why}: 64/128 (FiaTilingNonQuantArch35)")
    if v.v_dim > 128 and v.mla_mode != "split_d512" and v.s1 != 1:
        if small_q and v.v_dim <= 256:
            return Arch35Blocks(32, 256, f"Dv={v.v_dim} in (128,256], small S1 over long S2: 32/256")
        return Arch35Blocks(64, 128, f"Dv={v.v_dim}>128 prefill: 64/128")
    return Arch35Blocks(64, 128, "default 64/128 (FiaTilingNonQuantArch35)")


#: The GQA template's (M, sInner, D bucket, Dv bucket) -> config map (the D192 key names the D256/Dv128 config).
_GQA_MAP = {
    (64, 64, 256, 256): 10, (64, 64, 512, 512): 11, (64, 256, 64, 64): 0, (64, 256, 128, 128): 1,
    (128, 128, 64, 64): 2, (128, 128, 128, 128): 3, (128, 128, 192, 128): 5, (128, 128, 256, 128): 5,
    (128, 128, 256, 256): 6, (128, 128, 512, 512): 7, (128, 256, 64, 64): 8, (64, 128, 576, 512): 9,
    (64, 256, 256, 256): 18, (128, 256, 128, 128): 17, (128, 128, 128, 64): 23, (128, 128, 64, 128): 24,
    (64, 256, 128, 64): 25, (64, 256, 64, 128): 26,
}


def gqa_config(v: TilingView, blocks: Arch35Blocks | None) -> tuple[int, str]:
    """The GQA template's config; ``blocks`` None (a tiling sink skips the block choice) takes the fallback."""
    if blocks is None:
        return CONFIG_DEFAULT_GQA, "tiling sink: no block choice, fallback config 5"
    m, si = blocks.m_base, blocks.s_inner
    d = v.qk_dim + (v.rope_dim if v.mla_mode == "split_d512" else 0)
    d, dv = d_bucket(d), d_bucket(v.v_dim, allow_576=False)
    idx = _GQA_MAP.get((m, si, d, dv))
    if idx is None:
        return CONFIG_DEFAULT_GQA, f"({m},{si},D{d},Dv{dv}) has no GQA config: fallback config 5"
    if (m, si, d, dv) == (128, 128, 128, 128) and v.rope_mode == "split":
        return CONFIG_ROPE_SPLIT_D128, "rope-split D128: config 4 (D192/Dv128)"
    return idx, f"config {idx} = (M{m}, S2 {si}, D{d}, Dv{dv})"


def gqa_s1_outer_split(*, batch: int, n2: int, s2: int, qk_dim: int, v_dim: int, aic: int, l2_bytes: int,
                       out_quant: bool = False, prefix: bool = False, padding: bool = False, sink: bool = False,
                       alibi: bool = False, sparse_mode: int = 0, mask: bool = False) -> bool:
    """The GQA template's "S1 outer split" (L2 reuse): the KV the cores stream at once exceeds half of L2.

    ``min(B*N2, cores) * S2 * (D + Dv) * 2 B * 2 >= L2``; off with post-quant, prefix, left padding, sink,
    alibi, band mask or sparse 0 with a mask. A route rule (the GQA template is not capable then).
    """
    if out_quant or prefix or padding or sink or alibi:
        return False
    if sparse_mode == 4 or (sparse_mode == 0 and mask):
        return False
    return min(batch * n2, aic) * s2 * (qk_dim + v_dim) * 2 * 2 >= l2_bytes


# ------------------------------------------------------------------------------------------- catch-all
@dataclass(frozen=True)
class ImplFlags:
    ifa: bool
    pfa_merge: bool
    gs_merge: bool
    actual_q_valid: bool
    actual_kv_valid: bool
    pfa: bool                 # antiquant prefill
    reasons: tuple


def _q_lens_aligned(v: TilingView, actual_q_valid: bool) -> bool:
    if not actual_q_valid or v.quant_mode == "anti" or v.actual_q is None:
        return True
    vals = list(v.actual_q)[:min(len(v.actual_q), v.batch)]
    cumulative = v.q_layout in ("TND", "NTD")
    for i, x in enumerate(vals):
        if cumulative and i >= 1:
            x -= vals[i - 1]
        if x < v.s1:
            return False
    return True


def impl_flags(v: TilingView) -> ImplFlags:
    """ifa / pfa-merge / gs-merge of the catch-all (op_host ``InitTilingFlags``, ``SetGSMerge``, ``SetIsIFA``)."""
    reasons = []
    if v.max_workspace:
        q_valid = kv_valid = False
    else:
        q_valid = bool(v.actual_q_dims) and v.actual_q is not None
        kv_valid = bool(v.actual_kv_dims) and v.actual_kv is not None
        if v.quant_mode == "anti" and v.q_layout == "TND":
            q_valid = True
        if v.quant_mode == "anti" and v.s1 == 1 and v.q_layout != "TND":
            q_valid = False
    pfa_merge = False
    gs_merge = False
    if v.quant_mode == "none" and v.prefix:
        reasons.append("system prefix: no G/S1 merge")
    elif v.mla_mode == "split_d512":
        gs_merge = True
        reasons.append("MLA D512: G merged into S1")
    elif v.quant_mode != "anti" and v.qk_dim > 256 and v.qk_dim % 64:
        reasons.append(f"D={v.qk_dim}>256 not a multiple of 64: no merge")
    else:
        transposed = v.input_layout in TRANSPOSED_LAYOUTS
        pfa_merge = v.s1 * v.g < 64 and not (
            v.pse or v.alibi or v.mla_mode == "split_d128" or v.out_quant or v.q_padding or v.kv_padding
            or v.tensor_list or v.quant_mode == "full" or transposed)
        unequal = not _q_lens_aligned(v, q_valid)
        if unequal:
            pfa_merge = False
        if v.quant_mode == "anti":
            gs_merge = _antiquant_gs_merge(v, unequal)
        else:
            gs_merge = pfa_merge
        reasons.append(f"S1*G={v.s1 * v.g}: PFA merge {'on' if pfa_merge else 'off'}")
    ifa = (v.s1 == 1 and not v.alibi and v.input_layout not in IFA_EXCLUDED_LAYOUTS
           and v.full_quant_mode != "per_block")
    if v.quant_mode != "anti":
        gs_merge = gs_merge or ifa
    pfa = v.quant_mode == "anti" and v.s1 > 1
    return ImplFlags(ifa, pfa_merge, gs_merge, q_valid, kv_valid, pfa, tuple(reasons))


def _antiquant_gs_merge(v: TilingView, unequal: bool) -> bool:
    if v.s1 == 1 and not v.alibi:
        return True
    total = v.g * v.s1
    if total <= 0 or total > 32:
        return False
    return not (unequal or v.q_padding or v.mask or v.pse or v.paged or v.alibi or v.out_quant or v.lse
                or v.input_layout == "BNSD_BSND")


def _small_head(v: TilingView) -> tuple[bool, str]:
    if v.quant_mode != "none":
        return False, "quantised"
    if v.s1 > 64 or v.s2 <= 128:
        return False, f"S1={v.s1}>64 or S2={v.s2}<=128"
    if v.mla_mode == "split_d128" or v.full_quant_mode == "per_block":
        return False, "rope-split D128 / per-block quant"
    wide, window = _wide_window(v.sparse_mode, v.pre_tokens, v.next_tokens)
    if not wide:
        return False, f"window {window}<=128 or sparse 2"
    return True, f"S1={v.s1}<=64, S2={v.s2}>128, window {window}>128"


def impl_dn(v: TilingView, s_outer: int) -> bool:
    """The transposed-softmax ("DN") path of the catch-all template (op_host ``CheckEnableDN``)."""
    return (not v.mask and not v.pse and not v.alibi and not v.paged and v.rope_mode == "none"
            and v.qk_dim <= 128 and v.v_dim <= 128 and not v.prefix
            and (v.quant_mode == "none" or v.full_quant_mode == "per_block") and s_outer * CV_RATIO > 64)


def impl_blocks(v: TilingView, flags: ImplFlags, q_lens: tuple, kv_lens: tuple) -> tuple[Arch35Blocks, bool]:
    """(blocks, dn flag) of the catch-all template for non-antiquant problems."""
    so, si, why = 64, 128, "default 64/128"
    pfa_layout = v.q_layout in ("BSH", "BSND", "TND") and flags.pfa_merge
    if v.v_dim <= 128 and v.mla_mode != "combine_d128":
        small, swhy = _small_head(v)
        if small:
            so, si, why = 32, 256, f"{swhy}: small-head 32/256"
        elif pfa_layout:
            so, si, why = 32, 256, "PFA merge with a BSH/BSND/TND query: 32/256"
        else:
            why = f"{swhy}; no PFA merge layout: 64/128"
    elif v.v_dim > 128 and v.mla_mode != "split_d512" and v.s1 != 1:
        if pfa_layout and v.v_dim <= 256:
            so, si, why = 32, 256, f"Dv={v.v_dim}<=256 with PFA merge: 32/256"
        else:
            why = f"Dv={v.v_dim}>128 prefill: 64/128"
    elif v.mla_mode == "split_d512" or (v.s1 == 1 and v.v_dim > 128):
        so = 32 if v.mla_mode == "split_d512" else 64
        why = "MLA D512: sOuter 32 (M 64)" if so == 32 else f"decode Dv={v.v_dim}>128: 64/128"
    if v.full_quant_mode == "mxfp8":
        so, si, why = 64, 512, "MXFP8: 64/512"
    dn = impl_dn(v, so)
    if dn and v.qk_dim == v.v_dim == 64 and all(q % 32 == 0 and k > 128 for q, k in zip(q_lens, kv_lens)):
        si, why = 256, why + "; DN path with D=Dv=64 and aligned lengths: sInner 256"
    if dn and v.full_quant_mode == "per_block" and v.qk_dim == v.v_dim and v.qk_dim <= 128:
        si, why = 256, why + "; DN per-block quant: sInner 256"
    if v.full_quant_mode == "mxfp8":
        so, si = 64, 512
    return Arch35Blocks(so, si, why + " (FusedInferAttentionScoreTilingImpl)"), dn


def impl_antiquant_blocks(v: TilingView, flags: ImplFlags) -> tuple[Arch35Blocks, int]:
    """(blocks with the config's sInner, sInner clipped to the longest KV) of the antiquant path."""
    so = 32 if (v.s1 > 1 and flags.gs_merge) else 16
    merged_prefill = v.s1 > 1 and flags.gs_merge
    if v.qk_dim <= 64:
        si = 512 if (v.pse or merged_prefill) else 1024
    elif v.qk_dim <= 128:
        si = 512
    elif v.qk_dim <= 256:
        si = 256
    else:
        si = 128
    seq = max(v.max_actual_seq, v.prefix_len)
    clipped = si if (v.max_actual_seq == 0 or si <= seq) else seq
    why = f"antiquant D={v.qk_dim}: sOuter {so}, sInner {si} (SetDequantBaseSize)"
    if clipped != si:
        why += f"; split uses sInner {clipped} (longest KV)"
    return Arch35Blocks(so, si, why), clipped


_IMPL_RULES = (
    # (antiquant, sOuter as the key sees it, sInner, D, Dv, config, needs rope split)
    (True, 16, 1024, 64, 64, 12, False), (True, 16, 512, 64, 64, 16, False), (True, 16, 512, 128, 128, 13, False),
    (True, 16, 256, 256, 256, 14, False), (True, 16, 128, 512, 512, 15, False), (True, 32, 512, 64, 64, 19, False),
    (True, 32, 512, 128, 128, 20, False), (True, 32, 256, 256, 256, 21, False), (True, 32, 128, 512, 512, 22, False),
    (False, 64, 64, 256, 256, 10, False), (False, 64, 64, 512, 512, 11, False), (False, 64, 256, 64, 64, 0, False),
    (False, 64, 256, 128, 128, 1, False), (False, 128, 128, 64, 64, 2, False), (False, 128, 128, 128, 128, 4, True),
    (False, 128, 128, 128, 128, 3, False), (False, 128, 128, 192, 128, 5, False), (False, 128, 128, 256, 128, 5, False),
    (False, 128, 128, 256, 256, 6, False), (False, 128, 128, 512, 512, 7, False), (False, 128, 256, 64, 64, 8, False),
    (False, 64, 128, 576, 512, 9, False), (False, 64, 256, 256, 256, 18, False), (False, 128, 256, 128, 128, 17, False),
    (False, 128, 128, 128, 64, 23, False), (False, 128, 128, 64, 128, 24, False), (False, 64, 256, 128, 64, 25, False),
    (False, 64, 256, 64, 128, 26, False), (False, 128, 512, 64, 64, 27, False), (False, 128, 512, 128, 128, 28, False),
)


def impl_config(v: TilingView, blocks: Arch35Blocks) -> tuple[int, str]:
    """The catch-all template's config (first matching rule; none -> config 0)."""
    d = v.qk_dim + (v.rope_dim if v.mla_mode == "split_d512" else 0)
    d, dv = d_bucket(d), d_bucket(v.v_dim)
    anti = v.quant_mode == "anti"
    so = blocks.s_outer if anti else blocks.s_outer * CV_RATIO
    for a, ro, ri, rd, rdv, cfg, rope in _IMPL_RULES:
        if a == anti and ro == so and ri == blocks.s_inner and rd == d and rdv == dv:
            if rope and v.rope_mode != "split":
                continue
            return cfg, f"config {cfg} = (sOuter {so}, S2 {ri}, D{d}, Dv{dv})"
    return 0, f"({so},{blocks.s_inner},D{d},Dv{dv}) matches no config rule: config 0"


def impl_s1_outer_split(v: TilingView, flags: ImplFlags, blocks: Arch35Blocks, dn: bool, q_lens: tuple,
                        kv_lens: tuple, aic: int, l2_bytes: int) -> tuple[bool, str]:
    """The catch-all template's S1 outer split: the KV the first cores read at once needs over half of L2."""
    if v.quant_mode != "none" or v.out_quant:
        return False, "quantised: no S1 outer split"
    if (v.prefix or v.kv_padding or v.q_padding or dn or v.sink or v.alibi or flags.gs_merge or flags.pfa_merge):
        return False, "prefix/padding/DN/sink/alibi/merge: no S1 outer split"
    if v.sparse_mode == 4 or (v.sparse_mode == 0 and v.mask):
        return False, "band mask or sparse 0 with a mask: no S1 outer split"
    if v.tensor_list or v.mla_mode == "split_d512":
        return False, "tensor list / MLA D512: no S1 outer split"
    if max(q_lens, default=0) < blocks.m_base:
        return False, f"longest query {max(q_lens, default=0)} < M base {blocks.m_base}: no S1 outer split"
    remaining = aic
    total = 0
    for kv in sorted(kv_lens, reverse=True):
        if remaining <= 0:
            break
        take = min(remaining, v.n2)
        total += take * kv
        remaining -= take
    need = total * (v.qk_dim + v.v_dim) * 2
    if need * 2 >= l2_bytes:
        return True, f"KV streamed at once {need} B >= half of L2 ({l2_bytes} B): S1 outer split"
    return False, f"KV streamed at once {need} B < half of L2: no S1 outer split"


def s1_outer_split_enabled(info) -> bool:
    """:func:`gqa_s1_outer_split` read from the verdict half's ``FiaInfo`` (for the GQA template's ``IsCapable``)."""
    plat = info.platform
    return gqa_s1_outer_split(batch=info.b_size, n2=info.n2_size, s2=info.s2_size, qk_dim=info.qk_head_dim,
                              v_dim=info.v_head_dim, aic=plat.aic, l2_bytes=plat.l2,
                              out_quant=info.is_out_quant_enable, prefix=info.sys_prefix_flag,
                              padding=info.q_padding_flag or info.kv_padding_flag, sink=info.learnable_sink_flag,
                              alibi=info.enable_alibi_pse, sparse_mode=info.sparse_mode, mask=info.atten_mask_flag)
