"""Readable text of a kernel's IR.

One op per line: results, the op kind with its attributes and operands, the
result types, and on the right the scope, pipe and source location. Nested
blocks are indented; loop-carried values appear as ``iter(...)``.

``format_kernel`` numbers the values of the kernel it prints in the order they first appear
(``%name.n``), not by their process-wide ids: the same specialisation prints the same text whichever
kernels the process traced before it, so two traces of one kernel (``passes.Compilation.ir_after``
prints from a second one) and two runs of a program can be compared line by line. ``format_op`` on its
own prints the ids.
"""

from __future__ import annotations

import threading

from .ir import Block, Kernel, Op, Value

__all__ = ["format_kernel", "format_op"]

_SKIP_ATTRS = {"op", "dims", "acc", "channels", "channel", "which", "origin"}


#: the value numbering of the ``format_kernel`` running on this thread (value id -> number), if any
_numbering = threading.local()


def _v(v: Value) -> str:
    if v.const is not None and v.owner is not None and v.owner.kind == "const":
        return repr(v.const)
    numbers = getattr(_numbering, "ids", None)
    if numbers is None:
        return repr(v)
    n = numbers.setdefault(v.id, len(numbers))
    return f"%{v.name}.{n}" if v.name else f"%{n}"


def _attrs(op: Op) -> str:
    items = [f"{k}={v!r}" for k, v in op.attrs.items() if k not in _SKIP_ATTRS and v is not None]
    return ("{" + ", ".join(items) + "}") if items else ""


def _window(w) -> str:
    """A GM window as tensor[start +: extent (valid n), ...] with merged dims shown as (radices)."""
    parts = []
    for d in w.dims:
        valid = "" if (d.valid is None or d.valid == d.extent or getattr(d.valid, "const", None) == d.extent) \
            else f" valid {_v(d.valid) if isinstance(d.valid, Value) else d.valid}"
        merged = "" if len(d.radices) == 1 else "merged(" + "x".join(
            _v(r) if isinstance(r, Value) else str(r) for r in d.radices) + ") "
        start = _v(d.start) if isinstance(d.start, Value) else str(d.start)
        parts.append(f"{merged}{start} +: {d.extent}{valid}")
    off = w.offset
    base = f"{_v(w.tensor)}" + ("" if (not isinstance(off, Value) and off == 0) else
                                f"@{_v(off) if isinstance(off, Value) else off}")
    return f"{base}[{', '.join(parts)}]"


def format_op(op: Op, indent: int = 0) -> list[str]:
    pad = "  " * indent
    where = f"{op.scope or '-':6} {op.pipe:4} {op.loc}" if op.loc else ""
    if op.kind == "for":
        lo, hi, step, *inits = op.operands
        body = op.blocks[0]
        iv, *carried = body.args
        it = ", ".join(f"{_v(a)} = {_v(i)}" for a, i in zip(carried, inits))
        res = ", ".join(map(_v, op.results))
        head = f"{pad}{(res + ' = ') if res else ''}for {_v(iv)} in range({_v(lo)}, {_v(hi)}, {_v(step)})"
        head += f" iter({it})" if it else ""
        head += f" pipelined({op.attrs['stages']} stages)" if "stages" in op.attrs else ""
        head += f" row chunks of {op.attrs['chunk']}" if "chunk" in op.attrs else ""
        lines = [f"{head} {{".ljust(72) + "  # " + where]
        lines += _block(body, indent + 1)
        lines.append(pad + "}")
        return lines
    if op.kind == "program":
        lines = [f"{pad}program {op.attrs['core']} {{".ljust(72) + "  # " + where]
        lines += _block(op.blocks[0], indent + 1)
        lines.append(pad + "}")
        return lines
    if op.kind == "if":
        res = ", ".join(map(_v, op.results))
        stage = f" stage {op.attrs['stage']}" if "stage" in op.attrs else ""
        lines = [f"{pad}{(res + ' = ') if res else ''}if{stage} {_v(op.operands[0])} {{".ljust(72) + "  # " + where]
        lines += _block(op.blocks[0], indent + 1)
        lines.append(pad + "} else {")
        lines += _block(op.blocks[1], indent + 1)
        lines.append(pad + "}")
        return lines
    name = op.kind + (f".{op.attrs['op']}" if "op" in op.attrs else "")
    res = ", ".join(map(_v, op.results))
    types = ", ".join(repr(r.type) for r in op.results)
    if op.kind == "mma":
        tiles = iter(op.args)
        a = _window(op.windows["a"]) if "a" in op.windows else _v(next(tiles))
        b = _window(op.windows["b"]) if "b" in op.windows else _v(next(tiles))
        args = f"{a}, {b}" + (f", acc={_v(next(tiles))}" if op.attrs["acc"] else "")
    else:
        args = ", ".join([_window(w) for w in op.windows.values()] + [_v(a) for a in op.args])
    text = f"{pad}{(res + ' = ') if res else ''}{name}{_attrs(op)}({args})"
    if types:
        text += f" : {types}"
    return [text.ljust(72) + ("  # " + where if where else "")]


def _block(block: Block, indent: int) -> list[str]:
    out = []
    for op in block.ops:
        if op.kind == "const":
            continue  # constants print inline at their uses
        out += format_op(op, indent)
    return out


def format_kernel(k: Kernel) -> str:
    outer = getattr(_numbering, "ids", None)
    _numbering.ids = {}
    try:
        return _format_kernel(k)
    finally:
        _numbering.ids = outer


def _format_kernel(k: Kernel) -> str:
    params = []
    args = iter(k.args)
    for p in k.params:
        if p.kind == "constexpr":
            params.append(f"{p.name}={p.value!r}")
        else:
            params.append(f"{_v(next(args))}: {p.type!r}")
    sub = f", {k.subblocks} sub-blocks" if k.subblocks else ""
    head = f"kernel {k.name}[{k.kind}{sub}, target={k.target}]({', '.join(params)})  # {k.loc}"
    return "\n".join([head] + _block(k.body, 1))
