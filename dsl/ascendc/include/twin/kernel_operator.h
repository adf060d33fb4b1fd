// cvtile CPU twin of the Ascend C API subset declared in ../decl/kernel_operator.h.
//
// An emitted kernel compiles against this header with a plain C++17 g++ and runs on CPU threads:
//   g++ -std=c++17 -O1 -pthread -ffp-contract=off [-D__NPU_ARCH__=3510] -I <this dir> kernel.cpp
// (__NPU_ARCH__ defaults to 2201 = Atlas A2/A3; 3510 = Ascend 950). The declarations come from the one
// declaration header; this file only adds definitions, so the two cannot drift apart silently.
// Semantics, units and checks: ../README.md. Written for cvtile.
#ifndef CVTILE_TWIN_KERNEL_OPERATOR_H
#define CVTILE_TWIN_KERNEL_OPERATOR_H

#ifndef CVTILE_TWIN
#define CVTILE_TWIN 1
#endif
#define CVTILE_INL inline
#include "../decl/kernel_operator.h"
#include "cvtile_twin_numeric.h"
#include "cvtile_twin_runtime.h"
#include "cvtile_twin_api.h"

#endif // CVTILE_TWIN_KERNEL_OPERATOR_H
