"""Compare the tiling mirror with the real op_host tiling, built on x86 as an oracle.

Model
-----
The oracle is the ``fia_oracle`` driver of ``shared/tools/ophost_oracle`` (the
unchanged CANN op_host FusedInferAttentionScore tiling, compiled for x86; nothing
of it is in this project). It reads UT-format CSV rows and prints one JSON line per
row: ``got`` (SUCCESS / FAILED), ``tiling_key``, ``block_dim``, ``workspace``, or
``crash`` when the real op_host dies on the row (SIGFPE, SIGSEGV). The same rows
go through ``FiaParams.from_csv_row`` and ``tile_fia`` on the UT platform of the
arch, and each row is compared on

* **verdict**: cvtile accepts exactly the rows op_host accepts;
* **key**: the tiling key, for rows both accept (not for the legacy PFA route's
  non-empty plans outside its TND branch, whose key the mirror does not model: ``key_mirrored`` False);
* **block_dim**: the block dim op_host sets for the launch (``FiaTiling.block_dim``;
  how many cores get work is ``used_cores``, reported beside it);
* **workspace**: the workspace size in bytes op_host asks for (not for those legacy PFA plans either:
  ``workspace_mirrored`` False; the rows left out are counted as "not modelled").

A row that crashes op_host is reported and not counted (an upstream bug, not a
disagreement); so is a rejection the x86 build cannot decide (op_host's log says a
platform query failed: the legacy PFA path with mixed dtypes asks the softmax API's
platform, which needs a device runtime). A row on which cvtile raises anything but
``ParamError`` is a cvtile error and always counts. The oracle runs the whole file in one process; after a
crash it is restarted on the rows that follow the one it died on (the driver names that row in its own
crash line; without one, the first row it did not finish is taken).

Invariants
----------
* ``compare_rows`` never hides a row: every row is an agreement, a disagreement
  (with its fields, both sides' values and op_host's logged reason), an op_host
  crash or an undecidable rejection, and the last two are listed by case name.
* ``find_oracle()`` reads ``CVTILE_OPHOST_ORACLE`` (the build directory or the
  binary) and returns None when it is not set or not built.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ParamError
from .params import FiaParams
from .platform import ut_platform
from .random_calls import random_rows, write_rows

__all__ = ["find_oracle", "run_oracle", "compare_rows", "Comparison", "RowDiff", "FIELDS"]

FIELDS = ("verdict", "key", "block_dim", "workspace")
ENV = "CVTILE_OPHOST_ORACLE"


def find_oracle(path: str | None = None) -> Path | None:
    """The ``fia_oracle`` binary at ``path`` or ``$CVTILE_OPHOST_ORACLE`` (a binary or a build dir)."""
    p = path or os.environ.get(ENV)
    if not p:
        return None
    p = Path(p)
    for cand in (p, p / "fia_oracle", p / "build" / "fia_oracle"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def oracle_env(binary: str | Path) -> dict:
    """The environment the oracle runs in: its build's ``lib`` directory first on ``LD_LIBRARY_PATH`` (the
    binaries carry no rpath; without it every row would look like a crash)."""
    lib = Path(binary).resolve().parent / "lib"
    old = os.environ.get("LD_LIBRARY_PATH", "")
    return {**os.environ, "LD_LIBRARY_PATH": f"{lib}{os.pathsep + old if old else ''}"}


def run_oracle(binary: str | Path, rows: list[dict], arch: str, *, timeout: float = 600.0) -> dict[str, dict]:
    """op_host's record of every row, by case name (a crashed row gets ``{"crash": SIGNAL}``)."""
    out: dict[str, dict] = {}
    pending = list(rows)
    with tempfile.TemporaryDirectory(prefix="cvtile_oracle_") as tmp:
        while pending:
            path = write_rows(pending, Path(tmp) / "rows.csv", arch)
            proc = subprocess.run([str(binary), "--arch", arch[-2:], str(path)], capture_output=True, text=True,
                                  timeout=timeout, env=oracle_env(binary))
            if "error while loading shared libraries" in proc.stderr:
                raise RuntimeError(f"the op_host oracle {binary} does not start: {proc.stderr.strip()[-300:]}")
            for line in proc.stdout.splitlines():
                line = line.strip()
                if not line.startswith("{"):
                    continue
                rec = json.loads(line)
                out[rec.get("case", "")] = rec
            done = [r for r in pending if r["case_name"] in out]
            if len(done) == len(pending):
                break
            first = next(r for r in pending if r["case_name"] not in out)
            if proc.returncode == 0:
                raise RuntimeError(f"op_host oracle printed nothing for {first['case_name']} "
                                   f"(stderr: {proc.stderr[-300:]})")
            named = [r for r in pending if "crash" in out.get(r["case_name"], {})]
            if named:
                # the driver printed the crash line of the row it died on: go on after that row (blaming the
                # next row too would drop a row op_host answers)
                crashed = named[-1]
            else:
                # the process died on the first row it did not finish
                sig = -proc.returncode if proc.returncode < 0 else proc.returncode
                out[first["case_name"]] = {"case": first["case_name"], "crash": _signal_name(sig)}
                crashed = first
            pending = pending[pending.index(crashed) + 1:]
    return out


#: op_host log lines that say the x86 build cannot decide the row (the platform API the tiling asks is not
#: there without a device runtime): such a rejection is not op_host's verdict.
UNDECIDABLE = ("Failed to get PlatformAscendC",)


def op_host_reason(binary: str | Path, rows: list[dict], arch: str, case: str) -> str:
    """The first error op_host logs for one row (``ORACLE_LOG=3``), without the generic wrappers."""
    row = [r for r in rows if r["case_name"] == case]
    with tempfile.TemporaryDirectory(prefix="cvtile_oracle_") as tmp:
        path = write_rows(row, Path(tmp) / "row.csv", arch)
        proc = subprocess.run([str(binary), "--arch", arch[-2:], str(path), case], capture_output=True, text=True,
                              timeout=120, env={**oracle_env(binary), "ORACLE_LOG": "3"})
    for line in proc.stderr.splitlines():
        if " l3] " not in line or "platform_ascendc.cpp" in line:
            continue
        if "tiling process for" in line or "check failed!" in line:
            continue
        return line.split("OpName:[FusedInferAttentionScore] ", 1)[-1].strip()[:300]
    return ""


def _signal_name(sig: int) -> str:
    import signal
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"exit {sig}"


@dataclass
class RowDiff:
    case: str
    fields: list
    cvtile: dict
    ophost: dict


@dataclass
class Comparison:
    arch: str
    rows: int = 0
    crashes: list = field(default_factory=list)       # case names op_host crashed on (not counted)
    undecided: list = field(default_factory=list)     # rejections the x86 build cannot decide (not counted)
    diffs: list = field(default_factory=list)
    accepted: int = 0                                # rows op_host accepts
    agree: dict = field(default_factory=lambda: {f: 0 for f in FIELDS})
    compared: dict = field(default_factory=lambda: {f: 0 for f in FIELDS})
    unmodelled: dict = field(default_factory=lambda: {f: 0 for f in FIELDS})   # accepted rows the mirror
    #                                                     does not model the field of (not compared, counted)

    def disagreements(self, what: str) -> int:
        return self.compared[what] - self.agree[what]

    def summary_line(self) -> str:
        parts = [f"{f} {self.agree[f]}/{self.compared[f]}" for f in FIELDS]
        return (f"oracle {self.arch}: {self.rows} rows ({self.accepted} accepted by op_host; not counted: "
                f"{len(self.crashes)} op_host crashes, {len(self.undecided)} undecidable on x86): "
                + ", ".join(parts) + " agree"
                + "".join(f"; {n} {f} not modelled (legacy PFA)" for f, n in self.unmodelled.items() if n))

    def to_dict(self) -> dict:
        return {"arch": self.arch, "rows": self.rows, "accepted": self.accepted, "crashes": self.crashes,
                "undecided": self.undecided,
                "agree": self.agree, "compared": self.compared, "unmodelled": self.unmodelled,
                "summary": self.summary_line(),
                "diffs": [asdict(d) for d in self.diffs]}


def cvtile_record(row: dict, arch: str) -> dict:
    """cvtile's answer for one row: ``got``, and for an accepted row its key, block dim, cores and workspace."""
    from .fia import tile_fia

    try:
        t = tile_fia(FiaParams.from_csv_row(row), ut_platform(arch))
    except ParamError as e:
        return {"got": "FAILED", "error": str(e)}
    except Exception as e:  # a cvtile bug: never hidden
        return {"got": "ERROR", "error": f"{type(e).__name__}: {e}"}
    return {"got": "SUCCESS", "tiling_key": t.tiling_key, "block_dim": t.block_dim, "used_cores": t.used_cores,
            "workspace": t.workspace_bytes, "route": f"{t.route}/{t.template}",
            "key_mirrored": t.extras.get("key_mirrored", True),
            "workspace_mirrored": t.extras.get("workspace_mirrored", True)}


def compare_rows(rows: list[dict], arch: str, ophost: dict[str, dict], binary: str | Path | None = None) -> Comparison:
    """Compare cvtile with op_host's records (see the module docstring). With ``binary``, a verdict
    disagreement gets op_host's logged reason, and a rejection the x86 build cannot decide
    (``UNDECIDABLE``) is set aside."""
    cmp = Comparison(arch)
    for row in rows:
        case = row["case_name"]
        theirs = ophost.get(case)
        if theirs is None:
            raise KeyError(f"op_host has no record of {case}")
        if "crash" in theirs:
            cmp.crashes.append(case)
            continue
        ours = cvtile_record(row, arch)
        if binary is not None and ours["got"] != theirs.get("got") and theirs.get("got") == "FAILED":
            theirs = {**theirs, "reason": op_host_reason(binary, rows, arch, case)}
            if any(u in theirs["reason"] for u in UNDECIDABLE):
                cmp.undecided.append(case)
                continue
        cmp.rows += 1
        bad = []
        cmp.compared["verdict"] += 1
        if ours["got"] == theirs.get("got"):
            cmp.agree["verdict"] += 1
        else:
            bad.append("verdict")
        if theirs.get("got") == "SUCCESS":
            cmp.accepted += 1
        if ours["got"] == theirs.get("got") == "SUCCESS":
            pairs = (("key", "tiling_key"), ("block_dim", "block_dim"), ("workspace", "workspace"))
            for what, k in pairs:
                if not ours.get(f"{what}_mirrored", True):
                    cmp.unmodelled[what] += 1
                    continue
                cmp.compared[what] += 1
                if int(ours[k]) == _scalar(theirs.get(k, -1)):
                    cmp.agree[what] += 1
                else:
                    bad.append(what)
        if bad:
            keep = {k: theirs.get(k) for k in ("got", "tiling_key", "block_dim", "workspace", "error", "reason")}
            cmp.diffs.append(RowDiff(case, bad, ours, keep))
    return cmp


def _scalar(v) -> int:
    """op_host's workspace comes as a list of sizes (one per workspace); the sum is what is allocated."""
    return int(sum(v)) if isinstance(v, list) else int(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cvtile.tiling.oracle",
                                 description="Random FIA calls through the tiling mirror and the real op_host.")
    ap.add_argument("--arch", choices=("arch22", "arch35"), default="arch22")
    ap.add_argument("-n", "--rows", type=int, default=1000, help="random calls (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    ap.add_argument("--corpus", default="", help="UT CSV whose rows are mutated (default: none)")
    ap.add_argument("--oracle", default="", help=f"fia_oracle binary or build dir (default ${ENV})")
    ap.add_argument("--json", default="", help="write the whole comparison here")
    ap.add_argument("--show", type=int, default=10, help="disagreements to print (default 10)")
    args = ap.parse_args(argv)
    binary = find_oracle(args.oracle or None)
    if binary is None:
        print(f"oracle: no fia_oracle binary (set {ENV} or --oracle)", file=sys.stderr)
        return 2
    corpus = []
    if args.corpus:
        with open(args.corpus, newline="", encoding="utf-8") as fh:
            corpus = list(csv.DictReader(fh))
    rows = random_rows(args.arch, args.rows, args.seed, corpus)
    cmp = compare_rows(rows, args.arch, run_oracle(binary, rows, args.arch), binary)
    print(cmp.summary_line())
    for d in cmp.diffs[:args.show]:
        print(f"  {d.case}: {','.join(d.fields)}  cvtile={d.cvtile}  op_host={d.ophost}")
    if args.json:
        Path(args.json).write_text(json.dumps(cmp.to_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
