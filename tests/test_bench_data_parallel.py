"""``bench training_step --nproc``'s children: every engine, in one process and in two under
torchrun, trains the same rows from the same weights (PyTorch's one process the oracle of each
rank's first loss) and reports its time, collectives and peak RSS. No figure is asserted: the
bench reports them."""

import pytest

from ort_ascend_ops.bench import data_parallel
from ort_ascend_ops.bench.training_step import _configs


# Slow (90 s on CI's two cores, the suite's longest): run by hand with -m slow. The same
# engines' data parallel is held to torch by tests/test_data_parallel.py in every CI run.
@pytest.mark.slow
def test_each_engine_reports_every_rank_and_trains_that_ranks_rows(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    spec = _configs()["byte_llama"] | {"batch": 2, "seq": 32}
    result = data_parallel.run_config("byte_llama", spec, [1, 2], 1, 0, tmp_path, say=lambda *_: None)
    runs = result["runs"]
    assert set(runs) == set(data_parallel.ENGINES)
    oracle = runs["PyTorch DDP"][1][0]["losses"][0]  # one process of torch on rank 0's rows
    for engine, by_count in runs.items():
        for processes, records in by_count.items():
            assert isinstance(records, list), f"{engine}, {processes}: {records}"
            assert [r["rank"] for r in records] == list(range(processes))
            assert records[0]["losses"][0] == pytest.approx(oracle, rel=2e-5), engine
            assert all(r["step_s"] > 0 and r["peak_rss"] > 0 for r in records)
            if engine.startswith("ours"):  # DDP's own logging reports its first step's as 0
                assert (min(r["comm_s"] for r in records) > 0) == (processes > 1), engine
    second = [runs[e][2][1]["losses"][0] for e in runs]  # rank 1's rows, the same in every engine
    assert second == pytest.approx([second[0]] * len(second), rel=2e-5) and second[0] != oracle
    assert len(data_parallel.table(result)) == 2 + sum(len(by_count) for by_count in runs.values())
