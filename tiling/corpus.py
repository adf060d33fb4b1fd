"""Run an op_host tiling unit-test CSV (the upstream column format) through ``tile_fia`` and compare.

Model
-----
Each row becomes ``FiaParams.from_csv_row`` and is tiled on the unit-test
platform of its arch (``ut_platform``: Ascend910B3 for arch22, Ascend950_ut for
arch35). The arch comes from the argument, else from the file name (``arch22`` /
``arch35`` in it), else from the dtypes (fp8/hifloat8/fp4 only exist on arch35).
A row's *verdict* agrees when cvtile accepts exactly the rows the CSV marks
SUCCESS; its *key* is compared only for SUCCESS rows whose expected key is not the
"not checked" marker 18446744073709551615. An exception other than ``ParamError``
is an *error* (a cvtile bug), counted separately and never hidden.
A file whose header lacks ``UT_COLUMNS`` (case name, expected verdict, query shape) is not a UT CSV: a
``ValueError``, before any row is judged.

Invariants
----------
* ``summary_line()`` reads ``cases: N run, V verdict agree, K key agree (of S success rows), E errors``.
* ``to_json()`` holds every row's record (name, expected and actual verdict and key, error text).
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ParamError
from .params import FiaParams
from .platform import ut_platform
from .tiling_key import UNCHECKED_KEY

__all__ = ["RowRecord", "CorpusResult", "run_corpus", "infer_arch"]

_ARCH35_ONLY_DTYPES = ("FLOAT8", "HIFLOAT8", "FLOAT4")


@dataclass
class RowRecord:
    case: str
    expected: str
    actual: str                      # "SUCCESS" / "FAILED" / "ERROR"
    expected_key: int | None
    key: int | None = None
    template: str = ""
    error: str = ""                  # the ParamError text of a rejection, or the exception of an error

    @property
    def verdict_ok(self) -> bool:
        return self.actual == self.expected

    @property
    def key_checked(self) -> bool:
        return self.expected == "SUCCESS" and self.expected_key is not None and self.expected_key != UNCHECKED_KEY

    @property
    def key_ok(self) -> bool:
        return self.key_checked and self.key == self.expected_key


@dataclass
class CorpusResult:
    path: str
    arch: str
    records: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def run(self) -> int:
        return len(self.records)

    @property
    def verdict_agree(self) -> int:
        return sum(r.verdict_ok for r in self.records)

    @property
    def key_rows(self) -> int:
        return sum(r.key_checked for r in self.records)

    @property
    def key_agree(self) -> int:
        return sum(r.key_ok for r in self.records)

    @property
    def errors(self) -> int:
        return sum(r.actual == "ERROR" for r in self.records)

    def mismatches(self) -> list:
        return [r for r in self.records if not r.verdict_ok or (r.key_checked and not r.key_ok)]

    def summary_line(self) -> str:
        return (f"cases: {self.run} run, {self.verdict_agree} verdict agree, {self.key_agree} key agree "
                f"(of {self.key_rows} success rows), {self.errors} errors")

    def to_dict(self) -> dict:
        return {"path": self.path, "arch": self.arch, "seconds": round(self.seconds, 4),
                "summary": self.summary_line(), "run": self.run, "verdict_agree": self.verdict_agree,
                "key_agree": self.key_agree, "key_rows": self.key_rows, "errors": self.errors,
                "records": [asdict(r) for r in self.records]}

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)


def infer_arch(path: str | Path, rows: list | None = None) -> str:
    name = Path(path).name.lower()
    for arch in ("arch35", "arch22"):
        if arch in name:
            return arch
    for row in rows or ():
        for k, v in row.items():
            if k.endswith("_dtype") and v and any(v.upper().startswith(p) for p in _ARCH35_ONLY_DTYPES):
                if row.get(k.replace("_dtype", "_shape")):
                    return "arch35"
    return "arch22"


def _key(cell: str) -> int | None:
    cell = (cell or "").strip()
    if not cell:
        return None
    try:
        return int(cell)
    except ValueError:
        return None


#: the columns a UT CSV must have for its rows to be judged (the others default as op_host's UT reader does)
UT_COLUMNS = ("case_name", "expectResult", "query_shape")


def run_corpus(path: str | Path, arch: str | None = None) -> CorpusResult:
    """Tile every row of a UT CSV and compare verdicts and keys (see the module docstring)."""
    from .fia import tile_fia

    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        missing = [c for c in UT_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: not a UT tiling CSV: its header lacks {', '.join(missing)} (op_host's UT case "
                         f"files name every row and its expected verdict and query)")
    arch = arch or infer_arch(path, rows)
    plat = ut_platform(arch)
    result = CorpusResult(str(path), arch)
    t0 = time.perf_counter()
    for row in rows:
        expected = (row.get("expectResult") or "").strip().upper()
        rec = RowRecord(row.get("case_name", ""), expected, "ERROR", _key(row.get("expectTilingKey", "")))
        try:
            params = FiaParams.from_csv_row(row)
            t = tile_fia(params, plat)
            rec.actual, rec.key, rec.template = "SUCCESS", t.tiling_key, f"{t.route}/{t.template}"
        except ParamError as e:
            rec.actual, rec.error = "FAILED", str(e)
        except Exception as e:  # a cvtile bug: recorded, never hidden
            rec.actual, rec.error = "ERROR", f"{type(e).__name__}: {e}"
        result.records.append(rec)
    result.seconds = time.perf_counter() - t0
    return result
