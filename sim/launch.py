"""Running a compiled kernel on the simulator: module loading, caching, threads, errors.

Model
-----
``NumbaRunner`` is the "numba" backend of ``cvtile.dsl``. For one compiled
kernel it generates the numba module text (``codegen.generate``), writes it
into the cache directory under a name derived from a hash of the text, and
imports it. The functions a launch calls are compiled by the direct compiler
(``direct``: the text typed and lowered to LLVM with numba's own rules and
runtime helpers, without numba's front end), or by numba when
``$CVTILE_COMPILER`` is ``numba`` or the direct compiler does not take the
module (``compile_direct``; the compile log says why). Either keeps the machine
code beside the text (the direct compiler's ``*.direct`` objects, numba's
``cache=True`` files), so a second process with the same kernel loads instead
of compiling. The
compile of each of the module's functions holds a lock file beside the module
(``_compiling``), so processes that need the same kernel at the same moment
(test or corpus workers, ``precompile``'s children) compile it once: the others
wait, then load it. Two functions of one module (a core group's ``prog_aic``
and ``prog_aiv``) may compile in two processes at once.

``launch(grid, args)`` converts the arguments (arrays to flat storage views,
16-bit floats as uint16 bits, zero-copy when contiguous; a copied array is
written back after the run; a read-only array is never written back: one the kernel only reads runs as it is
or on a private writeable copy, one a ``store`` writes is a ``ValueError`` naming it), runs the cores on Python threads (the generated
``core`` releases the GIL; each thread takes the next core when it is free, so
uneven cores balance; the threads are the process's reused workers, ``workers.run_all``; a one-core or
one-thread launch runs on the caller's thread) with BLAS held at one thread (nested BLAS threads halve
the speed), and raises ``SimulationError`` for the first core that recorded an
error, naming the kernel source line. ``CVTILE_THREADS`` sets the thread count
(default: the CPUs this process may use). A launch with ``check=`` (or inside
``checking.checked_launches()``) runs the checked module of the kernel instead
(``checking.launch_checked``: the same conversion, threads and error decoding,
plus the shadow arrays each program gets).

A module's functions compile at the LLVM level its text names (``OPT_LEVEL``, from ``$CVTILE_OPT`` when it
was generated; ``optlevel``), not at numba's process-wide level.

A module compiled without NRT (``codegen``: a function that allocates
nothing) that numba refuses to compile so is regenerated with NRT and compiled
again.

The cache directory is ``$CVTILE_CACHE_DIR`` or ``~/.cache/cvtile``.
``CVTILE_COMPILE_LOG=<file>`` appends one tab-separated line per machine-code
compile (or numba cache load) of a kernel variant: seconds, kernel, order,
the generated module's name, the running pytest test if any, and the
statement that forced an NRT fallback if one did (what a test tier spends on
compiles, which tests share a specialisation, and which compiles ran twice).
``COMPILE_STATS["nrt_fallbacks"]`` counts those second compiles.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from ..dsl.errors import SimulationError
from . import checking, direct
from .codegen import generate
from .optlevel import compiling_kernels
from .shadow import ERR_WIDTH
from .storage import to_storage
from .sync import ROLES, SCHED_WAIT, abort_group, new_sched
from .workers import run_all

__all__ = ["NumbaRunner", "cache_dir", "COMPILE_STATS"]

_MODULES: dict[str, object] = {}
_LOCK = threading.Lock()
#: seconds this process has spent generating, loading and compiling kernels (for reports that separate
#: compile time from run time)
COMPILE_STATS = {"seconds": 0.0, "kernels": 0, "nrt_fallbacks": 0, "direct": 0, "direct_fallbacks": 0}


_BLAS = {"modules": -1, "controller": None, "libs": []}


def _one_blas_thread():
    """A context that limits BLAS to one thread (the cores are the launch's parallelism).

    Inspecting the process's native libraries costs about 2 ms (threadpoolctl walks every loaded library), which
    was half the fixed cost of a small launch; the controller is therefore built once and rebuilt only when
    the process has imported modules since (a BLAS library arrives with an import: numpy's, scipy's for
    numba's ``np.dot``, torch's)."""
    if _BLAS["modules"] != len(sys.modules):
        _BLAS["controller"] = ThreadpoolController()
        _BLAS["modules"] = len(sys.modules)
        _BLAS["libs"] = _BLAS["controller"].select(user_api="blas").lib_controllers
    return _OneThread(_BLAS["libs"])


class _OneThread:
    """What ``ThreadpoolController.limit(limits=1, user_api="blas")`` does, without its snapshot of every
    library's info (half of the context's cost): each BLAS library's thread count is read and set to 1 now,
    and set back on exit."""

    def __init__(self, libs):
        self._libs = libs
        self._saved = [lib.num_threads for lib in libs]
        for lib in libs:
            lib.set_num_threads(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for lib, n in zip(self._libs, self._saved):
            lib.set_num_threads(n)
        return False


def cache_dir() -> Path:
    env = os.environ.get("CVTILE_CACHE_DIR")
    path = Path(env) if env else Path.home() / ".cache" / "cvtile"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _load_module(text: str, name: str):
    digest = hashlib.sha1(text.encode()).hexdigest()[:20]
    modname = f"cvtile_k_{_safe(name)}_{digest}"
    with _LOCK:
        if modname in _MODULES:
            return _MODULES[modname]
        path = cache_dir() / f"{modname}.py"
        if not path.exists() or path.read_text() != text:
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        _MODULES[modname] = module
        return module


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:40]


class _Variant:
    """One generated module of a runner (unchecked, or checked with one ``CheckMode``) and the argument
    signatures its machine code is ready for."""

    def __init__(self, generated, name: str):
        self.generated = generated
        self.name = name
        self._module = None
        #: argument signature -> what runs it: the imported module (numba's functions) or a
        #: ``direct.DirectModule``
        self.ready: dict = {}

    @property
    def module(self):
        if self._module is None:
            self._module = _load_module(self.generated.text, self.name)
        return self._module


class NumbaRunner:
    """Runs one compiled kernel on the simulator in one execution order: ``"program"`` runs the sequential
    kernel (one ``core`` per AI core), ``"pipelined"`` the programs the passes produced (one ``group`` driver
    per core group, its AIC and AIV programs meeting only at flags). A launch with ``check=`` (or inside
    ``checked_launches()``) runs the checked variant of the module (``checking``), generated on first use."""

    def __init__(self, compiled, order: str = "program", ir=None):
        t0 = time.perf_counter()
        self.compiled = compiled
        self.order = order
        #: the IR this runner executes (``ir`` overrides it: tests run hand-modified programs)
        self.ir = ir if ir is not None else (compiled.ir if order == "program" else compiled.compilation.final)
        self.generated = generate(self.ir)
        #: the tensor parameters some store writes (a read-only array may be passed for any other)
        self.stored_params = stored_params(self.ir)
        self.source = self.generated.text
        self._plain = _Variant(self.generated, compiled.name)
        self._checked: dict = {}
        COMPILE_STATS["seconds"] += time.perf_counter() - t0

    @property
    def module(self):
        return self._plain.module

    @property
    def plain(self) -> _Variant:
        """The unchecked module's variant (what a launch without checking runs)."""
        return self._plain

    def variant(self, mode) -> _Variant:
        """The checked module of ``mode`` (a ``checking.CheckMode`` without equivalence)."""
        if mode not in self._checked:
            t0 = time.perf_counter()
            self._checked[mode] = _Variant(generate(self.ir, check=mode), self.compiled.name)
            COMPILE_STATS["seconds"] += time.perf_counter() - t0
        return self._checked[mode]

    def warm(self, args) -> None:
        """Compile the machine code now (for timing compile separately from running)."""
        self.launch(1, args, dry=True)

    def launch(self, grid: int, args: list, *, serial: bool = False, dry: bool = False, check=None):
        if check is not None or checking.active() is not None:
            mode, session, own = checking.resolve(check)
            if mode is not None:
                return checking.launch_checked(self, mode, session, own, grid, args, serial, dry)
        variant = self._plain
        flat_args, writeback, _ = self.convert(grid, args, variant)
        err, problems = self.execute(variant, grid, flat_args, serial, dry)
        if dry:
            return None
        bad = np.nonzero(err[:, 0])[0]
        if bad.size:
            self.raise_error(self.generated, err, int(bad[0]))
        if problems:
            raise SimulationError(self.describe(problems[0]), problems[0][0])
        self.write_back(writeback)
        return None

    def convert(self, grid: int, args: list, variant: _Variant):
        """(flat arguments of the generated function, the copies to write back, storage by parameter name): each
        tensor's flat storage or scalar in parameter order, then every tensor's axes in one int64 array."""
        flat_args = []
        writeback = []
        storages = {}
        names = variant.generated.arg_names
        user = [n for n in names if n[1] != "workspace"]
        if len(user) != len(args):
            raise TypeError(f"{self.compiled.name}: expected {len(user)} runtime arguments, got {len(args)}")
        args = list(args) + workspace_views(self.ir, grid)
        dims = []     # every tensor's axes, in parameter order
        for (pname, kind), value in zip(names, args):
            if kind in ("tensor", "workspace"):
                storage, _ = to_storage(value, pname)
                read_only = isinstance(value, np.ndarray) and not value.flags.writeable
                if read_only:
                    if pname in self.stored_params:
                        raise ValueError(f"{self.compiled.name}: argument {pname!r} is a read-only array, but the "
                                         f"kernel stores into it; pass a writeable array")
                    if not storage.flags.writeable:
                        storage = storage.copy()      # a private writeable copy: the kernel only reads it
                storages[pname] = storage
                flat = storage.reshape(-1)
                if not (read_only or _is_view_of(value) or _shares(flat, value)):
                    writeback.append((value, storage))
                dims += storage.shape
                flat_args.append(flat)
            elif kind == "scalar":
                flat_args.append(_scalar(value))
        flat_args.append(np.array(dims, dtype=np.int64))
        return flat_args, writeback, storages

    def flat_types(self, args: list) -> list:
        """The numba types of the flat arguments ``convert`` makes of ``args``, without converting or allocating
        anything (the arrays of a recording that does not run are read-only broadcasts): every tensor's storage
        a writeable C-contiguous 1-d array, a scalar as ``_scalar`` makes it, and last the axes (``convert``)."""
        from numba import from_dtype, types, typeof

        from .storage import storage_dtype

        flat = []
        workspaces = iter(p for p in self.ir.params if p.kind == "workspace")
        for (_, kind), value in zip(self.generated.arg_names, list(args) + [None] * len(self.generated.arg_names)):
            if kind in ("tensor", "workspace"):
                dt = storage_dtype(next(workspaces).type.dtype.name if kind == "workspace" else value.dtype)
                flat.append(types.Array(from_dtype(dt), 1, "C"))
            elif kind == "scalar":
                flat.append(typeof(_scalar(value)))
        return flat + [types.Array(types.int64, 1, "C")]

    def execute(self, variant: _Variant, grid: int, flat_args: list, serial: bool, dry: bool, shadows=None):
        """Compile if needed and run every core (group); returns (err, problems). ``shadows``: the checked
        variant's ``shadow.LaunchShadows``."""
        err = np.zeros((max(grid, 1), 5 if shadows is None else ERR_WIDTH), dtype=np.int64)
        group = variant.generated.entry == "group"
        sig = tuple([(a.dtype, a.ndim) if type(a) is np.ndarray or hasattr(a, "ndim") else type(a)
                     for a in flat_args])
        if sig not in variant.ready:  # compile (or load from a cache) before the timed run
            t0 = time.perf_counter()
            fallback = ""
            sigs = signatures(variant.module, group, err, flat_args, shadows)
            runnable, fallback = compile_direct(variant.module, variant.generated.text, sigs)
            if runnable is None:
                try:
                    compile_signatures(variant.module, sigs)
                except Exception as e:   # an NRT-free function that turns out to need NRT: compile it with NRT
                    if _NO_NRT not in variant.generated.text or not _is_numba_error(e):
                        raise
                    fallback = _nrt_reason(e)
                    variant.generated.text = variant.generated.text.replace(_NO_NRT, "")
                    variant._module = None
                    compile_signatures(variant.module, signatures(variant.module, group, err, flat_args, shadows))
                    COMPILE_STATS["nrt_fallbacks"] += 1
                runnable = variant.module
            seconds = time.perf_counter() - t0
            COMPILE_STATS["seconds"] += seconds
            COMPILE_STATS["kernels"] += 1
            variant.ready[sig] = runnable
            _log_compile(seconds, self.compiled.name, self.order, variant, fallback)
        if dry:
            return err, []
        threads = 1 if serial or (shadows is not None and shadows.serial) else _threads()
        runnable = variant.ready[sig]
        with _one_blas_thread():
            if group:
                problems = _run_groups(runnable, grid, err, flat_args, threads, shadows)
            else:
                _run_cores(runnable, grid, err, flat_args, threads, shadows)
                problems = []
        return err, problems

    def raise_error(self, generated, err, core: int):
        """The SimulationError of the check that core ``core`` recorded in ``err``."""
        site = int(err[core, 0])
        message, loc, labels = generated.sites[site - 1]
        vals = [int(x) for x in err[core, 1:1 + len(labels)]]
        detail = ", ".join(f"{lab}={val}" for lab, val in zip(labels, vals))
        who = f"{core} ({ROLES[int(err[core, 4])]})" if generated.entry == "group" else core
        raise SimulationError(f"{message}{' (' + detail + ')' if detail else ''}", who, loc, vals)

    @staticmethod
    def write_back(writeback) -> None:
        for original, storage in writeback:
            _write_back(original, storage)

    def describe(self, problem, generated=None) -> str:
        """The text of a deadlock or of flags left set at the end, from the group driver's record (of the
        module ``generated``, by default the unchecked one)."""
        generated = generated or self.generated
        blk, kind, data = problem
        sites = generated.sites
        if kind == "leftover":
            rows = ", ".join(f"{_counter(r)} of flag id {fid}: {n}" for r, fid, n in data)
            return (f"core group {blk}: flags are left set at the end of the kernel (a set without a matching "
                    f"wait): {rows}")
        lines = [f"deadlock in core group {blk}: every program that has not finished waits on a flag"]
        for role, site in enumerate(data):
            if site <= 0:
                lines.append(f"  {ROLES[role]}: finished")
                continue
            message, loc, _ = sites[site - 1]
            lines.append(f"  {ROLES[role]} {message} at {loc}: {loc.text.strip() if loc and loc.text else ''}")
            fid = _flag_id(message)
            sets = generated.flag_sets.get(fid, [])
            where = "; ".join(f"{core} program at {sloc}" for core, sloc in sets) or "nowhere: no program sets it"
            lines.append(f"      its set is in the {where}")
        return "\n".join(lines)


def _counter(row: int) -> str:
    """The flag counter ``flags[row]`` of a core group (see ``codegen``: rows 0/1 are the AIVs' inbound
    counters, rows 2/3 the AIC's from AIV 0/1)."""
    return f"{ROLES[row + 1]} counter" if row < 2 else f"aic counter from {ROLES[row - 1]}"


def _flag_id(message: str) -> int:
    import re

    m = re.search(r"\(id (\d+)\)", message)
    return int(m.group(1)) if m else -1


def workspace_views(ir, grid: int, fill: bool = True) -> list:
    """The workspace arguments of a split kernel: one allocation of ``grid`` core groups' slots, filled with
    all-ones bytes (NaN in every float slot, so a slot read before it is written shows), viewed once per
    channel with the channel's dtype. ``fill=False``: left unfilled, for a caller that never reads them."""
    params = [p for p in ir.params if p.kind == "workspace"]
    if not params:
        return []
    from .storage import USER_DTYPE

    n = max(1, grid) * ir.slot_area_bytes
    buf = np.full(n, 0xFF, np.uint8) if fill else np.empty(n, np.uint8)
    return [buf.view(USER_DTYPE[p.type.dtype.name]) for p in params]


def _threads() -> int:
    env = os.environ.get("CVTILE_THREADS")
    if env:
        return max(1, int(env))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _bound(fn, *fixed):
    """``fn`` with every argument after its leading integers (``blk, nblk, sub`` and a program's ``role``) fixed to
    ``fixed``: a thread binds a launch's arguments once and calls the result for each core (group). A directly
    compiled function packs them once (``DirectFunction.bind``); the callable keeps ``fixed`` alive."""
    if hasattr(fn, "bind"):
        return fn.bind(*fixed)
    return lambda *lead: fn(*lead, *fixed)


def _run_cores(module, grid: int, err: np.ndarray, args: list, threads: int, shadows=None) -> None:
    """Run core(blk) for blk in 0..grid-1 on ``threads`` threads, each taking the next core when free
    and reusing one set of tile buffers (and, checked, of workspace shadows) for all the cores it runs."""
    core = module.core

    def state() -> tuple:
        return (module.alloc(),) if shadows is None else (module.alloc(), shadows.for_core())

    if threads <= 1 or grid <= 1:
        run = _bound(core, err, *state(), *args)
        for blk in range(grid):
            if run(blk, grid, 0):
                return
        return
    counter = iter(range(grid))
    lock = threading.Lock()
    failures = []

    def worker():
        run = _bound(core, err, *state(), *args)
        while True:
            with lock:
                blk = next(counter, None)
            if blk is None:
                return
            try:
                run(blk, grid, 0)
            except BaseException as e:  # a numba-level error: report it from the launching thread
                failures.append(e)
                return

    run_all(worker, min(threads, grid))
    if failures:
        raise failures[0]


def _run_groups(module, grid: int, err: np.ndarray, args: list, threads: int, shadows=None) -> list:
    """Run every core group: its AIC program on a worker thread and its AIV program on two more threads, the
    three passing one baton (``sync.py``); ``threads`` groups at a time. Returns the problems found
    ((blk, "deadlock", wait sites by role) or (blk, "leftover", [(row, id, count)])), first group first."""
    problems = []
    lock = threading.Lock()
    counter = iter(range(grid))
    failures = []

    def program(run, blk, sub, role, sched):
        try:
            run(blk, grid, sub, role)
        except BaseException as e:   # a numba-level error: stop the group, report from the launching thread
            failures.append(e)
            abort_group(sched)

    def one(blk, runs, flags, sched, reset):
        flags[:] = 0
        if reset is not None:
            reset()
        sched[:] = new_sched()
        aivs = [threading.Thread(target=program, args=(runs[k + 1], blk, k, k + 1, sched), daemon=True)
                for k in (0, 1)]
        for t in aivs:
            t.start()
        program(runs[0], blk, 0, 0, sched)
        for t in aivs:
            t.join()
        if sched[2] == 2:
            with lock:
                problems.append((blk, "deadlock", [int(x) for x in sched[SCHED_WAIT:SCHED_WAIT + 3]]))
            return False
        if sched[2] == 0 and flags[:4].any():
            rows = [(int(r), int(i), int(flags[r, i])) for r, i in zip(*np.nonzero(flags[:4]))]
            with lock:
                problems.append((blk, "leftover", rows))
            return False
        return sched[2] == 0 and not failures

    def worker():
        bufs = (module.alloc_aic(), module.alloc_aiv(), module.alloc_aiv())
        states, reset = [(b,) for b in bufs], None
        if shadows is not None:
            tuples, reset = shadows.for_group()
            states = [(b, t) for b, t in zip(bufs, tuples)]
        flags = np.zeros((5, 16), np.int64)
        sched = new_sched()         # reset for each group (``one``), so the bound programs keep pointing at it
        runs = [_bound(fn, flags, sched, err, *st, *args)
                for fn, st in zip((module.prog_aic, module.prog_aiv, module.prog_aiv), states)]
        while True:
            with lock:
                blk = next(counter, None)
            if blk is None or not one(blk, runs, flags, sched, reset):
                return

    if threads <= 1 or grid <= 1:
        worker()
    else:
        run_all(worker, min(threads, grid))
    if failures:
        raise failures[0]
    problems.sort(key=lambda p: p[0])
    return problems


def _log_compile(seconds: float, kernel: str, order: str, variant, fallback: str = "") -> None:
    """One line of ``$CVTILE_COMPILE_LOG`` (see the module docstring); nothing when it is unset."""
    path = os.environ.get("CVTILE_COMPILE_LOG")
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    with open(path, "a") as f:
        f.write(f"{seconds:.3f}\t{kernel}\t{order}\t{variant.module.__name__}\t{test}\t{fallback}\n")


def _nrt_reason(e: Exception) -> str:
    """The statement numba could not lower without NRT (for the compile log), from its error text."""
    import re

    found = re.search(r'lowering "([^"]*)"', str(e))
    return "nrt fallback: " + (found.group(1) if found else str(e).splitlines()[0])[:160]


def compile_direct(module, text: str, sigs: list):
    """(the ``direct.DirectModule`` of ``sigs``'s functions, "") when ``$CVTILE_COMPILER`` is ``direct`` and the
    direct compiler takes the module, else (None, why not: "" when numba is the compiler)."""
    if direct.compiler() != "direct":
        return None, ""
    try:
        runnable = direct.compile_functions(module, text, sigs, module.OPT_LEVEL, _direct_cache_path, _compiling)
    except direct.Unsupported as e:   # outside the direct compiler's subset: numba compiles it
        COMPILE_STATS["direct_fallbacks"] += 1
        return None, f"direct fallback: {e}"[:200]
    COMPILE_STATS["direct"] += 1
    return runnable, ""


def compiled_on_disk(module, text: str, function: str, sig) -> bool:
    """Whether ``function`` of ``module`` has machine code for ``sig`` in the kernel cache, by the compiler
    ``$CVTILE_COMPILER`` names (numba's index file, or the direct compiler's object)."""
    if direct.compiler() == "direct":
        return _direct_cache_path(module, function, direct.cache_key(text, function, sig, module.OPT_LEVEL)).exists()
    return any((cache_dir() / "__pycache__").glob(f"{module.__name__}.{function}-*.nbi"))


def compile_job(module, text: str, function: str, sig) -> None:
    """Compile ``function`` of ``module`` for ``sig`` into the kernel cache by the compiler ``$CVTILE_COMPILER``
    names (numba when the direct compiler does not take it): ``precompile``'s children."""
    runnable, _ = compile_direct(module, text, [(function, sig)])
    if runnable is None:
        compile_signatures(module, [(function, sig)])


def _direct_cache_path(module, function: str, key: str) -> Path:
    """Where the direct compiler keeps ``function``'s machine code for ``key`` (beside the module's text)."""
    return cache_dir() / f"{module.__name__}.{function}.{key}.direct"


@contextlib.contextmanager
def _compiling(module, function: str):
    """Hold the cache's lock file of ``function`` of ``module`` while its machine code is compiled or loaded: two
    processes that need the same kernel at once (test workers, corpus workers, ``precompile``'s children) compile
    it once, the second then loads what the first wrote into numba's cache instead of compiling it again.
    Without ``fcntl`` (not POSIX) there is no lock and each process compiles for itself, as before."""
    try:
        import fcntl
    except ImportError:   # pragma: no cover - not POSIX
        yield
        return
    with open(cache_dir() / f"{module.__name__}.{function}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def signatures(module, group: bool, err, args, shadows=None) -> list:
    """(function name, numba argument types) of each function of ``module`` a launch with the flat arguments
    ``args`` calls: ``core``, or (``group``) a core group's ``prog_aic`` and ``prog_aiv``."""
    if group:
        flags = np.zeros((5, 16), np.int64)
        sched = new_sched()
        tuples = shadows.for_group()[0] if shadows is not None else None
        out = []
        for name, bufs, k in (("prog_aic", module.alloc_aic(), 0), ("prog_aiv", module.alloc_aiv(), 1)):
            extra = [] if tuples is None else [tuples[k]]
            out.append((name, _types([np.int64(0), np.int64(1), np.int64(0), np.int64(0), flags, sched, err, bufs,
                                      *extra, *args])))
        return out
    extra = [] if shadows is None else [shadows.for_core()]
    return [("core", _types([np.int64(0), np.int64(1), np.int64(0), err, module.alloc(), *extra, *args]))]


def compile_signatures(module, sigs: list) -> None:
    """Compile (or load from numba's cache) each function of ``module`` for its argument types, without running
    it, each holding its lock file (``_compiling``), at the LLVM level the module's text names (``OPT_LEVEL``,
    ``optlevel``: a child compiling the same text compiles at the same level whatever its environment)."""
    for name, sig in sigs:
        with _compiling(module, name), compiling_kernels(module.OPT_LEVEL):
            getattr(module, name).compile(sig)


_NO_NRT = ", _nrt=False"


def _is_numba_error(e: Exception) -> bool:
    from numba.core.errors import NumbaError

    return isinstance(e, (NumbaError, NotImplementedError, AssertionError))


def _types(values: list) -> tuple:
    """The numba types of ``values`` (a value that is already a numba type stands for itself)."""
    from numba import typeof
    from numba.core.types import Type

    return tuple(x if isinstance(x, Type) else typeof(x) for x in values)


def stored_params(ir) -> frozenset:
    """The names of the kernel's tensor parameters that a ``store`` writes (the only op that writes user GM)."""
    ids = {op.windows["window"].tensor.id for op in ir.ops() if op.kind == "store"}
    params = [p for p in ir.params if p.kind != "constexpr"]
    return frozenset(p.name for p, v in zip(params, ir.args) if v.id in ids)


def _is_view_of(value) -> bool:
    """Whether ``to_storage(value)`` is a view of ``value`` without asking numpy (``np.shares_memory`` costs
    microseconds per argument): a plain C-contiguous numpy array in native byte order is stored as a view
    (``storage``'s invariant). An empty one shares no memory with anything, and has nothing to write back."""
    return type(value) is np.ndarray and value.flags.c_contiguous and value.dtype.isnative


def _shares(flat: np.ndarray, value) -> bool:
    try:
        arr = np.asarray(value) if not hasattr(value, "numpy") else None
    except Exception:
        arr = None
    if arr is None:
        return False
    try:
        return np.shares_memory(flat, arr)
    except Exception:
        return False


def _write_back(original, storage: np.ndarray) -> None:
    from .storage import from_storage, dtype_name

    data = from_storage(storage, dtype_name(original.dtype))
    if hasattr(original, "copy_") and hasattr(original, "numpy"):  # torch tensor
        import torch

        original.copy_(torch.from_numpy(np.ascontiguousarray(data).view(storage.dtype).copy())
                       .view(original.dtype) if data.dtype != storage.dtype else torch.from_numpy(data))
        return
    np.copyto(original, data)


def _scalar(value):
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return np.int64(value)
    return np.float32(value)
