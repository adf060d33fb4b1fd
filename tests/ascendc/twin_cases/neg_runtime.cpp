// Kernels that break a rule on purpose; the twin must stop them with one clear line and a non-zero status.
//   deadlock    : the AIC never sets the flag both AIVs wait for (a removed CrossCoreSetFlag)
//   sixteen     : the AIC sets a mode-2 flag 16 times and nobody waits (the counter saturates at 15)
//   ub_overflow : an Add whose operand runs past the end of UB
//   wait_no_set : WaitFlag with no earlier SetFlag on the core
//   double_set  : SetFlag twice on the same event and id
//   leftover    : SetFlag never waited before the kernel ends
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void neg_kernel(GM_ADDR mode_gm)
{
    GlobalTensor<int32_t> modeT;
    modeT.SetGlobalBuffer((__gm__ int32_t*)mode_gm, 1);
    const int32_t mode = modeT.GetValue(0);
    TPipe pipe;
    TBuf<TPosition::VECCALC> ubBuf;
    pipe.InitBuffer(ubBuf, 196608);
    if (mode == 0) { // deadlock
        if ASCEND_IS_AIV {
            CrossCoreWaitFlag(3);
        }
        if ASCEND_IS_AIC {
            // CrossCoreSetFlag<2, PIPE_FIX>(3) removed
        }
    } else if (mode == 1) { // sixteen
        if ASCEND_IS_AIC {
            for (int i = 0; i < 16; ++i) {
                CrossCoreSetFlag<2, PIPE_FIX>(5);
            }
        }
    } else if (mode == 2) { // ub_overflow
        if ASCEND_IS_AIV {
            LocalTensor<float> t = ubBuf.Get<uint8_t>()[196608 - 256].ReinterpretCast<float>();
            Add(t, t, t, 128);
        }
    } else if (mode == 3) { // wait_no_set
        if ASCEND_IS_AIV {
            WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
        }
    } else if (mode == 4) { // double_set
        if ASCEND_IS_AIV {
            SetFlag<HardEvent::MTE2_V>(EVENT_ID1);
            SetFlag<HardEvent::MTE2_V>(EVENT_ID1);
        }
    } else if (mode == 5) { // leftover
        if ASCEND_IS_AIV {
            SetFlag<HardEvent::V_MTE3>(EVENT_ID2);
        }
    }
}

#ifdef CVTILE_TWIN
#include <cstdio>
#include <string>

int main(int argc, char** argv)
{
    if (argc < 2) {
        return 2;
    }
    const std::string m = argv[1];
    const char* names[] = {"deadlock", "sixteen", "ub_overflow", "wait_no_set", "double_set", "leftover"};
    int32_t* mode = static_cast<int32_t*>(cvtile_twin::GmAlloc(4));
    *mode = -1;
    for (int i = 0; i < 6; ++i) {
        if (m == names[i]) {
            *mode = i;
        }
    }
    if (*mode < 0) {
        return 2;
    }
    CVTILE_TWIN_RUN(neg_kernel, 2, KERNEL_TYPE_MIX_AIC_1_2, reinterpret_cast<uint8_t*>(mode));
    std::printf("finished without an error\n");
    return 0;
}
#endif
