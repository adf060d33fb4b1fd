// Cube -> vector hand-off in a KERNEL_TYPE_MIX_AIC_1_2 kernel, ITERS iterations per group, two slots.
//   mix_gm (both arches): the AIC computes S = Q_it @ K^T (32 x 64, K = 32, fp16 in, fp32 out), Fixpipes it to
//     the group's GM workspace slot it % 2 and sets CrossCoreSetFlag<2, PIPE_FIX>(C2V); each AIV waits, reads its
//     16 rows, computes P = exp(S * 0.125 - 1), writes them to out and sets CrossCoreSetFlag<2, PIPE_MTE3>(V2C),
//     which the AIC waits for before it reuses the slot (and drains at the end).
//   mix_ub (Ascend 950 only): the same computation with Fixpipe L0C -> UB (dual destination, M split) into a UB
//     slot of both AIVs, synchronised with mode 4 flags (id for AIV0, 16 + id for AIV1).
// Inputs: q [groups * ITERS, 32, 32] fp16, k [64, 32] fp16. Output: out [groups * ITERS, 32, 64] fp32.
#include "kernel_operator.h"

using namespace AscendC;

namespace {
constexpr uint32_t ITERS = 5;
constexpr uint32_t SM = 32, SN = 64, SK = 32;
constexpr uint16_t C2V = 7;
constexpr uint16_t V2C = 8;

// Cube side: K^T in L0B once, then one Mmad per iteration into L0C.
struct Cube {
    TBuf<TPosition::A1> l1Buf;
    TBuf<TPosition::A2> l0aBuf;
    TBuf<TPosition::B2> l0bBuf;
    TBuf<TPosition::CO1> l0cBuf;
    LocalTensor<half> a1, b1, a2, b2;
    LocalTensor<float> c1;
    GlobalTensor<half> qGm, kGm;

    __aicore__ inline void Init(TPipe& pipe, GM_ADDR q, GM_ADDR k, uint32_t qElems)
    {
        pipe.InitBuffer(l1Buf, 16384);
        pipe.InitBuffer(l0aBuf, 4096);
        pipe.InitBuffer(l0bBuf, 4096);
        pipe.InitBuffer(l0cBuf, 8192);
        a1 = l1Buf.Get<half>();
        b1 = l1Buf.Get<half>()[4096];
        a2 = l0aBuf.Get<half>();
        b2 = l0bBuf.Get<half>();
        c1 = l0cBuf.Get<float>();
        qGm.SetGlobalBuffer((__gm__ half*)q, qElems);
        kGm.SetGlobalBuffer((__gm__ half*)k, SN * SK);
        Nd2NzParams pk(1, SN, SK, 0, SK, SN, 1, 0);
        DataCopy(b1, kGm, pk);
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID1);
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID1);
        LoadData(b2, b1, LoadData2DParams(0, (SK / 16) * (SN / 16), 1, 0, 0, false, 0));
        SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        SetFlag<HardEvent::M_MTE1>(EVENT_ID0);
    }
    // Mmad for tile `tile` of q into c1 (waits for L0C to be drained by the caller's FIX_M)
    __aicore__ inline void Compute(uint32_t tile)
    {
        WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        Nd2NzParams pq(1, SM, SK, 0, SK, SM, 1, 0);
        DataCopy(a1, qGm[tile * SM * SK], pq);
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        WaitFlag<HardEvent::M_MTE1>(EVENT_ID0);
#if __NPU_ARCH__ == 3510
        LoadData(a2, a1, LoadData2DParams(0, (SK / 16) * (SM / 16), 1, 0, 0, false, 0));
#else
        for (uint32_t i = 0; i < SM / 16; ++i) {
            LoadData(a2[i * (SK / 16) * 256], a1[i * 256], LoadData2DParams(0, SK / 16, SM / 16, 0, 0, false, 0));
        }
#endif
        SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
        WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
        MmadParams mp;
        mp.m = SM;
        mp.n = SN;
        mp.k = SK;
        Mmad(c1, a2, b2, mp);
        SetFlag<HardEvent::M_MTE1>(EVENT_ID0);
        SetFlag<HardEvent::M_FIX>(EVENT_ID0);
        WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
    }
    __aicore__ inline void Drain()
    {
        WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        WaitFlag<HardEvent::M_MTE1>(EVENT_ID0);
    }
};

// Vector side: 16 rows x 64 columns of S -> P = exp(S * 0.125 - 1)
__aicore__ inline void Softish(const LocalTensor<float>& t)
{
    Muls(t, t, 0.125f, 16 * SN);
    Adds(t, t, -1.0f, 16 * SN);
    Exp(t, t, 16 * SN);
}
} // namespace

extern "C" __global__ __aicore__ void mix_gm(GM_ADDR q, GM_ADDR k, GM_ADDR ws, GM_ADDR out)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    TPipe pipe;
    const uint32_t groups = GetBlockNum();
    if ASCEND_IS_AIC {
        const uint32_t g = GetBlockIdx();
        Cube cube;
        cube.Init(pipe, q, k, groups * ITERS * SM * SK);
        GlobalTensor<float> wsGm;
        wsGm.SetGlobalBuffer((__gm__ float*)ws + g * 2 * SM * SN, 2 * SM * SN);
        for (uint32_t it = 0; it < ITERS; ++it) {
            if (it >= 2) {
                CrossCoreWaitFlag(V2C); // both AIVs released slot it % 2
            }
            cube.Compute(g * ITERS + it);
            FixpipeParamsV220 fp(SN, SM, SM, SN, false);
            Fixpipe(wsGm[(it % 2) * SM * SN], cube.c1, fp);
            CrossCoreSetFlag<2, PIPE_FIX>(C2V);
        }
        for (uint32_t it = (ITERS >= 2 ? ITERS - 2 : 0); it < ITERS; ++it) {
            CrossCoreWaitFlag(V2C);
        }
        cube.Drain();
    }
    if ASCEND_IS_AIV {
        const uint32_t g = GetBlockIdx() / GetTaskRatio();
        const uint32_t sub = GetSubBlockIdx();
        TBuf<TPosition::VECCALC> ubBuf;
        pipe.InitBuffer(ubBuf, 16 * SN * 4);
        LocalTensor<float> t = ubBuf.Get<float>();
        GlobalTensor<float> wsGm, outGm;
        wsGm.SetGlobalBuffer((__gm__ float*)ws + g * 2 * SM * SN, 2 * SM * SN);
        outGm.SetGlobalBuffer((__gm__ float*)out, groups * ITERS * SM * SN);
        SetFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
        for (uint32_t it = 0; it < ITERS; ++it) {
            CrossCoreWaitFlag(C2V);
            WaitFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
            DataCopy(t, wsGm[(it % 2) * SM * SN + sub * 16 * SN], 16 * SN);
            SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
            WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
            Softish(t);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(outGm[((g * ITERS + it) * SM + sub * 16) * SN], t, 16 * SN);
            CrossCoreSetFlag<2, PIPE_MTE3>(V2C);
            SetFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
        }
        WaitFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
    }
}

#if __NPU_ARCH__ == 3510
constexpr FixpipeConfig CFG_ROW_MAJOR_UB = {CO2Layout::ROW_MAJOR, true};

extern "C" __global__ __aicore__ void mix_ub(GM_ADDR q, GM_ADDR k, GM_ADDR out)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    TPipe pipe;
    const uint32_t groups = GetBlockNum();
    TBuf<TPosition::VECCALC> ubBuf; // two 16 x 64 float slots in each AIV's UB
    pipe.InitBuffer(ubBuf, 2 * 16 * SN * 4);
    if ASCEND_IS_AIC {
        const uint32_t g = GetBlockIdx();
        Cube cube;
        cube.Init(pipe, q, k, groups * ITERS * SM * SK);
        for (uint32_t it = 0; it < ITERS; ++it) {
            if (it >= 2) {
                CrossCoreWaitFlag<4, PIPE_FIX>(V2C);      // AIV0 freed slot it % 2
                CrossCoreWaitFlag<4, PIPE_FIX>(16 + V2C); // AIV1 freed slot it % 2
            }
            cube.Compute(g * ITERS + it);
            FixpipeParamsArch3510<CO2Layout::ROW_MAJOR> fp(SN, SM, SM, SN);
            fp.dualDstCtl = 1; // rows 0..15 to AIV0, rows 16..31 to AIV1
            Fixpipe<float, float, CFG_ROW_MAJOR_UB>(ubBuf.Get<float>()[(it % 2) * 16 * SN], cube.c1, fp);
            CrossCoreSetFlag<4, PIPE_FIX>(C2V);
            CrossCoreSetFlag<4, PIPE_FIX>(16 + C2V);
        }
        for (uint32_t it = (ITERS >= 2 ? ITERS - 2 : 0); it < ITERS; ++it) {
            CrossCoreWaitFlag<4, PIPE_FIX>(V2C);
            CrossCoreWaitFlag<4, PIPE_FIX>(16 + V2C);
        }
        cube.Drain();
    }
    if ASCEND_IS_AIV {
        const uint32_t g = GetBlockIdx() / GetTaskRatio();
        const uint32_t sub = GetSubBlockIdx();
        GlobalTensor<float> outGm;
        outGm.SetGlobalBuffer((__gm__ float*)out, groups * ITERS * SM * SN);
        for (uint32_t it = 0; it < ITERS; ++it) {
            CrossCoreWaitFlag<4, PIPE_V>(C2V);
            LocalTensor<float> t = ubBuf.Get<float>()[(it % 2) * 16 * SN];
            Softish(t);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(outGm[((g * ITERS + it) * SM + sub * 16) * SN], t, 16 * SN);
            CrossCoreSetFlag<4, PIPE_MTE3>(V2C);
        }
    }
}
#endif

#ifdef CVTILE_TWIN
#include <cstdio>
#include <string>
#include <vector>

// usage: mix_pipeline <dir> gm|ub <groups>; reads dir/q.bin dir/k.bin, writes dir/out.bin
int main(int argc, char** argv)
{
    if (argc < 4) {
        return 2;
    }
    const std::string dir = argv[1];
    const std::string mode = argv[2];
    const uint32_t groups = static_cast<uint32_t>(std::atoi(argv[3]));
    const size_t qBytes = groups * ITERS * SM * SK * 2, kBytes = SN * SK * 2, oBytes = groups * ITERS * SM * SN * 4;
    uint8_t* q = static_cast<uint8_t*>(cvtile_twin::GmAlloc(qBytes));
    uint8_t* k = static_cast<uint8_t*>(cvtile_twin::GmAlloc(kBytes));
    uint8_t* ws = static_cast<uint8_t*>(cvtile_twin::GmAlloc(groups * 2 * SM * SN * 4));
    uint8_t* out = static_cast<uint8_t*>(cvtile_twin::GmAlloc(oBytes));
    FILE* f = std::fopen((dir + "/q.bin").c_str(), "rb");
    if (!f || std::fread(q, 1, qBytes, f) != qBytes) return 2;
    std::fclose(f);
    f = std::fopen((dir + "/k.bin").c_str(), "rb");
    if (!f || std::fread(k, 1, kBytes, f) != kBytes) return 2;
    std::fclose(f);
    if (mode == "gm") {
        CVTILE_TWIN_RUN(mix_gm, groups, KERNEL_TYPE_MIX_AIC_1_2, q, k, ws, out);
    } else {
#if __NPU_ARCH__ == 3510
        CVTILE_TWIN_RUN(mix_ub, groups, KERNEL_TYPE_MIX_AIC_1_2, q, k, out);
#else
        std::fprintf(stderr, "mix_ub needs __NPU_ARCH__ 3510\n");
        return 2;
#endif
    }
    f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(out, 1, oBytes, f);
    std::fclose(f);
    return 0;
}
#endif
