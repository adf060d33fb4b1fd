// Calls every overload declared in the header at least once, so that each twin definition is instantiated,
// and checks the formats the other cases do not reach: int8 Mmad with an NZ Fixpipe, GEMV (m = 1), fp32
// Mmad with K0 = 8, repeat-form Duplicate / Cast / Sub, DataCopyParams copies, int conversions.
// KERNEL_TYPE_MIX_AIC_1_2 on 2 groups. The host compares res[] with values it computes itself.
#include "kernel_operator.h"

using namespace AscendC;

namespace {
// res layout (float / int32 slots of 1024 each)
constexpr uint32_t R_I8 = 0;      // int32 [16 x 16] int8 Mmad, NZ Fixpipe
constexpr uint32_t R_GEMV = 1024; // float [16] GEMV
constexpr uint32_t R_F32 = 2048;  // float [16 x 16] fp32 Mmad, k = 12
constexpr uint32_t R_VEC = 3072;  // float [512] repeat forms (group 0, AIV 0)
constexpr uint32_t R_INT = 4096;  // int32 [64] integer casts (group 0, AIV 0)
constexpr uint32_t R_SYS = 5120;  // int32 per core: blockIdx, blockNum, subIdx, subNum, ratio
constexpr uint32_t R_VSCR = 6144; // float [4 x 128] vector-core GM scratch
constexpr uint32_t R_CSCR = 7168; // float [256] cube-core GM scratch (read only)
constexpr uint32_t R_DN = 7680;   // float [256] NZ2DN output (arch35)
constexpr uint32_t R_SIZE = 8192;

__aicore__ inline void CubePart(GM_ADDR in, GM_ADDR res)
{
    TPipe pipe;
    TBuf<TPosition::A1> l1Buf;
    TBuf<TPosition::A2> l0aBuf;
    TBuf<TPosition::B2> l0bBuf;
    TBuf<TPosition::CO1> l0cBuf;
    pipe.InitBuffer(l1Buf, 65536);
    pipe.InitBuffer(l0aBuf, 8192);
    pipe.InitBuffer(l0bBuf, 8192);
    pipe.InitBuffer(l0cBuf, 8192);
    GlobalTensor<int32_t> resI;
    GlobalTensor<float> resF;
    resI.SetGlobalBuffer((__gm__ int32_t*)res, R_SIZE);
    resF.SetGlobalBuffer((__gm__ float*)res, R_SIZE);
    const uint32_t g = GetBlockIdx();

    // int8: A [16, 32], B [16, 32] (= B^T) from in + 0 / in + 512
    GlobalTensor<int8_t> a8, b8;
    a8.SetGlobalBuffer((__gm__ int8_t*)in, 512);
    b8.SetGlobalBuffer((__gm__ int8_t*)in + 512, 512);
    LocalTensor<int8_t> a1 = l1Buf.Get<int8_t>(), b1 = l1Buf.GetWithOffset<int8_t>(512, 4096);
    DataCopy(a1, a8, Nd2NzParams(1, 16, 32, 0, 32, 16, 1, 0));
    DataCopy(b1, b8, Nd2NzParams(1, 16, 32, 0, 32, 16, 1, 0));
    SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    LoadData(l0aBuf.Get<int8_t>(), a1, LoadData2DParams(0, 1, 1, 0, 0, false, 0));
    LoadData(l0bBuf.Get<int8_t>(), b1, LoadData2DParams(0, 1, 1, 0, 0, false, 0));
    SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
    WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
    LocalTensor<int32_t> ci = l0cBuf.Get<int32_t>();
    MmadParams mp(16, 16, 32, 0, false, true);
    Mmad(ci, l0aBuf.Get<int8_t>(), l0bBuf.Get<int8_t>(), mp);
    SetFlag<HardEvent::M_FIX>(EVENT_ID0);
    WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
    if (g == 0) {
        FixpipeParamsV220 fp(16, 16, 16, 16 * 16 * 4 / 32, false);
        Fixpipe<int32_t, int32_t, CFG_NZ>(resI[R_I8], ci, fp);
    }
    // the same result to L1 through the V220 block (NZ), then L1 -> GM is not a path we check numerically
    Fixpipe<int32_t, int32_t, CFG_NZ>(l1Buf.Get<int32_t>()[8192], ci, FixpipeParamsV220(16, 16, 16, 64, false));
    SetFlag<HardEvent::FIX_M>(EVENT_ID0);
    WaitFlag<HardEvent::FIX_M>(EVENT_ID0);

    // GEMV: A [1, 32] half at in + 1024, B^T [16, 32] half at in + 1088
    GlobalTensor<half> ah, bh;
    ah.SetGlobalBuffer((__gm__ half*)(in + 1024), 32);
    bh.SetGlobalBuffer((__gm__ half*)(in + 1088), 512);
    LocalTensor<half> a1h = l1Buf.Get<half>(), b1h = l1Buf.Get<half>()[2048];
    SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
    WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
    DataCopy(a1h, ah, Nd2NzParams(1, 1, 32, 0, 32, 1, 1, 0));
    DataCopy(b1h, bh, Nd2NzParams(1, 16, 32, 0, 32, 16, 1, 0));
    SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    LoadData(l0aBuf.Get<half>(), a1h, LoadData2DParams(0, 1, 1, 0, 0, false, 0));
    LoadData(l0bBuf.Get<half>(), b1h, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
    SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
    WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
    LocalTensor<float> cf = l0cBuf.Get<float>();
    MmadParams mg;
    mg.m = 1;
    mg.n = 16;
    mg.k = 32;
    Mmad(cf, l0aBuf.Get<half>(), l0bBuf.Get<half>(), mg);
    SetFlag<HardEvent::M_FIX>(EVENT_ID0);
    WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
    if (g == 0) {
        Fixpipe(resF[R_GEMV], cf, FixpipeParamsV220(16, 1, 16, 16, false));
    }
    SetFlag<HardEvent::FIX_M>(EVENT_ID0);
    WaitFlag<HardEvent::FIX_M>(EVENT_ID0);

    // fp32: A [16, 12] at in + 2560, B^T [16, 12] at in + 3328, k = 12 (K0 = 8, two K fractals)
    GlobalTensor<float> af, bf;
    af.SetGlobalBuffer((__gm__ float*)(in + 2560), 192);
    bf.SetGlobalBuffer((__gm__ float*)(in + 3328), 192);
    LocalTensor<float> a1f = l1Buf.Get<float>(), b1f = l1Buf.Get<float>()[1024];
    SetFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
    WaitFlag<HardEvent::MTE1_MTE2>(EVENT_ID0);
    DataCopy(a1f, af, Nd2NzParams(1, 16, 12, 0, 12, 16, 1, 0));
    DataCopy(b1f, bf, Nd2NzParams(1, 16, 12, 0, 12, 16, 1, 0));
    SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0);
    LoadData(l0aBuf.Get<float>(), a1f, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
    LoadData(l0bBuf.Get<float>(), b1f, LoadData2DParams(0, 2, 1, 0, 0, false, 0));
    SetFlag<HardEvent::MTE1_M>(EVENT_ID0);
    WaitFlag<HardEvent::MTE1_M>(EVENT_ID0);
    MmadParams m32;
    m32.m = 16;
    m32.n = 16;
    m32.k = 12;
    m32.kDirectionAlign = false;
    Mmad(cf, l0aBuf.Get<float>(), l0bBuf.Get<float>(), m32);
    SetFlag<HardEvent::M_FIX>(EVENT_ID0);
    WaitFlag<HardEvent::M_FIX>(EVENT_ID0);
#if __NPU_ARCH__ == 3510
    if (g == 0) {
        FixpipeParamsArch3510<CO2Layout::ROW_MAJOR> fp(16, 16, 16, 16);
        Fixpipe<float, float, CFG_ROW_MAJOR>(resF[R_F32], cf, fp);
    }
    FixpipeParamsArch3510<CO2Layout::NZ> fz(16, 16, 16, 256);
    Fixpipe<float, float, CFG_NZ>(l1Buf.Get<float>()[4096], cf, fz);
    FixpipeParamsArch3510<CO2Layout::COLUMN_MAJOR> fc(16, 16, 16, 16);
    fc.params.srcNzC0Stride = 1;
    Fixpipe<float, float, CFG_COLUMN_MAJOR>(resF[R_DN], cf, fc);
#else
    if (g == 0) {
        Fixpipe(resF[R_F32], cf, FixpipeParamsV220(16, 16, 16, 16, false));
    }
    // GM -> L0B directly (arch22 only)
    LoadData(l0bBuf.Get<float>(), bf, LoadData2DParams(0, 1, 1, 0, 0, false, 0));
#endif
    // L1 <-> GM contiguous
    GlobalTensor<float> scratch;
    scratch.SetGlobalBuffer((__gm__ float*)res + R_CSCR, 256);
    DataCopy(a1f, scratch, 64);
    DataCopy(a1f, scratch, DataCopyParams(1, 8, 0, 0));
    SetFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    PipeBarrier<PIPE_ALL>();
    // all AICs meet (mode 0)
    CrossCoreSetFlag<0, PIPE_FIX>(1);
    CrossCoreWaitFlag<0, PIPE_FIX>(1);
}

__aicore__ inline void VecPart(GM_ADDR in, GM_ADDR res)
{
    TPipe pipe;
    pipe.Init();
    pipe.Reset();
    TBuf<TPosition::VECIN> inBuf;
    TBuf<TPosition::VECCALC> ubBuf;
    pipe.InitBuffer(inBuf, 4096);
    pipe.InitBuffer(ubBuf, 32768);
    GlobalTensor<float> inF, resF;
    GlobalTensor<int32_t> resI;
    inF.SetGlobalBuffer((__gm__ float*)(in + 4096), 1024);
    resF.SetGlobalBuffer((__gm__ float*)res, R_SIZE);
    resI.SetGlobalBuffer((__gm__ int32_t*)res, R_SIZE);
    const bool lead = GetBlockIdx() == 0;
    LocalTensor<float> x = inBuf.Get<float>(256);
    LocalTensor<uint8_t> ub = ubBuf.Get<uint8_t>();
    LocalTensor<float> o = ub[0].ReinterpretCast<float>();
    LocalTensor<float> t = ub[4096].ReinterpretCast<float>();
    DataCopy(x, inF, DataCopyParams(1, 32, 0, 0)); // 32 blocks = 256 floats
    SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
    // repeat forms, checked: o[0..127] = 5 (Duplicate, bit mask, 2 repeats) then o[0..63] -= x (count mask)
    uint64_t full[2] = {~0ull, 0};
    Duplicate(o, 5.0f, full, 2, 1, 8);
    Sub(o, o, x, 64, 1, BinaryRepeatParams());
    // Cast repeat: o16[...] (half view of o[128..]) = half(x[0..63]); then back to float at o[192..]
    LocalTensor<half> oh = ub[512].ReinterpretCast<half>();
    Cast(oh, x, RoundMode::CAST_RINT, 64, 1, UnaryRepeatParams(1, 1, 4, 8));
    Cast(o[192], oh, RoundMode::CAST_NONE, 64, 1, UnaryRepeatParams(1, 1, 8, 4));
    // Maxs / Mins / Adds / Muls repeat forms on o[256..319]
    DataCopy(o[256], x, 64);
    Maxs(o[256], o[256], -0.5f, 64, 1, UnaryRepeatParams());
    Mins(o[256], o[256], 0.5f, full, 1, UnaryRepeatParams());
    Adds(o[256], o[256], 1.0f, 64, 1, UnaryRepeatParams());
    Muls(o[256], o[256], 2.0f, full, 1, UnaryRepeatParams());
    // Mul / Max / Min / Div / Add with bit masks on o[320..383]
    Duplicate(o[320], 3.0f, 64);
    Mul(o[320], o[320], x, full, 1, BinaryRepeatParams());
    Max(o[320], o[320], x, full, 1, BinaryRepeatParams());
    Min(o[320], o[320], x, 64, 1, BinaryRepeatParams());
    Add(o[320], o[320], x, full, 1, BinaryRepeatParams());
    Duplicate(o[384], 2.0f, 64);
    Div(o[384], x, o[384], 64, 1, BinaryRepeatParams());
    Div(o[384], o[384], o[384], full, 1, BinaryRepeatParams());
    Duplicate(o[448], 1.0f, 64, 1, 1, 8);
    PipeBarrier<PIPE_V>();
    // more count forms (not checked numerically beyond running)
    LocalTensor<half> th = ub[8192].ReinterpretCast<half>();
    Cast(th, x, RoundMode::CAST_NONE, 256);
    Sqrt(th, th, 256);
    Abs(th, th, 256);
    Ln(th, th, 256);
    Reciprocal(th, th, 256);
    Rsqrt(th, th, 256);
    Sub(th, th, th, 256);
    Min(th, th, th, 256);
    Adds(th, th, half(1.0f), 256);
    Maxs(th, th, half(0.0f), 256);
    Mins(th, th, half(2.0f), 256);
    ReduceMin(th[256], th, th[512], 256, false);
    WholeReduceMin(th[512], th, 128, 2, 1, 1, 8, ReduceOrder::ORDER_ONLY_INDEX);
    ReduceRepeat<ReduceType::SUM>(th[512], th, 128, 2, 1, 1, 8);
    ReduceRepeat<ReduceType::MIN>(t, x, 64, 4, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);
    CompareScalar(ub[16384], x, 0.0f, CMPMODE::GT, 256);
    Compares(ub[16384], x, 0.0f, CMPMODE::NE, 256);
    Compare(ub[16384], x, x, CMPMODE::EQ, 64);
    Brcb(th[1024], th, 1, BrcbRepeatParams(1, 8));
    Duplicate(ub[20480].ReinterpretCast<bfloat16_t>(), bfloat16_t(1.5f), 64);
    Duplicate(ub[20480].ReinterpretCast<uint32_t>(), 7u, 64);
    // integer paths, checked: int32 / int16 / int8 / int64 conversions and integer arithmetic
    LocalTensor<int32_t> oi = ub[24576].ReinterpretCast<int32_t>();
    LocalTensor<int16_t> o16 = ub[26624].ReinterpretCast<int16_t>();
    LocalTensor<int64_t> o64 = ub[27136].ReinterpretCast<int64_t>();
    LocalTensor<int8_t> o8 = ub[27648].ReinterpretCast<int8_t>();
    LocalTensor<uint8_t> u8 = ub[27904].ReinterpretCast<uint8_t>();
    LocalTensor<bfloat16_t> ob = ub[28160].ReinterpretCast<bfloat16_t>();
    Muls(t, x, 1000.0f, 64);
    Cast(oi, t, RoundMode::CAST_RINT, 64);          // [0, 64)
    Cast(o16, oi, RoundMode::CAST_NONE, 64);
    Cast(oh, o16, RoundMode::CAST_RINT, 64);
    Cast(oi[64], oh, RoundMode::CAST_TRUNC, 64);     // [64, 128): int32(half(int16(...)))
    Cast(o64, oi, RoundMode::CAST_NONE, 64);
    Cast(oi[128], o64, RoundMode::CAST_NONE, 64);    // [128, 192): round trip through int64
    Cast(t[64], o64, RoundMode::CAST_RINT, 64);
    Cast(o64, t[64], RoundMode::CAST_ROUND, 64);
    Cast(o16, t, RoundMode::CAST_FLOOR, 64);
    Cast(t[128], o16, RoundMode::CAST_NONE, 64);
    Cast(t[192], t, RoundMode::CAST_FLOOR, 64);      // float -> float, integral
    Muls(t[256], x, 100.0f, 64);
    Cast(oh, t[256], RoundMode::CAST_RINT, 64);
    Cast(o8, oh, RoundMode::CAST_FLOOR, 64);
    Cast(u8, oh, RoundMode::CAST_CEIL, 64);
    Cast(oh, o8, RoundMode::CAST_NONE, 64);
    Cast(oi[192], oh, RoundMode::CAST_RINT, 64);     // [192, 256): floor to int8 (saturating) of 100x
    Cast(oh, u8, RoundMode::CAST_NONE, 64);
    Cast(oi[256], oh, RoundMode::CAST_RINT, 64);     // [256, 320): ceil to uint8 (saturating) of 100x
    Cast(ob, t, RoundMode::CAST_TRUNC, 64);
    Cast(t[320], ob, RoundMode::CAST_NONE, 64);
    Cast(oi[320], ob, RoundMode::CAST_ROUND, 64);
    Cast(o16, t, RoundMode::CAST_TRUNC, 64);
    Cast(oi[384], oh, RoundMode::CAST_CEIL, 64);
#if __NPU_ARCH__ == 3510
    Cast(ob, oh, RoundMode::CAST_RINT, 64);
    Cast(oh, ob, RoundMode::CAST_RINT, 64);
#endif
    Add(oi[448], oi, oi[64], 64);
    Max(oi[448], oi[448], oi[128], 64);
    Relu(oi[448], oi[448], 64);
    Add(o16, o16, o16, 64);
    Max(o16, o16, o16, 64);
    // scalar access
    oi.SetValue(511, oi.GetValue(0) + 1);
    const bool hasPhy = oi.GetPhyAddr() != nullptr && oi.GetPhyAddr(1) != nullptr && oi.GetSize() > 0;
    SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
    if (lead) {
        DataCopy(resF[R_VEC], o, 512);
        DataCopy(resI[R_INT], oi, 512);
        DataCopy(resF[R_INT + 512], t, 512);
    }
    // UB -> UB copies and the DataCopyParams / old DataCopyPad forms
    DataCopy(t, o, 64);
    DataCopy(t, o, DataCopyParams(2, 8, 0, 0));
    GlobalTensor<float> scratch;
    scratch.SetGlobalBuffer((__gm__ float*)res + R_VSCR + GetBlockIdx() * 128, 128);
    SetFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    DataCopy(scratch, t, DataCopyParams(1, 8, 0, 0));
    DataCopyPad(scratch, t, DataCopyParams(2, 36, 0, 0));
    SetFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
    WaitFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
    DataCopyPad(t, scratch, DataCopyParams(2, 36, 0, 0), DataCopyPadParams(true, 0, 1, 0));
    SetFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
    // system variables
    GlobalTensor<int32_t> sys;
    sys.SetGlobalBuffer((__gm__ int32_t*)res + R_SYS + 8 * GetBlockIdx(), 8);
    sys.SetValue(0, static_cast<int32_t>(GetBlockIdx()));
    sys.SetValue(1, static_cast<int32_t>(GetBlockNum()));
    sys.SetValue(2, static_cast<int32_t>(GetSubBlockIdx()));
    sys.SetValue(3, static_cast<int32_t>(GetSubBlockNum()));
    sys.SetValue(4, static_cast<int32_t>(GetTaskRation()));
    sys.SetValue(5, hasPhy ? 1 : 0);
    sys.SetValue(6, sys.GetValue(0) * 10);
    // a tensor made from (position, address, size): the same UB bytes as oi
    LocalTensor<int32_t> alias(TPosition::VECCALC, oi.GetPhyAddr() == nullptr ? 0 : 4096 + 24576, 512);
    sys.SetValue(7, alias.GetValue(511) == oi.GetValue(511) ? 1 : 0);
    pipe.Destroy();
    // the two AIVs of the group meet (mode 1)
    CrossCoreSetFlag<1, PIPE_MTE3>(2);
    CrossCoreWaitFlag<1, PIPE_MTE3>(2);
}
} // namespace

extern "C" __global__ __aicore__ void api_coverage(GM_ADDR in, GM_ADDR res)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    if ASCEND_IS_AIC {
        CubePart(in, res);
    }
    if ASCEND_IS_AIV {
        VecPart(in, res);
    }
}

#ifdef CVTILE_TWIN
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

// usage: api_coverage <dir>; reads dir/in.bin (8192 bytes), writes dir/res.bin
int main(int argc, char** argv)
{
    if (argc < 2) {
        return 2;
    }
    const std::string dir = argv[1];
    uint8_t* in = static_cast<uint8_t*>(cvtile_twin::GmAlloc(8192));
    uint8_t* res = static_cast<uint8_t*>(cvtile_twin::GmAlloc(R_SIZE * 4));
    FILE* f = std::fopen((dir + "/in.bin").c_str(), "rb");
    if (!f || std::fread(in, 1, 8192, f) != 8192) {
        return 2;
    }
    std::fclose(f);
    // the 16-bit float types on the host: every operator, against float arithmetic rounded once
    half ha(1.5f), hb(0.25), hc(int32_t(3)), hd(uint8_t(2));
    half hs = ha + hb;
    hs -= hc;
    hs *= hd;
    hs /= hb;
    hs += -ha;
    const bool halfOk = static_cast<float>(hs) == -11.5f && static_cast<double>(ha * hb) == 0.375 &&
                        (ha / hd) == half(0.75f) && ha > hb && hb < ha && ha >= ha && hb <= hb && ha != hb &&
                        static_cast<float>(half(65520.0f)) == INFINITY && half(int16_t(-7)) == half(-7.0f) &&
                        half(uint16_t(9)) < half(uint32_t(10)) && half(int8_t(-1)) == -half(1.0f) &&
                        half(5.96046448e-8f).val == 1 && half(2.98023224e-8f).val == 0;
    bfloat16_t ba(1.0f), bb(0.00390625f);
    const bool bfOk = (ba + bb).ToFloat() == 1.0f && static_cast<float>(ba - bb) == 0.99609375f &&
                      (-ba).ToFloat() == -1.0f && bfloat16_t(1.0f + 0.005859375f).val == 0x3F81;
    if (!halfOk || !bfOk) {
        std::fprintf(stderr, "host half/bfloat16 arithmetic is wrong\n");
        return 1;
    }
    CVTILE_TWIN_RUN(api_coverage, 2, KERNEL_TYPE_MIX_AIC_1_2, in, res);
    f = std::fopen((dir + "/res.bin").c_str(), "wb");
    std::fwrite(res, 1, R_SIZE * 4, f);
    std::fclose(f);
    return 0;
}
#endif
