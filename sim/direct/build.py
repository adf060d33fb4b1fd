"""Compiling a generated module's functions directly, and caching their machine code.

Model
-----
``compile_functions(module, text, signatures)`` compiles each (function name, numba argument types) of a
launch: the function's text is lowered (``lower.FunctionLowering``) into an LLVM module beside its C entry
point (``entry.build_entry``), in a numba code library of numba's CPU codegen, which links the runtime
helpers' libraries the body calls, optimises the whole at the module's LLVM level (``OPT_LEVEL``, under
``optlevel.compiling_kernels``, as numba compiles the module) and emits machine code. The library is
serialised (its object code) into the kernel cache beside the module's text, keyed by the function's text,
its argument types, the LLVM level, numba's version, the host CPU and the direct compiler's own source
stamp; a later process loads it instead of compiling, without loading numba's typing and lowering
registries (``_loader``): a warm process pays neither numba's front end nor its registries.

Invariants
----------
* The same text, argument types and level give the same machine code whether compiled or loaded.
* Symbol names carry the key's hash, so two kernels' entry points never clash in the process's JIT.
* Every typing and lowering decision is numba's (``lower``): a module the direct compiler takes computes
  what numba's compile of it computes, bit for bit, which ``tests/sim/test_direct_compiler.py`` compares.
"""

from __future__ import annotations

import ast
import hashlib
import os
import pickle
import threading

from llvmlite import ir
from numba import types

from ..stamp import source_stamp
from .entry import DirectFunction, build_entry, leading
from .lower import FunctionLowering, Unsupported

__all__ = ["compile_functions", "cache_key", "DirectModule", "STATS"]

#: what this process's direct compiles did: compiled afresh, or loaded from the kernel cache
STATS = {"compiled": 0, "loaded": 0}
_STATE: dict = {}
_TREES: dict = {}
_LOCK = threading.RLock()


def _context():
    """(target context with the numpy error model and no NRT, typing context, memos), made once per process."""
    if "ctx" not in _STATE:   # (``_loader`` may have filled the state first: a process that loaded, then compiles)
        from numba.core import callconv
        from numba.core.registry import cpu_target

        typingctx, target = cpu_target.typing_context, cpu_target.target_context
        typingctx.refresh()
        target.refresh()
        ctx = target.subtarget(error_model=callconv.create_error_model("numpy", target), enable_nrt=False)
        _STATE.update(ctx=ctx, typingctx=typingctx, memo={"sig": {}, "fnty": {}, "cres": {}, "attr": {}})
    return _STATE["ctx"], _STATE["typingctx"], _STATE["memo"]


def _loader():
    """numba's CPU codegen, ready to load cached machine code: numba's C helpers, its NRT and the BLAS (which
    the linked runtime helpers may call) in place, but not numba's typing and lowering registries, whose
    loading (``refresh``, about a quarter of a second more) only a compile needs."""
    if "codegen" not in _STATE:
        from numba.core.registry import cpu_target
        from numba.core.runtime import rtsys
        from numba.np.linalg import ensure_blas

        target = cpu_target.target_context
        rtsys.initialize(target)
        # the BLAS numba's matmul helpers call (scipy's), loaded now: the launcher holds every BLAS it finds
        # loaded at one thread (``launch._one_blas_thread``); loaded later, inside a kernel's first product, it
        # would run on all threads and block its sums otherwise (other bits)
        load_cython_blas()
        ensure_blas()
        _STATE["codegen"] = target.codegen()
    return _STATE["codegen"]


def load_cython_blas() -> None:
    """Import ``scipy.linalg.cython_blas`` (the BLAS whose function pointers numba's matmul helpers take) from
    its extension module alone, without running ``scipy.linalg``'s package ``__init__``: the same library and
    the same functions, in about 0.02 s instead of 0.23 s (the package imports scipy's array-API layer).
    ``import scipy.linalg.cython_blas`` and ``from scipy.linalg import cython_blas`` later give this module; the
    attribute ``scipy.linalg.cython_blas`` of a package imported later is not set (the import system sets it only
    when it loads the submodule itself). Does nothing when the module or the package is already imported, or
    scipy lays its files out otherwise (``ensure_blas`` then imports it)."""
    import importlib.machinery
    import importlib.util
    import sys

    name = "scipy.linalg.cython_blas"
    if name in sys.modules or "scipy.linalg" in sys.modules:
        return
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "cython_blas" + suffix)
        if os.path.exists(path):
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path,
                                                                                           loader=loader))
            loader.exec_module(module)
            sys.modules[name] = module
            return


def _function_node(text: str, name: str) -> ast.FunctionDef:
    tree = _TREES.get(text)
    if tree is None:
        tree = _TREES[text] = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    if name not in tree:
        raise Unsupported(f"no function {name!r} in the module")
    return tree[name]


def cache_key(text: str, name: str, argtys, level: int) -> str:
    """The cache key of ``name``'s machine code (see the module docstring for what it covers)."""
    import numba
    from llvmlite import binding as llvm

    parts = (source_stamp(("direct/lower.py", "direct/entry.py", "direct/build.py")), text, name, repr(tuple(argtys)),
             str(level), numba.__version__, llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())
    return hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:24]


def compile_function(module, text: str, name: str, argtys, level: int, cache_path) -> DirectFunction:
    """The ``DirectFunction`` of ``name`` in ``module`` (imported from ``text``) for ``argtys``, loaded from
    ``cache_path(key)`` when a process compiled it before, else compiled and written there."""
    from numba.core.compiler_lock import global_compiler_lock

    key = cache_key(text, name, argtys, level)
    entry_name = f"cvtile_direct_{name}_{key}"
    path = cache_path(key)
    with global_compiler_lock:
        if path.exists():
            try:
                lib = _loader().unserialize_library(pickle.loads(path.read_bytes()))
                fn = DirectFunction(lib, lib.get_pointer_to_function(entry_name), leading(argtys), name)
                STATS["loaded"] += 1
                return fn
            except Exception:   # noqa: BLE001  (a damaged or foreign cache file: compile afresh)
                pass
        ctx, typingctx, memo = _context()
        lib = ctx.codegen().create_library(entry_name)
        irmod = lib.create_ir_module(entry_name)
        body = ir.Function(irmod, ctx.call_conv.get_function_type(types.int64, list(argtys)), f"{entry_name}_body")
        body.linkage = "internal"
        node = _function_node(text, name)
        ctx.call_conv.decorate_function(body, [a.arg for a in node.args.args], list(argtys))
        lowering = FunctionLowering(ctx, typingctx, body, node, list(argtys), vars(module), memo)
        with ctx.push_code_library(lib):
            lowering.lower()
        build_entry(ctx, irmod, body, list(argtys), entry_name)
        lib.add_ir_module(irmod)
        for helper in lowering.libraries:
            lib.add_linking_library(helper)
        lib.enable_object_caching()
        lib.finalize()
        address = lib.get_pointer_to_function(entry_name)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(lib.serialize_using_object_code()))
        os.replace(tmp, path)
        STATS["compiled"] += 1
        return DirectFunction(lib, address, leading(argtys), name)


class DirectModule:
    """A generated module whose launched functions are directly compiled: the functions the launch calls are
    ``DirectFunction``s, everything else (the tile buffers' ``alloc``) is the imported module's."""

    def __init__(self, module, functions: dict):
        self._module = module
        self.__dict__.update(functions)

    def __getattr__(self, name):
        return getattr(self._module, name)


#: numba's (major, minor) versions the direct compiler was checked against: it calls numba's internal APIs
#: (the calling convention, the code library's serialisation, the typing and lowering registries)
CHECKED_NUMBA = ((0, 68),)


def check_numba_version(version: str | None = None) -> None:
    """Raise ``Unsupported`` (numba then compiles every module, with a warning once per process) when numba's
    version is not one ``CHECKED_NUMBA`` names."""
    import numba

    version = version or numba.__version__
    try:
        major_minor = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:
        major_minor = None
    if major_minor in CHECKED_NUMBA:
        return
    checked = ", ".join(f"{a}.{b}" for a, b in CHECKED_NUMBA)
    why = (f"numba {version} is not a version the direct compiler was checked against ({checked}): numba's own "
           f"pipeline compiles the simulator's modules (slower to compile, the same results)")
    if not _STATE.get("warned"):
        import warnings

        _STATE["warned"] = True
        warnings.warn(f"cvtile: {why}", RuntimeWarning, stacklevel=3)
    raise Unsupported(why)


def compile_functions(module, text: str, signatures: list, level: int, cache_path, lock) -> DirectModule:
    """``signatures``: (function name, numba argument types) of a launch (``launch.signatures``); each compiled
    or loaded holding ``lock(module, name)`` (the cache's lock file). Raises ``Unsupported`` when a function is
    outside the subset the direct compiler lowers, or numba is not a version it was checked against."""
    from ..optlevel import compiling_kernels

    check_numba_version()
    functions = {}
    for name, argtys in signatures:
        with lock(module, name + ".direct"), compiling_kernels(level):
            functions[name] = compile_function(module, text, name, argtys, level,
                                               lambda k, n=name: cache_path(module, n, k))
    return DirectModule(module, functions)
