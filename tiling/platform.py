"""The platform table: one record per chip, read from ``platforms.json``.

Model
-----
Every hardware number cvtile uses (core counts, on-chip buffer sizes, clock,
HBM bandwidth, and the cost model's per-pipe rates and latencies) comes from
this one table. The DSL verifier reads the buffer budgets, the cost model
reads the chip's clock and HBM bandwidth here and the per-pipe constants in
its generation's cost table (``Platform.cost``: ``dav_c220`` for A2/A3,
``dav_c310`` for 950; every entry carries its unit and source), and the
tiling mirror reads the core counts and L2 size exactly as the real op_host
reads them from the platform (``GetCoreNumAic`` and friends).

Invariants
----------
* ``aiv`` is 1x or 2x ``aic`` (the cube:vector ratio of one AI core group).
* ``ub_usable <= ub``; the verifier checks kernels against ``ub_usable``.
* ``arch`` is ``"arch22"`` (Atlas A2/A3, DAV_2201) or ``"arch35"`` (Ascend 950,
  DAV_3510); everything arch-dependent in cvtile keys on this field.

The op_host unit-test corpora were produced on harness platforms:
``Ascend910B3`` (20 AIC / 40 AIV) for arch22 and ``Ascend950_ut`` (the
harness stand-in numbers: UB 192 KB, L0C 64 KB, L2 112 MB) for arch35.
``ut_platform(arch)`` names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

__all__ = ["Platform", "CostTable", "CostEntry", "cost_table", "get_platform", "platform_names", "ut_platform", "DEFAULT_TARGET", "UnknownPlatformError",
           "tsch_num_blocks"]

DEFAULT_TARGET = "Ascend910B1"


class UnknownPlatformError(ValueError):
    """A target name that is not in the platform table."""


@dataclass(frozen=True)
class Platform:
    name: str
    arch: str
    npu_arch: str
    soc_family: str
    aic: int
    aiv: int
    clock_mhz: int
    ub: int
    ub_usable: int
    l1: int
    l0a: int
    l0b: int
    l0c: int
    l2: int
    hbm_bytes: int
    #: the chip's HBM bandwidth (GB/s), the cap every core's GM traffic shares
    hbm_gbytes_per_s: float = 1600.0
    #: the name of this chip's core-generation cost table (``cost_tables`` in platforms.json)
    cost_table: str = "dav_c220"
    cube_to_vector_on_chip: bool = False
    preload_depth: int = 2
    #: byte alignment of a buffer's start per on-chip space (memory planning)
    buffer_align: dict = field(default_factory=lambda: {"UB": 32, "L1": 512, "L0A": 512, "L0B": 512, "L0C": 1024},
                               hash=False)
    note: str = ""

    @property
    def cv_ratio(self) -> int:
        """Vector cores per cube core (1 or 2)."""
        return self.aiv // self.aic

    def align(self, space: str) -> int:
        """The byte alignment of a buffer in an on-chip space ("UB", "L1", "L0A", "L0B", "L0C")."""
        return int(self.buffer_align.get(space.upper(), 32))

    def capacity(self, space: str) -> int:
        """Bytes a kernel may use in an on-chip memory space ("UB", "L1", "L0A", "L0B", "L0C")."""
        table = {"UB": self.ub_usable, "L1": self.l1, "L0A": self.l0a, "L0B": self.l0b, "L0C": self.l0c}
        try:
            return table[space.upper()]
        except KeyError:
            raise KeyError(f"no on-chip capacity for memory space {space!r}") from None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def cost(self) -> "CostTable":
        """The cost model's constants for this chip (its generation's table in ``cost_tables``)."""
        return cost_table(self.cost_table)


@dataclass(frozen=True)
class CostEntry:
    """One cost constant: its value, unit and where the number came from."""

    name: str
    value: object
    unit: str
    source: str


class CostTable:
    """The cost constants of one core generation (``cost_tables[name]`` in platforms.json): ``table.x`` is the
    value of entry ``x``; ``table.entries`` every entry with its unit and source. An entry the cost model asks
    for that the table lacks is a ``KeyError`` naming the table (never a default in code). The entries are read
    only: an entry's value, once read, is kept as an attribute (the cost model reads some for every op it times)."""

    def __init__(self, name: str, raw: dict):
        self.name = name
        self.doc = raw.get("_doc", "")
        self.entries = {k: CostEntry(k, v["value"], v["unit"], v["source"]) for k, v in raw.items()
                        if not k.startswith("_")}

    def __getattr__(self, key: str):
        try:
            value = self.__dict__["entries"][key].value
        except KeyError:
            raise AttributeError(f"cost table {self.__dict__.get('name')!r} has no entry {key!r}") from None
        self.__dict__[key] = value       # read as an attribute from now on (__getattr__ is not called for it)
        return value


@lru_cache(maxsize=None)
def cost_table(name: str) -> CostTable:
    """The cost table ``name`` (``dav_c220`` for Atlas A2/A3, ``dav_c310`` for Ascend 950)."""
    tables = _table()["cost_tables"]
    if name not in tables:
        raise UnknownPlatformError(f"cost_table={name!r} is not in the platform table; known: {', '.join(tables)}")
    return CostTable(name, tables[name])


@lru_cache(maxsize=1)
def _table() -> dict:
    text = resources.files(__package__).joinpath("platforms.json").read_text(encoding="utf-8")
    return json.loads(text)


def platform_names() -> list[str]:
    return sorted(_table()["platforms"])


@lru_cache(maxsize=None)
def get_platform(name: str = DEFAULT_TARGET) -> Platform:
    """The platform record for ``name`` (case-insensitive, ``_`` and ``-`` alike)."""
    if isinstance(name, Platform):
        return name
    table = _table()["platforms"]
    key = {k.lower().replace("-", "_"): k for k in table}.get(str(name).lower().replace("-", "_"))
    if key is None:
        raise UnknownPlatformError(
            f"target={name!r} is not a known platform; known: {', '.join(sorted(table))}")
    raw = {k: v for k, v in table[key].items() if not k.startswith("_")}
    note = " ".join(v for k, v in table[key].items() if k.startswith("_"))
    plat = Platform(name=key, note=note, **raw)
    if plat.aiv not in (plat.aic, 2 * plat.aic):
        raise ValueError(f"platform {key}: aiv={plat.aiv} must be 1x or 2x aic={plat.aic}")
    if plat.ub_usable > plat.ub:
        raise ValueError(f"platform {key}: ub_usable={plat.ub_usable} exceeds ub={plat.ub}")
    return plat


def ut_platform(arch: str) -> Platform:
    """The platform the upstream op_host unit tests of ``arch`` ran on."""
    try:
        return get_platform(_table()["ut_platform"][arch])
    except KeyError:
        raise UnknownPlatformError(f"arch={arch!r}: no unit-test platform (known: arch22, arch35)") from None


def tsch_num_blocks(slices: int, aic: int, aiv: int) -> int:
    """The launch block count for ``slices`` vector slices on a mix kernel (``CalcTschNumBlocks``): one block
    per AIV:AIC group of slices, rounded up; 0 (a failed launch) when a 1:2 chip would need more blocks than
    it has cube cores; ``slices`` itself when the core counts give no ratio."""
    if aic == 0 or aiv == 0 or aic > aiv:
        return slices
    ratio = aiv // aic
    blocks = -(-slices // ratio)
    return 0 if ratio == 2 and blocks > aic else blocks
