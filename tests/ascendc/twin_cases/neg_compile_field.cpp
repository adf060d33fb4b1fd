// Must NOT compile: a misspelled MmadParams field (cmatrixInitValue instead of cmatrixInitVal).
#include "kernel_operator.h"

using namespace AscendC;

extern "C" __global__ __aicore__ void bad_field(GM_ADDR x)
{
    MmadParams p;
    p.m = 16;
    p.cmatrixInitValue = false;
    (void)x;
}
