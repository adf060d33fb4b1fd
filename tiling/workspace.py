"""Workspace size and layout of the FIA templates (GM scratch shared by the cube and vector cores).

Model
-----
Every template reserves the AscendC library's system workspace first
(``LIBAPI_WORKSPACE``, 16 MiB, a runtime constant the same on A2/A3 and 950), then
its own areas. Layouts are returned as ``{area: (offset, bytes)}`` with offsets
counted from the start of the whole workspace.

arch22 ``FiaTilingNonQuant`` (preload depth 2, sized for all AIC cores):
``mm1`` (S, fp32) ``2 * cores * mm1``, ``vec1`` (P, fp16/bf16) ``2 * cores * mm1``,
``mm2`` (O_j, fp32) and ``vec2`` (running O, fp32) ``2 * cores * mm2`` each, with
``mm1 = aligned sInner * min(G*S1, M base)`` and ``mm2 = aligned D * min(G*S1, M base)``
elements. With FD: the partial outputs ``cores * 2 * M base * aligned D`` fp32
(2: a core holds at most a head and a tail piece), then the row sums and row maxes,
``cores * 2 * M base * 8`` fp32 each (8 = one 32-byte block per row). A tiling sink
(no actual lengths) sizes everything for M base 512, sInner 512 and FD on.

arch22 ``FiaTilingNonQuantMla``: the same four areas with ``min(G*S1, M)`` rounded up
to 16, plus two ``2 * cores * M`` int32/fp32 areas (AMLA n-update and softmax sum);
FD areas scale with N2.

The legacy IFA route (``IFATiling::CalcWorkSpace``) stages the matmul results in GM in every perf mode but
all-vector (mode 1): ``preload * cores`` copies of S (fp32, or int32 / fp16 with antiquant), P (fp16/bf16,
int8 with antiquant, halved for int4 KV), O_j and the running O, the preprocessed query (antiquant only)
and two ``gMax`` rows (n-update, softmax sum), with ``S = msd * align(sInner) * G*S1`` and ``O = msd *
align(D) * G*S1`` elements (``msd``: the antiquant iteration count, 1 without); preload is 4 in cube-view
mode, 6 in DD mode, 2 in MLA mode and 1 otherwise. Sizes that op_host computes through a ``float`` are
rounded to float32 here too.

The legacy PFA route's TND branch (``PromptFlashAttentionTiling::RunBigKernelTilingWithParams``) sizes one
workspace per cube core: three copies of the S2 step's scores (``nRatio * gBase * S1 block * S2 block``
elements) and four of the output rows (``S1 block * align16(D)``), all in the softmax dtype (4 bytes, 2 for
an fp16 query in high-performance mode or an int8 query), times the AIC count, plus the 16 MiB reserve.

arch35 templates: ``bmm2`` / ``vec2`` staging only when ``Dv > 128`` (3 slots per
core: preload 2 + 1), FD areas per used core: ``2 * M * Dv`` partial outputs and
``2 * M * 8`` sums and maxes; paged attention adds 256 bytes per vector core. The
catch-all template's FD areas are ``B * N1 * kv_splits * align32(Dv)`` and
``B * N1 * kv_splits * 8`` floats (sum and max).

Invariants
----------
* ``total == sum of the area sizes``; areas do not overlap and appear in kernel order.
"""

from __future__ import annotations

__all__ = ["LIBAPI_WORKSPACE", "Workspace", "ifa_staging_workspace", "arch22_gqa_workspace", "arch22_mla_workspace",
           "arch35_gqa_workspace",
           "arch35_mla_workspace", "arch35_impl_workspace", "arch35_max_gqa_workspace", "fixed_workspace",
           "pfa_tnd_workspace"]

LIBAPI_WORKSPACE = 16 * 1024 * 1024
FP32 = 4


class Workspace:
    """An ordered list of named areas; ``layout`` gives ``{name: (offset, bytes)}``."""

    def __init__(self):
        self.areas: list[tuple[str, int]] = []

    def add(self, name: str, nbytes: int) -> "Workspace":
        if nbytes:
            self.areas.append((name, int(nbytes)))
        return self

    @property
    def total(self) -> int:
        return sum(n for _, n in self.areas)

    @property
    def layout(self) -> dict:
        out, off = {}, 0
        for name, n in self.areas:
            out[name] = (off, n)
            off += n
        return out


def _fd_areas(ws: Workspace, out_elems: int, lse_elems_each: int) -> Workspace:
    return ws.add("fd_partial_out", out_elems * FP32).add("fd_row_sum", lse_elems_each * FP32) \
        .add("fd_row_max", lse_elems_each * FP32)


def arch22_gqa_workspace(*, cores: int, m_base: int, s2_base_aligned: int, head_dim_aligned: int, gs1: int,
                         fd: bool, kv_bytes: int = 2, max_workspace: bool = False) -> Workspace:
    """``FiaTilingNonQuant::CalcWorkspaceSize`` (or ``CalcMaxWorkspaceSize`` for a tiling sink)."""
    if max_workspace:
        m_base, mm1, mm2 = 512, 512 * 512, head_dim_aligned * 512
        fd = True
    else:
        rows = min(gs1, m_base)
        mm1, mm2 = s2_base_aligned * rows, head_dim_aligned * rows
    pre = 2
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ws.add("mm1_scores", pre * cores * mm1 * FP32).add("vec1_probs", pre * cores * mm1 * kv_bytes)
    ws.add("mm2_out", pre * cores * mm2 * FP32).add("vec2_out", pre * cores * mm2 * FP32)
    if fd:
        rows_fd = cores * 2 * m_base
        _fd_areas(ws, rows_fd * head_dim_aligned, rows_fd * 8)
    return ws


def arch22_mla_workspace(*, cores: int, m_base: int, s2_base_aligned: int, head_dim_aligned: int, gs1: int,
                         n2: int, fd: bool, max_workspace: bool = False) -> Workspace:
    """``FiaTilingNonQuantMla::CalcWorkspaceSize`` (or its tiling-sink maximum)."""
    if max_workspace:
        mm1, mm2 = 512 * m_base, head_dim_aligned * m_base
        fd = True
    else:
        rows = (min(gs1, m_base) + 15) // 16 * 16
        mm1, mm2 = s2_base_aligned * rows, head_dim_aligned * rows
    pre = 2
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ws.add("mm1_scores", pre * cores * mm1 * FP32).add("vec1_probs", pre * cores * mm1 * 2)
    ws.add("mm2_out", pre * cores * mm2 * FP32).add("vec2_out", pre * cores * mm2 * FP32)
    ws.add("amla_n_update", pre * cores * m_base * 4).add("amla_softmax_sum", pre * cores * m_base * 4)
    if fd:
        rows_fd = cores * 2 * n2 * m_base
        _fd_areas(ws, rows_fd * head_dim_aligned, rows_fd * 8)
    return ws


def ifa_staging_workspace(ws: Workspace, *, perf_mode: int, cores: int, s_inner: int, g: int, s1: int,
                          head_dim: int, antiquant: bool = False, int4: bool = False, high_precision: bool = False,
                          rope: bool = False, amla: bool = False, tnd: bool = False, prefix_batch: int = 0) -> Workspace:
    """The matmul staging areas of the legacy IFA tiling (``IFATiling::CalcUbBmm`` and
    ``CalcWorkSpaceForBmmAll``), added to ``ws``; nothing in all-vector mode (1). ``prefix_batch``: the
    query batch with a system prefix (the areas hold one copy per batch), else 0."""
    import numpy as np

    if perf_mode == 1:
        return ws
    msd = (4 if int4 else 3 if high_precision else 2) if antiquant else 1
    block = 64 if int4 else 32
    s_align = -(-s_inner // block) * block
    d_align = -(-head_dim // block) * block
    g_max = (128 if antiquant else 256) if (1 < s1 <= 16 and not rope) else 128
    cube_m = g * s1
    if perf_mode == 5:                                    # MLA: the cube's M is capped (and 16-aligned with AMLA)
        cube_m = min(cube_m, 128 if tnd else g_max)
        if amla:
            cube_m = -(-cube_m // 16) * 16
    if rope:
        mm, bmm2 = s_align * cube_m, d_align * cube_m
    else:
        mm, bmm2 = msd * s_align * cube_m, msd * d_align * cube_m
    q_pre = msd * g * (d_align + 64) * s1
    if prefix_batch:
        mm, bmm2 = mm * prefix_batch, bmm2 * prefix_batch
    mm_e, vec1_e, bmm2_e, vec2_e, qpre_e, ratio = 4, 2, 4, 4, 0, 1.0
    if antiquant:
        mm_e = bmm2_e = vec2_e = 2 if rope else 4
        vec1_e, qpre_e, ratio = 1, 1, 0.5 if int4 else 1.0
    pre = {3: 4, 6: 6, 5: 2}.get(perf_mode, 1)

    def via_float(n: int) -> int:                     # static_cast<size_t>(static_cast<float>(n) * ratio)
        return int(np.float32(np.float32(n) * np.float32(ratio)))

    ws.add("ifa_mm1_scores", pre * mm * cores * mm_e)
    ws.add("ifa_vec1_probs", pre * via_float(mm * (msd if rope else 1) * cores * vec1_e))
    ws.add("ifa_mm2_out", pre * bmm2 * cores * bmm2_e).add("ifa_vec2_out", pre * bmm2 * cores * vec2_e)
    ws.add("ifa_query_pre", pre * via_float((q_pre if rope else bmm2) * cores * qpre_e))
    ws.add("ifa_n_update", pre * g_max * cores * 4).add("ifa_softmax_sum", pre * g_max * cores * 4)
    return ws


def pfa_tnd_workspace(*, aic: int, s1_block: int, s2_block: int, n_ratio: int, g_base: int, d_aligned: int,
                      softmax_bytes: int) -> Workspace:
    """The legacy PFA TND branch (the workspace set in ``RunBigKernelTilingWithParams``; the score tile is
    ``SetTensorSizeParams``' ``bmm1ResUbSize``): per cube core 3 score tiles of the whole S2 step and 4 output
    tiles, in the softmax dtype."""
    scores = n_ratio * g_base * s1_block * s2_block * softmax_bytes
    out = s1_block * d_aligned * softmax_bytes
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    return ws.add("pfa_scores", 3 * scores * aic).add("pfa_out", 4 * out * aic)


def _dv_block(dv: int) -> int:
    for c in (64, 128, 256, 512):
        if dv <= c:
            return c
    return 0


def arch35_gqa_workspace(*, used_cores: int, m_base: int, v_dim: int, fd: bool) -> Workspace:
    """``FiaTilingNonQuantArch35::CalcWorkspaceSize`` (also the MXFP8 / full-quant GQA templates)."""
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    dvb = _dv_block(v_dim)
    if v_dim > 128:
        bmm2 = m_base * (512 if dvb > 256 else dvb) * FP32
        vec2 = m_base * dvb * FP32 if dvb > 256 else 0
        ws.add("bmm2_stage", bmm2 * 3 * used_cores).add("vec2_stage", vec2 * 3 * used_cores)
    if fd:
        _fd_areas(ws, used_cores * 2 * m_base * v_dim, used_cores * 2 * m_base * 8)
    return ws


def arch35_max_gqa_workspace(*, vector_cores: int, dv_max: int = 512, m_max: int = 128) -> Workspace:
    """The tiling-sink maximum of the arch35 GQA / MXFP8 templates (M 128, Dv 512, FD on)."""
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    ws.add("bmm2_stage", vector_cores * 3 * m_max * dv_max * FP32)
    ws.add("paged_align", vector_cores * 2 * 2 * 64)
    _fd_areas(ws, vector_cores * 2 * m_max * dv_max, vector_cores * 2 * m_max * 8)
    return ws


def arch35_mla_workspace(*, used_cores: int, fd: bool, max_workspace: bool = False, aic: int = 0) -> Workspace:
    """``FiaTilingNonQuantMlaArch35``: FD areas only (M 64, Dv 512, 2 slots per core)."""
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    if max_workspace:
        used_cores, fd = aic, True
    if fd:
        _fd_areas(ws, used_cores * 2 * 64 * 512, used_cores * 2 * 64 * 8)
    return ws


def arch35_impl_workspace(*, vector_cores: int, aic: int, s_outer: int, v_dim: int, dn: bool, fd: bool,
                          accum_out_elems: int, lse_elems: int, paged: bool, max_workspace: bool,
                          antiquant: bool = False, qk_dim: int = 0) -> Workspace:
    """``FusedInferAttentionScoreTilingImpl::GetWorkspace`` (normal and antiquant)."""
    ws = Workspace().add("libapi", LIBAPI_WORKSPACE)
    if antiquant:
        ws.add("antiquant_l1_stage", 256 * 1024 * vector_cores).add("antiquant_l0c_stage", 128 * 1024 * vector_cores)
        if max_workspace:
            _fd_areas(ws, aic * qk_dim, aic * 8)
        elif fd:
            _fd_areas(ws, accum_out_elems, lse_elems)
        if paged:
            ws.add("paged_align", vector_cores * 64 * 2)
        return ws
    dvb = _dv_block(v_dim)
    if (not dn and v_dim > 128) or (dn and v_dim > 192):
        m = s_outer * 2
        bmm2 = m * (512 if dvb > 256 else dvb) * FP32
        vec2 = m * dvb * FP32 if dvb > 256 else 0
        ws.add("bmm2_stage", bmm2 * 3 * vector_cores).add("vec2_stage", vec2 * 3 * vector_cores)
    if max_workspace:
        dv64 = (v_dim + 63) // 64 * 64
        ws.add("fd_partial_out", aic * dv64 * FP32)
        ws.add("fd_row_sum", aic * 32 * 2).add("fd_row_max", aic * 32 * 2)
    elif fd:
        _fd_areas(ws, accum_out_elems, lse_elems)
    if paged:
        ws.add("paged_align", vector_cores * 2 * 2 * 64)
    return ws


def fixed_workspace(nbytes: int, name: str = "empty_tensor") -> Workspace:
    """A template that only needs a fixed amount (the arch22 empty-tensor template asks for 16 MiB)."""
    return Workspace().add(name, nbytes)
