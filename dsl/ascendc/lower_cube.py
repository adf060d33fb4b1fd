"""Lowering rules of the cube side (AIC): GM -> L1, L1 -> L0A/L0B, Mmad, L0C -> GM.

A mixin of ``lower._Lowering``: the methods here use its helpers (``emit``, ``ref``, ``tile``,
``extents``, ``namer``, ``api``, ``platform``, ``arch35``) and read only the IR and the memory plan.

Model
-----
* Layouts (``include/README.md`` section 4). An L1 tile of capacity (R0, C) is NZ as ``Nd2NzParams``
  writes it: column blocks of C0 = 32 / sizeof(T) elements, each ``ceil(R0 / 16) * 16`` rows tall (the
  capacity's rows, so the layout is static; the valid rows are written, the padding columns up to the next
  C0 multiple are zero). L0A is Zz (A2/A3) or Nz (950), L0B Zn. An (M, N) L0C tile is row blocks of up to
  128 rows (the plan's base_m), each an NZ 16x16 matrix of its rows padded to 16, one after the other;
  ``Mmad`` runs on whole 16-row / 16-column fractals (the rows and columns past the valid extents hold
  values nobody stores) and sums over exactly the valid K. B stored [K, N] reaches L0B transposed: 16-bit
  fractals by ``LoadData`` with ``ifTranspose``, 8-bit ones by ``LoadDataWithTranspose`` per 32 x 32 square
  (A2/A3; N, its pieces and the K rows stored in multiples of 32), 32-bit ones by ``LoadDataWithTranspose``
  per 16 x 16 square of a Zz stream piece (A2/A3; a GM operand only: its stream piece is copied to L1 as 16-row
  NZ bands, ``_zz_bands``, so a square's two 16 x 8 fractals are consecutive).
* ``copy{staged}`` (L1 -> L0A/L0B feeding one mma) prints nothing: L0A/L0B hold the mma's ping-pong base
  tiles (``mma@<line>.a`` / ``.b`` of the plan), which the mma fills itself piece by piece.
* ``mma`` walks the plan's base tiles: row blocks, column pieces of ``base_n`` (a loop when they are equal)
  and contraction pieces of ``base_k`` (a loop over the valid K); per piece L1 -> L0A/L0B (``LoadData``)
  for the L1 operands, GM -> L1 -> L0A/L0B for a GM window operand (through the plan's ``.stream``
  pieces; a window whose columns are NZ fractals, an NZ cache, copies its fractals as they are with
  ``DataCopy`` of 32-byte blocks, one call per paged row), and ``Mmad`` (``cmatrixInitVal`` on the first K piece unless it accumulates into ``acc``). Its
  result is the planned L0C buffer, or -- a result that is only stored -- the plan's ``mma@<line>.c``
  pieces: when the whole result fits them it waits there for its store; otherwise the mma is lowered at
  its store (only waits, events, checks and scalars stand between them) and each piece is Fixpiped out when
  done.
* An ``if`` whose arms each end in an mma whose result only leaves the cube (the plan gives the ``if``
  result no buffer): when those results exceed their pieces, the whole ``if`` is lowered at its result's
  store (each arm its scalars, then its mma Fixpiped piece by piece; ``defer_if``); otherwise it stays
  where it is and its result is a ``LocalTensor`` handle each arm's yield points at that arm's own pieces
  (``if_result_handle``). An arm may yield its mma through a ``dequant``: such an ``if`` is always lowered at
  its store, each arm's Fixpipes with DEQF16 and that arm's scale (a handle would not carry the arm's scale).
* A hand-off received into L1 only to be staged (the plan gives it no buffer of its own) is loaded at its
  ``load`` -- where the channel's flags are -- into the consuming mma's ``.stream`` pieces; when it does
  not fit them, the mma itself is lowered at the ``load``, streaming the hand-off from its slot piece by
  piece before the slot is released.
* Synchronisation. insert_sync sees an mma as one M op; the MTE2 / MTE1 / M / FIX steps inside it are
  ordered here with events of ids 6 and 7 (one per ping-pong copy; insert_sync uses 0 and 1 + loop depth,
  checked; its parity pairs, 4 + depth, are AIV events only): a FIX -> M fence first (L0C may still be read by an earlier Fixpipe), primed ``M_MTE1`` credits
  per L0 copy, an ``MTE1 -> MTE2`` fence before each GM -> L1 stream (every earlier LoadData is done),
  ``MTE2_MTE1`` and ``MTE1_M`` pairs per piece (``M_FIX`` / ``FIX_M`` per L0C piece when streaming out),
  and at the end the credits drained and an ``MTE1 -> MTE2`` fence, so nothing the mma read or wrote on
  chip is in flight after it and the IR's own events around it stay valid.
* ``store`` of an L0C tile: ``Fixpipe`` NZ2ND to GM per row block (``quantPre`` F322F16 / F322BF16 for
  16-bit outputs; DEQF16 with the scale's fp32 bits as ``deqScalar`` for a ``dequant``'s int32 tile, which has
  no code of its own and is stored, streamed piece by piece or not, as its int32 source would be), one call for a window with one row stride, one per row otherwise (mixed-radix or paged
  rows).
* On the 950 a hand-off's slots are read and written where the simulator keeps them (the workspace slot
  area, through GM); the plan's on-chip slot buffers stay unused.
* What the plan or the API subset cannot express raises ``AscendCUnsupported`` naming the construct and
  the line: a non-transposed B of 32-bit type on the 950 or staged in L1, or of 8-bit type on the 950 or
  whose column pieces are not whole 32 x 32 squares once padded, an
  L1 / L0C tile whose
  fractal layout exceeds its planned buffer, an L1 operand the plan lets another buffer overwrite before
  the mma read it (the plan keeps a staged operand until its mma, so the mma's own stream pieces never
  do), a streamed-out result read by more than one store or by an op other than a store, an ``if`` of
  streamed mmas whose arms hold other ops and whose results exceed their pieces, resident L0A/L0B tiles
  (copies that are not staged) and the 950's L0C -> L1 copy.
"""

from __future__ import annotations

import re

from ..passes.plan_memory import l0c_blocks, l0c_bytes
from .c_syntax import CTYPE, SPACE_VAR, AscendCError, AscendCUnsupported, c_cast, c_sum

__all__ = ["CubeRules"]

#: event ids the mma lowering uses for its own steps (one per ping-pong copy)
_EV = (6, 7)
_FRACTAL = 512                  # bytes of one L1 / L0A / L0B fractal
_FRACTAL_B32 = _FRACTAL // 4     # elements of a fractal of a 32-bit type (16 x 8)
_QUANT = {("float32", "float32"): "NoQuant", ("float32", "float16"): "F322F16",
          ("float32", "bfloat16"): "F322BF16", ("int32", "int32"): "NoQuant"}


def _ceil(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _fold(e: str) -> str:
    """An index expression with its integer-literal arithmetic folded ("((0 / 16) * 4 + 1) * 256" -> "256")."""
    e = str(e)
    if re.fullmatch(r"[0-9\s+*/%()]+", e):
        try:   # non-negative literals: C's / and % agree with Python's // and %
            return str(eval(e.replace("/", "//"), {"__builtins__": {}}))
        except Exception:          # noqa: BLE001 - left as it is
            return e
    return e


def _lin(pairs, const: int = 0, scale: int = 1) -> str:
    """``(sum(expr * coef) + const) * scale`` as C text, with the literal parts folded."""
    parts = []
    for e, k in pairs:
        e = _fold(str(e))
        c = _const(e)
        if c is not None:
            const += c * k
        elif k:
            parts.append(e if k == 1 else (f"{e} * {k}" if e.isidentifier() else f"({e}) * {k}"))
    if not parts:
        return str(const * scale)
    if const:
        parts.append(str(const))
    body = " + ".join(parts)
    if scale == 1:
        return body
    return f"{body} * {scale}" if len(parts) == 1 and parts[0].isidentifier() else f"({body}) * {scale}"


def _at(t: str, idx: str) -> str:
    """``t[idx]``, or ``t`` itself at offset 0."""
    idx = _fold(idx)
    return t if idx == "0" else f"{t}[{idx}]"


def _nz_columns(w, ref):
    """(fractal width, fractal stride) expressions when a rank-2 GM window's columns are NZ fractals (two radices,
    the inner one at stride 1, no lookups: an NZ cache's D/d0 fractals of d0 elements), else None. That the width
    is 32 bytes (the L1 fractal's) is checked where the copy is emitted (at run time when it is a shape)."""
    if len(w.dims) != 2:
        return None
    d = w.dims[-1]
    if len(d.radices) != 2 or any(d.lookups or ()) or ref(d.strides[1]) != "1":
        return None
    return ref(d.radices[1]), ref(d.strides[0])


def _const(e: str):
    """The int value of a literal expression, else None."""
    try:
        return int(e)
    except (TypeError, ValueError):
        return None


class _CubeState:
    """Facts about the AIC program the cube rules need: plan positions, users, mma piece buffers."""

    def __init__(self, body, plan):
        self.pos: dict[int, int] = {}
        self.users: dict[int, list] = {}
        self.ops: list = []
        self.if_of_yield: dict[int, object] = {}     # id(an if arm's yield) -> the if
        self._number(body)
        self.plan = plan

    def _number(self, block):
        # the numbering of liveness.Liveness on the IR plan_memory saw (before insert_sync added sync ops)
        for op in block.ops:
            if op.defn.category == "sync":
                continue
            self.pos[id(op)] = len(self.ops)
            self.ops.append(op)
            for v in op.operands:
                self.users.setdefault(v.id, []).append(op)
            for b in op.blocks:
                if op.kind == "if" and b.ops and b.ops[-1].kind == "yield":
                    self.if_of_yield[id(b.ops[-1])] = op
                self._number(b)

    def dequant_of(self, mma):
        """The ``dequant`` reading ``mma``'s result (an if arm's, when the arm yields it so), or None when the
        result leaves L0C as it is."""
        return next((u for u in self.users.get(mma.result.id, []) if u.kind == "dequant"), None)

    def readers(self, v) -> list:
        """The ops reading ``v``, through the if it is yielded from: that if's readers of the result instead."""
        out = []
        for u in self.users.get(v.id, []):
            owner = self.if_of_yield.get(id(u)) if u.kind == "yield" else None
            if owner is None:
                out.append(u)
                continue
            for i, a in enumerate(u.args):
                if a.id == v.id:
                    out.extend(self.readers(owner.results[i]))
        return out


class CubeRules:
    # ------------------------------------------------------------------ program facts
    def _cube(self):
        st = getattr(self, "_cube_state", None)
        if st is None:
            body = self.k.programs().get("aic")
            if body is None:

                raise AscendCError("a cube op outside the AIC program")
            st = _CubeState(body, self.plan)
            self._cube_state = st
            self._check_event_ids()
        return st

    def _check_event_ids(self):
        """insert_sync's back-edge events use ids 1 + loop depth: they must not meet the mma's 6 and 7."""
        from ..ir import walk

        mine = {"FIX_M", "M_FIX", "M_MTE1", "MTE1_MTE2", "MTE2_MTE1", "MTE1_M"}
        for op in walk(self.k.programs()["aic"]):
            if op.kind in ("event_set", "event_wait") and op.attrs["id"] in _EV and op.attrs["event"] in mine:
                raise AscendCUnsupported(f"an event {op.attrs['event']} with id {op.attrs['id']} (loops nested "
                                         f"{op.attrs['id']} deep): the mma lowering uses ids 6 and 7", op.loc)

    def _space_buffers(self, space: str) -> list:
        sp = self.plan.programs.get("aic", {}).get(space)
        return list(sp.all) if sp is not None else []

    def _mma_pieces(self, op) -> dict:
        """tag ('a', 'b', 'c', 'a.stream', 'b.stream') -> the plan's staging Buffer of this mma."""

        st = self._cube()
        p = st.pos[id(op)]
        line = op.loc.line if op.loc else 0
        out = {}
        for space in ("L1", "L0A", "L0B", "L0C"):
            for b in self._space_buffers(space):
                if b.name.startswith(f"mma@{line}.") and b.start == p:
                    out[b.name[len(f"mma@{line}."):]] = b
        if "a" not in out or "b" not in out:
            raise AscendCError(f"the memory plan has no L0A/L0B base tiles for this mma (position {p})", op.loc)
        return out

    def _buffer(self, v):
        return self.plan.buffer_of.get(v.id)

    def _clobbered(self, space: str, lo: int, hi: int, after: int, upto: int, skip=()) -> list:
        """Buffers of ``space`` overlapping bytes [lo, hi) that the plan starts in (after, upto]."""
        out = []
        for b in self._space_buffers(space):
            if any(b is s for s in skip):
                continue
            if after < b.start <= upto and b.offset < hi and lo < b.offset + b.bytes:
                out.append(b)
        return out

    def _local(self, space: str, offset, ct: str, hint: str) -> str:
        """A LocalTensor<ct> named after ``hint`` at a byte offset of a space."""

        name = self.namer.ident(hint)
        self.spaces_used.setdefault(space, 0)
        self.emit(f"LocalTensor<{ct}> {name} = {SPACE_VAR[space]}[{offset}].ReinterpretCast<{ct}>();")
        self.api.add("LocalTensor")
        return name

    # ------------------------------------------------------------------ GM windows
    def _window_counts(self, op, w, what: str) -> tuple:
        """The valid counts of a GM window (checked against the extents and the bounds)."""
        from .names import c_string
        from ..ir import Value

        if len(w.dims) != 2:

            raise AscendCUnsupported(f"{what}: a rank-{len(w.dims)} GM window on the cube side", op.loc)
        if _nz_columns(w, self.ref) is None:
            self._window_rows(w, op)     # the columns must be contiguous, or 32-byte fractals (an NZ cache)
        counts = tuple(self.ref(d.valid) for d in w.dims)
        for i, (d, n) in enumerate(zip(w.dims, counts)):
            if isinstance(d.valid, Value) and d.valid.const is None:
                self.emit(f"CVT_CHECK({n} >= 0 && {n} <= {d.extent}, "
                          f"{c_string(f'{what}: valid extent of dim {i} is outside [0, {d.extent}]')});")
        for i, (d, n) in enumerate(zip(w.dims, counts)):
            start, bound = self.ref(d.start), self.ref(d.bound)
            self.emit(f"CVT_CHECK({start} >= 0 && {start} + {n} <= {bound}, "
                      f"{c_string(f'{what}: GM dim {i} access leaves [0, bound)')});")
        return counts

    def _nd2nz(self, op, dst: str, w, row0: str, nrows: str, col0: str, ncols: str, R: int, c0: int):
        """Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of a GM window (relative to its starts)
        into the NZ tile ``dst`` of R rows per column block (Nd2Nz; one call for rows with one stride that
        fits its 16-bit field, one call per row otherwise)."""

        if _nz_columns(w, self.ref) is not None:
            self._nz2nz(op, dst, w, row0, nrows, col0, ncols, R, c0)
            return
        g = self.gm[w.tensor.id]
        d0, d1 = w.dims
        cstart = c_sum(self.ref(d1.start), col0)
        self.api |= {"DataCopy", "Nd2NzParams"}
        u16 = lambda e: c_cast("uint16_t", e)  # noqa: E731
        plain = len(d0.radices) == 1 and not any(d0.lookups or ())

        def per_row():
            src_d = str(max(_const(ncols), 1)) if _const(ncols) is not None else f"cvtMax<int64_t>({ncols}, 1)"
            self._per_row(op, w, row0, nrows, cstart,
                          lambda r, base: f"DataCopy({dst}[{r} * {c0}], {g}[{base}], Nd2NzParams(1, 1, "
                                          f"{u16(ncols)}, 0, {u16(src_d)}, {R}, 1, 0));")

        if not plain:
            per_row()
            return
        stride, base = self._row_base(w, row0, cstart)
        one = (f"DataCopy({dst}, {g}[{base}], Nd2NzParams(1, {u16(nrows)}, {u16(ncols)}, 0, {u16(stride)}, "
               f"{R}, 1, 0));")
        s = _const(stride)
        if s is not None and 1 <= s <= 65535:
            self.emit(one)
            return
        self.emit(f"if ({stride} >= 1 && {stride} <= 65535) {{")
        self.depth += 1
        self.emit(one)
        self.depth -= 1
        self.emit("} else {")
        self.depth += 1
        per_row()
        self.depth -= 1
        self.emit("}")

    def _row_base(self, w, row0: str, cstart: str) -> tuple:
        """(row stride, element offset of row ``row0`` at column ``cstart``) of a GM window with one row stride."""
        d0 = w.dims[0]
        stride = self.ref(d0.strides[0])
        r0 = _fold(c_sum(self.ref(d0.start), row0))
        return stride, c_sum(self.ref(w.offset), "0" if r0 == "0" else f"({r0}) * {stride}", cstart)

    def _nz2nz(self, op, dst: str, w, row0: str, nrows: str, col0: str, ncols: str, R: int, c0: int):
        """Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of a GM window whose columns are NZ
        fractals (an NZ cache: c0 contiguous elements, fractal j at j * stride) into the NZ tile ``dst`` of R
        rows per column block: the fractals copy as they are (DataCopy of 32-byte blocks, no Nd2Nz), one call
        for rows one fractal row apart, one call per row otherwise (a paged cache's rows)."""
        from .names import c_string

        g = self.gm[w.tensor.id]
        d0, d1 = w.dims
        fc0, fstride = _nz_columns(w, self.ref)
        if _const(fc0) is not None and _const(fc0) != c0:
            raise AscendCUnsupported(f"an NZ GM window of {fc0}-element fractals into an L1 tile of {c0}-element "
                                     "fractals", op.loc)
        cstart = _fold(c_sum(self.ref(d1.start), col0))
        self.emit(f"CVT_CHECK({fc0} == {c0}, {c_string(f'NZ window: its fractals are not {c0} elements (32 bytes)')});")
        self.emit(f"CVT_CHECK(({cstart}) % {c0} == 0 && ({ncols}) % {c0} == 0 && ({fstride}) % {c0} == 0, "
                  f"{c_string('NZ window: the columns copied are not whole fractals')});")
        self.api |= {"DataCopy", "DataCopyParams"}
        u16 = lambda e: c_cast("uint16_t", e)  # noqa: E731
        nblk = _fold(f"({ncols}) / {c0}")
        cofs = f"({cstart}) / {c0} * {fstride}"
        plain = len(d0.radices) == 1 and not any(d0.lookups or ()) and self.ref(d0.strides[0]) == str(c0)
        if plain:
            r0 = _fold(c_sum(self.ref(d0.start), row0))
            base = c_sum(self.ref(w.offset), f"({r0}) * {c0}", cofs)
            self.emit(f"DataCopy({dst}, {g}[{base}], DataCopyParams({u16(nblk)}, {u16(nrows)}, "
                      f"{u16(f'({fstride}) / {c0} - ({nrows})')}, {u16(f'{R} - ({nrows})')}));")
            return
        self._per_row(op, w, row0, nrows, cofs,
                      lambda r, base: f"DataCopy({dst}[{r} * {c0}], {g}[{base}], DataCopyParams({u16(nblk)}, 1, "
                                      f"{u16(f'({fstride}) / {c0} - 1')}, {R - 1}));")

    def _per_row(self, op, w, row0: str, nrows: str, col: str, copy):
        """A loop over rows [row0, row0 + nrows) of a GM window (mixed-radix or paged rows: each row's own
        offset), printing ``copy(row, base)`` per row, base the row's element offset plus ``col``."""
        d0 = w.dims[0]
        r = self.namer.ident("row")
        self.emit(f"for (int64_t {r} = 0; {r} < {nrows}; ++{r}) {{")
        self.depth += 1
        roff = self._row_offset(d0, c_sum(self.ref(d0.start), row0, r), op)
        self.emit(copy(r, c_sum(self.ref(w.offset), roff, col)))
        self.depth -= 1
        self.emit("}")

    # ------------------------------------------------------------------ GM -> L1
    def cube_load(self, op):

        t = op.result.type
        w = op.windows["window"]
        if t.rank != 2:
            raise AscendCUnsupported(f"a rank-{t.rank} L1 tile", op.loc)
        if w.tensor.type.dtype.name != t.dtype.name:
            raise AscendCUnsupported(f"a load converting {w.tensor.type.dtype} to an L1 tile of {t.dtype}",
                                     op.loc)
        size = t.dtype.itemsize
        c0 = 32 // size
        R = _ceil(t.shape[0], 16)
        need = R * _ceil(t.shape[1], c0) * size
        buf = self._buffer(op.result)
        ct = CTYPE[t.dtype.name]
        if buf is None:
            dst = self._stream_target(op, need)
            if dst is None:
                return       # the consuming mma streamed it from its slot (see _stream_target)
        else:
            per_copy = buf.bytes // max(buf.copies, 1)
            if need > per_copy:
                raise AscendCUnsupported(f"an L1 tile {t.shape[0]}x{t.shape[1]} {t.dtype} whose NZ layout (rows "
                                         f"padded to 16, columns to {c0}) takes {need} bytes, more than its "
                                         f"planned {per_copy}", op.loc)
            dst = self.tile(op.result)
        rows, cols = self._window_counts(op, w, "load")
        self.emit(f"// GM -> L1 ({ct} NZ, {R} rows per {c0}-column block)")
        self._nd2nz(op, dst, w, "0", rows, "0", cols, R, c0)

    def _stream_target(self, op, need: int):
        """A hand-off received into L1 only to be staged into one mma (the plan gives it no buffer of its own):
        loaded here, where the channel's flags are, into that mma's stream pieces when it fits them (the
        LocalTensor is returned); otherwise the mma itself is lowered here, streaming the hand-off from its
        slot piece by piece before the slot is released (None is returned)."""

        st = self._cube()
        copies = st.users.get(op.result.id, [])
        mmas = []
        for c in copies:
            if c.kind != "copy" or not c.attrs.get("staged"):
                raise AscendCError(f"an L1 tile without a buffer read by a {c.kind}", op.loc)
            mmas += [(u, c) for u in st.users.get(c.result.id, []) if u.kind == "mma"]
        if len(mmas) != 1:
            raise AscendCUnsupported(f"an L1 hand-off without a buffer staged into {len(mmas)} mma ops", op.loc)
        mma, copy = mmas[0]
        ops, _ = _mma_operands(mma)
        which = next(k for k, (kind, v) in ops.items() if kind == "tile" and v is copy.result)
        pieces = self._mma_pieces(mma)
        buf = pieces.get(which + ".stream")
        if buf is None:
            raise AscendCError(f"the memory plan has no L1 stream pieces for operand {which} of the mma at "
                               f"line {mma.loc.line if mma.loc else '?'}", op.loc)
        if need > buf.bytes:
            self._advance_mma(op, mma, copy, which)
            return None
        bad = self._clobbered("L1", buf.offset, buf.offset + buf.bytes, st.pos[id(op)], st.pos[id(mma)],
                              skip=[buf])
        if bad:
            raise AscendCUnsupported(f"the L1 hand-off's place ({buf.name}) is reused by {bad[0].name} before "
                                     f"the mma reads it", op.loc)
        ct = CTYPE[op.result.type.dtype.name]
        name = self._local("L1", buf.offset, ct, op.result.name or "handoffL1")
        self.names[op.result.id] = name
        return name

    def _advance_mma(self, load, mma, copy, which: str):
        """Lower ``mma`` at the hand-off ``load`` it consumes, with that operand read from the load's GM slot
        window (streamed through the mma's L1 pieces). Only flags, events, the staged copy and scalars the mma
        does not read may stand between them; the mma's L0C result must be free from the load on."""

        st = self._cube()
        block = next((b for b in _blocks_of(self.k.programs()["aic"]) if load in b.ops), None)
        if block is None or mma not in block.ops:
            raise AscendCUnsupported("an L1 hand-off larger than its mma's stream pieces, consumed in another "
                                     "block", load.loc)
        i, j = block.ops.index(load), block.ops.index(mma)
        between = block.ops[i + 1:j]
        made = {r.id for o in between for r in o.results}
        for mid in between:
            if not (mid is copy or mid.kind in ("flag_set", "flag_wait", "event_set", "event_wait", "barrier") or
                    (mid.defn.category == "scalar" and mid.defn.pure)):
                raise AscendCUnsupported(f"an L1 hand-off larger than its mma's stream pieces, followed by a "
                                         f"{mid.kind} before the mma", load.loc)
        if any(v.id in made and v.id != copy.result.id for v in mma.operands):
            raise AscendCUnsupported("an L1 hand-off larger than its mma's stream pieces, whose mma reads values "
                                     "computed after the hand-off", load.loc)
        w = load.windows["window"]
        ctx = self._mma_prepare(mma, {which: ("gm", w, w.tensor.type.dtype, w.shape)})
        if ctx["defer"] is not None:
            # the result exceeds the L0C pieces too: the mma runs at its store (each piece Fixpiped out as it
            # is done), still reading the operand from its slot, so the slot's release (the flag sets between
            # the hand-off and the mma) moves to after that store. The core then waits for the store's slot
            # while it holds the operand's slot; with slots of depth >= 2 on both channels the producer never
            # needs the held slot to free the awaited one (the twin's watchdog would report a deadlock).
            store = ctx["defer"]
            sets = [mid for mid in between if mid.kind == "flag_set"]
            self.postponed = getattr(self, "postponed", {})
            self.postponed[id(store)] = sets
            self.skip_ops = getattr(self, "skip_ops", set()) | {id(x) for x in sets}
            self.deferred = getattr(self, "deferred", {})
            self.deferred[mma.result.id] = ctx
            self.advanced = getattr(self, "advanced", set())
            self.advanced.add(id(mma))
            self.emit(f"// the hand-off and the result of the mma at line {mma.loc.line if mma.loc else '?'} both "
                      f"exceed its pieces: it runs at its store (line {store.loc.line if store.loc else '?'}), "
                      "streaming the hand-off from its slot, which is released after that store")
            return
        # the result's L0C place must not hold another live value from the load to the mma
        if ctx["acc"] is not None or not ctx["streamed"]:
            cb = self._buffer(ctx["acc"] if ctx["acc"] is not None else mma.result)
            lo, hi = cb.offset, cb.offset + cb.bytes
        else:
            cb = ctx["pieces"]["c"]
            lo, hi = cb.offset, cb.offset + cb.bytes
        p0, p1 = st.pos[id(load)], st.pos[id(mma)]
        for b in self._space_buffers("L0C"):
            if b is not cb and b.offset < hi and lo < b.offset + b.bytes and b.start < p1 and b.end > p0 \
                    and not (ctx["acc"] is not None and b.start >= p1):
                raise AscendCUnsupported(f"the mma consuming this hand-off writes L0C that {b.name} still holds "
                                         "at the hand-off", load.loc)
        if ctx["streamed"]:
            self._check_streamed_result(mma, cb, p1)
        self.emit(f"// the hand-off exceeds the mma's L1 stream pieces: the mma at line "
                  f"{mma.loc.line if mma.loc else '?'} runs here, streaming it from its slot")
        self._mma_emit(ctx)
        self.advanced = getattr(self, "advanced", set())
        self.advanced.add(id(mma))

    # ------------------------------------------------------------------ on-chip copies
    def op_copy(self, op):

        src, dst = op.args[0].type.space.name, op.result.type.space.name
        if src == "L1" and dst in ("L0A", "L0B"):
            if op.attrs.get("staged"):
                return       # the mma stages it into its own base tiles (see the module docstring)
            raise AscendCUnsupported(f"a copy L1 -> {dst} that is not staged into one mma (a resident "
                                     f"{dst} tile)", op.loc)
        raise AscendCUnsupported(f"an on-chip copy {src} -> {dst}", op.loc)

    # ------------------------------------------------------------------ mma
    def op_mma(self, op):
        if id(op) in getattr(self, "advanced", ()):
            return           # lowered at the hand-off it consumes
        ctx = self._mma_prepare(op)
        if ctx["defer"] is not None:
            # the result does not fit the L0C pieces: computed piece by piece at its store, each piece
            # Fixpiped out as it is done (the ops in between only wait, sync and compute scalars)
            store = ctx["defer"]
            self.deferred = getattr(self, "deferred", {})
            self.deferred[op.result.id] = ctx
            self.emit(f"// mma {ctx['M']}x{ctx['N']}: streamed out of L0C piece by piece at its store "
                      f"(line {store.loc.line if store.loc else '?'})")
            return
        if ctx["streamed"]:
            self._check_streamed_result(op, ctx["pieces"]["c"], ctx["pos"])
        self._mma_emit(ctx)

    def _mma_prepare(self, op, override: dict | None = None, store=None) -> dict:
        """Validate an mma against the plan and the API subset; what its lowering needs (``override``: operand
        sources to use instead of the IR's, e.g. a hand-off's GM slot window; ``store``: the store its streamed
        result goes to, when it is not the result's own user: an if's arm)."""

        st = self._cube()
        pos = st.pos[id(op)]
        pieces = self._mma_pieces(op)
        operands, acc = _mma_operands(op)
        trans = bool(op.attrs.get("trans_b"))
        M, N = op.result.type.shape
        src = {}
        for which, (kind, v) in operands.items():
            if override and which in override:
                src[which] = override[which]
                if which + ".stream" not in pieces:
                    raise AscendCError(f"the memory plan has no L1 stream pieces for operand {which}", op.loc)
                continue
            if kind == "gm":
                src[which] = ("gm", v, v.tensor.type.dtype, v.shape)
                if which + ".stream" not in pieces:
                    raise AscendCError(f"the memory plan has no L1 stream pieces for operand {which}", op.loc)
                continue
            o = v.owner
            if o is None or o.kind != "copy" or not o.attrs.get("staged"):
                raise AscendCUnsupported(f"mma operand {which} in {v.type.space} that is not staged from L1 (a "
                                         f"resident {v.type.space} tile)", op.loc)
            src[which] = ("l1", o.args[0], o.args[0].type.dtype, o.args[0].type.shape, o)
        dt = src["a"][2]
        if src["b"][2].name != dt.name:
            raise AscendCUnsupported(f"mma of {dt} by {src['b'][2]}", op.loc)
        c0 = 32 // dt.itemsize
        bm, bk = pieces["a"].shape
        bk2, bn = pieces["b"].shape
        if not trans and dt.itemsize == 4:
            why = ("on Ascend950 (its transposing load is outside the API subset)" if self.arch35 else
                   "staged in L1 (an L1 tile is NZ; the 32-bit LoadDataWithTranspose reads 16-row Zz bands, which "
                   "only a GM operand's stream pieces are copied as)" if src["b"][0] != "gm" else None)
            if why:
                raise AscendCUnsupported(f"mma with a non-transposed B of {dt} {why}", op.loc)
        if not trans and dt.itemsize == 1:
            k_rows = src["b"][3][0] if src["b"][0] == "l1" else bk
            # each column piece must be whole 32-column squares once padded to 16-column fractals (the L1
            # blocks hold 32 columns, padded with zeros past N): pieces of min(bn, N) and of N's tail
            sizes = {min(bn, N), N - (-(-N // bn) - 1) * bn}
            odd = bn % 32 or any((-(-x // 16)) % 2 for x in sizes)
            why = ("on Ascend950 (its transposing load is outside the API subset)" if self.arch35 else
                   f"whose N pieces ({N} columns by {bn}) are not whole 32-column squares, or whose stored K rows "
                   f"({k_rows}) or K piece ({bk}) are not multiples of 32"
                   if odd or bk % 32 or (-(-k_rows // 16)) % 2 else None)
            if why:
                raise AscendCUnsupported(f"mma with a non-transposed B of {dt} {why} (LoadDataWithTranspose "
                                         "transposes 32 x 32 squares)", op.loc)
        if bk != bk2 or bk % c0 or bk % 16:
            raise AscendCUnsupported(f"mma base tiles {bm}x{bk} / {bk2}x{bn} ({dt}): base_k must be a multiple "
                                     f"of {max(c0, 16)}", op.loc)
        if bm != min(_ceil(M, 16), 128):
            raise AscendCError(f"the plan's base_m {bm} differs from the L0C row blocks of {M} rows", op.loc)
        blocks = l0c_blocks(M, N)
        K = src["a"][3][1]
        ctx = dict(op=op, pos=pos, pieces=pieces, src=src, acc=acc, trans=trans, M=M, N=N, K=K, dt=dt, bm=bm,
                   bn=bn, bk=bk, blocks=blocks, defer=None, streamed=False)
        need = l0c_bytes(M, N)
        if acc is not None:
            cbuf = self._buffer(acc)
            cbytes = cbuf.bytes // max(cbuf.copies, 1)
        elif "c" in pieces:
            cbuf = pieces["c"]
            cbytes = cbuf.bytes
            ctx["streamed"] = True
            if store is not None:
                ctx["defer"] = store
            elif op.result.id in self.plan.streamed_out:   # the plan's rule: more than the two .c pieces hold
                ctx["defer"] = self._deferred_store(op)
        else:
            cbuf = self._buffer(op.result)
            cbytes = cbuf.bytes // max(cbuf.copies, 1)
        if need > cbytes and ctx["defer"] is None:
            raise AscendCUnsupported(f"an mma result {M}x{N} whose L0C fractals ({need} bytes) exceed its planned "
                                     f"{cbytes} bytes", op.loc)
        one_piece = K <= bk and N <= bn and len(blocks) == 1
        until = pos if ctx["defer"] is None else st.pos[id(ctx["defer"])]
        for which, s_ in src.items():
            if s_[0] == "l1":
                self._check_source(op, s_[4], s_[1], until, pieces, one_piece)
        return ctx

    def _deferred_store(self, op):
        """The one store of a streamed-out mma result, when only waits, syncs, checks and scalars stand between
        them."""
        return self._only_store(op.result, op, "an mma result")

    def _only_store(self, v, after, what: str):
        """The one store reading ``v`` (a streamed-out mma result, or an if's result that its arms' mmas stream
        out), in the block of ``after`` (the op making ``v``) with only waits, syncs, checks and pure scalars
        between them: where the mma is lowered, each piece Fixpiped out as it is done. A check between them
        (a bound of the store's window) then runs before the mma rather than after it; the mma's result is seen
        only at its store either way."""

        st = self._cube()
        users = st.users.get(v.id, [])
        if len(users) == 1 and users[0].kind == "dequant":   # the fixpipe dequantises each piece as it stores it
            users = st.users.get(users[0].result.id, [])
        if len(users) != 1 or users[0].kind != "store":
            raise AscendCUnsupported(f"{what} of {v.type.shape} (more than the L0C pieces hold) read by "
                                     f"{len(users)} ops: it streams out only to one store", after.loc)
        store = users[0]
        block = next((b for b in _blocks_of(self.k.programs()["aic"]) if after in b.ops), None)
        if block is None or store not in block.ops:
            raise AscendCUnsupported(f"a streamed-out {what} stored in another block", after.loc)
        i, j = block.ops.index(after), block.ops.index(store)
        for mid in block.ops[i + 1:j]:
            if not (mid.kind in ("event_set", "event_wait", "flag_wait", "barrier", "check", "dequant") or
                    (mid.defn.category == "scalar" and mid.defn.pure)):
                raise AscendCUnsupported(f"a streamed-out {what} whose store follows a {mid.kind} (the mma is "
                                         "computed piece by piece at its store)", after.loc)
        return store

    def defer_if(self, op):
        """An if whose arms each end in an mma whose result streams out of L0C (the plan gives the if's result no
        buffer), stored once after the if: the whole if is lowered at that store (``_only_store``'s rule for
        what may stand between), each arm's mma Fixpiped into the store's window piece by piece. An arm may yield
        its mma through a ``dequant``: that arm's Fixpipes then dequantise (DEQF16 with the arm's own scale)."""

        why = "an if whose arms' mma results stream out of L0C to its result's store"
        if len(op.results) != 1 or not op.results[0].is_tile or len(op.blocks) != 2:
            raise AscendCUnsupported(f"{why}, with other results or one arm, is not lowered", op.loc)
        r = op.results[0]
        store = self._only_store(r, op, "if result")
        gdt = store.windows["window"].tensor.type.dtype.name
        for arm in op.blocks:
            mma = self._arm_mma(arm, 0, through_dequant=True)
            if mma is None:
                raise AscendCUnsupported(f"{why}: an arm yields a value no streamed mma of its own made", op.loc)
            deq = self._cube().dequant_of(mma)
            for o in arm.ops:
                if not (o is mma or o is deq or o is arm.ops[-1] or (o.kind == "copy" and o.attrs.get("staged")) or
                        (o.defn.category == "scalar" and o.defn.pure)):
                    raise AscendCUnsupported(f"{why}: an arm also holds a {o.kind}", o.loc)
            if _quant_of(mma.result.type.dtype.name, deq, gdt) is None:
                raise AscendCUnsupported(f"{why}: a Fixpipe store of an arm's {mma.result.type.dtype}"
                                         f"{' dequantised' if deq is not None else ''} to a {gdt} tensor", op.loc)
        self.deferred_ifs = getattr(self, "deferred_ifs", {})
        self.deferred_ifs[r.id] = op
        self.emit(f"// if (line {op.loc.line if op.loc else '?'}): its arms' mmas stream out of L0C, so it runs at "
                  f"its result's store (line {store.loc.line if store.loc else '?'})")

    def _arm_mma(self, arm, i: int, through_dequant: bool = False):
        """The mma of ``arm`` (an if's block) whose result the arm yields as the if's result ``i``, when it is
        the arm's own, does not accumulate and streams out through the plan's ``.c`` pieces; else None. With
        ``through_dequant`` the arm may yield it through a ``dequant`` of its own (``dequant_of``)."""
        y = arm.ops[-1]
        mma = y.args[i].owner if y.kind == "yield" and len(y.args) > i else None
        if through_dequant and mma is not None and mma.kind == "dequant" and mma in arm.ops:
            mma = mma.args[0].owner
        if mma is None or mma.kind != "mma" or mma not in arm.ops or mma.attrs.get("acc") or \
                "c" not in self._mma_pieces(mma):
            return None
        return mma

    def _other_arms_pieces(self, op) -> list:
        """The L0C pieces of the mmas of the other arms of the if ``op`` (an mma) yields its result from: never
        live at the same time as ``op``'s."""
        st = self._cube()
        out = []
        for u in st.users.get(op.result.id, []):
            owner = st.if_of_yield.get(id(u)) if u.kind == "yield" else None
            for arm in owner.blocks if owner is not None else ():
                for o in arm.ops:
                    if o.kind == "mma" and o is not op:
                        c = self._mma_pieces(o).get("c")
                        out += [c] if c is not None else []
        return out

    def if_result_handle(self, op, r) -> bool:
        """An if's tile result that its arms' mmas leave in their own L0C pieces (no buffer of its own): a
        LocalTensor handle declared before the if, each arm's yield pointing it at its pieces (``op_yield``).
        False when an arm's result streams out piece by piece at its store instead (``defer_if``)."""
        i = op.results.index(r)
        for arm in op.blocks:
            mma = self._arm_mma(arm, i)    # an arm yielding a dequant is lowered at the store (``defer_if``)
            if mma is None or mma.result.id in self.plan.streamed_out:
                return False
        name = self.namer.ident(r.name or "ifResult")
        self.emit(f"LocalTensor<{CTYPE[r.type.dtype.name]}> {name};   // the arm's mma result in its L0C pieces")
        self.api.add("LocalTensor")
        self.names[r.id] = name
        self.handles = getattr(self, "handles", set()) | {r.id}
        return True

    def _deferred_if_at(self, dif, store):
        """The if ``defer_if`` left for ``store``: each arm's scalars, then its mma Fixpiped into the store."""
        self.emit(f"if ({self.ref(dif.args[0])}) {{")
        for i, arm in enumerate(dif.blocks):
            if i:
                self.emit("} else {")
            self.depth += 1
            for o in arm.ops:
                if o.kind == "mma":
                    self._mma_emit(self._mma_prepare(o, store=store), store=store)
                elif o.kind not in ("yield", "dequant"):     # a dequant is the arm's Fixpipes' (``_fixpipe``)
                    self.note(o)
                    getattr(self, "op_" + o.kind)(o)
            self.depth -= 1
        self.emit("}")

    def _mma_emit(self, ctx: dict, store=None):
        """The mma's pieces: (row block, column piece) x K pieces; with ``store`` each finished piece is Fixpiped
        into the store's window from the plan's L0C pieces (ping-pong)."""
        from .names import c_string

        op, pieces, src, acc, trans = ctx["op"], ctx["pieces"], ctx["src"], ctx["acc"], ctx["trans"]
        M, N, K, dt, bm, bn, bk = (ctx[x] for x in ("M", "N", "K", "dt", "bm", "bn", "bk"))
        acct = CTYPE[op.result.type.dtype.name]
        # the result in L0C: the accumulator's buffer, the planned buffer, or the plan's streamed-out pieces
        if acc is not None:
            out = self.tile(acc)
            self.names[op.result.id] = out
        elif store is not None:
            out = None
        elif ctx["streamed"]:
            out = self._local("L0C", pieces["c"].offset, acct, op.result.name or "mmaOut")
            self.names[op.result.id] = out
        else:
            out = self.tile(op.result)
        # valid extents
        ext = {}
        for which, s_ in src.items():
            ext[which] = self._window_counts(op, s_[1], "mma operand") if s_[0] == "gm" else self.extents(s_[1])
        kv = ext["a"][1]
        kvb = ext["b"][1] if trans else ext["b"][0]
        if kv != kvb:
            self.emit(f"CVT_CHECK({kv} == {kvb}, {c_string('mma: the operands valid contraction extents differ')});")
        if acc is None and not (_const(kv) or 0) > 0:
            self.emit(f"CVT_CHECK({kv} > 0, {c_string('mma: an empty contraction (valid K of 0) is not lowered')});")
        streams = [w for w, s_ in src.items() if s_[0] == "gm"]
        self.emit(f"// mma {M}x{N}, K {K} ({dt}{', B transposed' if trans else ''}): base tiles {bm}x{bn}x{bk}"
                  f"{', operand ' + ' and '.join(streams) + ' streamed from GM' if streams else ''}"
                  f"{', accumulating' if acc is not None else ''}"
                  f"{', each piece Fixpiped out' if store is not None else ''}")
        self.api |= {"SetFlag", "WaitFlag", "HardEvent", "LoadData", "LoadData2DParams", "Mmad", "MmadParams"}
        e0, e1 = _EV
        # L0C may still be read by an earlier Fixpipe (another mma's pieces share it); L0A / L0B copies free
        if store is None:
            self.emit(f"SetFlag<HardEvent::FIX_M>({e0});")
            self.emit(f"WaitFlag<HardEvent::FIX_M>({e0});")
        else:
            for e in _EV:
                self.emit(f"SetFlag<HardEvent::FIX_M>({e});")
        for e in _EV:
            self.emit(f"SetFlag<HardEvent::M_MTE1>({e});")
        npieces = -(-N // bn)
        for bi, blk in enumerate(ctx["blocks"]):
            if N % bn == 0 and npieces > 2:     # equal column pieces: a loop
                nvar = self.namer.ident("n0")
                self.emit(f"for (int64_t {nvar} = 0; {nvar} < {N}; {nvar} += {bn}) {{   // column pieces")
                self.depth += 1
                pidx = _fold(f"{bi * npieces} + {nvar} / {bn}")
                self._mma_piece(ctx, ext, out, store, blk, nvar, bn, pidx)
                self.depth -= 1
                self.emit("}")
                continue
            for n0 in range(0, N, bn):
                self._mma_piece(ctx, ext, out, store, blk, str(n0), min(bn, N - n0), str(bi * npieces + n0 // bn))
        # drain: nothing the mma read or wrote on chip is in flight after it
        for e in _EV:
            self.emit(f"WaitFlag<HardEvent::M_MTE1>({e});")
        self.emit(f"SetFlag<HardEvent::MTE1_MTE2>({e1});")
        self.emit(f"WaitFlag<HardEvent::MTE1_MTE2>({e1});")
        if store is not None:
            for e in _EV:
                self.emit(f"WaitFlag<HardEvent::FIX_M>({e});")

    def _mma_piece(self, ctx: dict, ext: dict, out, store, blk: tuple, n0: str, npc: int, pidx: str):
        """One (row block, column piece from column n0) of an mma: its K pieces (ping-pong L0A / L0B copies, GM
        operands streamed through the L1 pieces) accumulated into L0C; with ``store`` computed in L0C copy
        ``pidx % 2`` of the plan's pieces and Fixpiped out once done."""

        op, pieces, src, acc, trans = ctx["op"], ctx["pieces"], ctx["src"], ctx["acc"], ctx["trans"]
        M, N, K, dt, bk = (ctx[x] for x in ("M", "N", "K", "dt", "bk"))
        acct, ct = CTYPE[op.result.type.dtype.name], CTYPE[dt.name]
        c0, fe = 32 // dt.itemsize, _FRACTAL // dt.itemsize
        mv, kv = ext["a"]
        nv = ext["b"][0] if trans else ext["b"][1]
        e0 = _EV[0]
        m0, mrows, M1, cofs = blk
        N1p = -(-npc // 16)
        nb0 = _fold(f"{n0} / 16")
        streams = [w for w, s_ in src.items() if s_[0] == "gm"]
        if store is not None:
            cp = _fold(f"({pidx}) % 2")
            ec = _fold(f"{e0} + {cp}")
            dst = self._local("L0C", _piece(pieces["c"], cp), acct, "cPiece")
            self.emit(f"WaitFlag<HardEvent::FIX_M>({ec});")
        else:
            dst = _at(out, f"{cofs} + ({nb0}) * {M1 * 256}")
        single_k = K <= bk
        if single_k:
            kk0, kp, pp, ev = "0", kv, "0", str(e0)
        else:
            kk0 = self.namer.ident("k0")
            self.emit(f"for (int64_t {kk0} = 0; {kk0} < {kv}; {kk0} += {bk}) {{   // K pieces")
            self.depth += 1
            kp = self.namer.ident("kLen")
            self.emit(f"const int64_t {kp} = cvtMin<int64_t>({bk}, {kv} - {kk0});")
            pp = self.namer.ident("pp")
            self.emit(f"const int64_t {pp} = ({kk0} / {bk}) % 2;   // ping-pong copy")
            ev = self.namer.ident("ev")
            self.emit(f"const int32_t {ev} = {e0} + static_cast<int32_t>({pp});")
        k1 = _fold(f"({kp} + {c0 - 1}) / {c0}")
        if _const(k1) is None:
            k1 = self.namer.ident("k1")
            self.emit(f"const int64_t {k1} = ({kp} + {c0 - 1}) / {c0};   // K fractals of this piece")
        self.emit(f"WaitFlag<HardEvent::M_MTE1>({ev});")
        a2 = self._local("L0A", _piece(pieces["a"], pp), ct, "aL0")
        b2 = self._local("L0B", _piece(pieces["b"], pp), ct, "bL0")
        nrows_b = -(-src["b"][3][0] // 16)       # 16-row blocks of B as stored (N rows transposed, K rows not)

        def load(which, l1, stream):
            if which == "a":
                if stream:
                    self._load_a(a2, l1, "0", k1, M1, M1, "0", fe, bk // c0)
                else:
                    self._load_a(a2, l1, f"{kk0} / {c0}", k1, M1, -(-M // 16), str(m0 // 16), fe, bk // c0)
            elif trans:
                if stream:
                    self._load_bt(b2, l1, "0", k1, N1p, N1p, "0", fe, bk // c0)
                else:
                    self._load_bt(b2, l1, f"{kk0} / {c0}", k1, N1p, nrows_b, nb0, fe, bk // c0)
            elif stream:
                self._load_b(b2, l1, "0", kp, N1p, bk // 16, "0", fe)
            else:
                self._load_b(b2, l1, f"{kk0} / 16", kp, N1p, nrows_b, nb0, fe)

        # the L1 operands first (a stream piece may take an L1 operand's place once it was read)
        for which, s_ in src.items():
            if s_[0] == "l1":
                load(which, self.tile(s_[1]), False)
        if streams:
            # GM -> L1: every LoadData so far (this piece's, the last reader of this stream copy) is done
            self.emit(f"SetFlag<HardEvent::MTE1_MTE2>({ev});")
            self.emit(f"WaitFlag<HardEvent::MTE1_MTE2>({ev});")
            stream_t = {}
            for which in streams:
                t = self._local("L1", _piece(pieces[which + ".stream"], pp), ct, f"{which}Stream")
                stream_t[which] = t
                w = src[which][1]
                if which == "a":
                    self._nd2nz(op, t, w, str(m0), _clamp(mv, m0, mrows, M), kk0, kp, 16 * M1, c0)
                elif trans:
                    self._nd2nz(op, t, w, n0, _clamp(nv, n0, npc, N), kk0, kp, 16 * N1p, c0)
                elif fe == _FRACTAL_B32:
                    self._zz_bands(op, t, w, kk0, kp, n0, _clamp(nv, n0, npc, N), N1p)
                else:
                    self._nd2nz(op, t, w, kk0, kp, n0, _clamp(nv, n0, npc, N), bk, c0)
            self.emit(f"SetFlag<HardEvent::MTE2_MTE1>({ev});")
            self.emit(f"WaitFlag<HardEvent::MTE2_MTE1>({ev});")
            for which in streams:
                load(which, stream_t[which], True)
        self.emit(f"SetFlag<HardEvent::MTE1_M>({ev});")
        self.emit(f"WaitFlag<HardEvent::MTE1_M>({ev});")
        init = "false" if acc is not None else ("true" if single_k else f"({kk0} == 0)")
        self.emit(f"Mmad({dst}, {a2}, {b2}, MmadParams({16 * M1}, {16 * N1p}, {c_cast('uint16_t', kp)}, 0, "
                  f"false, {init}));")
        self.emit(f"SetFlag<HardEvent::M_MTE1>({ev});")
        if not single_k:
            self.depth -= 1
            self.emit("}")
        if store is not None:
            self.emit(f"SetFlag<HardEvent::M_FIX>({ec});")
            self.emit(f"WaitFlag<HardEvent::M_FIX>({ec});")
            self._fixpipe(store, dst, M1, str(m0), _clamp(mv, m0, mrows, M), n0, _clamp(nv, n0, npc, N),
                          mma=op)
            self.emit(f"SetFlag<HardEvent::FIX_M>({ec});")

    def _check_source(self, op, copy, l1, pos: int, pieces: dict, one_piece: bool):
        """The staged L1 operand stays in place from its copy to the mma (another buffer may take its place
        once the copy read it, as the plan sees it). This mma's own stream pieces may take it when the mma
        is one piece: it reads its L1 operands before it streams (see op_mma)."""

        st = self._cube()
        buf = self._buffer(l1)
        if buf is None:
            if l1.id not in self.names:
                raise AscendCUnsupported("an mma operand staged from an L1 tile without a buffer", op.loc)
            return       # a hand-off placed in this mma's stream pieces (checked at its load)
        own = [b for t, b in pieces.items() if t.endswith(".stream")]
        bad = self._clobbered("L1", buf.offset, buf.offset + buf.bytes // max(buf.copies, 1), st.pos[id(copy)],
                              pos, skip=[buf] + (own if one_piece else []))
        if bad:
            raise AscendCUnsupported(f"the L1 operand {buf.name} of this mma shares its place with {bad[0].name}, "
                                     "which may be written before the mma has read the operand (the mma stages "
                                     "its L1 operands itself, piece by piece)", op.loc)

    def _check_streamed_result(self, op, cbuf, pos: int):
        """A result streamed out of L0C stays in the mma's pieces until its last store."""

        st = self._cube()
        last = max((st.pos[id(u)] for u in st.readers(op.result)), default=pos)
        bad = self._clobbered("L0C", cbuf.offset, cbuf.offset + cbuf.bytes, pos, last,
                              skip=[cbuf] + self._other_arms_pieces(op))
        if bad:
            raise AscendCUnsupported(f"the mma result's L0C pieces are reused by {bad[0].name} before its store",
                                     op.loc)

    def _load_a(self, dst: str, src: str, kb0: str, k1: str, M1p: int, M1L: int, mb0: str, fe: int, kmax: int):
        """K fractals [kb0, kb0 + k1) x row blocks [mb0, mb0 + M1p) of an NZ L1 matrix of 16 * M1L rows into L0A:
        Zz on A2/A3 (fractals row-major over (m1, k1)), Nz on 950 (column-major, the L1 order)."""
        if self.arch35:   # the L1 NZ order copied unchanged: the same fractal walk as B stored [N, K]
            self._load_bt(dst, src, kb0, k1, M1p, M1L, mb0, fe, kmax)
            return
        for i in range(M1p):
            d = dst if i == 0 else _at(dst, f"{k1} * {i * fe}")
            self.emit(f"LoadData({d}, {_at(src, _lin([(kb0, M1L), (mb0, 1)], i, fe))}, LoadData2DParams(0, "
                      f"static_cast<uint8_t>({k1}), {M1L}, 0, 0, false, 0));")

    def _load_bt(self, dst: str, src: str, kb0: str, k1: str, N1p: int, N1L: int, nb0: str, fe: int, kmax: int):
        """B stored [N, K] (NZ in L1, 16 * N1L rows): its NZ is L0B's Zn; n blocks [nb0, nb0 + N1p)."""
        if N1p == N1L and _fold(nb0) == "0" and kmax * N1L <= 255:
            self.emit(f"LoadData({dst}, {_at(src, _lin([(kb0, N1L * fe)]))}, LoadData2DParams(0, "
                      f"static_cast<uint8_t>({k1} * {N1L}), 1, 0, 0, false, 0));")
            return
        j = self.namer.ident("kb")
        self.emit(f"for (int64_t {j} = 0; {j} < {k1}; ++{j}) {{")
        self.emit(f"    LoadData({dst}[{j} * {N1p * fe}], {src}[{_lin([(kb0, N1L), (j, N1L), (nb0, 1)], 0, fe)}], "
                  f"LoadData2DParams(0, {N1p}, 1, 0, 0, false, 0));")
        self.emit("}")

    def _zz_bands(self, op, dst: str, w, row0: str, nrows: str, col0: str, ncols: str, N1p: int):
        """Rows [row0, row0 + nrows) x columns [col0, col0 + ncols) of a 32-bit GM window into L1 as Zz: one NZ
        band of 16 rows per 16 rows of K, band j at j * 16 * 16 * N1p elements, so the two 16 x 8 fractals of each
        16-column square are consecutive (what the 32-bit LoadDataWithTranspose joins). A window with one row
        stride takes, when 16 rows of it fit Nd2Nz's 16-bit source stride (checked at run time unless the stride
        is a constant), one Nd2Nz for its whole bands (ndNum of them) and one for the rest; otherwise, and for
        any other window, a loop of ``_nd2nz`` per band."""
        d0 = w.dims[0]
        plain = _nz_columns(w, self.ref) is None and len(d0.radices) == 1 and not any(d0.lookups or ())
        stride = self.ref(d0.strides[0])
        s_ = _const(stride)
        fits = f"{stride} >= 1 && 16 * {stride} <= 65535"
        if plain and (s_ is None or 1 <= 16 * s_ <= 65535):
            if s_ is None:
                self.emit(f"if ({fits}) {{")
                self.depth += 1
            self._zz_whole_bands(w, dst, row0, nrows, col0, ncols, N1p)
            if s_ is None:
                self.depth -= 1
                self.emit("} else {")
                self.depth += 1
                self._zz_band_loop(op, dst, w, row0, nrows, col0, ncols, N1p)
                self.depth -= 1
                self.emit("}")
            return
        self._zz_band_loop(op, dst, w, row0, nrows, col0, ncols, N1p)

    def _zz_whole_bands(self, w, dst: str, row0: str, nrows: str, col0: str, ncols: str, N1p: int):
        """Zz by two Nd2Nz: ndNum = nrows / 16 ND matrices of 16 rows (one band each), then the rest."""
        g = self.gm[w.tensor.id]
        stride, base = self._row_base(w, row0, c_sum(self.ref(w.dims[1].start), col0))
        u16 = lambda e: c_cast("uint16_t", e)  # noqa: E731
        bands, rest = _fold(f"({nrows}) / 16"), _fold(f"({nrows}) % 16")
        self.api |= {"DataCopy", "Nd2NzParams"}
        self.emit(f"if ({bands} > 0) {{   // Zz: a 16-row NZ band per 16 rows of K")
        self.emit(f"    DataCopy({dst}, {g}[{base}], Nd2NzParams({u16(bands)}, 16, {u16(ncols)}, "
                  f"{u16(f'16 * {stride}')}, {u16(stride)}, 16, 1, {16 * 16 * N1p}));")
        self.emit("}")
        self.emit(f"if ({rest} > 0) {{")
        self.emit(f"    DataCopy({_at(dst, f'({bands}) * {16 * 16 * N1p}')}, {g}[{c_sum(base, f'({bands}) * 16 * {stride}')}], "
                  f"Nd2NzParams(1, {u16(rest)}, {u16(ncols)}, 0, {u16(stride)}, 16, 1, 0));")
        self.emit("}")

    def _zz_band_loop(self, op, dst: str, w, row0: str, nrows: str, col0: str, ncols: str, N1p: int):
        """Zz by one ``_nd2nz`` (R = 16) per band."""
        j = self.namer.ident("band")
        self.emit(f"for (int64_t {j} = 0; {j} * 16 < {nrows}; ++{j}) {{   // Zz: a 16-row NZ band each")
        self.depth += 1
        self._nd2nz(op, _at(dst, f"{j} * {16 * 16 * N1p}"), w, c_sum(row0, f"{j} * 16"),
                    f"cvtMin<int64_t>(16, {nrows} - {j} * 16)", col0, ncols, 16, 8)
        self.depth -= 1
        self.emit("}")

    def _load_b(self, dst: str, src: str, kr0: str, kp: str, N1p: int, K1L: int, nb0: str, fe: int):
        """B stored [K, N] (NZ in L1, 16 * K1L rows): each 16 x 16 fractal transposed into L0B's Zn; 8-bit B
        (32-column blocks in L1) per 32 rows of K: each 32 x 32 square (two 16 x 32 fractals of one column block)
        transposed into the two L0B fractals of its 32 columns (LoadDataWithTranspose); 32-bit B (Zz in L1,
        ``_zz_bands``: a stream piece only) per 16-row band: each 16 x 16 square (two 16 x 8 fractals side by
        side) transposed into L0B fractals (2j, n) and (2j + 1, n), N1p fractals apart (LoadDataWithTranspose)."""
        if fe == _FRACTAL_B32:
            j = self.namer.ident("kb")
            self.api |= {"LoadDataWithTranspose", "LoadData2dTransposeParams"}
            self.emit(f"for (int64_t {j} = 0; {j} < ({kp} + 15) / 16; ++{j}) {{")
            self.emit(f"    LoadDataWithTranspose({dst}[{j} * {2 * N1p * fe}], {src}[{j} * {16 * 16 * N1p}], "
                      f"LoadData2dTransposeParams(0, {N1p}, 1, 0, {N1p - 1}));")
            self.emit("}")
            return
        if fe == _FRACTAL:          # one-byte elements
            j = self.namer.ident("kb")
            self.api |= {"LoadDataWithTranspose", "LoadData2dTransposeParams"}
            self.emit(f"for (int64_t {j} = 0; {j} < ({kp} + 31) / 32; ++{j}) {{")
            self.emit(f"    LoadDataWithTranspose({dst}[{j} * {N1p * fe}], "
                      f"{src}[{_lin([(f'({nb0}) / 2', K1L), (kr0, 1), (j, 2)], 0, fe)}], "
                      f"LoadData2dTransposeParams(0, {N1p // 2}, {K1L // 2}, 1, 0));")
            self.emit("}")
            return
        i = self.namer.ident("kb")
        self.emit(f"for (int64_t {i} = 0; {i} < ({kp} + 15) / 16; ++{i}) {{")
        self.emit(f"    LoadData({dst}[{i} * {N1p * fe}], {src}[{_lin([(nb0, K1L), (kr0, 1), (i, 1)], 0, fe)}], "
                  f"LoadData2DParams(0, {N1p}, {K1L}, 0, 0, true, 0));")
        self.emit("}")

    # ------------------------------------------------------------------ L0C -> GM
    def op_dequant(self, op):
        """No code of its own: the Fixpipe of each store reading it dequantises (``quantPre`` DEQF16 with the
        scale's bits as ``deqScalar``)."""
        st = self._cube()
        for u in st.users.get(op.result.id, []):
            if u.kind != "store":
                raise AscendCUnsupported(f"a dequant read by a {u.kind}: the fixpipe dequantises only what it moves "
                                         "out of L0C (a store or a hand-off)", op.loc)
        self.api |= {"QuantMode_t"}

    def cube_store(self, op):
        from .names import c_string

        tile = op.args[-1]
        w = op.windows["window"]
        t = tile.type
        if t.space.name != "L0C" or t.rank != 2:
            raise AscendCUnsupported(f"a store of a {t.space} tile on the cube side", op.loc)
        gdt = w.tensor.type.dtype.name
        src_tile, _ = _fixpipe_source(tile)
        self._cube()
        deferred = getattr(self, "deferred", {}).pop(src_tile.id, None)
        deferred_if = getattr(self, "deferred_ifs", {}).pop(src_tile.id, None)
        if deferred_if is None and _quant_mode(tile, gdt) is None:   # a deferred if's arms: checked by defer_if
            raise AscendCUnsupported(f"a Fixpipe store of {t.dtype} to a {gdt} tensor", op.loc)
        mv, nv = self.extents(tile)
        wcounts = self._window_counts(op, w, "store")
        for i, (n, wn) in enumerate(zip((mv, nv), wcounts)):
            if n != wn:
                self.emit(f"CVT_CHECK({n} <= {wn}, "
                          f"{c_string(f'store: the tile valid dim {i} exceeds the window valid extent')});")
        self.api |= {"Fixpipe", "FixpipeParamsV220", "QuantMode_t", "CFG_ROW_MAJOR"}
        if deferred_if is not None or deferred is not None:
            if deferred_if is not None:
                self._deferred_if_at(deferred_if, op)
            else:
                self._mma_emit(deferred, store=op)
            for fs in getattr(self, "postponed", {}).pop(id(op), []):
                self.op_flag_set(fs, postponed=True)
            return
        src = self.tile(src_tile)
        blocks = l0c_blocks(*t.shape)
        self.emit(f"// L0C -> GM (NZ2ND, {src_tile.type.dtype} -> {gdt}{f', {len(blocks)} row blocks' if len(blocks) > 1 else ''})")
        for m0, rows, M1, cofs in blocks:
            self._fixpipe(op, _at(src, str(cofs)), M1, m0, _clamp(mv, m0, rows, t.shape[0]), 0, nv)

    def _fixpipe(self, op, src: str, M1: int, m0: int, nrows: str, n0: int, ncols: str, mma=None):
        """Rows [0, nrows) x columns [0, ncols) of the L0C NZ matrix ``src`` (16 * M1 rows) into the store's
        window from its row m0, column n0: NZ2ND, one call for rows with one stride, one per row otherwise.
        ``mma``: the mma whose pieces these are, when they stream out at the store: its own result type and
        dequant (an if's arm's, which the store's tile does not show) decide the conversion."""

        w = op.windows["window"]
        gdt = w.tensor.type.dtype.name
        if mma is not None:
            src_dt, deq = mma.result.type.dtype.name, self._cube().dequant_of(mma)
        else:
            src_tile, deq = _fixpipe_source(op.args[-1])
            src_dt = src_tile.type.dtype.name
        quant = _quant_of(src_dt, deq, gdt)
        g = self.gm[w.tensor.id]
        gt, lt = CTYPE[gdt], CTYPE[src_dt]
        deq_line = f"{{fp}}.deqScalar = cvtDeqScalar({self.ref(deq.args[1])});" if deq is not None else None
        d0, d1 = w.dims
        cstart = _fold(c_sum(self.ref(d1.start), str(n0) if n0 else ""))
        fp = self.namer.ident("fixParams")
        if len(d0.radices) == 1 and not any(d0.lookups or ()):
            stride = self.ref(d0.strides[0])
            r0 = _fold(c_sum(self.ref(d0.start), str(m0) if m0 else ""))
            base = c_sum(self.ref(w.offset), "0" if r0 == "0" else f"({r0}) * {stride}", cstart)
            dstride = stride if _const(stride) != 0 else ncols
            self.emit(f"FixpipeParamsV220 {fp}({c_cast('uint16_t', ncols)}, {c_cast('uint16_t', nrows)}, {16 * M1}, "
                      f"{c_cast('uint32_t', dstride)}, false);")
            self.emit(f"{fp}.quantPre = QuantMode_t::{quant};")
            if deq_line:
                self.emit(deq_line.format(fp=fp))
            self.emit(f"Fixpipe<{gt}, {lt}, CFG_ROW_MAJOR>({g}[{base}], {src}, {fp});")
            return
        one = str(max(_const(ncols), 1)) if _const(ncols) is not None else f"cvtMax<int64_t>({ncols}, 1)"
        self.emit(f"FixpipeParamsV220 {fp}({c_cast('uint16_t', ncols)}, 1, {16 * M1}, {c_cast('uint32_t', one)}, "
                  "false);")
        self.emit(f"{fp}.quantPre = QuantMode_t::{quant};")
        if deq_line:
            self.emit(deq_line.format(fp=fp))
        r = self.namer.ident("row")
        self.emit(f"for (int64_t {r} = 0; {r} < {nrows}; ++{r}) {{")
        self.depth += 1
        roff = self._row_offset(d0, c_sum(self.ref(d0.start), str(m0) if m0 else "", r), op)
        self.emit(f"Fixpipe<{gt}, {lt}, CFG_ROW_MAJOR>({g}[{c_sum(self.ref(w.offset), roff, cstart)}], "
                  f"{src}[{r} * 16], {fp});")
        self.depth -= 1
        self.emit("}")


def _fixpipe_source(tile):
    """(the L0C tile a Fixpipe reads, the ``dequant`` op it applies or None) of a stored cube tile."""
    o = tile.owner
    if o is not None and o.kind == "dequant":
        return o.args[0], o
    return tile, None


def _quant_mode(tile, gdt: str):
    """The Fixpipe ``quantPre`` storing ``tile`` into a ``gdt`` tensor (DEQF16 for a dequant), or None."""
    src, deq = _fixpipe_source(tile)
    return _quant_of(src.type.dtype.name, deq, gdt)


def _quant_of(src_dt: str, deq, gdt: str):
    """The Fixpipe ``quantPre`` moving an L0C ``src_dt`` tile into a ``gdt`` tensor, through the ``dequant`` op
    ``deq`` (DEQF16) or not; None when no Fixpipe mode converts so."""
    if deq is not None:
        return "DEQF16" if (src_dt, gdt) == ("int32", "float16") else None
    return _QUANT.get((src_dt, gdt))


def _blocks_of(block):
    """Every block of a program, nested ones included."""
    yield block
    for op in block.ops:
        for b in op.blocks:
            yield from _blocks_of(b)


def _mma_operands(op):
    """{'a'|'b': ('gm', Window) | ('tile', Value)} and the acc value (or None) of an mma."""
    tiles = list(op.args)
    acc = tiles.pop() if op.attrs.get("acc") else None
    out = {}
    for which in ("a", "b"):
        if which in op.windows:
            out[which] = ("gm", op.windows[which])
        else:
            out[which] = ("tile", tiles.pop(0))
    return out, acc


def _clamp(nv: str, n0, npc: int, N: int) -> str:
    """The valid count of a piece [n0, n0 + npc) of N rows or columns of which nv are valid."""
    c, s = _const(nv), _const(str(n0))
    if c is not None and s is not None:
        return str(max(0, min(npc, c - s)))
    if s == 0 and npc == N:
        return nv
    return f"cvtMax<int64_t>(0, cvtMin<int64_t>({npc}, {nv} - {_fold(str(n0))}))"


def _piece(buf, pp: str):
    """The byte offset of ping-pong copy ``pp`` (an expression) of a staging buffer."""
    one = buf.bytes // max(buf.copies, 1)
    return str(buf.offset) if pp == "0" else f"{buf.offset} + {pp} * {one}"
