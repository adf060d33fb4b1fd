"""Where one warm FIA API call's time goes: ``bench_fia.py --breakdown``'s per-component timer.

``breakdown(call, repeat)`` runs ``call`` (an ``npu_fused_infer_attention_score`` call whose kernels are
already compiled) ``repeat`` times with perf_counter timers around the API's stages, each installed by
replacing a module attribute for the duration and put back after, and returns the median per call of each
component (milliseconds; the median of each component, so the rows need not add up exactly to the median
total):

============================  =================================================================================
binding                       ``check_binding``: torch_npu's binding type checks and the attributes normalised
op_host checks                ``tiling.verdict.check_fia`` (parse, checkers, route); 0 on a memo hit
tiling                        the rest of ``tile_fia`` (block sizes, core split, flash-decode plan); 0 on a hit
tiling memo                   ``fia.tiling_memo``: the key, the lookup and the caller's copy; 0 on a call memo
                              hit (a repeated plain call: ``tiling_memo.call_signature``)
parameter record              the rest of ``prepare_fia``: arrays, metadata, ``FiaParams``, the API's own checks;
                              on a call memo hit the call's signature, the lookup and the caller's copy
host launch prep              ``launch.run_fia`` outside the kernel launches: layouts, task tables, masks, the
                              output and workspaces (zero-filled), the kernels' constexprs; a plain call's
                              launch plan holds its band and task tables
DSL specialise                ``JITFunction._specialise``: binding the kernel's arguments, the key, the lookup; 0
                              when the call's launch plan holds the attention kernel's specialisation
argument conversion           ``NumbaRunner.convert``: storage views (16-bit floats as uint16), shape arguments
launch                        the rest of ``NumbaRunner.launch``: the compile check, the BLAS one-thread limit,
                              the thread pool, the error record and its decoding, write-back
simulated cores               ``_run_cores`` / ``_run_groups``: the generated kernels on every core
outputs and API rest          everything else of the call (the torch conversion of the outputs when torch
                              tensors came in, the empty lse, the V1 keyword plumbing)
============================  =================================================================================

The API's fixed cost per call is the call minus its simulated cores (``fixed``). No golden is computed on
this path. ``memo=False`` empties the tiling memo before every call (what a call with a new signature
costs).
"""

from __future__ import annotations

import functools
import importlib
import time
from contextlib import contextmanager

import numpy as np

#: (module, attribute path, label) of each timed stage
_STAGES = (
    ("cvtile.kernels.fia.api", "check_binding", "binding"),
    ("cvtile.kernels.fia.api", "prepare_fia", "prepare"),
    ("cvtile.kernels.fia.api", "memo_tile_fia", "memo"),
    ("cvtile.kernels.fia.tiling_memo", "tile_fia", "tile_fia"),
    ("cvtile.kernels.fia.api", "tile_fia", "tile_fia"),   # before the memo (an older checkout): tile_fia itself
    ("cvtile.tiling.verdict", "check_fia", "check_fia"),
    ("cvtile.kernels.fia.api", "_launch_fia", "run_fia"),
    ("cvtile.dsl.jit", "JITFunction._specialise", "specialise"),
    ("cvtile.sim.launch", "NumbaRunner.launch", "sim_launch"),
    ("cvtile.sim.launch", "NumbaRunner.convert", "convert"),
    ("cvtile.sim.launch", "_run_cores", "cores"),
    ("cvtile.sim.launch", "_run_groups", "cores"),
)

#: the reported components, from the stages' inclusive times
COMPONENTS = ("binding", "op_host checks", "tiling", "tiling memo", "parameter record", "host launch prep",
              "DSL specialise", "argument conversion", "launch", "simulated cores", "outputs and API rest")


@contextmanager
def _timed(acc: dict):
    """Install the stage timers (adding each stage's seconds to ``acc``) and remove them on exit."""
    undo = []
    for modname, path, label in _STAGES:
        try:
            owner = importlib.import_module(modname)
        except ImportError:   # a module an older checkout lacks
            continue
        *parents, attr = path.split(".")
        for p in parents:
            owner = getattr(owner, p)
        if attr not in owner.__dict__:   # a stage an older checkout lacks
            continue
        real = owner.__dict__[attr]
        undo.append((owner, attr, real))
        setattr(owner, attr, _timer(real, label, acc))
    try:
        yield
    finally:
        for owner, attr, real in reversed(undo):
            setattr(owner, attr, real)


_ACTIVE: list = []   # the stages running now, outermost first


def _timer(fn, label: str, acc: dict):
    """``fn`` adding its seconds to ``acc[label]`` (``binding`` inside ``prepare``, which an older checkout ran a
    second time there, to ``binding_in_prepare``)."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        key = "binding_in_prepare" if label == "binding" and "prepare" in _ACTIVE else label
        _ACTIVE.append(label)
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t0
            _ACTIVE.pop()
    return timed


def _components(s: dict, total: float) -> dict:
    g = s.get
    inner = g("binding_in_prepare", 0.0)
    memo = g("memo", g("tile_fia", 0.0))
    return {"binding": g("binding", 0.0) + inner, "op_host checks": g("check_fia", 0.0),
            "tiling": g("tile_fia", 0.0) - g("check_fia", 0.0), "tiling memo": memo - g("tile_fia", 0.0),
            "parameter record": g("prepare", 0.0) - memo - inner,
            "host launch prep": g("run_fia", 0.0) - g("specialise", 0.0) - g("sim_launch", 0.0),
            "DSL specialise": g("specialise", 0.0), "argument conversion": g("convert", 0.0),
            "launch": g("sim_launch", 0.0) - g("convert", 0.0) - g("cores", 0.0),
            "simulated cores": g("cores", 0.0),
            "outputs and API rest": total - g("binding", 0.0) - g("prepare", 0.0) - g("run_fia", 0.0)}


def breakdown(call, repeat: int = 50, memo: bool = True) -> dict:
    """``{"total", "fixed", "fixed_best", "cpu", "components": {name: ms}}`` of ``repeat`` timed calls of
    ``call`` (medians in ms; ``fixed_best`` the least call-minus-cores; ``cpu`` the median CPU time of the
    calling thread, which the other processes of a busy machine disturb less than wall time)."""
    try:
        from cvtile.kernels.fia import tiling_memo
    except ImportError:   # an older checkout, without the memo
        tiling_memo = None
    call()
    rows, totals, fixed, cpu = [], [], [], []
    acc: dict = {}
    with _timed(acc):
        for _ in range(repeat):
            if not memo and tiling_memo is not None:
                tiling_memo.clear()
            acc.clear()
            c0, t0 = time.thread_time(), time.perf_counter()
            call()
            total, spent = time.perf_counter() - t0, time.thread_time() - c0
            rows.append(_components(acc, total))
            totals.append(total)
            fixed.append(total - acc.get("cores", 0.0))
            cpu.append(spent)
    ms = lambda xs: float(np.median(xs)) * 1e3   # noqa: E731
    return {"total": ms(totals), "fixed": ms(fixed), "fixed_best": min(fixed) * 1e3, "cpu": ms(cpu),
            "components": {name: ms([r[name] for r in rows]) for name in COMPONENTS}}
