"""The command line's option types and the case options several commands share.

``positive_int`` / ``non_negative_int`` / ``positive_float`` / ``target_name`` are argparse types whose errors name the value and
the rule (argparse then prints one line and exits 2). ``add_case_options`` adds the options of one
``cvtile run`` case (also taken by ``emit`` and ``trace``): fields of the decode default case
(``cvtile.cases.DEFAULT_CASES``) to change; ``case_options_of`` reads back the ones given.
``validate_shape_options`` gives ``cvtile tiling`` / ``cost``'s shape options (``cli_call``) the same
range-checked types. ``check_output_dir`` refuses an ``-o`` directory that cannot be made before a command
does any work, without making it (a command that fails leaves no directory behind).
"""

from __future__ import annotations

import argparse
import errno
import os
from pathlib import Path

__all__ = ["positive_int", "non_negative_int", "positive_float", "target_name", "add_case_options", "case_options_of",
           "validate_shape_options", "check_output_dir"]

_CASE_OPTIONS = ("batch", "num_heads", "num_kv_heads", "q_seqlen", "kv_seqlen", "head_dim", "dtype", "layout",
                 "sparse_mode", "pre_tokens", "next_tokens", "lse", "target", "actual_q", "actual_kv", "kv_dtype")


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is not {'positive' if low == 1 else f'>= {low}'}")
        return value
    parse.__name__ = "positive int" if low == 1 else f"int >= {low}"
    return parse


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


def positive_float(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value:g} is not a positive finite number")
    return value


def target_name(text: str) -> str:
    """A platform of the platform table (argparse type)."""
    from .tiling.platform import platform_names

    if text not in platform_names():
        raise argparse.ArgumentTypeError(f"unknown target {text!r}; known: {', '.join(platform_names())}")
    return text


def add_case_options(p) -> None:
    """The case options shared by ``run`` and ``emit``: a FusedInferAttentionScore case from the decode default."""
    from .cases import DEFAULT_CASES

    base = DEFAULT_CASES[0]
    p.add_argument("--batch", "-b", type=positive_int, help=f"batch B (default {base.batch})")
    p.add_argument("--num-heads", "-n", type=positive_int, help=f"query heads N (default {base.num_heads})")
    p.add_argument("--num-kv-heads", type=positive_int, help=f"key/value heads (default {base.num_kv_heads})")
    p.add_argument("--q-seqlen", type=positive_int,
                   help=f"query sequence length S1, 1 = decode (default {base.q_seqlen})")
    p.add_argument("--kv-seqlen", type=non_negative_int,
                   help=f"key/value sequence length S2 (default {base.kv_seqlen})")
    p.add_argument("--head-dim", "-d", type=positive_int, help=f"head dim D (default {base.head_dim})")
    p.add_argument("--dtype", choices=("float16", "bfloat16"), help=f"query/key/value dtype (default {base.dtype})")
    p.add_argument("--kv-dtype", choices=("int8", "int4", "float8_e4m3fn", "hifloat8"),
                   help="a KV-antiquant cache instead: int8, int4 packed 8 per int32, float8_e4m3fn or hifloat8 "
                        "(Ascend950 only, no offset; hifloat8 as uint8 codes with V2's key_dtype/value_dtype), with "
                        "per-channel scale and offset in the query's dtype (A2/A3: the IFA decode route, stacked "
                        "antiquant_scale/offset; "
                        "Ascend950: its dequant kernel, the key's and value's own; default: "
                        "key/value in the query's dtype)")
    p.add_argument("--layout", choices=("BSH", "BSND", "BNSD", "TND", "NTD", "BNSD_BSND", "BSH_BNSD",
                                          "BSND_BNSD", "TND_NTD", "NTD_TND"),
                   help=f"input_layout (default {base.layout})")
    p.add_argument("--sparse-mode", type=int, choices=(0, 2, 3, 4),
                   help=f"sparse_mode; 2/3/4 pass the 2048x2048 mask template (default {base.sparse_mode})")
    p.add_argument("--pre-tokens", type=int, help=f"pre_tokens (default {base.pre_tokens})")
    p.add_argument("--next-tokens", type=int, help=f"next_tokens (default {base.next_tokens})")
    p.add_argument("--lse", dest="lse", action="store_const", const=True,
                   help=f"also check softmax_lse (default {'on' if base.lse else 'off'})")
    p.add_argument("--no-lse", dest="lse", action="store_const", const=False, help="do not check softmax_lse")
    p.add_argument("--actual-q", type=non_negative_int, nargs="+",
                   help="actual_seq_lengths per batch (default: S1 for every batch)")
    p.add_argument("--actual-kv", type=non_negative_int, nargs="+",
                   help="actual_seq_lengths_kv per batch (default: S2 for every batch)")
    p.add_argument("--target", "-t", type=target_name, help=f"platform (default {base.target})")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs (default 0)")


def case_options_of(args) -> dict:
    """The case fields given on the command line."""
    given = {name: getattr(args, name) for name in _CASE_OPTIONS if getattr(args, name, None) is not None}
    for key in ("actual_q", "actual_kv"):
        if key in given:
            given[key] = tuple(given[key])
    return given


#: ``cvtile tiling`` / ``cost`` shape options (``cli_call.add_shape_options``) that must be positive / non-negative
_TILING_POSITIVE = ("batch", "num_heads", "q_seqlen", "head_dim", "value_head_dim")
_TILING_NON_NEGATIVE = ("num_kv_heads", "kv_seqlen", "rope_dim", "block_size", "actual_q", "actual_kv")


def validate_shape_options(p) -> None:
    """Give the tiling parser's shape options range-checked types (a negative batch would otherwise size
    host arrays by a wrapped uint32) and its target a table lookup."""
    for action in p._actions:
        if action.dest in _TILING_POSITIVE:
            action.type = positive_int
        elif action.dest in _TILING_NON_NEGATIVE:
            action.type = non_negative_int
        elif action.dest == "target":
            action.type = target_name


def check_output_dir(path: Path) -> None:
    """Raise the OSError ``path.mkdir(parents=True, exist_ok=True)`` would raise (a file in the way, an ancestor
    that is a file, no write permission where the first missing directory would go), without making anything."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
