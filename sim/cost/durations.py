"""How long one op occupies its pipe, from the target's cost table.

Model
-----
Every tile op runs on one pipe of its core (the op table's ``pipe``) for
``head + work / rate`` cycles, with the constants of the platform's cost
table (``Platform.cost``; each entry names its source):

* GM loads (MTE2): a burst set-up, one burst per strided row, and the bytes
  at the per-core GM read rate (to L1 for the cube, to UB for the vector);
* stores: from UB through MTE3 at the write rate; from L0C through the
  fixpipe (FIX) with its drain head, a per-row floor and the drain rate;
* on-chip copies: L1 -> L0A / L0B on MTE1 at the LoadData rates; on 950
  L0C -> UB (FIX) and UB -> L1 (MTE3) at their rates, which are also what a hand-off on the 950's on-chip
  route costs (place_handoffs' store into the receiving core's slot, ``attrs["route"] == "onchip"``; its
  load by the receiver costs nothing: the data is already in that core's buffer);
* ``mma`` (M): the MMAD head plus one cycle per 16x16xk0 fractal
  (k0 = 32 bytes of the input dtype; fp32 takes more passes). An operand read
  straight from a GM window is streamed through L1 first: its MTE2 load and
  MTE1 move are returned as extra spans that the scheduler chains before the
  M span (in pieces, so they overlap as the staging pieces do on the chip);
* vector ops (V): an instruction head plus the elements (valid rows times the
  valid columns rounded up to a 32-byte block, as the vector unit reads UB)
  at the rate of the op's class (binary, scalar operand, exp, div, cast,
  compare/select, dup; a row reduce adds a per-row term; the math-library functions tanh,
  sigmoid, erf, pow and floor count as several passes at the exp rate, ``_MATH_PASSES``),
  plus a per-row cost where an operand is broadcast along the rows (the chip expands it first);
* views (``expand``, ``slice_rows``), ``device_print`` (no code on the chip) and ``dequant`` (the fixpipe converts
  while it moves the tile: the store or hand-off that reads it is timed by the float16 bytes it writes) cost nothing; scalar ops cost a scalar
  issue; a scalar GM read the data-cache miss; a ``gather`` is scalar work per
  element (S: a GM read miss and a scalar issue each) followed by a vector op.

Every duration is a pure function of the op and its operands' runtime valid
extents, so the same op with the same extents always costs the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dsl.types import L0A, L0B, L0C, L1, UB

__all__ = ["Piece", "tile_cost", "scalar_cost"]

_UNARY_EXP = ("exp", "log", "sqrt", "rsqrt")
#: the math-library functions as passes over the elements at the exp rate: the vector instructions their
#: documented formulas take (an assumption of cvtile, not a measurement): tanh (e^2x - 1) / (e^2x + 1) five,
#: sigmoid 1 / (1 + e^-x) four, erf a rational polynomial about ten, pow exp(y ln x) three, floor two casts
_MATH_PASSES = {"tanh": 5, "sigmoid": 4, "erf": 10, "pow": 3, "floor": 2}
_COMPARE = ("lt", "le", "gt", "ge", "eq", "ne", "where", "and", "or", "xor", "not")


@dataclass(frozen=True)
class Piece:
    """One span an op occupies: ``cycles`` on ``pipe``. ``overlap`` > 1: the next piece of the same op may start
    after 1/overlap of this one (a streamed operand's pieces)."""

    pipe: str
    cycles: float
    overlap: int = 1


def _rows_cols(ext: tuple) -> tuple:
    if len(ext) == 1:
        return 1, int(ext[0])
    return int(ext[0]), int(ext[1])


def _block_cols(cols: int, itemsize: int) -> int:
    per_block = max(1, 32 // itemsize)
    return -(-cols // per_block) * per_block


def _gm_load(cost, rows: int, nbytes: int, to_ub: bool) -> float:
    rate = cost.mte2_gm_ub_bytes_per_cycle if to_ub else cost.mte2_gm_bytes_per_cycle
    return cost.mte2_head_cycles + rows * cost.mte2_row_cycles + nbytes / rate


def _fix_drain(cost, rows: int, nbytes: int) -> float:
    return cost.fix_head_cycles + rows * cost.fix_row_cycles + nbytes / cost.fix_bytes_per_cycle


def _onchip_move(cost, src, rows: int, nbytes: int) -> Piece:
    """The 950's on-chip moves between the core types: L0C -> UB through the fixpipe, UB -> L1 on MTE3."""
    if src is L0C:
        return Piece("FIX", cost.fix_head_cycles + rows * cost.fix_row_cycles + nbytes / cost.l0c_ub_bytes_per_cycle)
    return Piece("MTE3", cost.mte3_head_cycles + nbytes / cost.ub_l1_bytes_per_cycle)


def _fractals(cost, m: int, k: int, n: int, dtype) -> float:
    k0 = max(1, 32 // dtype.itemsize) if dtype.bits >= 8 else 64
    per = cost.mma_cycles_per_fractal.get(dtype.name, 1)
    return (-(-m // 16)) * (-(-k // k0)) * (-(-n // 16)) * per


def tile_cost(op, ext_of, window_ext, cost) -> list:
    """The spans of tile op ``op``: a list of ``Piece`` in the order they run. ``ext_of(v)`` gives a tile
    operand's runtime valid extents, ``window_ext(w)`` a GM window's."""
    kind = op.kind
    if kind == "load" and op.attrs.get("route") == "onchip":
        return []       # the producer's move already put the hand-off in this core's own buffer
    if kind == "load":
        t = op.results[0].type
        rows, cols = _rows_cols(window_ext(op.windows["window"]))
        return [Piece("MTE2", _gm_load(cost, rows, rows * cols * t.dtype.itemsize, t.space is UB))]
    if kind == "store":
        src = op.args[0]
        w = op.windows["window"]
        rows, cols = _rows_cols(window_ext(w))
        out_bytes = rows * cols * w.tensor.type.dtype.itemsize
        if op.attrs.get("route") == "onchip":
            return [_onchip_move(cost, src.type.space, rows, out_bytes)]
        if src.type.space is L0C:
            return [Piece("FIX", _fix_drain(cost, rows, out_bytes))]
        return [Piece("MTE3", cost.mte3_head_cycles + rows * cost.mte2_row_cycles
                      + out_bytes / cost.mte3_gm_bytes_per_cycle)]
    if kind == "copy":
        src, dst = op.args[0].type, op.results[0].type
        rows, cols = _rows_cols(ext_of(op.args[0]))
        nbytes = rows * cols * dst.dtype.itemsize
        if dst.space is L0A:
            return [Piece("MTE1", cost.mte1_head_cycles + nbytes / cost.mte1_l0a_bytes_per_cycle)]
        if dst.space is L0B:
            return [Piece("MTE1", cost.mte1_head_cycles + nbytes / cost.mte1_l0b_bytes_per_cycle)]
        if (src.space, dst.space) in ((L0C, UB), (UB, L1)):
            return [_onchip_move(cost, src.space, rows, nbytes)]
        return [Piece(op.pipe, cost.mte1_head_cycles + nbytes / cost.mte1_l0a_bytes_per_cycle)]
    if kind == "mma":
        return _mma_cost(op, ext_of, window_ext, cost)
    if kind == "gather":    # one scalar GM read (a data-cache miss) and UB write per element, then a vector op
        rows, cols = _rows_cols(ext_of(op.results[0]))
        return [Piece("S", rows * cols * (cost.scalar_gm_read_cycles + cost.scalar_op_cycles)),
                Piece("V", _vector_cycles(op, ext_of, cost))]
    if kind in ("expand", "slice_rows", "device_print", "dequant") or (kind == "create" and op.attrs.get("uninit")):
        # views, a buffer that is only claimed (no fill instruction), a simulator-only print, and the fixpipe's
        # dequant (done by the FIX move that reads it, which is timed by the bytes it writes)
        return []
    return [Piece("V", _vector_cycles(op, ext_of, cost))]


def _mma_cost(op, ext_of, window_ext, cost) -> list:
    pieces = []
    operands = []
    ti = 0
    for name in ("a", "b"):
        w = op.windows.get(name)
        if w is not None:
            ext = window_ext(w)
            dt = w.tensor.type.dtype
            rows, cols = _rows_cols(ext)
            nbytes = rows * cols * dt.itemsize
            # streamed through L1 in pieces of at most half of the L0 buffer, as the staging plan does
            npieces = max(1, -(-nbytes // (32 * 1024)))
            rate = cost.mte1_l0a_bytes_per_cycle if name == "a" else cost.mte1_l0b_bytes_per_cycle
            pieces.append(Piece("MTE2", _gm_load(cost, rows, nbytes, False), npieces))
            pieces.append(Piece("MTE1", cost.mte1_head_cycles + nbytes / rate, npieces))
            operands.append((ext, dt))
        else:
            v = op.args[ti]
            ti += 1
            operands.append((ext_of(v), v.type.dtype))
    (a_ext, a_dt), (b_ext, _) = operands
    m, k = _rows_cols(a_ext)
    n = _rows_cols(b_ext)[0] if op.attrs.get("trans_b") else _rows_cols(b_ext)[1]
    pieces.append(Piece("M", cost.mma_head_cycles + _fractals(cost, m, k, n, a_dt)))
    return pieces


def _vector_cycles(op, ext_of, cost) -> float:
    res = op.results[0] if op.results else op.args[0]
    t = res.type
    ext = ext_of(res) if op.results else ext_of(op.args[0])
    rows, cols = _rows_cols(ext)
    kind = op.kind
    rates = cost.vec_elems_per_cycle
    if kind == "insert_rows":      # writes only the chunk's rows into the full tile
        c = op.args[1]
        r, cc = _rows_cols(ext_of(c))
        return cost.vec_head_cycles + r * _block_cols(cc, c.type.dtype.itemsize) / rates["binary_float32"]
    if kind == "reduce":
        x = op.args[0]
        r, c = _rows_cols(ext_of(x))
        elems = r * _block_cols(c, x.type.dtype.itemsize)
        return cost.vec_reduce_head_cycles + elems / cost.vec_reduce_elems_per_cycle + r * cost.vec_reduce_row_cycles
    elems = rows * _block_cols(cols, t.dtype.itemsize)
    extra = 0.0
    if kind in ("create", "iota"):
        rate = rates["dup"]
    elif kind == "cast":
        rate = rates["cast"]
    elif kind == "gather":
        rate = rates["dup"]
    else:  # ewise
        name = op.attrs["op"]
        tiles = [o for o in op.args if o.is_tile]
        half = t.dtype.bits == 16
        if name in _UNARY_EXP:
            rate = rates["exp"]
        elif name in _MATH_PASSES:
            rate = rates["exp"] / _MATH_PASSES[name]
        elif name == "div":
            rate = rates["div"]
        elif name in _COMPARE:
            rate = rates["select"] if name == "where" else rates["compare"]
        elif len(tiles) < len(op.args):
            rate = rates["scalar_float16" if half else "scalar_float32"]
        else:
            rate = rates["binary_float16" if half else "binary_float32"]
        if t.rank == 2 and any(o.type.rank == 2 and o.type.shape[1] == 1 and t.shape[1] != 1 for o in tiles):
            extra = rows * cost.vec_broadcast_row_cycles
    return cost.vec_head_cycles + elems / rate + extra


def scalar_cost(op, cost) -> float:
    """Scalar-unit cycles of a scalar op (a GM read is a data-cache miss)."""
    if op.kind == "sload":
        return cost.scalar_gm_read_cycles
    if op.kind == "const":
        return 0.0
    return cost.scalar_op_cycles
