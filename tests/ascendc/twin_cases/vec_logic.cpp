// Bitwise vector ops (And, Or, Not) and the arithmetic progression (ArithProgression, Arange) on one vector
// core. Calls every overload of these APIs. The input image (two 2 KB random operands) is copied into UB at
// byte 0; each section computes into the OUT region (8 KB, zeroed first) and copies it to out + section * 8 KB.
// Sections from 16 on exist on arch35 only (the 950 data types). The section list is mirrored by
// tests/ascendc/test_twin.py (_logic_expected).
#include "kernel_operator.h"

using namespace AscendC;

namespace {
constexpr uint32_t A = 0;       // 2048 random bytes (int16[1024])
constexpr uint32_t B = 2048;    // 2048 random bytes
constexpr uint32_t kInBytes = 4096;
constexpr uint32_t OUT = 4096;  // 8 KB result region
constexpr uint32_t kSec = 8192;
constexpr uint32_t kSections = 32;

struct Ctx {
    LocalTensor<uint8_t> ub;
    GlobalTensor<uint8_t> out;
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

extern "C" __global__ __aicore__ void vec_logic(GM_ADDR in, GM_ADDR out)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    TPipe pipe;
    TBuf<TPosition::VECCALC> ubBuf;
    pipe.InitBuffer(ubBuf, 16384);
    Ctx c;
    c.ub = ubBuf.Get<uint8_t>();
    GlobalTensor<uint8_t> inGm;
    inGm.SetGlobalBuffer((__gm__ uint8_t*)in, kInBytes);
    c.out.SetGlobalBuffer((__gm__ uint8_t*)out, kSections * kSec);
    c.sec = 0;
    DataCopy(At<uint8_t>(c, 0), inGm, kInBytes);
    SetFlag<HardEvent::MTE2_V>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);

    LocalTensor<int16_t> a = At<int16_t>(c, A), b = At<int16_t>(c, B), o = At<int16_t>(c, OUT);
    LocalTensor<uint16_t> au = At<uint16_t>(c, A), bu = At<uint16_t>(c, B), ou = At<uint16_t>(c, OUT);
    LocalTensor<float> of = At<float>(c, OUT);
    LocalTensor<half> oh = At<half>(c, OUT);
    LocalTensor<int32_t> oi = At<int32_t>(c, OUT);

    // 0-3: count forms
    Begin(c); And(o, a, b, 1024); End(c);
    Begin(c); Or(o, a, b, 1024); End(c);
    Begin(c); Not(o, a, 1024); End(c);
    Begin(c); And(ou, au, bu, 1000); End(c);
    // 4: Or, count mask 100 of 128 lanes, 3 repeats
    Begin(c); Or(ou, au, bu, 100, 3, BinaryRepeatParams(1, 1, 1, 8, 8, 8)); End(c);
    // 5: And, bit mask, src1 block 0 reused in every block, src1 repeats 1 block apart
    {
        uint64_t m[2] = {0xF0F0F0F0F0F0F0F0ull, 0x00000000FFFFFFFFull};
        Begin(c); And(o, a, b, m, 2, BinaryRepeatParams(1, 1, 0, 8, 8, 1)); End(c);
    }
    // 6: And with a full count mask, then Or with a bit mask, both in place on dst
    {
        uint64_t m[2] = {0x00FF00FF00FF00FFull, 0xFFFF0000FFFF0000ull};
        Begin(c);
        And(ou, au, bu, 128, 8, BinaryRepeatParams(1, 1, 1, 8, 8, 8));
        Or(ou, ou, bu, m, 8, BinaryRepeatParams(1, 1, 1, 8, 8, 8));
        End(c);
    }
    // 7: Not, count mask 128, dst repeats 16 blocks apart
    Begin(c); Not(ou, au, 128, 4, UnaryRepeatParams(1, 1, 16, 8)); End(c);
    // 8: Not, bit mask, dst block stride 2
    {
        uint64_t m[2] = {0x5555555555555555ull, 0x8000000000000001ull};
        Begin(c); Not(o, a, m, 1, UnaryRepeatParams(2, 1, 8, 8)); End(c);
    }
    // 9-15: arithmetic progressions (arch22: scalar head, block and repeat Adds; arch35: register steps)
    Begin(c); ArithProgression(of, 1.234f, 5.678f, 1000); End(c);
    Begin(c); ArithProgression(of, -2.5f, 0.1f, 20); End(c);
    Begin(c); ArithProgression(oh, half(-3.0f), half(0.0999f), 300); End(c);
    Begin(c); ArithProgression(o, static_cast<int16_t>(32000), static_cast<int16_t>(37), 2000); End(c);
    Begin(c); ArithProgression(oi, 2147483000, 3, 300); End(c);
    Begin(c); ArithProgression(oi, -5, 2, 5); End(c);
    Begin(c); Arange(of, 100.0f, 0.3f, 2000); End(c);
#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 3510
    // 16-: the 950 data types
    Begin(c); And(oi, At<int32_t>(c, A), At<int32_t>(c, B), 512); End(c);
    Begin(c); Or(At<uint32_t>(c, OUT), At<uint32_t>(c, A), At<uint32_t>(c, B), 64, 4, BinaryRepeatParams()); End(c);
    Begin(c); And(At<int8_t>(c, OUT), At<int8_t>(c, A), At<int8_t>(c, B), 2048); End(c);
    Begin(c); Or(At<uint64_t>(c, OUT), At<uint64_t>(c, A), At<uint64_t>(c, B), 256); End(c);
    Begin(c); Not(of, At<float>(c, A), 512); End(c);
    Begin(c); Not(oh, At<half>(c, A), 128, 8, UnaryRepeatParams()); End(c);
    Begin(c); Not(At<int64_t>(c, OUT), At<int64_t>(c, A), 256); End(c);
    Begin(c); Not(At<uint8_t>(c, OUT), At<uint8_t>(c, A), 2048); End(c);
    Begin(c); ArithProgression(At<int64_t>(c, OUT), int64_t(1) << 40, int64_t(123456789), 1000); End(c);
    Begin(c); Arange(oh, half(1000.0f), half(0.3f), 1000); End(c);
#endif
    WaitFlag<HardEvent::MTE3_V>(EVENT_ID1);
}

#ifdef CVTILE_TWIN
#include <cstdio>
#include <string>

// usage: vec_logic <dir>; reads dir/in.bin (kInBytes), writes dir/out.bin (kSections sections of 8 KB)
int main(int argc, char** argv)
{
    if (argc < 2) {
        return 2;
    }
    const std::string dir = argv[1];
    uint8_t* in = static_cast<uint8_t*>(cvtile_twin::GmAlloc(kInBytes));
    uint8_t* out = static_cast<uint8_t*>(cvtile_twin::GmAlloc(kSections * kSec));
    FILE* f = std::fopen((dir + "/in.bin").c_str(), "rb");
    if (!f || std::fread(in, 1, kInBytes, f) != kInBytes) {
        std::fprintf(stderr, "bad input\n");
        return 2;
    }
    std::fclose(f);
    CVTILE_TWIN_RUN(vec_logic, 1, KERNEL_TYPE_AIV_ONLY, in, out);
    f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(out, 1, kSections * kSec, f);
    std::fclose(f);
    return 0;
}
#endif
