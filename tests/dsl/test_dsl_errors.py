"""Every rule a kernel can break, with the message AND the location.

A `CompilationError` renders ``file:line: message`` plus the offending source line and a caret; each error
kernel below marks its offending line with ``# <- error`` and the test checks that the message names this
file and that line (found from the marker, so editing the file does not break the tests), quotes the
line, and contains a stable fragment of the rule. Compilation errors need no numba compile.

Run-time rules (out-of-bounds GM access, mismatched valid shapes, failing asserts...) raise
`SimulationError` naming the kernel source line, the values involved and the core.
"""

from __future__ import annotations

import inspect
import math  # noqa: F401  (kernels below call it at compile time)

import numpy as np
import pytest

import cvtile.dsl as ct

MARK = "# <- error"
F16 = np.zeros((16, 16), np.float16)
F32 = np.zeros((16, 16), np.float32)
CASES = []


def case(*fragments, args=(F16, F32), kwargs=None):
    def register(kernel):
        CASES.append(pytest.param(kernel, args, kwargs or {}, fragments, id=kernel.__name__))
        return kernel
    return register


# ------------------------------------------------------------------ scopes

@case("mma is a cube op; it is not allowed inside `with vector():`")
@ct.jit
def mma_in_vector(a, o):
    with ct.vector():
        x = ct.load(a[0:16, 0:16])
        y = ct.mma(x, x)  # <- error


@case("exp is a vector op; it is not allowed inside `with cube():`")
@ct.jit
def exp_in_cube(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        y = ct.exp(x)  # <- error


@case("+ is a vector op; it is not allowed inside `with cube():`")
@ct.jit
def add_in_cube(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        y = x + x  # <- error


@case("load is a tile op; put it inside `with cube():` (GM->L1) or `with vector():` (GM->UB)")
@ct.jit
def load_outside_scope(a, o):
    x = ct.load(a[0:16, 0:16])  # <- error


@case("this tile op needs an explicit space= outside `with vector():`")
@ct.jit
def zeros_outside_scope(a, o):
    x = ct.zeros((16,), ct.float32)  # <- error


@case("exp is a vector op; it is not allowed outside any cube()/vector() scope")
@ct.jit
def exp_outside_scope(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
    y = ct.exp(x)  # <- error


@case("`with cube():` inside `with vector():`: scopes do not nest")
@ct.jit
def nested_scopes(a, o):
    with ct.vector():
        with ct.cube():  # <- error
            pass


# ------------------------------------------------------------------ copy edges and stores

@case("copy UB->L0A is not a legal on-chip edge on Ascend910B1", "legal: L1->L0A, L1->L0B")
@ct.jit
def copy_ub_to_l0a(a, o):
    with ct.vector():
        x = ct.load(a[0:16, 0:16])
        y = ct.copy(x, ct.L0A)  # <- error


@case("copy L1->UB is not a legal on-chip edge on Ascend910B1")
@ct.jit
def copy_l1_to_ub(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        y = ct.copy(x, ct.UB)  # <- error


@case("load into UB is not a legal copy edge in cube scope (legal: GM->L1)")
@ct.jit
def load_ub_in_cube(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16], ct.UB)  # <- error


@case("store of a float32 UB tile into a float16 GM tensor: the UB->GM copy does not convert; "
      "cast the tile to float16 first")
@ct.jit
def store_f32_into_f16(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        ct.store(a[0:16, 0:16], x)  # <- error


@case("store from L1 is not a legal copy edge (legal: UB->GM, L0C->GM)")
@ct.jit
def store_from_l1(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        ct.store(a[0:16, 0:16], x)  # <- error


@case("the fixpipe cannot convert float32 to int32 on store", args=(F16, np.zeros((16, 16), np.int32)))
@ct.jit
def fixpipe_to_int(a, o):
    with ct.cube():
        c = ct.mma(a[0:16, 0:16], a[0:16, 0:16])
        ct.store(o[0:16, 0:16], c)  # <- error


@case("store: tile dim 1 capacity 16 exceeds the window extent 8")
@ct.jit
def store_larger_than_window(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        ct.store(o[0:16, 0:8], x)  # <- error


# ------------------------------------------------------------------ mma typing

@case("mma operands must have one dtype, got float16 and float32")
@ct.jit
def mma_dtype_mismatch(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        y = ct.load(o[0:16, 0:16])
        z = ct.mma(x, y)  # <- error


@case("mma takes float16, bfloat16, float32 or int8 operands, got int32", args=(np.zeros((16, 16), np.int32), F32))
@ct.jit
def mma_int32_operands(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        z = ct.mma(x, x)  # <- error


@case("mma operand a must be in L1, L0A or a GM window, got a L0B tile")
@ct.jit
def mma_wrong_operand_space(a, o):
    with ct.cube():
        x = ct.load(a[0:16, 0:16])
        y = ct.copy(x, ct.L0B)
        z = ct.mma(y, x)  # <- error


@case("mma contraction extents differ: a is 16x16, b is 8x16")
@ct.jit
def mma_contraction_mismatch(a, o):
    with ct.cube():
        z = ct.mma(a[0:16, 0:16], a[0:8, 0:16])  # <- error


@case("mma acc must be tile<16x16 float32 @L0C>, got tile<16x8 float32 @L0C>")
@ct.jit
def mma_acc_mismatch(a, o):
    with ct.cube():
        c = ct.mma(a[0:16, 0:16], a[0:16, 0:8])
        z = ct.mma(a[0:16, 0:16], a[0:16, 0:16], acc=c)  # <- error


@case("mma's trans_b must be a compile-time bool", args=(F16, F32, 1))
@ct.jit
def mma_runtime_trans_b(a, o, n):
    with ct.cube():
        z = ct.mma(a[0:16, 0:16], a[0:16, 0:16], trans_b=n > 0)  # <- error


# ------------------------------------------------------------------ tile typing

@case("mixing a rank-1 tile with a rank-2 tile: broadcast explicitly with v[:, None] (per row)")
@ct.jit
def rank1_with_rank2(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        r = ct.rowmax(x)
        y = x - r  # <- error


@case("tile shapes (16, 16) and (8, 1) do not broadcast")
@ct.jit
def shapes_do_not_broadcast(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        r = ct.rowmax(ct.load(o[0:8, 0:16]))
        y = x - r[:, None]  # <- error


@case("+ operands have different dtypes ['float16', 'float32']; cast one of them first")
@ct.jit
def dtype_mismatch(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        y = ct.load(a[0:16, 0:16])
        z = x + y  # <- error


@case("exp needs a float tile, got int32", args=(F16, np.zeros((16, 16), np.int32)))
@ct.jit
def exp_of_int(a, o):
    with ct.vector():
        z = ct.exp(ct.load(o[0:16, 0:16]))  # <- error


@case("where's condition must be a bool tile (a comparison result)")
@ct.jit
def where_needs_bool(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        z = ct.where(x, x, 0.0)  # <- error


@case("a float scalar operand with a int32 tile", args=(F16, np.zeros((16, 16), np.int32)))
@ct.jit
def float_scalar_with_int_tile(a, o):
    with ct.vector():
        z = ct.load(o[0:16, 0:16]) * 0.5  # <- error


@case("if needs a scalar condition; for tiles use where(...)")
@ct.jit
def if_on_a_tile(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        if x > 0.0:  # <- error
            pass


@case("a conditional expression on tiles: use where(cond, a, b)", args=(F16, F32, 1))
@ct.jit
def ifexp_on_tiles(a, o, n):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        y = x if n > 0 else x * 2.0  # <- error


@case("and/or on tiles: use & and |")
@ct.jit
def and_on_tiles(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        y = (x > 0.0) and (x < 1.0)  # <- error


@case("tiles support v[:, None] and v[None, :] broadcasts only (no element access or slicing)")
@ct.jit
def tile_element_access(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        y = x[0, 1]  # <- error


@case("cast rounding must be rint, round, trunc, floor or ceil, got 'nearest'")
@ct.jit
def bad_rounding_mode(a, o):
    with ct.vector():
        y = ct.cast(ct.load(o[0:16, 0:16]), ct.int32, rounding="nearest")  # <- error


# ------------------------------------------------------------------ unsupported Python

@case("while loops", "cvtile kernels do not support")
@ct.jit
def uses_while(a, o):
    while True:  # <- error
        pass


@case("cvtile kernels do not support break")
@ct.jit
def uses_break(a, o):
    for i in range(3):
        break  # <- error


@case("cvtile kernels do not support continue")
@ct.jit
def uses_continue(a, o):
    for i in range(3):
        continue  # <- error


@case("cvtile kernels do not support try/except")
@ct.jit
def uses_try(a, o):
    try:  # <- error
        pass
    finally:
        pass


@case("cvtile kernels do not support lambda")
@ct.jit
def uses_lambda(a, o):
    f = lambda z: z  # <- error  # noqa: E731


@case("cvtile kernels do not support list comprehensions")
@ct.jit
def uses_comprehension(a, o):
    f = [i for i in range(3)]  # <- error


@case("cvtile kernels do not support f-strings")
@ct.jit
def uses_fstring(a, o):
    f = f"{a}"  # <- error


@case("tiles are values: item assignment is not supported (build a new tile with where/ops)")
@ct.jit
def item_assignment(a, o):
    with ct.vector():
        x = ct.load(o[0:16, 0:16])
        x[0] = 1.0  # <- error


@case("kernels write their results to GM tensors; `return` is not allowed in a kernel")
@ct.jit
def returns_a_value(a, o):
    return 1  # <- error


@case("cvtile kernels do not support nested functions (use @cvtile.dsl.inline helpers)")
@ct.jit
def nested_def(a, o):
    def helper():  # <- error
        pass


# ------------------------------------------------------------------ names and scoping rules

@case("'t' is first assigned inside the loop at line", "and is not visible after it; assign it before the loop",
      args=(F16, F32, 3))
@ct.jit
def loop_local_used_after(a, o, n):
    for i in range(n):
        t = i * 2
    u = t + 1  # <- error


@case("loop-carried 's' changes type in the loop: int64 before, float32 at the end of the body",
      args=(F16, F32, 3))
@ct.jit
def loop_carried_type_change(a, o, n):
    s = 0
    for i in range(n):
        s = s + 0.5  # <- error


@case("loop-carried 's' changes type in the loop: tile<16 float32 @UB> before, tile<8 float32 @UB>",
      args=(F16, F32, 3))
@ct.jit
def loop_carried_tile_shape_change(a, o, n):
    with ct.vector():
        s = ct.zeros((16,), ct.float32)
    for i in range(n):
        with ct.vector():
            s = ct.zeros((8,), ct.float32)  # <- error


@case("'q' is assigned in only one arm of the if at line", "assign it before the if", args=(F16, F32, 3))
@ct.jit
def if_arm_only_variable(a, o, n):
    if n > 0:
        q = 1
    r = q + 1  # <- error


@case("'y' has type int64 in one arm of the if and float32 in the other", args=(F16, F32, 3))
@ct.jit
def if_arms_disagree(a, o, n):
    y = 0
    if n > 0:  # <- error
        y = n
    else:
        y = 0.5 * n


@case("name 'undefined_name' is not defined")
@ct.jit
def unknown_name(a, o):
    r = undefined_name + 1  # <- error  # noqa: F821


@case("sqrt() cannot be called with runtime values in a kernel", args=(F16, F32, 3))
@ct.jit
def runtime_value_to_python(a, o, n):
    r = np.sqrt(n)  # <- error


@case("compile-time call sqrt(...) failed: ValueError: math domain error", kwargs={"D": -1})
@ct.jit
def failing_compile_time_call(a, o, D: ct.constexpr):
    r = math.sqrt(D)  # <- error


@case("the Python builtin sorted() is not available in kernels")
@ct.jit
def unavailable_builtin(a, o):
    r = sorted((3, 1))  # <- error


@case("static assertion failed: D must be even", kwargs={"D": 3})
@ct.jit
def failing_static_assert(a, o, D: ct.constexpr):
    assert D % 2 == 0, "D must be even"  # <- error


@case("range bounds must be integers, got float32", args=(F16, F32, 0.5))
@ct.jit
def float_range_bound(a, o, x):
    for i in range(x):  # <- error
        pass


@case("operator floordiv needs integer operands, got float32 and float32", args=(F16, F32, 0.5))
@ct.jit
def float_floordiv(a, o, x):
    y = x // 2.0  # <- error


# ------------------------------------------------------------------ GM views and static shapes

@case("a slice needs a static extent: write a:a+E with a constexpr E, or ds(a, E, valid=n) for a tail",
      args=(F16, F32, 3))
@ct.jit
def slice_without_static_extent(a, o, n):
    with ct.vector():
        x = ct.load(a[0:n, 0:16])  # <- error


@case("an open-ended slice a: has no static extent", args=(F16, F32, 3))
@ct.jit
def open_ended_slice(a, o, n):
    with ct.vector():
        x = ct.load(a[n:, 0:16])  # <- error


@case("ds(start, size): size must be a positive compile-time int", args=(F16, F32, 3))
@ct.jit
def ds_with_runtime_size(a, o, n):
    with ct.vector():
        x = ct.load(a[ct.ds(0, n), 0:16])  # <- error


@case("shape must be positive compile-time ints (constexpr), got int64", args=(F16, F32, 3))
@ct.jit
def runtime_shape_in_zeros(a, o, n):
    with ct.vector():
        x = ct.zeros((n, 16), ct.float32)  # <- error


@case("load: dim 1 has no static extent; slice it as a:a+E with a constexpr E or ds(a, E)")
@ct.jit
def unsliced_dimension(a, o):
    with ct.vector():
        x = ct.load(a[0:16])  # <- error


@case("load needs a rank-1 or rank-2 view, got rank 3 (index the other dims)",
      args=(np.zeros((2, 16, 16), np.float16), F32))
@ct.jit
def rank3_window(a, o):
    with ct.vector():
        x = ct.load(a[0:2, 0:16, 0:16])  # <- error


@case("too many indices (3) for a rank-2 view")
@ct.jit
def too_many_indices(a, o):
    v = a[0, 1, 2]  # <- error


@case("a GM index must be an integer", args=(F16, F32, 0.5))
@ct.jit
def float_gm_index(a, o, x):
    v = a[x, 0]  # <- error


@case("split: dim 2 out of range for a rank-2 view")
@ct.jit
def split_out_of_range(a, o):
    v = a.split(2, 4)  # <- error


@case("reshape applies to a whole tensor argument")
@ct.jit
def reshape_a_derived_view(a, o):
    v = a[0].reshape(4, 4)  # <- error


@case("permute needs a permutation of 0..1, got (0, 0)")
@ct.jit
def bad_permutation(a, o):
    v = a.permute(0, 0)  # <- error


@case("calling helper: missing a required argument: 'b'")
@ct.jit
def inline_call_with_missing_argument(a, o):
    v = helper(1)  # <- error


@ct.inline
def helper(a, b):
    return a + b


@pytest.mark.parametrize("kernel, args, kwargs, fragments", CASES)
def test_compile_error_names_file_line_and_rule(dsl, kernel, args, kwargs, fragments):
    err = dsl.compile_error(kernel, *args, **kwargs)
    assert not isinstance(err, ct.BudgetError)
    text = dsl.assert_at(err, kernel, MARK, *fragments)
    assert text.splitlines()[-1].strip() == "^"                 # a caret under the offending column
    assert err.loc.line == dsl.line_of(kernel, MARK)


def test_error_inside_an_inline_helper_points_into_the_helper(dsl):
    @ct.inline
    def bad_helper(t):
        return ct.exp(t)  # <- error

    @ct.jit
    def calls_bad_helper(a, o):
        with ct.cube():
            bad_helper(ct.load(a[0:16, 0:16]))

    err = dsl.compile_error(calls_bad_helper, F16, F32)
    dsl.assert_at(err, bad_helper, MARK, "exp is a vector op; it is not allowed inside `with cube():`")


@ct.jit
def float_fill_of_int_tile(a, o, x):
    with ct.vector():
        t = ct.full((16,), 1.5, ct.int32)  # <- error


def test_regression_float_fill_value_of_an_int_tile(dsl):
    # full((16,), 1.5, int32) silently truncated the fill value to 1
    err = dsl.compile_error(float_fill_of_int_tile, F16, F32, 0.5)
    dsl.assert_at(err, float_fill_of_int_tile, MARK, "a float fill value (1.5) for a int32 tile: use an int, "
                                                       "or a float dtype")


def test_regression_loop_type_change_points_at_the_assignment(dsl):
    # the error used to point at the `for` line instead of the statement that changed the type
    err = dsl.compile_error(loop_carried_type_change, F16, F32, 3)
    assert err.loc.line == dsl.line_of(loop_carried_type_change, MARK)
    assert f"(loop at line {dsl.line_of(loop_carried_type_change, 'for i in range(n):')})" in str(err)


# ------------------------------------------------------------------ launching

@ct.jit
def tiny(x, o, N: ct.constexpr):
    with ct.vector():
        ct.store(o[0:N], ct.load(x[0:N]))


def test_calling_a_kernel_without_a_grid():
    with pytest.raises(RuntimeError, match=r"launch cvtile kernel tiny with tiny\[grid\]\(\.\.\.\)"):
        tiny(np.zeros(4, np.float32), np.zeros(4, np.float32), N=4)


@pytest.mark.parametrize("grid, exc, match", [
    (0, ValueError, "grid must be a positive number of cores, got 0"),
    (-2, ValueError, "grid must be a positive number of cores, got -2"),
    (1.5, ValueError, "grid must be a positive number of cores, got 1.5"),
    (True, ValueError, "grid must be a positive number of cores, got True"),
    ((2, 2), TypeError, r"cvtile grids are one-dimensional: kernel\[n\]\(\.\.\.\)"),
])
def test_bad_grids_are_rejected(grid, exc, match):
    with pytest.raises(exc, match=match):
        tiny[grid]


def test_bad_arguments_are_rejected_before_compiling():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="tiny: missing a required argument: 'N'"):
        tiny.compile(x, x)
    with pytest.raises(TypeError, match="argument 'x' of type str is neither an array, a number, nor a constexpr"):
        tiny.compile("x", x, N=4)
    with pytest.raises(TypeError, match="argument 'x': dtype"):
        tiny.compile(np.zeros(4, np.complex64), x, N=4)


def test_builtins_cannot_be_called_outside_kernels():
    with pytest.raises(RuntimeError, match="cvtile.dsl.exp is a kernel builtin"):
        ct.exp(1.0)
    with pytest.raises(RuntimeError, match="helper is a cvtile inline function"):
        helper(1, 2)


# ------------------------------------------------------------------ run-time rules (SimulationError)

@ct.jit
def faulty(x, o, mode, r0, n):
    with ct.vector():
        if mode == 0:
            t = ct.load(x[ct.ds(r0 + ct.block_idx() * 8, 8), 0:8])  # <- oob load
            ct.store(o[0:8, 0:8], t)
        if mode == 1:
            ct.store(o[ct.ds(r0, 8), 0:8], ct.load(x[0:8, 0:8]))  # <- oob store
        if mode == 2:
            t = ct.load(x[ct.ds(0, 8, valid=n), 0:8])
            u = ct.load(x[0:8, 0:8])
            ct.store(o[0:8, 0:8], t + u)  # <- shape mismatch
        if mode == 3:
            assert n < 5, "n too big"  # <- assert
        if mode == 4:
            ct.store(o[0:8, 0:8], ct.full((8, 8), x[r0, 0], ct.float32))  # <- oob scalar read
        if mode == 5:
            ct.store(o[0:8, 0:8], ct.load(x[ct.ds(0, 8, valid=n), 0:8]))  # <- valid beyond size
        if mode == 6:
            ct.store(o[ct.ds(0, 8, valid=n), 0:8], ct.load(x[0:8, 0:8]))  # <- tile larger than window
        if mode == 7:
            ct.store(o[0:8, 0:8], ct.full((8, 8), r0 // n, ct.float32))  # <- division by zero


SIM_CASES = [
    (0, 1, 3, "<- oob load", 1, "load: GM dim 0 access [start, start+count) leaves [0, bound) "
                                "(start=9, count=8, bound=16)"),
    (1, 12, 3, "<- oob store", 0, "store: GM dim 0 access [start, start+count) leaves [0, bound) "
                                  "(start=12, count=8, bound=16)"),
    (2, 0, 3, "<- shape mismatch", 0, "tile operands' valid extents differ in dim 0 (a=3, b=8)"),
    (3, 0, 7, "<- assert", 0, "assertion failed: n too big"),
    (4, 16, 0, "<- oob scalar read", 0, "GM index out of bounds"),
    (4, -1, 0, "<- oob scalar read", 0, "GM index out of bounds"),
    (5, 0, 9, "<- valid beyond size", 0, "load: valid extent of dim 0 is outside [0, 8] (valid=9)"),
    (6, 0, 5, "<- tile larger than window", 0, "store: the tile's valid dim 0 exceeds the window's valid extent "
                                               "(tile=8, window=5)"),
    (7, 4, 0, "<- division by zero", 0, "integer division by zero"),
]


@pytest.mark.parametrize("mode, r0, n, marker, core, fragment", SIM_CASES,
                         ids=[f"{c[0]}:{c[3][3:]}" for c in SIM_CASES])
def test_simulation_errors_name_the_kernel_line(dsl, mode, r0, n, marker, core, fragment):
    x = np.ones((16, 8), np.float32)
    o = np.zeros((16, 8), np.float32)
    with pytest.raises(ct.SimulationError) as info:
        faulty[2](x, o, mode, r0, n)
    err = info.value
    line = dsl.line_of(faulty, marker)
    assert str(err).startswith(f"{inspect.getsourcefile(faulty.fn)}:{line}: ")
    assert fragment in str(err)
    assert f"(core {core})" in str(err) and err.core == core
    assert dsl.source_line(faulty, marker) in str(err)


def test_the_same_kernel_runs_cleanly_in_bounds():
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    o = np.zeros((16, 8), np.float32)
    faulty[1](x, o, 0, 0, 3)    # one core: rows 0..7
    assert np.array_equal(o[:8], x[:8])
    faulty[1](x, o, 3, 0, 4)    # the assert holds



@ct.jit
def stores_into_broadcast(x, o):
    with ct.vector():
        t = ct.load(x[0:4, 0:8])
        ct.store(o.broadcast(0, 4)[0:4, 0:8], t)  # <- error


def test_store_into_a_broadcast_view_is_rejected(dsl):
    err = dsl.compile_error(stores_into_broadcast, np.zeros((4, 8), np.float32), np.zeros(8, np.float32))
    dsl.assert_at(err, stores_into_broadcast, MARK, "store into a broadcast view")
