"""``run_st_corpus(..., workers=N)`` / ``cvtile cases --workers N``: a sweep over local processes gives the
serial run's records, in corpus order (only the wall times differ)."""

from __future__ import annotations

import pytest

from cvtile.kernels.st_runner import default_api, golden_for, load_api, run_st_corpus


def _strip(result):
    return [{k: v for k, v in r.to_dict().items() if k != "seconds"} for r in result.records]


@pytest.mark.slow
def test_two_workers_give_the_serial_records(corpus_file):
    path = corpus_file("st/ring_attention_update.json")
    api = load_api(default_api(path))
    golden, _ = golden_for("lowp", True)
    serial = run_st_corpus(path, api, golden=golden, limit=6)
    parallel = run_st_corpus(path, api, golden=golden, limit=6, workers=2)
    assert _strip(serial) == _strip(parallel)
    assert serial.summary_line() == parallel.summary_line()


def test_workers_refuse_an_api_that_cannot_reach_another_process(corpus_file):
    path = corpus_file("st/ring_attention_update.json")
    golden, _ = golden_for("lowp", True)
    with pytest.raises(ValueError, match="workers=2: the api .* module-level"):
        run_st_corpus(path, lambda **kw: None, golden=golden, limit=3, workers=2)
