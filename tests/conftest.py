"""Shared pytest fixtures and hooks: where the external corpora live, the run order, and a timeline.

Each test starts with an empty FIA tiling memo (``kernels/fia/tiling_memo``): a memo left by an earlier test
in the same worker would hand a test that patches a planner the unpatched plan, and tests must not depend on
the order they run in.

The acceptance corpora (the upstream ops-transformer test cases as data) sit in
``../shared/cases`` beside the project checkout, or wherever ``CVTILE_CASES``
points. Tests that need them skip cleanly when they are absent.

Run order: the areas whose tests compile kernels (``kernels``, ``ascendc``,
``examples``, ``cli``) run first and the quick unit areas (``tiling``, ``cost``,
``packaging``) last, each area keeping its own order. Under ``pytest -n 2``
xdist hands tests out in this order, so the run ends on short tests and the
two workers finish together instead of one waiting on the other's last
multi-minute compile. The order changes nothing else: every test stands alone.

``CVTILE_TEST_TIMELINE=<file>`` appends one tab-separated line per test: the
xdist worker, its start and end (wall-clock seconds), the CPU seconds of the
worker process and of the processes it waited for, and the test id; where a
tier's wall time goes, and where a worker sat idle.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_tiling_memo():
    from cvtile.kernels.fia import tiling_memo

    tiling_memo.clear()
    yield
    tiling_memo.clear()


def cases_root() -> Path:
    env = os.environ.get("CVTILE_CASES")
    return Path(env) if env else ROOT.parent / "shared" / "cases"


@pytest.fixture(scope="session")
def cases_dir() -> Path:
    root = cases_root()
    if not root.is_dir():
        pytest.skip(f"external corpus folder {root} is absent (set CVTILE_CASES)")
    return root


@pytest.fixture(scope="session")
def corpus_file():
    """``corpus_file("st/fia_v4.json")``: the path of one corpus file; skips the test when it is absent."""

    def find(relpath: str) -> Path:
        path = cases_root() / relpath
        if not path.is_file():
            pytest.skip(f"corpus file {path} is absent (set CVTILE_CASES)")
        return path

    return find


#: the test areas in run order (see the module docstring); an area not listed runs between the two groups
_FIRST = ("kernels", "ascendc", "examples", "cli")
_LAST = ("sim", "dsl", "fuzz", "tiling", "cost", "packaging")


def _area_rank(item) -> int:
    parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
    area = parts[0] if len(parts) > 1 else ""
    if area in _FIRST:
        return _FIRST.index(area)
    if area in _LAST:
        return len(_FIRST) + 1 + _LAST.index(area)
    return len(_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_area_rank)    # stable: each area keeps its collection order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("CVTILE_TEST_TIMELINE")
    if not path:
        yield
        return
    t0, c0 = time.time(), time.process_time()
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(path, "a") as f:
        f.write(f"{worker}\t{t0:.3f}\t{time.time():.3f}\t{time.process_time() - c0:.3f}\t{children:.3f}\t"
                f"{item.nodeid}\n")
