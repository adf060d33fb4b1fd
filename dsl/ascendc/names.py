"""C identifiers from the user's Python names: sanitised so no name can make the emitted C do something else.

Model
-----
Every identifier the Ascend C backend prints that comes from user text (the
kernel's name, its parameters, the names of IR values) goes through
``Namer.ident``: characters outside ``[A-Za-z0-9_]`` become ``_``, a leading
digit gets a prefix, C and C++ keywords, the backend's own reserved prefixes
(``cvt``, ``Cvt``, ``CVT``, ``_``) and the Ascend C names the kernel uses
and names a header may define as a macro (all capitals, such as the Ascend C
headers' ``UB_ADDR``; the C library's ``errno``, ``si_pid``, ...) get the
prefix ``user_``, and the result is made unique within its scope. The
kernel entry, the one name at global scope beside the C library's, always
ends in ``_kernel`` (``Namer.entry``), so no user name can collide with a libc
function or typedef (a kernel called ``time``, ``free`` or ``u_int``). Strings that go
into C (comments with a source line, check messages) go through ``comment`` /
``c_string``: a comment never holds ``*/`` or a newline, a string literal escapes
every character outside printable ASCII.
"""

from __future__ import annotations

import re

__all__ = ["Namer", "comment", "c_string", "C_KEYWORDS"]

C_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete
do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires return short signed sizeof static static_assert static_cast struct switch template this thread_local throw
true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
main printf exit abort std half bfloat16_t int8_t uint8_t int16_t uint16_t int32_t uint32_t int64_t uint64_t
AscendC GM_ADDR TPipe TBuf TPosition LocalTensor GlobalTensor pipe tiling workspace
""".split())
_RESERVED_PREFIX = ("cvt", "Cvt", "CVT", "__", "_")


class Namer:
    """Unique, safe C identifiers within one scope (a kernel)."""

    def __init__(self):
        self.used: set[str] = set()
        self.by_key: dict = {}

    def ident(self, name, key=None) -> str:
        if key is not None and key in self.by_key:
            return self.by_key[key]
        base = re.sub(r"[^A-Za-z0-9_]", "_", str(name or "v")) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base in C_KEYWORDS or base.startswith(_RESERVED_PREFIX) or _macro_like(base):
            base = "user_" + base.lstrip("_")
        base = base[:48]
        out, k = base, 2
        while out in self.used:
            out = f"{base}_{k}"
            k += 1
        self.used.add(out)
        if key is not None:
            self.by_key[key] = out
        return out


    def entry(self, name) -> str:
        """The kernel entry's global name: the sanitised name with the suffix ``_kernel``."""
        base = self.ident(name)
        if base.endswith("_kernel"):
            return base
        self.used.discard(base)
        return self.ident(base + "_kernel")


def _macro_like(name: str) -> bool:
    """Names a header may define as a macro: all capitals (the Ascend C headers define about a thousand,
    e.g. UB_ADDR, DT_FLOAT) and the C library's lower-case macros."""
    return (name.upper() == name and any(c.isalpha() for c in name)) or name in _LIBC_MACROS


_LIBC_MACROS = frozenset("""errno stdin stdout stderr assert offsetof si_pid si_uid si_status si_addr si_band
si_value si_int si_ptr sa_handler sa_sigaction st_atime st_mtime st_ctime minor major makedev
""".split())


def comment(text: str) -> str:
    """Text safe inside a ``//`` comment: one line, printable ASCII, no ``*/`` or line splices."""
    s = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in str(text))
    return s.replace("*/", "* /").replace("\\", "/").strip()


def c_string(text: str) -> str:
    """A C string literal holding ``text`` (every byte outside printable ASCII, quotes and backslashes
    escaped)."""
    out = []
    for ch in str(text):
        o = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 32 <= o < 127 and ch != "?":
            out.append(ch)
        else:
            for b in ch.encode("utf-8"):
                out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'
