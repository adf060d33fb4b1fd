"""The pipeline's IR kept on disk (``cvtile.dsl.specialisation_cache``): a specialisation loaded in a later
process lowers to what a fresh one lowers to (both simulator modules, Ascend C, the memory map, the printed
IR), a user's kernel is not kept, and a damaged entry is compiled again."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import numpy as np
import pytest

import cvtile.dsl as ct
from cvtile.dsl import specialisation_cache
from cvtile.dsl.jit import JITFunction, record_launches
from cvtile.kernels.fia import tiling_memo
from cvtile.kernels.fia.api import fused_infer_attention_score_v4
from cvtile.kernels.st_cases import load_st_cases
from cvtile.kernels.st_runner import feature_cover


def _forget_specialisations() -> None:
    """Empty every kernel's in-process cache and FIA's launch plans (which keep their kernels'
    specialisations): the next launch specialises as a new process would."""
    tiling_memo.clear()
    for obj in gc.get_objects():
        if type(obj) is JITFunction:   # (type(), not isinstance: a dead weak proxy raises on isinstance)
            obj._cache.clear()


def _lowered(compiled) -> dict:
    out = {"program": compiled.numba_source, "pipelined": compiled.pipelined_source,
           "memory": compiled.memory_map, "frontend": compiled.ir_after("frontend"),
           "final": str(compiled.compilation.final)}
    try:
        out["ascendc"] = compiled.ascendc
    except Exception as exc:   # a refusal is compared too: it must be the same refusal
        out["ascendc"] = f"{type(exc).__name__}: {exc}"
    return out


def _recorded(calls) -> list:
    """What every launch of ``calls`` lowers to, the kernels specialised afresh (recorded, not run), and how
    many specialisations that was."""
    _forget_specialisations()
    out, kernels = [], set()
    for call in calls:
        with record_launches(run=False) as rec:
            call()
        out += [_lowered(launch.kernel) for launch in rec.launches]
        kernels |= {id(launch.kernel) for launch in rec.launches}
    return out, len(kernels)


def test_a_loaded_specialisation_lowers_as_a_fresh_one(corpus_file, tmp_path, monkeypatch):
    """Every optional input of the FIA st corpus (its feature cover: KV antiquant, full quant, MLA, paged and
    NZ caches, post-quant, masks ...): lowered once without the disk cache, once storing, once loading."""
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    path = corpus_file("st/fia_v4.json")
    cases = load_st_cases(path)
    calls = [lambda c=cases[i]: fused_infer_attention_score_v4(**c.make_inputs(np.random.default_rng(0)))
             for i in feature_cover(path)]
    monkeypatch.setenv("CVTILE_SPECIALISATION_CACHE", "0")
    fresh, kernels = _recorded(calls)
    assert not list(tmp_path.glob("spec_*.pickle"))
    monkeypatch.setenv("CVTILE_SPECIALISATION_CACHE", "1")
    before = dict(specialisation_cache.STATS)
    stored, _ = _recorded(calls)
    assert specialisation_cache.STATS["stored"] - before["stored"] == kernels >= len(calls)
    loaded, _ = _recorded(calls)
    assert specialisation_cache.STATS["loaded"] - before["loaded"] == kernels
    assert len(fresh) == len(stored) == len(loaded)
    for a, b, c in zip(fresh, stored, loaded):
        for part in a:
            assert a[part] == b[part] == c[part], part


@ct.jit
def _user_kernel(x, o, R: ct.constexpr, C: ct.constexpr):
    with ct.vector():
        ct.store(o[0:R, 0:C], ct.load(x[0:R, 0:C]) * 2.0)


def test_a_users_kernel_is_not_kept(tmp_path, monkeypatch):
    """A kernel outside cvtile's packages may call helpers no stamp covers: it is specialised in every process."""
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    assert not _user_kernel.fn.__module__.startswith("cvtile.")
    _user_kernel.compile(np.zeros((16, 16), np.float32), np.zeros((16, 16), np.float32), 16, 16)
    assert not list(tmp_path.glob("spec_*.pickle"))


def test_a_damaged_entry_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path))
    q = np.random.default_rng(0).uniform(-1, 1, (1, 2, 64, 64)).astype(np.float16)

    def call():
        fused_infer_attention_score_v4(q, q, q, num_heads=2, input_layout="BNSD", scale=0.125)

    first = _recorded([call])[0]
    entries = list(tmp_path.glob("spec_*.pickle"))
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:100])
    before = dict(specialisation_cache.STATS)
    assert _recorded([call])[0] == first
    assert specialisation_cache.STATS["loaded"] == before["loaded"]
    assert specialisation_cache.STATS["stored"] > before["stored"]   # and written again whole
    assert _recorded([call])[0] == first and specialisation_cache.STATS["loaded"] > before["loaded"]


_CHILD = r"""
import hashlib, json
import numpy as np
from cvtile.dsl import specialisation_cache
from cvtile.kernels.fia.api import npu_fused_infer_attention_score
q = np.random.default_rng(0).uniform(-1, 1, (1, 2, 256, 64)).astype(np.float16)
out = npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BNSD", scale=0.125, sparse_mode=3,
                                      atten_mask=np.triu(np.ones((2048, 2048), np.bool_), 1))[0]
print(json.dumps({"stats": specialisation_cache.STATS, "digest": hashlib.sha1(out.tobytes()).hexdigest()}))
"""


def test_a_later_process_runs_the_loaded_specialisation(tmp_path):
    """Two processes on one cache: the second loads the IR the first stored and computes the same bits."""
    env = dict(__import__("os").environ, CVTILE_CACHE_DIR=str(tmp_path), CVTILE_COMPILE_PROCESSES="1")
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True,
                                      check=True, cwd=tmp_path).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["stats"]["stored"] >= 1 and runs[0]["stats"]["loaded"] == 0
    assert runs[1]["stats"]["loaded"] == runs[0]["stats"]["stored"] and runs[1]["stats"]["stored"] == 0
    assert runs[0]["digest"] == runs[1]["digest"]


@pytest.mark.parametrize("value", [(1, 2.5, "a", None, True), ((1, 2), ("x",))])
def test_plain_keys_are_kept(value):
    assert specialisation_cache._plain(value)


@pytest.mark.parametrize("value", [(len,), (np.float16,), ([1, 2],)])
def test_keys_with_objects_are_not_kept(value):
    assert not specialisation_cache._plain(value)
