"""The Ascend C backend: a kernel after the passes, printed as a buildable Ascend C kernel-launch project.

* ``lower`` / ``lower_cube`` : the lowering rules (IR after the pipeline + memory plan -> the kernel's C++
  source; the vector, scalar, control and sync rules, and the cube rules);
* ``project``: the project around it (tiling header, host launcher, CMake, run script, compare script, data);
* ``check`` : the declaration-header syntax check and the CPU-twin build and run;
* ``names`` : sanitised C identifiers;
* ``real_headers`` : the opt-in check against the real public Ascend C headers (a generated intrinsic stub).

``lowered(ck)`` prints a compiled kernel (cached on it); ``emit(ck, dir, args, grid)`` writes the project of
one launch, with the inputs and the simulator's pipelined-order results as goldens; ``check_project`` and
``run_project`` compile it and run it on the twin. The backend reads only the IR and its memory plan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .check import (DECL_INCLUDE, MACROS, TWIN_INCLUDE, CheckFailed, NoCompiler, build_twin, run_twin,
                    syntax_check)
from .lower import AscendCError, AscendCUnsupported, LoweredKernel, lower_kernel
from .project import tiling_bytes, write_project

__all__ = ["AscendCError", "AscendCUnsupported", "LoweredKernel", "CheckFailed", "NoCompiler", "DECL_INCLUDE",
           "TWIN_INCLUDE", "MACROS", "lowered", "emit", "Launch", "check_project", "run_project", "arch_of"]


def arch_of(platform) -> str:
    return "arch35" if "950" in platform.name else "arch22"


def lowered(ck) -> LoweredKernel:
    """The Ascend C lowering of a compiled kernel (its final IR and memory plan), cached on it."""
    lk = getattr(ck, "_ascendc", None)
    if lk is None:
        lk = lower_kernel(ck.compilation.final, ck.platform)
        ck._ascendc = lk
    return lk


@dataclass
class Launch:
    """One kernel launch of a project: the compiled kernel, its block count and its runtime arguments
    (GM tensors as numpy arrays and scalars, in the kernel's parameter order); ``before``: copies of the
    arrays as they were before the launch, by ``id`` (a ``LaunchRecord`` has them), else their current
    contents are the inputs."""

    kernel: object
    grid: int
    args: list
    before: dict | None = None

    @classmethod
    def of(cls, rec) -> "Launch":
        return cls(rec.kernel, rec.grid, rec.args, rec.before)


def _stored(ck) -> set:
    from ..ir import walk

    final = ck.compilation.final
    ids = {op.windows["window"].tensor.id for op in walk(final.body) if op.kind == "store"}
    return {p.name for p, v in zip([p for p in final.params if p.kind != "constexpr"], final.args)
            if p.kind == "tensor" and v.id in ids}


def emit(dir_: str, launches: list, *, atol: float = 0.0, rtol: float = 0.0, goldens: dict | None = None,
         with_data: bool = True, tolerance=None, max_fail_ratio: float = 0.0) -> dict:
    """Write the project of a sequence of launches into ``dir_``.

    GM tensors with the same numpy array object across launches are one GM buffer (the flash-decode
    combine reads what the main kernel wrote). The comparison tolerance is ``atol``/``rtol`` (default 0:
    bitwise), or ``tolerance(dtype) -> (rtol, atol)`` (or ``tolerance(dtype, name)``) per output; an output
    passes with at most ``max_fail_ratio`` of its elements outside it (the upstream tests allow 0.5 %). The goldens are ``goldens`` (name -> array),
    ``"as_run"`` (the launches' arrays as they are now: the results of the run that recorded them, in program
    order, which the pipeline pass keeps bitwise equal to the pipelined order; no second simulation, and no
    pipelined compile) or else the simulator's results of the launches in pipelined order on copies of the
    inputs. Returns {"paths", "kernels", "outputs"}."""
    lks, plan, inputs, arrays = [], [], {}, {}
    outputs: list = []
    for L in launches:
        lk = lowered(L.kernel)
        if lk not in lks:
            lks.append(lk)
        names = []
        tensors = [(n, p) for n, p in lk.params if p.kind == "tensor"]
        if not with_data:
            plan.append((lks.index(lk), L.grid, [n for n, _ in tensors]))
            continue
        for (n, p), a in zip(tensors, [a for a in L.args if isinstance(a, np.ndarray)]):
            key = next((k for k, v in arrays.items() if v is a), None)
            if key is None:
                key = n if n not in arrays else f"{n}_{len(arrays)}"
                arrays[key] = a
                before = (L.before or {}).get(id(a))
                inputs[key] = np.array(a if before is None else before, copy=True)
            names.append(key)
            if p.name in _stored(L.kernel) and key not in outputs:
                outputs.append(key)
        plan.append((lks.index(lk), L.grid, names))
    data = None
    if with_data:
        if isinstance(goldens, str):
            if goldens != "as_run":
                raise ValueError(f"goldens={goldens!r}: a name -> array mapping, 'as_run' or None")
            goldens = {k: np.array(v, copy=True) for k, v in arrays.items()}
        if goldens is None:
            copies = {k: np.array(v, copy=True) for k, v in inputs.items()}
            for L in launches:
                args = []
                for a in L.args:
                    if isinstance(a, np.ndarray):
                        key = next(k for k, v in arrays.items() if v is a)
                        args.append(copies[key])
                    else:
                        args.append(a)
                L.kernel.launch(L.grid, args, order="pipelined")
            goldens = copies
        tilings = [tiling_bytes(lowered(L.kernel), None, L.args) for L in launches]
        tols = {}
        for name in outputs:
            if tolerance is None:
                r, a = rtol, atol
            else:
                import inspect

                two = len(inspect.signature(tolerance).parameters) >= 2
                r, a = tolerance(goldens[name].dtype, name) if two else tolerance(goldens[name].dtype)
            tols[name] = (float(r), float(a))
        data = {"inputs": inputs, "tilings": tilings, "goldens": goldens, "outputs": outputs, "tolerances": tols,
                "max_fail_ratio": max_fail_ratio}
    first = launches[0].kernel
    paths = write_project(dir_, lks, plan, first.platform.name, arch_of(first.platform) == "arch35", data)
    return {"paths": paths, "kernels": lks, "outputs": outputs}


def check_project(dir_: str, lks: list, arches=("arch22", "arch35")) -> list:
    """The declaration-header syntax check of every kernel file of a project for the AIC and AIV macro sets
    of each architecture; returns the (file, arch, core) triples checked."""
    done = []
    for lk in lks:
        path = os.path.join(dir_, "op_kernel", f"{lk.name}.cpp")
        for arch in arches:
            for core in ("aic", "aiv"):
                syntax_check(path, arch, core, include_dirs=[os.path.join(dir_, "op_kernel")])
                done.append((path, arch, core))
    return done


def run_project(dir_: str, arch: str, timeout: float = 600) -> str:
    """Build the project against the CPU twin, run it and compare with the goldens; returns compare.py's
    report (raises CheckFailed on a build, twin or comparison failure)."""
    import subprocess
    import sys

    exe = build_twin(dir_, arch)
    run_twin(dir_, exe, timeout=timeout)
    r = subprocess.run([sys.executable, "compare.py"], cwd=dir_, capture_output=True, text=True)
    if r.returncode != 0:
        raise CheckFailed(f"the twin's results differ from the goldens:\n{r.stdout}{r.stderr}", r.returncode,
                          r.stdout)
    return r.stdout
