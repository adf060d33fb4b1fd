"""Compiler checks of emitted Ascend C: the declaration-header syntax check and the CPU-twin build and run.

Model
-----
* ``syntax_check(path, arch, core)``: ``g++ -std=c++17 -fsyntax-only -Wall -Werror`` against the
  project's declaration header (``include/decl``) with the macro set of one architecture and core type
  (the four sets of the README: arch22/arch35 x AIC/AIV).  The header declares exactly the API subset
  the backend emits, with the public signatures, so a wrong type, argument count or enum is an error.
* ``build_twin(project_dir, arch)`` / ``run_twin``: the project's ``main.cpp`` built with g++ against the
  CPU twin (``include/twin``) and run in the project directory; the twin's exit status is 3 for a broken
  API rule, 4 for a deadlock.
* No C++ compiler on PATH raises ``NoCompiler`` (tests skip on it, naming the reason).
"""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = ["MACROS", "DECL_INCLUDE", "TWIN_INCLUDE", "NoCompiler", "CheckFailed", "compiler", "syntax_check",
           "build_twin", "run_twin"]

_HERE = os.path.dirname(os.path.abspath(__file__))
DECL_INCLUDE = os.path.join(_HERE, "include", "decl")
TWIN_INCLUDE = os.path.join(_HERE, "include", "twin")
MACROS = {
    ("arch22", "aic"): ["-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_CUBE__", "-D__DAV_CUBE__"],
    ("arch22", "aiv"): ["-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_VEC__", "-D__DAV_VEC__"],
    ("arch35", "aic"): ["-D__NPU_ARCH__=3510", "-D__DAV_C310__", "-D__DAV_C310_CUBE__", "-D__DAV_CUBE__"],
    ("arch35", "aiv"): ["-D__NPU_ARCH__=3510", "-D__DAV_C310__", "-D__DAV_C310_VEC__", "-D__DAV_VEC__"],
}


class NoCompiler(RuntimeError):
    """No C++17 compiler (g++) on PATH."""


class CheckFailed(RuntimeError):
    """A compile or twin run failed; the message holds the compiler's or the twin's output."""

    def __init__(self, message: str, returncode: int = 1, output: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.output = output


def compiler() -> str:
    gxx = os.environ.get("CXX") or shutil.which("g++")
    if not gxx:
        raise NoCompiler("g++ is not on PATH (the Ascend C checks need a C++17 g++)")
    return gxx


def syntax_check(path: str, arch: str, core: str, include_dirs=()) -> None:
    """g++ -fsyntax-only -Wall -Werror of one emitted file with the macro set of (arch, core)."""
    cmd = [compiler(), "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-I", DECL_INCLUDE,
           *(f"-I{d}" for d in include_dirs), *MACROS[(arch, core)], "-DASCENDC_CPU_DEBUG=1", path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed(f"syntax check of {os.path.basename(path)} ({arch} {core}) failed:\n{r.stderr[-4000:]}",
                          r.returncode, r.stderr)


def build_twin(project_dir: str, arch: str, exe: str = "cvtile_twin_main") -> str:
    """Build the project's main.cpp against the CPU twin; returns the executable's path."""
    out = os.path.join(project_dir, exe)
    cmd = [compiler(), "-std=c++17", "-O1", "-pthread", "-ffp-contract=off", "-w", "-DCVTILE_TWIN=1",
           *(["-D__NPU_ARCH__=3510"] if arch == "arch35" else []), "-I", TWIN_INCLUDE, "-I", project_dir,
           os.path.join(project_dir, "main.cpp"), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed(f"twin build failed:\n{r.stderr[-4000:]}", r.returncode, r.stderr)
    return out


def run_twin(project_dir: str, exe: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the twin executable in the project directory (it reads and writes data/)."""
    r = subprocess.run([exe], cwd=project_dir, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise CheckFailed(f"twin run failed with status {r.returncode}:\n{r.stderr[-4000:]}", r.returncode,
                          r.stderr)
    return r
