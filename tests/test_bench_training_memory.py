"""``bench training_step``'s memory children: each engine alone in a process, reporting its peak
RSS and losses; the losses of the same steps agree across engines (PyTorch eager the oracle).
No memory figure is asserted: the bench reports them."""

import numpy as np
import onnx
import pytest

from ort_ascend_ops.bench import training_memory
from ort_ascend_ops.examples import byte_llama
from ort_ascend_ops.training.artifacts import generate_artifacts
from ort_ascend_ops.training.optim import AdamW

# torch.compile's compilation in its child is most of the test's time: left to the slow run.
ENGINES = [
    pytest.param(("ours native", "ours portable"), id="ours"),
    pytest.param(("torch.compile",), id="torch.compile", marks=pytest.mark.slow),
]


def test_the_engines_are_the_benchs():
    assert {"PyTorch eager", *(e for p in ENGINES for e in p.values[0])} == set(training_memory.ENGINES)


@pytest.mark.parametrize("engines", ENGINES)
def test_every_engine_reports_its_peak_and_the_losses_of_the_same_steps(engines, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    paths = generate_artifacts(
        onnx.load(byte_llama.model_path()), loss=None, optimizer=AdamW(), artifact_directory=tmp_path / "ours"
    )
    weights, batch = tmp_path / "weights.pt", tmp_path / "batch.npy"
    torch.save(byte_llama.module().state_dict(), weights)
    np.save(batch, np.random.default_rng().integers(0, 256, (2, 24), dtype=np.int64))
    job = {"seq": 24, "threads": 1, "steps": 3, "batch": str(batch), "weights": str(weights)}
    job |= {"paths": {k: str(v) for k, v in paths.items()}, "architecture": "LlamaConfig"}
    job |= {"config": byte_llama.CONFIG}
    results = {e: training_memory.measure(job | {"engine": e}, tmp_path) for e in ("PyTorch eager", *engines)}
    expected = results.pop("PyTorch eager")["losses"]
    for engine, result in results.items():
        assert result["peak_rss"] > 0, engine
        np.testing.assert_allclose(result["losses"], expected, rtol=2e-5, err_msg=engine)


def test_a_failing_child_is_reported_not_raised(tmp_path):
    job = {"engine": "ours native", "seq": 1, "threads": 1, "steps": 1, "batch": str(tmp_path / "none.npy")}
    job["paths"] = {"checkpoint": str(tmp_path / "missing")}
    assert "none.npy" in training_memory.measure(job, tmp_path)["error"]
