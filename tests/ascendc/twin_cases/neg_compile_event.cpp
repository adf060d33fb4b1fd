// Must NOT compile: HardEvent::MTE2_MTE4 does not exist.
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void bad_event(GM_ADDR x)
{
    SetFlag<HardEvent::MTE2_MTE4>(EVENT_ID0);
    WaitFlag<HardEvent::MTE2_MTE4>(EVENT_ID0);
    (void)x;
}
