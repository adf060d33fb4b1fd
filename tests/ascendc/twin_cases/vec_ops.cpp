// Vector API sweep on one vector core. The input image (kInBytes) is copied into UB at byte 0; each section
// computes into the OUT region (8 KB, zeroed first) and copies it to out + section * 8 KB. The section list
// and the input layout are mirrored by tests/ascendc/test_twin.py.
#include "kernel_operator.h"

using namespace AscendC;

namespace {
// UB / input-image layout (bytes)
constexpr uint32_t X = 0;      // float[1024]  random
constexpr uint32_t Y = 4096;   // float[1024]  random
constexpr uint32_t P = 8192;   // float[1024]  positive
constexpr uint32_t E = 12288;  // float[1024]  exp arguments incl. special values
constexpr uint32_t C = 16384;  // float[1024]  cast-to-16-bit arguments (ties, subnormals, overflow)
constexpr uint32_t R = 20480;  // float[1024]  cast-to-int arguments
constexpr uint32_t XI = 24576; // int32[1024]
constexpr uint32_t XH = 28672; // half[1024]
constexpr uint32_t YH = 30720; // half[1024]
constexpr uint32_t PH = 32768; // half[1024]   positive
constexpr uint32_t QH = 34816; // half[1024]   [-300, 300]
constexpr uint32_t ROWS = 36864; // float[5 x 37] rows for DataCopyPad (GM only)
constexpr uint32_t kInBytes = 40960;
constexpr uint32_t OUT = 40960;  // 8 KB result region
constexpr uint32_t MASK_AT = 49152; // 256 B (not MASK: the arch35 headers have AscendC::MASK)
constexpr uint32_t TMP = 50176;  // 8 KB work
constexpr uint32_t BR = 58368;   // 512 B broadcast blocks
constexpr uint32_t kSec = 8192;

struct Ctx {
    LocalTensor<uint8_t> ub;
    GlobalTensor<uint8_t> out;
    GlobalTensor<uint8_t> in;
    uint32_t sec;
};

template <typename T>
__aicore__ inline LocalTensor<T> At(const Ctx& c, uint32_t off)
{
    return c.ub[off].ReinterpretCast<T>();
}

__aicore__ inline void Begin(Ctx& c)
{
    if (c.sec > 0) {
        WaitFlag<HardEvent::MTE3_V>(EVENT_ID1);
    }
    Duplicate(At<float>(c, OUT), 0.0f, 2048);
}

__aicore__ inline void End(Ctx& c)
{
    SetFlag<HardEvent::V_MTE3>(EVENT_ID0);
    WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
    DataCopy(c.out[c.sec * kSec], At<uint8_t>(c, OUT), kSec);
    SetFlag<HardEvent::MTE3_V>(EVENT_ID1);
    c.sec++;
}
} // namespace

extern "C" __global__ __aicore__ void vec_ops(GM_ADDR in, GM_ADDR out)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    TPipe pipe;
    TBuf<TPosition::VECCALC> ubBuf;
    pipe.InitBuffer(ubBuf, 65536);
    Ctx c;
    c.ub = ubBuf.Get<uint8_t>();
    c.in.SetGlobalBuffer((__gm__ uint8_t*)in, kInBytes);
    c.out.SetGlobalBuffer((__gm__ uint8_t*)out, 64 * kSec);
    c.sec = 0;
    DataCopy(At<uint8_t>(c, 0), c.in, kInBytes);
    SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);

    LocalTensor<float> x = At<float>(c, X), y = At<float>(c, Y), p = At<float>(c, P), e = At<float>(c, E);
    LocalTensor<float> cf = At<float>(c, C), rf = At<float>(c, R), o = At<float>(c, OUT);
    LocalTensor<int32_t> xi = At<int32_t>(c, XI), oi = At<int32_t>(c, OUT);
    LocalTensor<half> xh = At<half>(c, XH), yh = At<half>(c, YH), ph = At<half>(c, PH), qh = At<half>(c, QH);
    LocalTensor<half> oh = At<half>(c, OUT);
    LocalTensor<bfloat16_t> ob = At<bfloat16_t>(c, OUT);
    LocalTensor<int8_t> o8 = At<int8_t>(c, OUT);
    LocalTensor<uint8_t> mask = At<uint8_t>(c, MASK_AT);

    // 0-5: float binary
    Begin(c); Add(o, x, y, 1024); End(c);
    Begin(c); Sub(o, x, y, 1024); End(c);
    Begin(c); Mul(o, x, y, 1024); End(c);
    Begin(c); Div(o, x, p, 1024); End(c);
    Begin(c); Max(o, x, y, 1024); End(c);
    Begin(c); Min(o, x, y, 1024); End(c);
    // 6-9: half binary
    Begin(c); Add(oh, xh, yh, 1024); End(c);
    Begin(c); Mul(oh, xh, yh, 1024); End(c);
    Begin(c); Div(oh, xh, ph, 1024); End(c);
    Begin(c); Max(oh, xh, yh, 1024); End(c);
    // 10-14: tensor-scalar
    Begin(c); Adds(o, x, 0.37f, 1024); End(c);
    Begin(c); Muls(o, x, -1.7f, 1024); End(c);
    Begin(c); Maxs(o, x, 0.1f, 1024); End(c);
    Begin(c); Mins(o, x, 0.1f, 1024); End(c);
    Begin(c); Muls(oh, xh, half(0.3f), 1024); End(c);
    // 15-22: unary
    Begin(c); Exp(o, e, 1024); End(c);
    Begin(c); Exp(oh, xh, 1024); End(c);
    Begin(c); Ln(o, p, 1024); End(c);
    Begin(c); Sqrt(o, p, 1024); End(c);
    Begin(c); Rsqrt(o, p, 1024); End(c);
    Begin(c); Reciprocal(o, p, 1024); End(c);
    Begin(c); Abs(o, x, 1024); End(c);
    Begin(c); Relu(o, x, 1024); End(c);
    // 23: duplicate
    Begin(c); Duplicate(o, 3.25f, 1000); End(c);
    // 24-35: casts
    Begin(c); Cast(oh, cf, RoundMode::CAST_RINT, 1024); End(c);
    Begin(c); Cast(ob, cf, RoundMode::CAST_RINT, 1024); End(c);
    Begin(c); Cast(o, xh, RoundMode::CAST_NONE, 1024); End(c);
    Begin(c); Cast(oi, rf, RoundMode::CAST_RINT, 1024); End(c);
    Begin(c); Cast(oi, rf, RoundMode::CAST_FLOOR, 1024); End(c);
    Begin(c); Cast(oi, rf, RoundMode::CAST_CEIL, 1024); End(c);
    Begin(c); Cast(oi, rf, RoundMode::CAST_ROUND, 1024); End(c);
    Begin(c); Cast(oi, rf, RoundMode::CAST_TRUNC, 1024); End(c);
    Begin(c); Cast(o, xi, RoundMode::CAST_RINT, 1024); End(c);
    Begin(c); Cast(oh, cf, RoundMode::CAST_ODD, 1024); End(c);
    Begin(c); Cast(oh, cf, RoundMode::CAST_TRUNC, 1024); End(c);
    Begin(c); Cast(o8, qh, RoundMode::CAST_RINT, 1024); End(c);
    // 36-39: compare / select
    Begin(c); Compare(At<uint8_t>(c, OUT), x, y, CMPMODE::LT, 1024); End(c);
    Begin(c);
    Compare(mask, x, y, CMPMODE::LT, 1024);
    Select(o, mask, x, y, SELMODE::VSEL_TENSOR_TENSOR_MODE, 1024);
    End(c);
    Begin(c); Compares(At<uint8_t>(c, OUT), xh, half(0.25f), CMPMODE::GE, 1024); End(c);
    Begin(c);
    Compares(mask, xh, half(0.25f), CMPMODE::GE, 1024);
    Select(oh, mask, xh, half(-1.0f), SELMODE::VSEL_TENSOR_SCALAR_MODE, 1024);
    End(c);
    // 40-44: count-form reductions (1000 elements: a partial last repeat)
    Begin(c); ReduceMax(o, x, At<float>(c, TMP), 1000, true); End(c);
    Begin(c); ReduceMin(o, x, At<float>(c, TMP), 1000, true); End(c);
    Begin(c); ReduceSum(o, x, At<float>(c, TMP), 1000); End(c);
    Begin(c); ReduceSum(oh, xh, At<half>(c, TMP), 1000); End(c);
    Begin(c); ReduceMax(oh, xh, At<half>(c, TMP), 1000, true); End(c);
    // 45-47: per-repeat reductions
    Begin(c); WholeReduceMax(o, x, 64, 16, 1, 1, 8); End(c);
    Begin(c); WholeReduceSum(o, x, 64, 16, 1, 1, 8); End(c);
    Begin(c); ReduceRepeat<ReduceType::MAX>(oh, xh, 128, 8, 1, 1, 8, ReduceOrder::ORDER_INDEX_VALUE); End(c);
    // 48: row broadcast: o[r][j] = x[r][j] * p[r] for 16 rows of 64, via Brcb + Mul with src1BlkStride 0
    Begin(c);
    Brcb(At<float>(c, BR), p, 2, BrcbRepeatParams(1, 8));
    Mul(o, x, At<float>(c, BR), 64, 16, BinaryRepeatParams(1, 1, 0, 8, 8, 1));
    End(c);
    // 49-51: DataCopyPad with 148-byte rows (37 floats)
    {
        GlobalTensor<float> rows;
        rows.SetGlobalBuffer((__gm__ float*)(in + ROWS), 5 * 37);
        Begin(c);
        DataCopyPad(o, rows, DataCopyExtParams(5, 37 * 4, 0, 0, 0), DataCopyPadExtParams<float>(true, 0, 3, -7.0f));
        SetFlag<HardEvent::MTE2_V>(EVENT_ID2);
        WaitFlag<HardEvent::MTE2_V>(EVENT_ID2);
        End(c);
        Begin(c);
        DataCopyPad(At<float>(c, TMP), rows, DataCopyExtParams(5, 37 * 4, 0, 0, 0),
            DataCopyPadExtParams<float>(false, 0, 0, 0.0f));
        SetFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
        WaitFlag<HardEvent::MTE2_MTE3>(EVENT_ID0);
        GlobalTensor<float> oRows;
        oRows.SetGlobalBuffer((__gm__ float*)(out + c.sec * kSec), 5 * 37);
        DataCopyPad(oRows, At<float>(c, TMP), DataCopyExtParams(5, 37 * 4, 0, 0, 0));
        SetFlag<HardEvent::MTE3_V>(EVENT_ID1);
        c.sec++;
        Begin(c);
        DataCopy(o, At<float>(c, TMP), 5 * 40);
        End(c);
    }
    // 52: repeat-form Add with a partial count mask (40 of 64 lanes, 3 repeats)
    Begin(c); Add(o, x, y, 40, 3, BinaryRepeatParams(1, 1, 1, 8, 8, 8)); End(c);
    WaitFlag<HardEvent::MTE3_V>(EVENT_ID1);
}

#ifdef CVTILE_TWIN
#include <cstdio>
#include <string>
#include <vector>

// usage: vec_ops <dir>; reads dir/in.bin (kInBytes), writes dir/out.bin (64 sections of 8 KB)
int main(int argc, char** argv)
{
    if (argc < 2) {
        return 2;
    }
    const std::string dir = argv[1];
    uint8_t* in = static_cast<uint8_t*>(cvtile_twin::GmAlloc(kInBytes));
    uint8_t* out = static_cast<uint8_t*>(cvtile_twin::GmAlloc(64 * kSec));
    FILE* f = std::fopen((dir + "/in.bin").c_str(), "rb");
    if (!f || std::fread(in, 1, kInBytes, f) != kInBytes) {
        std::fprintf(stderr, "bad input\n");
        return 2;
    }
    std::fclose(f);
    CVTILE_TWIN_RUN(vec_ops, 1, KERNEL_TYPE_AIV_ONLY, in, out);
    f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(out, 1, 64 * kSec, f);
    std::fclose(f);
    return 0;
}
#endif
