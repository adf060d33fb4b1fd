"""``@jit``: specialisation, the compile cache, and launching a kernel.

Model
-----
``@jit`` wraps a plain function in a ``JITFunction``. Nothing runs at
decoration. A launch ``kernel[grid](*args, **kwargs)`` (or ``kernel.compile``)
binds the arguments to the parameters and *specialises*: a parameter annotated
``constexpr`` (or receiving ``None``) is a compile-time value; an array is a GM
tensor, typed by dtype and rank only; a Python number is a runtime scalar. The
kernel is compiled to IR once per specialisation and run through the passes
(``passes.run_pipeline``: the IR is verified after each; the memory plan is the
budget report, a kernel that does not fit raises ``BudgetError``), then handed
to a backend. The in-process cache key is
(source hash, constexpr values, argument dtypes and ranks, target), and a
specialisation that fails to compile (``CompilationError``, ``BudgetError``
included) is kept under its key too and raised again without compiling. A later
process does not trace or run the passes again for a kernel of cvtile's own
packages: the pipeline's IR is kept on disk (``specialisation_cache``), and the
numba backend keeps the machine code, keyed by the generated source.

Backends register themselves (``register_backend``): the simulator registers
"numba" when ``cvtile.sim`` is imported, which ``import cvtile`` does. The
language itself depends on no backend.

Invariants
----------
* Changing a constexpr value, an argument's dtype or rank, the target or the
  kernel's source gives a new compilation; changing shapes or scalar values
  does not.
* ``kernel[grid]`` takes ``grid`` = the number of cores (AI core groups for a
  mixed kernel; vector cores for a vector-only kernel).
* ``kernel[grid](..., order="program")`` runs the sequential kernel (the IR
  before split_cv); ``order="pipelined"`` runs the programs after every pass
  (split, hand-offs through slots, flags, pipelining, row chunks). Both must
  give bitwise the same results.
* ``kernel[grid](..., check=...)`` runs the backend's checking mode (the numba backend: ``cvtile.sim.CheckMode``);
  without it a launch runs no checking code.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from .builtins import constexpr
from .errors import CompilationError
from .frontend import InlineFunction, build_kernel, source_of
from .ir import Kernel
from . import specialisation_cache
from .passes import Compilation, run_pipeline
from .types import BOOL, F32, INDEX, TensorType, dtype_of

__all__ = ["jit", "inline", "JITFunction", "CompiledKernel", "register_backend", "backend", "ORDERS",
           "record_launches", "LaunchRecord", "launches_run", "output_array"]

#: the execution orders of the simulator: the sequential kernel, or the programs the chip runs
ORDERS = ("program", "pipelined")

_BACKENDS: dict[str, Callable] = {}


def register_backend(name: str, factory: Callable) -> None:
    """``factory(compiled_kernel, order)`` returns a runner with ``launch(grid, args)``."""
    _BACKENDS[name] = factory


def backend(name: str) -> Callable:
    if name not in _BACKENDS and name == "numba":
        import cvtile.sim  # noqa: F401  (registers the numba backend)
    try:
        return _BACKENDS[name]
    except KeyError:
        raise KeyError(f"no cvtile backend named {name!r} (known: {', '.join(_BACKENDS) or 'none'})") from None


class LaunchRecord:
    """One recorded launch: the compiled kernel, its grid, its runtime arguments (the live objects) and a copy
    of every array argument as it was before the launch (``before``, by ``id``; empty for a recording that
    does not run the launch)."""

    def __init__(self, kernel: "CompiledKernel", grid: int, args: list, snapshot: bool = True):
        import numpy as np

        self.kernel, self.grid, self.args = kernel, grid, list(args)
        #: the arrays as they were before the launch (only when the launch runs: a recording that does not
        #: run, for the cost model, keeps none)
        self.before = {id(a): np.array(a, copy=True) for a in args if isinstance(a, np.ndarray)} if snapshot else {}


_RECORDERS: list = []


class record_launches:
    """``with record_launches() as rec:`` collects every kernel launch made inside (``rec.launches``, a list of
    ``LaunchRecord`` in launch order): what an operator API such as FusedInferAttentionScore launches, for the
    Ascend C backend to emit as one project. ``record_launches(run=False)`` records without running the
    kernels (the cost model needs only the launches; outputs stay as they were). An ``isolated`` recording
    keeps the launches made inside it to itself: recordings opened before it do not see them (a dry run made
    for another purpose, ``sim.precompile``, inside a caller's recording)."""

    def __init__(self, run: bool = True, isolated: bool = False):
        self.run = run
        self.isolated = isolated

    def __enter__(self):
        self.launches: list[LaunchRecord] = []
        _RECORDERS.append(self)
        return self

    def __exit__(self, *exc):
        _RECORDERS.remove(self)
        return False


def launches_run() -> bool:
    """Whether a launch made now runs: False inside a ``record_launches(run=False)`` block (the cost model's
    recording, which needs only the launches)."""
    return all(rec.run for rec in _active_recorders())


def _active_recorders() -> list:
    """The recordings a launch made now goes to: every open one, or from the innermost isolated one on."""
    for i in range(len(_RECORDERS) - 1, -1, -1):
        if _RECORDERS[i].isolated:
            return _RECORDERS[i:]
    return _RECORDERS


def output_array(shape, dtype, fill=0) -> np.ndarray:
    """The array an operator API hands its launches to write: ``fill`` in every element (the chip's init) when
    the launches run; when they are only recorded (``launches_run()`` is False), a read-only zero-stride array of
    that shape and dtype which takes no memory. Nothing writes it then, and the cost model reads only shapes,
    dtypes and sizes, so a call whose outputs would not fit in the host's memory is still timed."""
    if launches_run():
        return np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
    return np.broadcast_to(np.full((), fill, dtype), tuple(int(s) for s in shape))


class CompiledKernel:
    """One specialisation of a kernel: its IR, its budget report, and (lazily) backend artifacts."""

    def __init__(self, ir: Kernel, report, platform, key, compilation=None):
        self.ir = ir
        self.report = report
        self.compilation = compilation
        self.platform = platform
        self.key = key
        self._runners: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return self.ir.name

    def runner(self, name: str = "numba", order: str = "program"):
        if order not in ORDERS:
            raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
        key = (name, order)
        if key not in self._runners:
            self._runners[key] = backend(name)(self, order)
        return self._runners[key]

    @property
    def numba_source(self) -> str:
        """The generated numba module text of program order (the simulator's view of this kernel)."""
        return self.runner("numba").source

    @property
    def pipelined_source(self) -> str:
        """The generated numba module text of pipelined order (the split, synced programs)."""
        return self.runner("numba", "pipelined").source

    @property
    def memory_map(self) -> str:
        """Every on-chip buffer of every program with its address, and the peak per space (plan_memory)."""
        return self.report.memory_map()

    @property
    def ir_text(self) -> str:
        return str(self.ir)

    def ir_after(self, stage: str) -> str:
        """The printed IR after a pass (or ``"frontend"``): see ``cvtile.dsl.passes``."""
        return self.compilation.ir_after(stage)

    def launch(self, grid: int, args: list, *, serial: bool = False, order: str = "program", check=None):
        """Run on the simulator. ``check``: the backend's checking mode (``cvtile.sim.CheckMode``, or True for
        every check; None: unchecked, unless a ``cvtile.sim.checked_launches()`` block is active)."""
        active = _active_recorders()
        for rec in active:
            rec.launches.append(LaunchRecord(self, grid, args, snapshot=rec.run))
        if any(not rec.run for rec in active):
            return None
        return self.runner("numba", order).launch(grid, args, serial=serial, check=check)

    def cost(self, grid: int, args: list, **kw):
        """The cost model's estimate of one launch (``cvtile.sim.cost.estimate``): time, bound, busy fractions."""
        from cvtile.sim.cost import estimate

        return estimate(self, grid, args, **kw)

    @property
    def ascendc(self) -> str:
        """The Ascend C source of this kernel (``cvtile.dsl.ascendc``: the final IR and its memory plan)."""
        from . import ascendc

        return ascendc.lowered(self).source

    def emit(self, dir_: str, grid: int | None = None, args: list | None = None, **kw) -> dict:
        """Write the Ascend C project of this kernel into ``dir_``; with ``grid`` and ``args`` (the runtime
        arguments of one launch) also its data: the inputs, the tiling buffer and the simulator's results as
        goldens (see ``cvtile.dsl.ascendc.emit``)."""
        from . import ascendc

        if args is None:
            return ascendc.emit(dir_, [ascendc.Launch(self, grid or 1, [])], with_data=False)
        return ascendc.emit(dir_, [ascendc.Launch(self, grid, args)], **kw)


class JITFunction:
    __cvtile_jit__ = True

    def __init__(self, fn, target: str | None = None):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.target = target
        self.signature = inspect.signature(fn)
        self._cache: dict = {}
        self._constexpr = {name for name, p in self.signature.parameters.items() if _is_constexpr(p, fn)}
        #: (name, default) of every parameter when all are positional-or-keyword (``_bind``'s fast path)
        self._plain_params = _plain_parameters(self.signature)

    def __repr__(self) -> str:
        return f"<cvtile kernel {self.__name__}>"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"launch cvtile kernel {self.__name__} with {self.__name__}[grid](...) "
                           f"(grid = number of cores)")

    def on(self, target: str) -> "JITFunction":
        """The same kernel compiled for another target platform."""
        other = JITFunction.__new__(JITFunction)
        other.__dict__.update(self.__dict__)
        other.target = target
        other._cache = self._cache
        return other

    def __getitem__(self, grid):
        if isinstance(grid, tuple):
            if len(grid) != 1:
                raise TypeError("cvtile grids are one-dimensional: kernel[n](...)")
            grid = grid[0]
        if not isinstance(grid, int) or isinstance(grid, bool) or grid <= 0:
            raise ValueError(f"grid must be a positive number of cores, got {grid!r}")

        def launcher(*args, serial: bool = False, order: str = "program", check=None, **kwargs):
            compiled, runtime = self._specialise(args, kwargs)
            return compiled.launch(grid, runtime, serial=serial, order=order, check=check)

        return launcher

    def cost(self, grid: int, *args, **kwargs):
        """The cost model's estimate of ``kernel[grid](*args, **kwargs)`` on this kernel's target (nothing runs):
        ``.estimated_us``, ``.bound``, ``.busy``, the critical path (``cvtile.sim.cost.LaunchCost``)."""
        compiled, runtime = self._specialise(args, kwargs)
        return compiled.cost(grid, runtime)

    def specialise(self, args, kwargs) -> tuple:
        """``(CompiledKernel, runtime arguments)`` of the launch ``kernel[grid](*args, **kwargs)``: the launcher
        runs ``compiled.launch(grid, runtime)``. For a caller that keeps the specialisation of a launch whose
        constexprs and argument types it knows will recur."""
        return self._specialise(args, kwargs)

    def compile(self, *args, **kwargs) -> CompiledKernel:
        """Compile (or fetch from the cache) the specialisation for these arguments."""
        return self._specialise(args, kwargs)[0]

    # ------------------------------------------------------------------
    def _specialise(self, args, kwargs):
        from cvtile.tiling.platform import DEFAULT_TARGET, get_platform

        bindings = {}
        runtime = []
        key_parts = []
        for name, value in self._bind(args, kwargs).items():
            if name in self._constexpr or value is None:
                bindings[name] = ("constexpr", value)
                key_parts.append((name, _hashable(value)))
                continue
            kind, info, text = _runtime_class(value)
            if kind is None:
                kind, info = self._classify(name, value)
                text = repr(info)
            bindings[name] = (kind, info)
            key_parts.append((name, kind, text))
            runtime.append(value)
        platform = get_platform(self.target or DEFAULT_TARGET)
        key = (_source_hash(self.fn), tuple(key_parts), platform.name)
        compiled = self._cache.get(key)
        if isinstance(compiled, CompilationError):   # this specialisation failed before: it fails the same way
            raise compiled.with_traceback(None)
        if compiled is None:
            from .passes.plan_memory import check_plan

            def trace():
                return build_kernel(self.fn, bindings, platform, self.__name__)

            try:
                digest = specialisation_cache.disk_key(self.fn, key, platform)
                stored = specialisation_cache.load(digest)
                if stored is None:
                    compilation = run_pipeline(trace(), platform, texts=False,
                                               retrace=lambda: run_pipeline(trace(), platform))
                else:
                    compilation = Compilation(*stored, retrace=lambda: run_pipeline(trace(), platform))
                ir = compilation.sequential
                report = compilation.final.memory
                check_plan(report, compilation.final)
            except CompilationError as exc:
                # kept like a success: a caller that tries tile sizes until one fits (FIA's row passes) would
                # otherwise run the whole pass pipeline again on every call for the sizes that do not
                self._cache[key] = exc
                raise
            if stored is None:
                specialisation_cache.store(digest, compilation.frontend, compilation.sequential, compilation.final)
            compiled = CompiledKernel(ir, report, platform, key, compilation)
            self._cache[key] = compiled
        return compiled, runtime

    def _bind(self, args, kwargs) -> dict:
        """The arguments by parameter name in signature order, defaults applied: ``signature.bind`` and
        ``apply_defaults``. A kernel whose parameters are all positional-or-keyword binds by a direct walk of
        its parameters (inspect's binder was a fifth of a small launch's fixed cost); any other kernel, and any
        call that does not bind (too many arguments, an unknown or repeated keyword, a missing argument), goes
        through ``inspect``, whose TypeError names the problem."""
        plain = self._plain_params
        if plain is not None and len(args) <= len(plain):
            out, used, n = {}, 0, len(args)
            for i, (name, default) in enumerate(plain):
                if i < n:
                    out[name] = args[i]
                elif name in kwargs:
                    out[name] = kwargs[name]
                    used += 1
                elif default is not inspect.Parameter.empty:
                    out[name] = default
                else:
                    break
            else:
                if used == len(kwargs):   # every keyword named a parameter not given by position
                    return out
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: {e}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def _classify(self, name, value):
        if name in self._constexpr or value is None:
            return "constexpr", value
        if isinstance(value, bool):
            return "scalar", BOOL
        if isinstance(value, int) or _is_np_scalar(value, "i"):
            return "scalar", INDEX
        if isinstance(value, float) or _is_np_scalar(value, "f"):
            return "scalar", F32
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            try:
                dt = _tensor_dtype(value.dtype)
            except TypeError as e:
                raise TypeError(f"{self.__name__}: argument {name!r}: {e}") from None
            return "tensor", TensorType(dt, len(value.shape))
        raise TypeError(f"{self.__name__}: argument {name!r} of type {type(value).__name__} is neither an array, "
                        f"a number, nor a constexpr")


#: argument dtype (numpy or torch) -> DSL dtype: a launch classifies every tensor argument, and naming a numpy
#: dtype costs microseconds each
_DTYPE_MEMO: dict = {}
#: (numpy dtype, rank) of an array argument of rank >= 1 -> ("tensor", TensorType, its repr): ``_runtime_class``
_ARRAY_MEMO: dict = {}
_SCALARS = {bool: ("scalar", BOOL, repr(BOOL)), int: ("scalar", INDEX, repr(INDEX)),
            float: ("scalar", F32, repr(F32))}
_UNKNOWN = (None, None, None)


def _runtime_class(value) -> tuple:
    """``(kind, info, repr(info))`` of a runtime argument whose class is known without ``_classify``'s walk: a
    Python bool, int or float, or a numpy array of rank >= 1 (by dtype and rank, memoised); else
    ``(None, None, None)``. Gives what ``_classify`` gives for the same value."""
    t = type(value)
    if t is np.ndarray and value.ndim:
        key = (value.dtype, value.ndim)
        hit = _ARRAY_MEMO.get(key)
        if hit is None:
            try:
                info = TensorType(_tensor_dtype(value.dtype), value.ndim)
            except TypeError:   # not a kernel dtype: ``_classify`` raises, naming the argument
                return _UNKNOWN
            hit = _ARRAY_MEMO[key] = ("tensor", info, repr(info))
        return hit
    return _SCALARS.get(t, _UNKNOWN)


def _tensor_dtype(dtype):
    """The DSL dtype of an array argument's dtype (memoised by the dtype object)."""
    try:
        return _DTYPE_MEMO[dtype]
    except KeyError:
        dt = _DTYPE_MEMO[dtype] = dtype_of(str(dtype).replace("torch.", ""))
        return dt
    except TypeError:   # an unhashable dtype-like object
        return dtype_of(str(dtype).replace("torch.", ""))


def jit(fn=None, *, target: str | None = None):
    """Decorate a kernel written in the cvtile tile language (see ``cvtile.dsl``)."""
    if fn is None:
        return lambda f: JITFunction(f, target)
    return JITFunction(fn, target)


def inline(fn):
    """Decorate a helper written in the kernel language; calls from kernels are inlined."""
    return InlineFunction(fn)


def _is_constexpr(p: inspect.Parameter, fn) -> bool:
    ann = p.annotation
    if ann is inspect.Parameter.empty:
        return False
    if ann is constexpr:
        return True
    if isinstance(ann, str):
        try:
            return eval(ann, getattr(fn, "__globals__", {})) is constexpr
        except Exception:
            return ann.split(".")[-1] == "constexpr"
    return False


def _is_np_scalar(v, kind: str) -> bool:
    dt = getattr(v, "dtype", None)
    return dt is not None and getattr(v, "shape", None) == () and dt.kind == kind


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _source_hash(fn) -> str:
    try:
        src = source_of(fn)
    except CompilationError:
        return str(id(fn))
    return src.digest


def _plain_parameters(signature: inspect.Signature):
    """``((name, default), ...)`` when every parameter is positional-or-keyword, else None."""
    params = list(signature.parameters.values())
    if any(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params):
        return None
    return tuple((p.name, p.default) for p in params)
