"""The checked variant of the numba backend: the same module as ``codegen`` plus the checks of a ``CheckMode``.

Model
-----
``CheckedGen`` is ``codegen._Gen`` with more lines around some ops; the values computed are the same. The
generated functions take one more argument, ``shadow`` (``shadow.ShadowPlan``: the vector clocks, flag
queues and event counters, then the shadow arrays of the tracked GM tensors and workspace channels).

* GM accesses (``races``, ``write_once``, and ``uninit`` for the workspace): after a load, store, mma operand,
  gather or scalar read of a tracked tensor, every element it touched is recorded in the shadow and checked
  (``shadow.gm_*`` / ``shadow.ws_*``; plain row windows in one runtime call, other windows element by element
  through the window's index arithmetic). A failed check returns the element, the other access's entry and
  the kind of conflict in ``err``; ``checking`` turns it into the typed error.
* Flags (``races``): a ``flag_set`` queues the setter's vector clock for each counter it raises and then
  advances the setter's own component; a ``flag_wait`` joins the snapshot of the set it consumed.
* Events (``flags``): each program counts its intra-core event sets per (event, id); a wait with no set
  before it, and a set never waited when the program ends, are errors (the chip would hang or leave a pipe
  waiting).
* On-chip memory (``uninit``): the only tiles that can hold elements nobody wrote are those of a
  ``create`` without a fill (the row-chunk assembly of ``chunk_rows``, or a hand-made IR) and what is built
  from their buffer by views, row inserts, loop-carried and branch values (*maybe-uninitialised* values, a
  fixpoint over the IR). Their buffers get a bool shadow ("written"), cleared by the unfilled create, set
  by every op that writes the buffer (an insert copies its chunk's shadow), and every op reading a
  maybe-uninitialised tile checks the elements it reads: all of them, except that ``where`` reads only the
  arm it selects. Every other tile is written whole by the op that defines it (the valid-extent model), so
  it needs no shadow. Unfilled creates are also filled with NaN (and every tile buffer starts as NaN).
"""

from __future__ import annotations

from .codegen import _Gen, _all_ops, _i64
from .shadow import MAX_SITES, ShadowPlan

__all__ = ["CheckedSource", "CheckedGen", "CheckInfo"]

def _stamp() -> str:
    """A hash of the checking runtime (checked modules only: the unchecked ones do not depend on it)."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).parent
    return hashlib.sha1(b"".join((here / n).read_bytes() for n in ("checkgen.py", "shadow.py"))).hexdigest()[:12]


_HEADER = [
    "from cvtile.sim.shadow import (shadow_entry, gm_rows, gm_one, ws_rows, ws_one, vc_push, vc_join, ev_set,",
    "                               ev_wait, ev_left, ini_check_1d, ini_check_2d, chk_fail)",
]


class CheckInfo:
    """What ``checking`` needs to report on a checked module: the plan, what each check site is, and the
    number of event counters of each program."""

    def __init__(self, plan: ShadowPlan, mode):
        self.plan = plan
        self.mode = mode
        #: site id -> ("access", tensor/channel name, "read"|"write", is_workspace) | ("uninit", tile name,
        #: where its buffer was created) | ("event", description)
        self.sites: dict[int, tuple] = {}
        self.events: dict[str, int] = {}   # program ("core", "aic", "aiv") -> event counters


class CheckedSource:
    """The ``make`` of ``codegen._generate`` for a checked module."""

    extra_params = ["shadow"]

    def __init__(self, kernel, mode):
        self.header = [f"# checked ({mode}); checking runtime {_stamp()}"] + _HEADER
        self.mode = mode
        self.info = CheckInfo(ShadowPlan.of(kernel, mode), mode)

    def gen(self, kernel, body, sites=None, program=None):
        return CheckedGen(kernel, body, sites, program, self.info)

    def finish(self, source) -> None:
        if len(source.sites) > MAX_SITES:
            from .checking import CheckModeError

            raise CheckModeError("check", f"kernel {source.kernel.name!r} has {len(source.sites)} check sites; "
                                 f"the checked simulator records at most {MAX_SITES}")
        source.checks = self.info


class CheckedGen(_Gen):
    nrt_free = False   # the shadow helpers it calls allocate: keep numba's NRT

    def __init__(self, kernel, body, sites, program, info: CheckInfo):
        super().__init__(kernel, info.mode.uninit, body, sites=sites, program=program)
        self.info = info
        self.plan = info.plan
        self.mode = info.mode
        self.mu: set[int] = set()          # maybe-uninitialised tile values
        self.origin: dict = {}             # their value id -> Loc of the unfilled create they come from
        self.shadowed: set[str] = set()    # tile buffers with a "written" shadow
        self.ini_names: set[str] = set()   # tile variables whose "written" view is bound (ini_<var>)
        self.events: dict[tuple, int] = {}

    # ------------------------------------------------------------ structure
    def _prepare(self):
        if not self.mode.uninit:
            return
        ops = list(_all_ops(self.body))
        values = {}
        mu = self.mu
        origin = self.origin
        changed = True

        def add(v, src):
            """v may be unwritten, through ``src`` (a maybe-unwritten value, or the Loc of an unfilled create)."""
            nonlocal changed
            if v.id not in mu:
                mu.add(v.id)
                values[v.id] = v
                origin[v.id] = src if not hasattr(src, "id") else origin.get(src.id)
                changed = True

        while changed:
            changed = False
            for op in ops:
                k = op.kind
                if k == "create" and op.attrs.get("uninit"):
                    add(op.result, op.loc)
                elif k in ("copy", "handoff", "slice_rows") and op.args[0].id in mu:
                    add(op.result, op.args[0])
                elif k == "insert_rows" and (op.args[0].id in mu or op.args[1].id in mu):
                    add(op.result, op.args[0] if op.args[0].id in mu else op.args[1])
                elif k == "for":
                    body = op.blocks[0]
                    ys = _yielded(body)
                    for i, (a, init) in enumerate(zip(body.args[1:], op.args[3:])):
                        if a.is_tile and init.id in mu:
                            add(a, init)
                        elif a.is_tile and i < len(ys) and ys[i].id in mu:
                            add(a, ys[i])
                    for r, a in zip(op.results, body.args[1:]):
                        if a.id in mu:
                            add(r, a)
                elif k == "if":
                    for arm in op.blocks:
                        for r, y in zip(op.results, _yielded(arm)):
                            if y.id in mu:
                                add(r, y)
        self.shadowed = {self.bufname(v) for v in values.values()}

    def _prologue(self) -> list:
        names = ["vc", "vcq", "vch", "evc"]
        for i, _ in enumerate(self.plan.tensors):
            names += [f"shw_{i}", f"shr_{i}"]
        for i, _ in enumerate(self.plan.workspace):
            names += [f"sws_{i}", f"swe_{i}", f"swrs_{i}", f"swre_{i}", f"swi_{i}"]
        lines = [f"    {', '.join(names)} = shadow"]
        if self.mode.flags and self.events:
            lines.append("    evc[:] = 0")
        return lines

    def _epilogue(self) -> list:
        self.info.events[self.core or "core"] = len(self.events)
        if not (self.mode.flags and self.events):
            return []
        return [f"    ev_left(evc, err, blk, {self._role})"]

    @property
    def _role(self) -> str:
        return "role" if self.core else "np.int64(0)"

    def _fail_call(self, site: int, values=()) -> str:
        """The statement recording a failed check of ``site`` with up to two values (the kernel runs on)."""
        a, b = (list(values) + ["0", "0"])[:2]
        return f"chk_fail(err, blk, np.int64({site}), np.int64({a}), np.int64({b}), {self._role})"

    # ------------------------------------------------------------ GM accesses
    def _me(self, site: int) -> str:
        me = self.tmp("me")
        clk = "vc[role, role]" if self.core else "np.int64(1)"
        self.emit(f"{me} = shadow_entry(blk, {self._role}, {clk}, np.int64({site}))")
        return me

    def _walk(self, op, w, counts: list, write: bool):
        """Record the window's ``counts`` elements in the shadow of its tensor (nothing when untracked)."""
        t = self.plan.tensor(w.tensor.id)
        ws = self.plan.channel(w.tensor.id) if t is None else None
        if t is None and ws is None:
            return
        if t is not None and not write and not t.rd:
            return
        name = t.name if t is not None else ws.name
        site = self.site(f"{'writes' if write else 'reads'} {name}", op)
        self.info.sites[site] = ("access", ws.channel if ws is not None else name, "write" if write else "read",
                                 ws is not None)
        me = self._me(site)
        role = self._role
        if t is not None:
            i = self.plan.tensors.index(t)
            arrays = f"shw_{i}, shr_{i}"
            rows, one = "gm_rows", "gm_one"
            tail = f", np.bool_({write}), np.bool_({t.races})"
        else:
            i = self.plan.workspace.index(ws)
            lo = self.tmp("lo")
            self.emit(f"{lo} = blk * {ws.area} + {ws.lo}")
            arrays = f"sws_{i}, swe_{i}, swrs_{i}, swre_{i}, swi_{i}, {lo}, np.int64({ws.cols})"
            rows, one = "ws_rows", "ws_one"
            tail = f", np.bool_({write}), np.bool_({ws.hb}), np.bool_({ws.uninit}), np.int64({ws.readers})"
        if len(w.dims) == 2 and self._plain_rows(w):
            base, stride = self._plain_base(w)
            self.emit(f"{rows}({arrays}, {_i64(base)}, {_i64(stride)}, {_i64(counts[0])}, {_i64(counts[1])}, "
                      f"{me}, vc, blk, {role}, err{tail})")
            return
        if len(w.dims) == 1 and self._contiguous(w, 0):
            base = f"{self.ref(w.offset)} + {self.ref(w.dims[0].start)}"
            self.emit(f"{rows}({arrays}, {_i64(base)}, np.int64(0), np.int64(1), {_i64(counts[0])}, {me}, vc, "
                      f"blk, {role}, err{tail})")
            return
        if len(w.dims) == 2 and self._contiguous(w, 1):   # merged or paged rows, contiguous columns: per row
            r = self.tmp("r")
            self.emit(f"for {r} in range({counts[0]}):")
            self.depth += 1
            ro = self.tmp("ro")
            self.emit(f"{ro} = {self.ref(w.offset)} + {self._row_addr(w, 0, f'{self.ref(w.dims[0].start)} + {r}')}")
            self.emit(f"{rows}({arrays}, {ro} + {self.ref(w.dims[1].start)}, np.int64(0), np.int64(1), "
                      f"{_i64(counts[1])}, {me}, vc, blk, {role}, err{tail})")
            self.depth -= 1
            return
        self._gm_elementwise(w, self.ref(w.offset), counts, None,
                             lambda idx, _: f"{one}({arrays}, {idx}, {me}, vc, blk, {role}, err{tail})",
                             index_only=True)

    def _refuse_lookups(self, w):
        for d in w.dims:
            for lk in d.lookups or ():
                if lk is not None and (self.plan.tensor(lk.table.id) or self.plan.channel(lk.table.id)):
                    from .checking import CheckModeError

                    name = next(p.name for p, v in zip([p for p in self.k.params if p.kind != "constexpr"],
                                                       self.k.args) if v.id == lk.table.id)
                    raise CheckModeError(name, "the kernel stores into a tensor it also reads as a paged block "
                                         "table; checking mode does not shadow block-table reads")

    def op_load(self, op):
        w = op.windows["window"]
        self._refuse_lookups(w)
        super().op_load(op)
        self._walk(op, w, self._window_counts(w, op, "load"), False)

    def op_store(self, op):
        tile = op.args[-1]
        self._check_read(op, tile)
        w = op.windows["window"]
        self._refuse_lookups(w)
        super().op_store(op)
        src = self.tile(tile)
        self._walk(op, w, [f"{src}.shape[{i}]" for i in range(tile.type.rank)], True)

    def op_mma(self, op):
        for x in op.args:
            self._check_read(op, x)
        super().op_mma(op)
        for w in op.windows.values():
            self._refuse_lookups(w)
            self._walk(op, w, self._window_counts(w, op, "mma operand"), False)

    def op_sload(self, op):
        super().op_sload(op)
        tensor, offset = op.operands
        t = self.plan.tensor(tensor.id)
        if t is not None and t.rd:
            i = self.plan.tensors.index(t)
            site = self.site(f"reads {t.name}", op)
            self.info.sites[site] = ("access", t.name, "read", False)
            me = self._me(site)
            self.emit(f"gm_one(shw_{i}, shr_{i}, {_i64(self.ref(offset))}, {me}, vc, blk, {self._role}, err, "
                      f"np.bool_(False), np.bool_(True))")

    def _plain_load(self, op) -> bool:
        t = self.plan.tensor(op.operands[0].id)
        return t is None or not t.rd   # a tracked read records (and checks) its access: checks stay behind it

    def _gather_prologue(self, op):
        """gather: its idx is read like any operand; a tracked table is read element by element (one shadow
        entry for the op, a ``gm_one`` per element at its address)."""
        self._check_read(op, op.args[0])
        t = self.plan.tensor(op.windows["table"].tensor.id)
        if t is None or not t.rd:
            return None
        site = self.site(f"reads {t.name}", op)
        self.info.sites[site] = ("access", t.name, "read", False)
        return self.plan.tensors.index(t), self._me(site)

    def _gather_read(self, op, state, addr):
        if state is not None:
            i, me = state
            self.emit(f"gm_one(shw_{i}, shr_{i}, {_i64(addr)}, {me}, vc, blk, {self._role}, err, np.bool_(False), "
                      f"np.bool_(True))")

    # ------------------------------------------------------------ flags and events
    def op_flag_set(self, op):
        super().op_flag_set(op)
        if self.mode.races and self.core:
            for r in self._flag_rows(False):
                self.emit(f"vc_push(vcq, vch, vc, {_i64(r)}, np.int64({op.attrs['id']}), role)")
            self.emit("vc[role, role] += 1")

    def op_flag_wait(self, op):
        super().op_flag_wait(op)
        if self.mode.races and self.core:
            for r in self._flag_rows(True):
                self.emit(f"vc_join(vcq, vch, vc, {_i64(r)}, np.int64({op.attrs['id']}), role)")

    def _event_slot(self, op) -> str:
        """The counter of an event op (a ping-pong pair's: the one of its iteration's id)."""
        k = self.events.setdefault((op.attrs["event"], op.attrs["id"]), len(self.events))
        if not op.args:
            return str(k)
        odd = self.events.setdefault((op.attrs["event"], op.attrs["id_odd"]), len(self.events))
        return f"({odd} if {self.ref(op.args[0])} % 2 else {k})"

    @staticmethod
    def _event_ids(op) -> str:
        return f"id {op.attrs['id']}" + (f" or {op.attrs['id_odd']}" if op.args else "")

    def op_event_set(self, op):
        if not self.mode.flags:
            return
        k = self._event_slot(op)
        site = self.site(f"intra-core event {op.attrs['event']} ({self._event_ids(op)}) is set here and not waited "
                         f"before the {self.core or 'core'} program ends", op, ("outstanding",))
        self.info.sites[site] = ("event", op.attrs["event"])
        self.emit(f"ev_set(evc, np.int64({k}), np.int64({site}))")

    def op_event_wait(self, op):
        if not self.mode.flags:
            return
        k = self._event_slot(op)
        site = self.site(f"waits on intra-core event {op.attrs['event']} ({self._event_ids(op)}) that no earlier set "
                         f"of the {self.core or 'core'} program raised (the pipe would wait forever)", op)
        self.info.sites[site] = ("event", op.attrs["event"])
        self.emit(f"ev_wait(evc, np.int64({k}), np.int64({site}))")

    # ------------------------------------------------------------ on-chip "written" shadows
    def buffer(self, v):
        name = super().buffer(v)
        if name in self.shadowed and not any(n == f"ini_{name}" for n, _ in self.buffers):
            self.buffers.append((f"ini_{name}", f"np.zeros({v.type.numel}, np.bool_)"))
        return name

    def _ini_view(self, var: str, buf: str, dims: list):
        if len(dims) == 1:
            self.emit(f"ini_{var} = ini_{buf}[:{dims[0]}]")
        else:
            self.emit(f"ini_{var} = ini_{buf}[:{dims[0]} * {dims[1]}].reshape({dims[0]}, {dims[1]})")
        self.ini_names.add(var)

    def view(self, v, dims):
        name = super().view(v, dims)
        buf = self.bufname(v)
        if buf in self.shadowed:
            self._ini_view(name, buf, dims)
            unfilled = v.owner is not None and v.owner.kind == "create" and v.owner.attrs.get("uninit")
            self.emit(f"ini_{name}.fill({not unfilled})")
        return name

    def op_create(self, op):
        super().op_create(op)
        if self.mode.uninit and op.attrs.get("uninit") and op.result.type.dtype.is_float:
            self.emit(f"{self.tile(op.result)}.fill(np.nan)")

    def _copy_into(self, name, buf, src, rank):
        super()._copy_into(name, buf, src, rank)
        if buf not in self.shadowed:
            return
        self._ini_view(name, buf, [f"{src}.shape[{d}]" for d in range(rank)])
        if src not in self.ini_names:
            self.emit(f"ini_{name}.fill(True)")
            return
        i, j = self.tmp("i"), self.tmp("j")
        self.emit(f"for {i} in range({src}.shape[0]):")
        if rank == 1:
            self.emit(f"    ini_{name}[{i}] = ini_{src}[{i}]")
        else:
            self.emit(f"    for {j} in range({src}.shape[1]):")
            self.emit(f"        ini_{name}[{i}, {j}] = ini_{src}[{i}, {j}]")

    def _bound_alias(self, dst, src, value):
        if src in self.ini_names:
            self.emit(f"ini_{dst} = ini_{src}")
            self.ini_names.add(dst)
        elif value.id in self.mu:   # a branch result that may be unwritten, from an arm that is written
            self.emit(f"ini_{dst} = np.ones({src}.shape, np.bool_)")
            self.ini_names.add(dst)

    def _bound_copy(self, dst, src):
        if src in self.ini_names:
            self.emit(f"ini_{dst} = ini_{src}.copy()")
            self.ini_names.add(dst)

    def op_slice_rows(self, op):
        super().op_slice_rows(op)
        x, row, n = op.args
        src, name = self.tile(x), self.tile(op.result)
        if src in self.ini_names:
            self.emit(f"ini_{name} = ini_{src}[{self.ref(row)}:{self.ref(row)} + {self.ref(n)}]")
            self.ini_names.add(name)

    def op_insert_rows(self, op):
        super().op_insert_rows(op)
        full, chunk, row = op.args
        f, c = self.tile(full), self.tile(chunk)
        if f in self.ini_names:
            r = self.ref(row)
            self.emit(f"ini_{f}[{r}:{r} + {c}.shape[0]] = {f'ini_{c}' if c in self.ini_names else 'True'}")

    # ------------------------------------------------------------ reads of maybe-uninitialised tiles
    def _check_read(self, op, x):
        """Every element of tile x (maybe-uninitialised) that ``op`` reads has been written."""
        if not (getattr(x, "is_tile", False) and x.id in self.mu):
            return
        site = self._uninit_site(op, x)
        self.emit(f"ini_check_{x.type.rank}d(ini_{self.tile(x)}, err, blk, np.int64({site}), {self._role})")

    def _uninit_site(self, op, x) -> int:
        origin = self.origin.get(x.id)
        site = self.site(f"reads an element of tile {x.name or x.id!r} that no op has written", op,
                         ("row", "col") if x.type.rank == 2 else ("index",))
        self.info.sites[site] = ("uninit", x.name or str(x.id), origin)
        return site

    def _check_where(self, op):
        cond, a, b = op.operands
        self._check_read(op, cond)
        arms = [(x, sel) for x, sel in ((a, True), (b, False)) if x.is_tile and x.id in self.mu]
        if not arms:
            return
        v = op.result
        shape = self._shape_from(self._leaves(v), v, op)
        idx = tuple(self.tmp(n) for n in ("i", "j")[:v.type.rank])
        for d, i in enumerate(idx):
            self.emit("    " * d + f"for {i} in range({shape[d]}):")
        self.depth += len(idx)
        sel = self.tmp("sel")
        self.emit(f"{sel} = {self.expr(cond, self._sub_idx(cond, v, idx)) if cond.is_tile else self.ref(cond)}")
        for x, when in arms:
            sub = self._sub_idx(x, v, idx)
            test = sel if when else f"not {sel}"
            site = self._uninit_site(op, x)
            vals = list(sub)
            self.emit(f"if {test} and not ini_{self.tile(x)}[{', '.join(sub)}]: " + self._fail_call(site, vals))
        self.depth -= len(idx)

    def op_ewise(self, op):
        if op.attrs.get("op") == "where":
            self._check_where(op)
        else:
            for x in op.operands:
                self._check_read(op, x)
        super().op_ewise(op)

    def op_cast(self, op):
        self._check_read(op, op.operands[0])
        super().op_cast(op)

    def op_dequant(self, op):
        self._check_read(op, op.operands[0])
        super().op_dequant(op)

    def op_device_print(self, op):
        self._check_read(op, op.args[0])
        super().op_device_print(op)

    def op_reduce(self, op):
        x = op.operands[0]
        if x.id in self.tile_var:
            self._check_read(op, x)
        super().op_reduce(op)

    def op_expand(self, op):
        self._check_read(op, op.operands[0])
        super().op_expand(op)


def _yielded(block) -> list:
    return block.ops[-1].operands if block.ops and block.ops[-1].kind == "yield" else []
