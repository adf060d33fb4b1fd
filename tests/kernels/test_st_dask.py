"""``run_st_corpus(..., scheduler=...)`` / ``cvtile cases --scheduler [ADDRESS]``: a sweep on dask.distributed
gives the serial run's records, in corpus order (only the wall times differ); an address that does not answer
is a one-line user error; an api that cannot reach another process is refused before any cluster starts."""

from __future__ import annotations

import sys

import pytest

from cvtile.cli import main
from cvtile.kernels import st_runner
from cvtile.kernels.st_runner import default_api, golden_for, load_api, run_st_corpus


def _strip(result):
    return [{k: v for k, v in r.to_dict().items() if k != "seconds"} for r in result.records]


@pytest.mark.slow
def test_a_local_cluster_gives_the_serial_records(corpus_file, tmp_path, monkeypatch):
    """The kernels come from a private cache that the serial run fills in this one process: the shared cache holds
    kernels compiled by different processes whose numba libraries can carry one mangled name for two different
    runtime helpers (sim/rt.py's ``_gm_copies`` closures, fp16 and bf16), and a process that loads both then runs
    the first one loaded in both kernels, so a worker that runs a bf16 case before an fp16 one gets wrong fp16
    outputs whatever the backend (the serial run only escapes by its order)."""
    pytest.importorskip("distributed")
    monkeypatch.setenv("CVTILE_CACHE_DIR", str(tmp_path / "kernels"))   # the cluster's processes inherit it
    path = corpus_file("st/ring_attention_update.json")
    api = load_api(default_api(path))
    golden, _ = golden_for("lowp", True)
    serial = run_st_corpus(path, api, golden=golden, limit=4)
    seen = []
    on_dask = run_st_corpus(path, api, golden=golden, limit=4, scheduler="local", workers=2, progress=seen.append)
    assert _strip(serial) == _strip(on_dask)
    assert serial.summary_line() == on_dask.summary_line()
    assert sorted(r.id for r in seen) == sorted(r.id for r in serial.records if r.status != "skipped")


def test_an_unreachable_scheduler_is_a_one_line_user_error(corpus_file, capsys, monkeypatch):
    pytest.importorskip("distributed")
    path = corpus_file("st/ring_attention_update.json")
    monkeypatch.setattr(st_runner, "SCHEDULER_CONNECT_TIMEOUT", "1s")   # nothing listens: connecting waits it out
    assert main(["cases", str(path), "--limit", "2", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "--scheduler tcp://127.0.0.1:1" in lines[0] and "no dask scheduler answered" in lines[0]


def test_a_scheduler_refuses_an_api_that_cannot_reach_another_process(corpus_file, monkeypatch):
    distributed = pytest.importorskip("distributed")

    def no_cluster(*args, **kwargs):
        raise AssertionError("a LocalCluster was started")

    monkeypatch.setattr(distributed, "LocalCluster", no_cluster)
    path = corpus_file("st/ring_attention_update.json")
    golden, _ = golden_for("lowp", True)
    with pytest.raises(ValueError, match="scheduler='local': the api .* module-level"):
        run_st_corpus(path, lambda **kw: None, golden=golden, limit=3, scheduler="local")


def test_a_scheduler_without_dask_names_the_install_command(corpus_file, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)   # import distributed raises ImportError
    path = corpus_file("st/ring_attention_update.json")
    with pytest.raises(st_runner.SchedulerUnavailableError, match=r"--scheduler .* pip install"):
        run_st_corpus(path, load_api(default_api(path)), golden=golden_for("lowp", True)[0], limit=2,
                      scheduler="local")
    assert main(["cases", str(path), "--limit", "2", "--scheduler"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "dask" in lines[0], lines
