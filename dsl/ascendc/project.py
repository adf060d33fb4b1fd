"""The emitted project: kernel sources, tiling header, host launcher, build files and the data of one call.

Model
-----
A project is written for one launch (a kernel, its arguments, a block count), in the
layout of the Ascend C kernel-launch samples::

    DIR/op_kernel/<name>.cpp        the kernel (lower.py), plus <name>_do(): the <<<>>> launch
    DIR/op_kernel/<name>_tiling.h   the tiling struct
    DIR/main.cpp                    host: reads data/*.bin, allocates GM and the workspace, launches,
                                    writes data/output_<arg>.bin; under CVTILE_TWIN it runs the CPU twin
    DIR/CMakeLists.txt, run.sh      the NPU build (CANN's ascendc.cmake) and the twin build (g++)
    DIR/compare.py                  data/output_*.bin against data/golden_*.bin (numpy only)
    DIR/data/                       input_<arg>.bin, tiling.bin, golden_<arg>.bin, manifest.json

Every GM argument is an input file and an output file (the kernel may read and write
any of them); ``manifest.json`` lists which are outputs (the tensors the kernel
stores to), their dtype and shape, and the comparison tolerance.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np

from .lower import LoweredKernel
from .names import comment

__all__ = ["write_project", "tiling_bytes", "host_main"]

_PACK = {"int64_t": "q", "float": "f", "bool": "?"}


def tiling_bytes(lk: LoweredKernel, params: list, values: list) -> bytes:
    """The tiling buffer of one call: the struct's fields in order, natural alignment (as the C compiler
    lays out a struct of int64_t / float / bool members)."""
    fmt, vals = "@", []
    for f in lk.tiling_fields:
        if f.source[0] == "dim":
            _, i, ax = f.source
            vals.append(int(np.asarray(values[i]).shape[ax]))
        else:
            _, i = f.source
            v = values[i]
            vals.append(float(np.float32(v)) if f.ctype == "float" else (bool(v) if f.ctype == "bool" else int(v)))
        fmt += _PACK[f.ctype]
    raw = struct.pack(fmt, *vals) if vals else struct.pack("@q", 0)
    align = 8 if any(f.ctype == "int64_t" for f in lk.tiling_fields) or not vals else 4
    return raw + b"\0" * (-len(raw) % align)


def host_main(lks: list, launches: list, soc: str) -> str:
    """main.cpp: one launch per entry of ``launches`` = (kernel index, block_dim, [arg names])."""
    inc = [f'#include "op_kernel/{lk.name}_tiling.h"' for lk in lks]
    lines = ["// Host launcher written by cvtile: reads data/*.bin, runs the kernels, writes data/output_*.bin.",
             "// Built with CANN (run.sh npu) it launches on the NPU; built with g++ against the cvtile twin",
             "// (run.sh twin) it runs every AIC and AIV of the launch as CPU threads.",
             "#include <cstdint>", "#include <cstdio>", "#include <cstdlib>", "#include <cstring>",
             "#include <string>", "#include <vector>", *inc]
    lines += ["#ifdef CVTILE_TWIN", '#include "kernel_operator.h"']
    lines += [f'#include "op_kernel/{lk.name}.cpp"' for lk in lks]
    lines += ["#else", '#include "acl/acl.h"']
    for lk in lks:
        lines.append(f"void {lk.name}_do(uint32_t blockDim, void* stream, "
                     + ", ".join(f"uint8_t* {n}" for n, _ in lk.params) + (", " if lk.params else "")
                     + "uint8_t* workspace, uint8_t* tiling);")
    lines += ["#endif", "",
              "static std::vector<uint8_t> ReadFile(const std::string& path)",
              "{",
              "    std::vector<uint8_t> data;",
              "    FILE* f = std::fopen(path.c_str(), \"rb\");",
              "    if (f == nullptr) {",
              "        std::fprintf(stderr, \"cannot open %s\\n\", path.c_str());",
              "        std::exit(2);",
              "    }",
              "    std::fseek(f, 0, SEEK_END);",
              "    long n = std::ftell(f);",
              "    std::fseek(f, 0, SEEK_SET);",
              "    data.resize(static_cast<size_t>(n));",
              "    if (n > 0 && std::fread(data.data(), 1, data.size(), f) != data.size()) {",
              "        std::fprintf(stderr, \"short read of %s\\n\", path.c_str());",
              "        std::exit(2);",
              "    }",
              "    std::fclose(f);",
              "    return data;",
              "}", "",
              "static void WriteFile(const std::string& path, const uint8_t* p, size_t n)",
              "{",
              "    FILE* f = std::fopen(path.c_str(), \"wb\");",
              "    if (f == nullptr || std::fwrite(p, 1, n, f) != n) {",
              "        std::fprintf(stderr, \"cannot write %s\\n\", path.c_str());",
              "        std::exit(2);",
              "    }",
              "    std::fclose(f);",
              "}", "",
              "#ifdef CVTILE_TWIN",
              "static uint8_t* DeviceAlloc(size_t n) { return static_cast<uint8_t*>(cvtile_twin::GmAlloc(n ? n : 32)); }",
              "static void ToDevice(uint8_t* d, const std::vector<uint8_t>& h) { if (!h.empty()) std::memcpy(d, h.data(), h.size()); }",
              "static void ToHost(std::vector<uint8_t>& h, const uint8_t* d) { if (!h.empty()) std::memcpy(h.data(), d, h.size()); }",
              "static void DeviceFree(uint8_t* d) { cvtile_twin::GmFree(d); }",
              "#else",
              "#define CVT_ACL(call) do { aclError cvtErr = (call); if (cvtErr != ACL_SUCCESS) { "
              "std::fprintf(stderr, \"%s failed: %d\\n\", #call, static_cast<int>(cvtErr)); std::exit(1); } } while (0)",
              "static uint8_t* DeviceAlloc(size_t n) { void* p = nullptr; CVT_ACL(aclrtMalloc(&p, n ? n : 32, "
              "ACL_MEM_MALLOC_HUGE_FIRST)); return static_cast<uint8_t*>(p); }",
              "static void ToDevice(uint8_t* d, const std::vector<uint8_t>& h) { if (!h.empty()) CVT_ACL(aclrtMemcpy(d, "
              "h.size(), h.data(), h.size(), ACL_MEMCPY_HOST_TO_DEVICE)); }",
              "static void ToHost(std::vector<uint8_t>& h, const uint8_t* d) { if (!h.empty()) CVT_ACL(aclrtMemcpy(h.data(), "
              "h.size(), d, h.size(), ACL_MEMCPY_DEVICE_TO_HOST)); }",
              "static void DeviceFree(uint8_t* d) { CVT_ACL(aclrtFree(d)); }",
              "#endif", "",
              "int main()",
              "{",
              "#ifdef CVTILE_TWIN",
              f"    cvtile_twin::SetTarget(\"{comment(soc)}\");",
              "#else",
              "    CVT_ACL(aclInit(nullptr));",
              "    CVT_ACL(aclrtSetDevice(0));",
              "    aclrtStream stream = nullptr;",
              "    CVT_ACL(aclrtCreateStream(&stream));",
              "#endif"]
    names = []
    for _, _, args in launches:
        for a in args:
            if a not in names:
                names.append(a)
    for a in names:
        lines += [f"    std::vector<uint8_t> {a}_h = ReadFile(\"data/input_{a}.bin\");",
                  f"    uint8_t* {a}_d = DeviceAlloc({a}_h.size());",
                  f"    ToDevice({a}_d, {a}_h);"]
    for j, (ki, block_dim, args) in enumerate(launches):
        lk = lks[ki]
        ws = lk.workspace_bytes_per_block and max(lk.workspace_bytes_per_block, 1)
        lines += [f"    // launch {j}: {lk.name} on {block_dim} blocks",
                  f"    std::vector<uint8_t> tiling{j}_h = ReadFile(\"data/tiling{j}.bin\");",
                  f"    uint8_t* tiling{j}_d = DeviceAlloc(tiling{j}_h.size());",
                  f"    ToDevice(tiling{j}_d, tiling{j}_h);",
                  f"    uint8_t* workspace{j}_d = DeviceAlloc({block_dim}ull * {_slot_area(lk)});"]
        call = ", ".join([f"{a}_d" for a in args] + [f"workspace{j}_d", f"tiling{j}_d"])
        lines += ["#ifdef CVTILE_TWIN",
                  f"    CVTILE_TWIN_RUN({lk.name}, {block_dim}, {lk.kernel_type}, {call});",
                  "#else",
                  f"    {lk.name}_do({block_dim}, stream, {call});",
                  "    CVT_ACL(aclrtSynchronizeStream(stream));",
                  "#endif",
                  f"    DeviceFree(tiling{j}_d);",
                  f"    DeviceFree(workspace{j}_d);"]
    for a in names:
        lines += [f"    ToHost({a}_h, {a}_d);",
                  f"    WriteFile(\"data/output_{a}.bin\", {a}_h.data(), {a}_h.size());",
                  f"    DeviceFree({a}_d);"]
    lines += ["#ifndef CVTILE_TWIN",
              "    CVT_ACL(aclrtDestroyStream(stream));",
              "    CVT_ACL(aclrtResetDevice(0));",
              "    CVT_ACL(aclFinalize());",
              "#endif",
              "    std::printf(\"done\\n\");",
              "    return 0;",
              "}", ""]
    return "\n".join(lines)


def _slot_area(lk: LoweredKernel) -> int:
    return max(int(getattr(lk, "slot_area_bytes", 0) or 0), 32)


def launcher_stub(lk: LoweredKernel) -> str:
    """The NPU launch function appended to the kernel source (never seen by g++: the twin and the syntax
    check define CVTILE_TWIN / ASCENDC_CPU_DEBUG)."""
    params = ", ".join(f"uint8_t* {n}" for n, _ in lk.params)
    args = ", ".join([n for n, _ in lk.params] + ["workspace", "tiling"])
    return "\n".join(["", "#if !defined(CVTILE_TWIN) && !defined(ASCENDC_CPU_DEBUG)",
                      f"void {lk.name}_do(uint32_t blockDim, void* stream, {params}{', ' if params else ''}"
                      "uint8_t* workspace, uint8_t* tiling)",
                      "{",
                      f"    {lk.name}<<<blockDim, nullptr, stream>>>({args});",
                      "}", "#endif", ""])


def cmake_lists(lks: list, soc: str) -> str:
    srcs = " ".join(f"op_kernel/{lk.name}.cpp" for lk in lks)
    return "\n".join([
        "# NPU build of the cvtile-emitted kernels (CANN's Ascend C kernel-launch flow).",
        "cmake_minimum_required(VERSION 3.16)",
        "project(cvtile_kernels LANGUAGES CXX)",
        f'set(SOC_VERSION "{comment(soc)}" CACHE STRING "the chip the kernels are built for")',
        'set(ASCEND_CANN_PACKAGE_PATH "$ENV{ASCEND_HOME_PATH}" CACHE PATH "the CANN toolkit")',
        'if(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)',
        '    set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)',
        'else()',
        '    set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)',
        'endif()',
        "include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)",
        f"ascendc_library(cvtile_kernels STATIC {srcs})",
        "add_executable(cvtile_main main.cpp)",
        "target_include_directories(cvtile_main PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} "
        "${ASCEND_CANN_PACKAGE_PATH}/include)",
        "target_link_directories(cvtile_main PRIVATE ${ASCEND_CANN_PACKAGE_PATH}/lib64)",
        "target_link_libraries(cvtile_main PRIVATE cvtile_kernels ascendcl runtime)",
        ""])


RUN_SH = """#!/usr/bin/env bash
# Build and run the emitted kernels.  run.sh twin : g++ and the cvtile CPU twin (needs CVTILE_TWIN_INCLUDE,
# the twin's include directory: python -c "import cvtile.dsl.ascendc as a; print(a.TWIN_INCLUDE)");
# run.sh npu : CMake with CANN (ASCEND_HOME_PATH set), on a machine with the NPU.  Then compare.py.
set -euo pipefail
cd "$(dirname "$0")"
mode="${1:-twin}"
if [ "$mode" = twin ]; then
    g++ -std=c++17 -O1 -pthread -ffp-contract=off -DCVTILE_TWIN=1 %(arch)s -I "${CVTILE_TWIN_INCLUDE:?set CVTILE_TWIN_INCLUDE}" -I . \\
        main.cpp -o cvtile_twin_main
    ./cvtile_twin_main
else
    cmake -S . -B build -DSOC_VERSION=%(soc)s
    cmake --build build -j
    ./build/cvtile_main
fi
python3 compare.py
"""

COMPARE_PY = '''"""Compare data/output_<arg>.bin with data/golden_<arg>.bin (written by cvtile) under the manifest's
tolerance (|a - g| <= atol + rtol |g| for all but max_fail_ratio of the elements, no gross outlier, no NaN/inf
mismatch); prints one PASS/FAIL line per output with the worst element, exits 1 on any FAIL."""
import json
import sys

import numpy as np

try:
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16
except ImportError:   # bf16 outputs are then compared through their float32 widening of the raw bits
    BF16 = None


def load(path, dtype, shape):
    raw = np.fromfile(path, dtype=np.uint8)
    if dtype == "bfloat16":
        bits = raw.view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape).astype(np.float64)
    return raw.view(dtype).reshape(shape).astype(np.float64)


def main():
    m = json.load(open("data/manifest.json"))
    ok = True
    for out in m["outputs"]:
        got = load(f"data/output_{out['name']}.bin", out["dtype"], out["shape"])
        want = load(f"data/golden_{out['name']}.bin", out["dtype"], out["shape"])
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        diff = np.where(same, 0.0, np.abs(got - want))
        diff[np.isnan(diff)] = np.inf
        tol = out["atol"] + out["rtol"] * np.where(np.isfinite(want), np.abs(want), 0.0)
        bad = diff > tol
        # the upstream tests' rule: at most max_fail_ratio of the elements outside the tolerance, none of them a
        # gross outlier, and no NaN/inf where the golden has none (or the other way round)
        nonfinite = ~same & ~(np.isfinite(got) & np.isfinite(want))
        scale = np.maximum(np.maximum(np.abs(got), np.abs(want)), 2.0 ** -14 / 0.005)
        outlier = bad & ~(diff / scale < out.get("max_outlier", 10.0))
        worst = int(np.argmax(diff)) if diff.size else 0
        idx = np.unravel_index(worst, want.shape) if diff.size else ()
        exact = bool(same.all())
        ratio = float(bad.mean()) if bad.size else 0.0
        ok_out = ratio <= out.get("max_fail_ratio", 0.0) and not outlier.any() and not nonfinite.any()
        res = "PASS" if ok_out else "FAIL"
        ok &= res == "PASS"
        how = "bitwise equal" if exact else ("within" if res == "PASS" else "beyond") + \
            " atol %g rtol %g" % (out["atol"], out["rtol"])
        print(f"{res}: {out['name']} {how}"
              f", largest difference {diff.max() if diff.size else 0:.3g} at {tuple(int(i) for i in idx)}"
              f", {int(bad.sum())} elements out of tolerance ({100 * ratio:.3g} %)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
'''


def write_project(dir_: str, lks: list, launches: list, soc: str, arch35: bool, data: dict | None = None) -> list:
    """Write the project files; ``data`` = {"inputs": {arg: array}, "tilings": [bytes], "goldens": {arg: array},
    "outputs": [arg], "tolerances": {arg: (rtol, atol)}}. Returns the paths written."""
    paths = []

    def put(rel: str, text, mode="w"):
        p = os.path.join(dir_, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, mode) as f:
            f.write(text)
        paths.append(p)

    for lk in lks:
        put(f"op_kernel/{lk.name}.cpp", lk.source + launcher_stub(lk))
        put(f"op_kernel/{lk.name}_tiling.h", lk.tiling_header)
    put("main.cpp", host_main(lks, launches, soc))
    put("CMakeLists.txt", cmake_lists(lks, soc))
    put("run.sh", RUN_SH % {"arch": "-D__NPU_ARCH__=3510" if arch35 else "", "soc": comment(soc)})
    os.chmod(os.path.join(dir_, "run.sh"), 0o755)
    put("compare.py", COMPARE_PY)
    if data is not None:
        for name, arr in data["inputs"].items():
            put(f"data/input_{name}.bin", np.ascontiguousarray(arr).tobytes(), "wb")
        for j, tb in enumerate(data["tilings"]):
            put(f"data/tiling{j}.bin", tb, "wb")
        outs = []
        for name in data["outputs"]:
            g = np.ascontiguousarray(data["goldens"][name])
            put(f"data/golden_{name}.bin", g.tobytes(), "wb")
            rtol, atol = data["tolerances"][name]
            outs.append({"name": name, "dtype": _dtype_name(g.dtype), "shape": list(g.shape), "rtol": rtol,
                         "atol": atol, "max_fail_ratio": data.get("max_fail_ratio", 0.0), "max_outlier": 10.0})
        put("data/manifest.json", json.dumps({"outputs": outs}, indent=1))
    return paths


def _dtype_name(dt) -> str:
    s = str(dt)
    return "bfloat16" if "bfloat16" in s else s
