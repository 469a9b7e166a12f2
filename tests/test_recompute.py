"""Activation recompute and the loss in chunks (``build_training_model(recompute=,
recompute_layers=, loss_chunk_size=)``): the same gradients bit for bit under every recompute
mode on a graph cut by its residual stream (the committed export, its scope records stripped; the
matrix rows, cut by their scopes, are in test_architectures.py), the chunked loss against PyTorch
autograd with ignored labels, on both paths; how ONNX Runtime's peak memory grows with the
sequence under each mode, measured in child processes; every bad option an error naming it."""

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ort_ascend_ops import make_session
from ort_ascend_ops.examples import byte_llama
from ort_ascend_ops.export import parameter_names
from ort_ascend_ops.training import GradientError, build_training_model
from ort_ascend_ops.training.artifacts import generate_artifacts

EXPORT = onnx.load(byte_llama.model_path())
PARAMETERS = parameter_names(EXPORT)


def tokens(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(seed).integers(0, byte_llama.CONFIG["vocab_size"], (batch, seq))
    labels = ids.copy()
    labels[:, :3] = -100  # ignored, as a chat template's prompt is
    return {"input_ids": ids, "labels": labels}


def run(training, data, native):
    return make_session(training, native=native).run(data)


@pytest.mark.parametrize("layers", [None, 1])
@pytest.mark.parametrize("mode", ["selective", "full"])
def test_every_mode_gives_the_same_gradients_bit_for_bit_on_a_graph_without_scopes(mode, layers):
    data = tokens(2, 24)
    plain = build_training_model(EXPORT, "loss", PARAMETERS)
    recomputing = build_training_model(EXPORT, "loss", PARAMETERS, recompute=mode, recompute_layers=layers)
    recomputed = [n for n in recomputing.graph.node if n.name.endswith("/recomputed")]
    assert recomputed, "nothing recomputed"
    for native in (True, False):
        for name, a, b in zip(
            [o.name for o in plain.graph.output],
            run(plain, data, native),
            run(recomputing, data, native),
            strict=True,
        ):
            assert a.tobytes() == b.tobytes(), f"native={native}: {name}"


def test_the_loss_in_chunks_follows_torch_autograd_with_ignored_labels():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from model_oracles import relative_error

    from ort_ascend_ops.examples.hf_models import torch_inputs
    from ort_ascend_ops.training import export_torch

    model = byte_llama.module(0)
    data = tokens(2, 11)  # 22 rows: chunks of 5, 5, 5, 5 and 2
    model.zero_grad()
    loss = model(**torch_inputs(data)).loss
    loss.backward()
    exported = export_torch(model, torch_inputs(data))
    names = [n for n, _ in model.named_parameters()]
    for recompute in ("none", "full"):
        training = build_training_model(exported, "loss", names, recompute=recompute, loss_chunk_size=5)
        chunks = {p.value for n in training.graph.node for p in n.metadata_props if p.key.endswith("segment")}
        assert len(chunks) == 5, chunks
        for native in (True, False):
            results = dict(
                zip([o.name for o in training.graph.output], run(training, data, native), strict=True)
            )
            assert relative_error(results["loss"], loss.detach().numpy()) < 1e-6
            for name, parameter in model.named_parameters():
                assert relative_error(results[f"{name}_grad"], parameter.grad.numpy()) < 1e-5, name


PEAK = """
import sys
import numpy as np, onnxruntime as ort
from ort_ascend_ops import make_session
options = ort.SessionOptions()
options.enable_cpu_mem_arena = False  # every tensor its own allocation
session = make_session(sys.argv[1], options=options, threads=1)
ids = np.random.default_rng(0).integers(0, 256, (4, 1024))
session.run({"input_ids": ids, "labels": ids})
print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024)
"""


def peak(path) -> int:
    """The peak RSS of a child running the training model once on 4 x 1024 tokens, each
    allocation of 64 KiB or more mapped alone (glibc's M_MMAP_THRESHOLD), so that a freed tensor
    leaves the resident set at once: the peak is what was alive at once."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    done = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def test_peak_memory_per_layer_is_what_each_mode_keeps(tmp_path):
    """Measured, not read from the graph: the byte Llama with 2 and with 6 layers (hidden 128,
    4 x 1024 tokens: 2 MiB per [tokens, hidden] value). Without recompute a layer adds about 56 MiB
    (its activations); "selective" keeps the products (about 41 MiB); "full" the two inputs of
    its sublayers and the parameters' gradients (about 10 MiB)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    peaks = {}
    for layers in (2, 6):
        model = byte_llama.export(config={"num_hidden_layers": layers})
        for mode in ("none", "selective", "full"):
            path = tmp_path / f"{layers}-{mode}.onnx"
            onnx.save(build_training_model(model, "loss", parameter_names(model), recompute=mode), path)
            peaks[layers, mode] = peak(path)
    per_layer = {
        mode: (peaks[6, mode] - peaks[2, mode]) / 4 / 2**20 for mode in ("none", "selective", "full")
    }
    print("MiB per layer:", per_layer)
    assert per_layer["full"] < 0.3 * per_layer["none"], per_layer
    assert per_layer["selective"] < 0.85 * per_layer["none"], per_layer


def test_bad_options_are_errors_naming_them():
    with pytest.raises(
        ValueError, match=r"recompute must be one of \['none', 'selective', 'full'\], got 'some'"
    ):
        build_training_model(EXPORT, "loss", PARAMETERS, recompute="some")
    with pytest.raises(ValueError, match="generate_artifacts: recompute must be one of"):
        generate_artifacts(EXPORT, loss=None, artifact_directory="unused", recompute="all")
    with pytest.raises(ValueError, match=r"recompute_layers must be None \(all\) or an integer >= 0, got -1"):
        build_training_model(EXPORT, "loss", PARAMETERS, recompute="full", recompute_layers=-1)
    with pytest.raises(ValueError, match="recompute_layers=9: the model has 3 decoder layers"):
        build_training_model(EXPORT, "loss", PARAMETERS, recompute="full", recompute_layers=9)
    with pytest.raises(ValueError, match="loss_chunk_size must be None or an integer >= 1, got 0"):
        build_training_model(EXPORT, "loss", PARAMETERS, loss_chunk_size=0)
    with pytest.raises(GradientError, match="loss_chunk_size: .* the rows of .* are not static"):
        build_training_model(EXPORT, "loss", PARAMETERS, loss_chunk_size=16)


def small_regression(nodes: int = 1) -> onnx.ModelProto:
    """y = x W (one MatMul), its mean squared error against a target: no layer, no cross-entropy."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], np.ones(16, np.float32))
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("Sub", ["y", "t"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["s"]),
            helper.make_node("ReduceMean", ["s"], ["loss"], keepdims=0),
        ],
        "regression",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8, 4]) for n in ("x", "t")],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_a_graph_without_layers_or_cross_entropy_is_refused_naming_what_was_looked_for():
    model = small_regression()
    with pytest.raises(
        GradientError,
        match=r"no decoder layer found: .*'model.layers.N'.*pkg.torch.onnx.name_scopes.*residual Adds",
    ):
        build_training_model(model, "loss", ["w"], recompute="full")
    with pytest.raises(
        GradientError,
        match="loss_chunk_size: the loss 'loss' cannot be computed in chunks: it is no cross-entropy",
    ):
        build_training_model(model, "loss", ["w"], loss_chunk_size=4)
