// Must NOT compile: Mmad with the fm and dst tensors swapped (fp16 dst, fp32 fm): no Mmad overload takes it.
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void bad_mmad(GM_ADDR x)
{
    TPipe pipe;
    TBuf<TPosition::A2> l0a;
    TBuf<TPosition::B2> l0b;
    TBuf<TPosition::CO1> l0c;
    pipe.InitBuffer(l0a, 65536);
    pipe.InitBuffer(l0b, 65536);
    pipe.InitBuffer(l0c, 131072);
    LocalTensor<half> a = l0a.Get<half>();
    LocalTensor<half> b = l0b.Get<half>();
    LocalTensor<float> c = l0c.Get<float>();
    MmadParams p;
    p.m = 16;
    p.n = 16;
    p.k = 16;
    Mmad(a, c, b, p);
    (void)x;
}
