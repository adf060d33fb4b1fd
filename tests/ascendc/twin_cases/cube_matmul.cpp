// Cube matmul through the full data path: GM (ND) -> L1 (DataCopy + Nd2NzParams) -> L0A / L0B (LoadData)
// -> Mmad (optionally K split into two accumulating calls) -> Fixpipe NZ2ND -> GM (fp32 or 16-bit).
// A is [M, K]; B is [K, N] (bTrans = 0) or [N, K] (bTrans = 1); C is [M, N].
// Tiling (int32): M, N, K, bTrans, out16, kSplit, wrong. wrong = 1 flips the B-load transpose (a layout bug).
#include "kernel_operator.h"

using namespace AscendC;

namespace {
__aicore__ inline uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

template <typename T>
__aicore__ inline void MatmulImpl(GM_ADDR aG, GM_ADDR bG, GM_ADDR cG, GM_ADDR tG)
{
    GlobalTensor<int32_t> tiling;
    tiling.SetGlobalBuffer((__gm__ int32_t*)tG, 8);
    const uint32_t M = tiling.GetValue(0);
    const uint32_t N = tiling.GetValue(1);
    const uint32_t K = tiling.GetValue(2);
    const bool bTrans = tiling.GetValue(3) != 0;
    const bool out16 = tiling.GetValue(4) != 0;
    const uint32_t chunks = tiling.GetValue(5) != 0 ? 2 : 1;
    const bool wrong = tiling.GetValue(6) != 0;

    GlobalTensor<T> aGm;
    GlobalTensor<T> bGm;
    aGm.SetGlobalBuffer((__gm__ T*)aG, M * K);
    bGm.SetGlobalBuffer((__gm__ T*)bG, K * N);

    TPipe pipe;
    TBuf<TPosition::A1> l1Buf;
    TBuf<TPosition::A2> l0aBuf;
    TBuf<TPosition::B2> l0bBuf;
    TBuf<TPosition::CO1> l0cBuf;
    pipe.InitBuffer(l1Buf, 524288);
    pipe.InitBuffer(l0aBuf, 65536);
    pipe.InitBuffer(l0bBuf, 65536);
    pipe.InitBuffer(l0cBuf, 131072);
    LocalTensor<uint8_t> l1All = l1Buf.Get<uint8_t>();
    LocalTensor<T> a1 = l1All[0].ReinterpretCast<T>();
    LocalTensor<T> b1 = l1All[262144].ReinterpretCast<T>();
    LocalTensor<T> a2 = l0aBuf.Get<T>();
    LocalTensor<T> b2 = l0bBuf.Get<T>();
    LocalTensor<float> c1 = l0cBuf.Get<float>();

    const uint32_t kc = K / chunks;
    const uint32_t m1 = CeilDiv(M, 16);
    const uint32_t n1 = CeilDiv(N, 16);
    const uint32_t k1 = CeilDiv(kc, 16);
    for (uint32_t ci = 0; ci < chunks; ++ci) {
        const uint32_t k0 = ci * kc;
        if (ci > 0) {
            WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        }
        Nd2NzParams pa;
        pa.ndNum = 1;
        pa.nValue = M;
        pa.dValue = kc;
        pa.srcNdMatrixStride = 0;
        pa.srcDValue = K;
        pa.dstNzC0Stride = m1 * 16;
        pa.dstNzNStride = 1;
        pa.dstNzMatrixStride = 0;
        DataCopy(a1, aGm[k0], pa);
        Nd2NzParams pb;
        pb.ndNum = 1;
        if (bTrans) { // B stored [N, K]: rows n, columns k
            pb.nValue = N;
            pb.dValue = kc;
            pb.srcDValue = K;
            pb.dstNzC0Stride = n1 * 16;
            pb.dstNzNStride = 1;
            DataCopy(b1, bGm[k0], pb);
        } else { // B stored [K, N]: rows k, columns n
            pb.nValue = kc;
            pb.dValue = N;
            pb.srcDValue = N;
            pb.dstNzC0Stride = k1 * 16;
            pb.dstNzNStride = 1;
            DataCopy(b1, bGm[k0 * N], pb);
        }
        SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
        if (ci > 0) {
            WaitFlag<HardEvent::M_MTE1>(EVENT_ID1);
        }
#if __NPU_ARCH__ == 3510
        // L0A is Nz on Ascend 950: the L1 layout copies through unchanged
        LoadData(a2, a1, LoadData2DParams(0, static_cast<uint8_t>(k1 * m1), 1, 0, 0, false, 0));
#else
        // L0A is Zz on Atlas A2: one LoadData per 16-row block gathers that row's K fractals
        for (uint32_t i = 0; i < m1; ++i) {
            LoadData(a2[i * k1 * 256], a1[i * 256], LoadData2DParams(0, static_cast<uint8_t>(k1), static_cast<uint16_t>(m1), 0, 0, false, 0));
        }
#endif
        if (bTrans) {
            LoadData(b2, b1, LoadData2DParams(0, static_cast<uint8_t>(k1 * n1), 1, 0, 0, wrong, 0));
        } else {
            for (uint32_t i = 0; i < k1; ++i) {
                LoadData(b2[i * n1 * 256], b1[i * 256], LoadData2DParams(0, static_cast<uint8_t>(n1), static_cast<uint16_t>(k1), 0, 0, !wrong, 0));
            }
        }
        SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
        WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
        if (ci + 1 < chunks) {
            SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
        }
        MmadParams mp;
        mp.m = M;
        mp.n = N;
        mp.k = kc;
        mp.cmatrixInitVal = (ci == 0);
        Mmad(c1, a2, b2, mp);
        if (ci + 1 < chunks) {
            SetFlag<HardEvent::M_MTE1>(EVENT_ID1);
        }
    }
    SetFlag<HardEvent::M_FIX>(EVENT_ID0);
    WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
#if __NPU_ARCH__ == 3510
    FixpipeParamsArch3510<CO2Layout::ROW_MAJOR> fp(N, M, m1 * 16, N);
    fp.params.ndNum = 1;
#else
    FixpipeParamsV220 fp(N, M, m1 * 16, N, false);
    fp.ndNum = 1;
#endif
    if (out16) {
        fp.quantPre = std::is_same<T, half>::value ? QuantMode_t::F322F16 : QuantMode_t::F322BF16;
        GlobalTensor<T> cGm;
        cGm.SetGlobalBuffer((__gm__ T*)cG, M * N);
        Fixpipe<T, float, CFG_ROW_MAJOR>(cGm, c1, fp);
    } else {
        fp.quantPre = QuantMode_t::NoQuant;
        GlobalTensor<float> cGm;
        cGm.SetGlobalBuffer((__gm__ float*)cG, M * N);
        Fixpipe<float, float, CFG_ROW_MAJOR>(cGm, c1, fp);
    }
}
} // namespace

extern "C" __global__ __aicore__ void mm_f16(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    MatmulImpl<half>(a, b, c, tiling);
}

extern "C" __global__ __aicore__ void mm_bf16(GM_ADDR a, GM_ADDR b, GM_ADDR c, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIC_ONLY);
    MatmulImpl<bfloat16_t>(a, b, c, tiling);
}

#ifdef CVTILE_TWIN
#include <cstdio>
#include <string>
#include <vector>

static std::vector<uint8_t> Load(const std::string& path)
{
    std::vector<uint8_t> v;
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::fprintf(stderr, "cannot open %s\n", path.c_str());
        std::exit(2);
    }
    uint8_t buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
        v.insert(v.end(), buf, buf + n);
    }
    std::fclose(f);
    return v;
}
static void* ToGm(const std::vector<uint8_t>& v)
{
    void* p = cvtile_twin::GmAlloc(v.size());
    std::memcpy(p, v.data(), v.size());
    return p;
}

// usage: cube_matmul <dir> f16|bf16 ; reads dir/a.bin dir/b.bin dir/tiling.bin, writes dir/c.bin
int main(int argc, char** argv)
{
    if (argc < 3) {
        return 2;
    }
    const std::string dir = argv[1];
    const std::string dt = argv[2];
    std::vector<uint8_t> a = Load(dir + "/a.bin"), b = Load(dir + "/b.bin"), t = Load(dir + "/tiling.bin");
    int32_t tl[8];
    std::memcpy(tl, t.data(), sizeof(tl));
    const size_t cBytes = static_cast<size_t>(tl[0]) * tl[1] * (tl[4] ? 2 : 4);
    uint8_t* c = static_cast<uint8_t*>(cvtile_twin::GmAlloc(cBytes));
    cvtile_twin::SetTarget(__NPU_ARCH__ == 3510 ? "Ascend950" : "Ascend910B1");
    uint8_t* ga = static_cast<uint8_t*>(ToGm(a));
    uint8_t* gb = static_cast<uint8_t*>(ToGm(b));
    uint8_t* gt = static_cast<uint8_t*>(ToGm(t));
    if (dt == "f16") {
        CVTILE_TWIN_RUN(mm_f16, 1, KERNEL_TYPE_AIC_ONLY, ga, gb, c, gt);
    } else {
        CVTILE_TWIN_RUN(mm_bf16, 1, KERNEL_TYPE_AIC_ONLY, ga, gb, c, gt);
    }
    FILE* f = std::fopen((dir + "/c.bin").c_str(), "wb");
    std::fwrite(c, 1, cBytes, f);
    std::fclose(f);
    return 0;
}
#endif
