"""The example models (``models/``, ``ort_ascend_ops.examples``): the committed files are what their
scripts build and pass the checker and strict shape inference; the training graphs' loss and
gradients match an independent float64 NumPy backprop (``model_oracles``) through the native
library and the portable path, and central finite differences of the forward loss."""

import functools
import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_oracles import (
    indexer_loss_backward,
    indexer_loss_forward,
    llama_block_backward,
    llama_block_forward,
    relative_error,
)

import ort_ascend_ops as oao
from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.examples import indexer_loss, llama_block

MODELS = Path(__file__).resolve().parent.parent / "models"
NAMES = ["llama_block", "indexer_loss"]
EXAMPLES = {"llama_block": llama_block, "indexer_loss": indexer_loss}
# native: the library's kernels; portable: stock ONNX Runtime inlining the reference functions;
# committed: the portable path on the file in models/ (its functions as saved); aclnn: our nodes on
# the aclnn backend over the CANN emulator (through the CANN EP under onnxruntime-cann, standard
# ops where ONNX Runtime places them). Not the indexer loss: float32 with head dim 16, which
# aclnnLightningIndexer refuses (float16/bfloat16, head dim 128).
PATHS = ["native", "portable", "committed"]
LLAMA_PATHS = [*PATHS, "aclnn"]

# Relative error ||out - ref|| / ||ref|| against the float64 oracle: float32 through ~40 ops.
ORACLE_TOL = 1e-5
# Central differences in float32: per coordinate |fd - g| <= FD_RTOL |g| + FD_ATOL, with a step
# where the truncation error (~h^2) and the rounding error (~eps |loss| / h) are both below that.
FD_STEP, FD_RTOL, FD_ATOL = 1e-2, 1e-2, 2e-4
# The indexer's steps are smaller: near-ties in the selection and ReLU kinks lie closer.
INDEXER_FD_STEP = 2e-3


@functools.cache
def _script(name):
    """The script in models/, imported from its file."""
    spec = importlib.util.spec_from_file_location(f"models_{name}", MODELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _built(name):
    """(forward, training) as the script in models/ builds them."""
    return _script(name).build()


@functools.cache
def _session(name, which, path="native"):
    if path == "committed":
        model = MODELS / _script(name).FILES[which == "training"]
    else:
        model = _built(name)[which == "training"]
    if path == "aclnn":
        return aclnn_emulator.make_session(model, cpu_fallback=True)
    return oao.make_session(model, native=path == "native")


def _run(session, inputs):
    return dict(
        zip(session.output_names, session.run({k: inputs[k] for k in session.input_names}), strict=True)
    )


def _node_key(node):
    attrs = []
    for a in sorted(node.attribute, key=lambda a: a.name):
        if a.type == onnx.AttributeProto.GRAPH:
            attrs.append((a.name, _graph_key(a.g)))
        else:
            attrs.append((a.name, a.SerializeToString()))
    return (node.domain, node.op_type, len(node.input), len(node.output), tuple(attrs))


def _graph_key(graph):
    return (len(graph.input), len(graph.output), tuple(sorted(_node_key(n) for n in graph.node)))


def _function_key(f):
    return (
        f.domain, f.name, tuple(f.input), tuple(f.output), tuple(f.attribute),
        tuple(a.SerializeToString() for a in f.attribute_proto),
        tuple(sorted((o.domain, o.version) for o in f.opset_import)),
        tuple(sorted(_node_key(n) for n in f.node)),
    )  # fmt: skip


def _normalized(model):
    """The model without its functions (compared byte for byte) and a key of each function that
    ignores value names and node order: onnxscript names and orders some values of the reference
    functions by set iteration, which varies with PYTHONHASHSEED (models/*.py fix it at 0)."""
    functions = [_function_key(f) for f in model.functions]
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.functions[:]
    return bare.SerializeToString(), functions


@pytest.mark.parametrize("name", NAMES)
def test_committed_files_are_what_the_scripts_build(name):
    script = _script(name)
    for file, model in zip(script.FILES, _built(name), strict=True):
        committed = onnx.load(MODELS / file)
        assert _normalized(committed) == _normalized(model), (
            f"models/{file} is stale: run `python models/{name}.py`"
        )


@pytest.mark.parametrize("name", NAMES)
def test_committed_files_pass_checker_and_strict_shape_inference(name):
    oao.register_schemas()
    example = EXAMPLES[name]
    for file in _script(name).FILES:
        model = onnx.load(MODELS / file)
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        for output in inferred.graph.output:
            shape = output.type.tensor_type.shape
            assert all(d.HasField("dim_value") for d in shape.dim), (
                f"{file}: {output.name} has no static shape"
            )
        used = {n.op_type for n in model.graph.node if n.domain == oao.DOMAIN}
        assert used and {f.name for f in model.functions} >= used
    training = onnx.load(MODELS / _script(name).FILES[1])
    inputs = {i.name: i.type for i in training.graph.input}
    outputs = {o.name: o.type for o in training.graph.output}
    assert list(outputs) == [example.LOSS] + [f"{w}_grad" for w in example.WRT]
    assert all(outputs[f"{w}_grad"] == inputs[w] for w in example.WRT)


def test_training_graphs_use_the_grad_ops():
    ops = {name: [n.op_type for n in _built(name)[1].graph.node if n.domain == oao.DOMAIN] for name in NAMES}
    assert sorted(ops["llama_block"]) == sorted(
        ["RmsNorm"] * 2
        + ["RotaryPositionEmbedding"] * 2
        + ["RmsNormGrad"] * 2
        + ["RotaryPositionEmbeddingGrad"] * 2
        + ["SwiGlu", "SwiGluGrad"]
    )
    assert sorted(ops["indexer_loss"]) == ["LightningIndexer", "LightningIndexerGrad"]


@pytest.mark.skipif(not aclnn_emulator.through_cann_ep(), reason="needs onnxruntime-cann (.ci/cann-ep)")
def test_training_graph_runs_our_nodes_on_the_cann_ep(tmp_path, rng):
    """Every node of our domain in the llama block's training graph (RmsNorm, RotaryPositionEmbedding
    and their grads) runs on the CANN EP, as ONNX Runtime's profile records it; the standard ops go
    where ONNX Runtime places them (those the EP takes run as its aclop kernels on the emulator)."""
    aclnn_emulator.activate()
    options = oao.session_options()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "llama_block")
    model = _built("llama_block")[1]
    session = oao.make_session(model, providers=oao.ascend_providers(), options=options)
    _run(session, llama_block.example_inputs(rng))
    events = json.loads(Path(session.ort.end_profiling()).read_text())
    ours = sorted(n.op_type for n in model.graph.node if n.domain == oao.DOMAIN)
    kernels = [e["args"] for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    placed = sorted((k["op_name"], k["provider"]) for k in kernels if k["op_name"] in ours)
    assert placed == [(op, aclnn_emulator.CANN_EP) for op in ours]


def _check_oracle(out, loss, grads, wrt):
    assert relative_error(out["loss"], loss) <= ORACLE_TOL, (float(out["loss"]), loss)
    for w in wrt:
        error = relative_error(out[f"{w}_grad"], grads[w])
        assert error <= ORACLE_TOL, f"{w}_grad: relative error {error:.3g} > {ORACLE_TOL}"


def _check_finite_differences(loss_at, inputs, out, wrt, rng, step=FD_STEP):
    """Central differences of ``loss_at(inputs)`` on the two largest-gradient coordinates and one
    random coordinate of every ``wrt`` value. ``loss_at`` returns None where a step leaves the
    piece the gradient describes (the indexer's selection changes): such coordinates are passed
    over for the next ones."""

    def central(w, i):
        sides = []
        for sign in (1, -1):
            value = inputs[w].copy()
            value.flat[i] += sign * step
            sides.append(loss_at({**inputs, w: value}))
        return None if None in sides else (sides[0] - sides[1]) / (2 * step)

    for w in wrt:
        g = out[f"{w}_grad"].ravel()
        for candidates, wanted in [(np.argsort(-np.abs(g), kind="stable"), 2), (rng.permutation(g.size), 1)]:
            checked = 0
            for i in candidates:
                fd = central(w, i)
                if fd is None:
                    continue
                assert abs(fd - g[i]) <= FD_RTOL * abs(g[i]) + FD_ATOL, (w, int(i), fd, float(g[i]))
                checked += 1
                if checked == wanted:
                    break
            assert checked == wanted, f"{w}: no coordinate where the step keeps the selection"


@pytest.mark.parametrize("path", LLAMA_PATHS)
def test_llama_block_gradients_match_float64_backprop(path, rng):
    inputs = llama_block.example_inputs(rng)
    out = _run(_session("llama_block", "training", path), inputs)
    loss, cache = llama_block_forward(inputs)
    _check_oracle(out, loss, llama_block_backward(cache), llama_block.WRT)


def test_llama_block_gradients_match_finite_differences(rng):
    inputs = llama_block.example_inputs(rng)
    out = _run(_session("llama_block", "training"), inputs)
    forward = _session("llama_block", "forward")
    _check_finite_differences(
        lambda feeds: float(_run(forward, feeds)["loss"]), inputs, out, llama_block.WRT, rng
    )


@pytest.mark.parametrize("path", PATHS)
def test_indexer_loss_gradients_match_float64_backprop(path, rng):
    inputs = indexer_loss.example_inputs(rng)
    out = _run(_session("indexer_loss", "training", path), inputs)
    selection = _run(_session("indexer_loss", "forward", path), inputs)["sparse_indices"]
    loss, cache = indexer_loss_forward(inputs, indexer_loss.Config().top_k)
    # The float64 selection is the model's (no near-ties at this seed); slots past the causal
    # limit hold -1, and the first tokens have such slots.
    np.testing.assert_array_equal(selection, cache["idx"])
    assert (selection == -1).any()
    assert np.isfinite(out["loss"]) and all(np.isfinite(out[f"{w}_grad"]).all() for w in indexer_loss.WRT)
    _check_oracle(out, loss, indexer_loss_backward(cache), indexer_loss.WRT)


def test_indexer_loss_gradients_match_finite_differences(rng):
    inputs = indexer_loss.example_inputs(rng)
    out = _run(_session("indexer_loss", "training"), inputs)
    forward = _session("indexer_loss", "forward")
    selection = _run(forward, inputs)["sparse_indices"]

    def loss_at(feeds):
        result = _run(forward, feeds)
        # The selection is not differentiable: only steps that keep it count.
        return float(result["loss"]) if np.array_equal(result["sparse_indices"], selection) else None

    _check_finite_differences(loss_at, inputs, out, indexer_loss.WRT, rng, step=INDEXER_FD_STEP)


def test_indexer_loss_gradient_is_softmax_minus_p(rng):
    """With p equal to the softmax of the selected scores the loss is 0 and so is every gradient;
    masked slots (p = 0 there) contribute nothing and produce no NaN."""
    inputs = indexer_loss.example_inputs(rng)
    config = indexer_loss.Config()
    _, cache = indexer_loss_forward(inputs, config.top_k)
    inputs["p"] = cache["q"].astype(np.float32)
    for path in PATHS[:2]:
        out = _run(_session("indexer_loss", "training", path), inputs)
        assert abs(float(out["loss"])) < 1e-5
        for w in indexer_loss.WRT:
            assert np.isfinite(out[f"{w}_grad"]).all()
            assert np.abs(out[f"{w}_grad"]).max() < 1e-4 * max(1.0, np.abs(inputs[w]).max())
