// Must NOT compile: And on float tensors. The real headers reject the repeat form for float on both
// architectures (a static_assert in the implementation); the declaration header has no And overload for it.
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void bad_and(GM_ADDR x)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> ubBuf;
    pipe.InitBuffer(ubBuf, 1024);
    LocalTensor<float> t = ubBuf.Get<float>();
    And(t, t, t, 64, 1, BinaryRepeatParams());
    (void)x;
}
