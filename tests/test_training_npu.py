"""The training API on an NPU (``Module(..., device="npu")``), run by the CANN job (.ci/cann-ep)
through onnxruntime-cann's execution provider on the emulated CANN runtime: a bf16-mixed step of
the committed Llama export gives the CPU's loss and gradients within bfloat16's tolerance, ONNX
Runtime's profile places every node of ours on the CANN EP, and the emulator's call counts say
the bfloat16 aclnn kernels ran. Devices that are not there are errors naming them, everywhere."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_oracles import tensors_distance

from ort_ascend_ops import DOMAIN, aclnn_emulator
from ort_ascend_ops.examples import hf_models as hf
from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer, training_session_options
from ort_ascend_ops.training.artifacts import generate_artifacts
from ort_ascend_ops.training.optim import AdamW

FIXTURE = Path(__file__).parents[1] / "models" / "hf" / "llama_dynamic_opset18_ce.onnx"
BF16_TOLERANCE = 2**-6  # a few bfloat16 ulps, relative
KERNELS = [
    "aclnnRmsNorm",
    "aclnnRmsNormGrad",
    "aclnnRotaryPositionEmbedding",
    "aclnnRotaryPositionEmbeddingGrad",
    "aclnnFlashAttentionScore",
    "aclnnFlashAttentionScoreGrad",
]
needs_cann_ep = pytest.mark.skipif(
    not aclnn_emulator.through_cann_ep(), reason="needs onnxruntime-cann (.ci/cann-ep)"
)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    return generate_artifacts(
        onnx.load(FIXTURE),
        optimizer=AdamW(lr=1e-2),
        artifact_directory=tmp_path_factory.mktemp("npu"),
        precision="bf16-mixed",
    )


def one_step(paths, device: str, options=None, optimizer_options=None):
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, paths["eval"], device=device, session_options=options)
    optimizer = Optimizer(paths["optimizer"], module, session_options=optimizer_options)
    inputs = hf.batch("ce", 2)
    loss = float(module(inputs["input_ids"], inputs["labels"]))
    grads = {n: p.grad for n, p in state.parameters.items()}
    assert optimizer.step()
    return module, optimizer, loss, grads, {n: p.data for n, p in state.parameters.items()}


def placements(session) -> list[tuple[str, str]]:
    events = json.loads(Path(session.end_profiling()).read_text())
    kernels = [e["args"] for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    return [(k["op_name"], k["provider"]) for k in kernels]


@needs_cann_ep
def test_bf16_mixed_step_on_the_npu_gives_the_cpus_cann_ep(artifacts, tmp_path):
    _, _, cpu_loss, cpu_grads, cpu_params = one_step(artifacts, "cpu")
    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()
    emulator.aclemu_reset()
    options = {}
    for session in ("training", "optimizer"):  # one profile file each
        options[session] = training_session_options()
        options[session].enable_profiling = True
        options[session].profile_file_prefix = str(tmp_path / session)
    module, optimizer, loss, grads, params = one_step(artifacts, "npu", *options.values())

    assert abs(loss / cpu_loss - 1) <= BF16_TOLERANCE
    assert tensors_distance(grads, cpu_grads) <= BF16_TOLERANCE
    for name, value in params.items():  # AdamW's first step moves each element by about lr
        np.testing.assert_allclose(value, cpu_params[name], atol=2.5e-2, err_msg=name)
    assert optimizer.step_count == 1

    training = onnx.load(artifacts["training"])
    ours = sorted(n.op_type for n in training.graph.node if n.domain == DOMAIN)
    placed = sorted(p for p in placements(module.training_session) if p[0] in ours)
    assert placed == [(op, aclnn_emulator.CANN_EP) for op in ours]
    updates = [p for p in placements(optimizer.session) if p[0] == "ApplyAdamW"]
    trained = module.trained
    assert updates == [("ApplyAdamW", aclnn_emulator.CANN_EP)] * len(trained)
    for kernel in KERNELS:  # the bfloat16 kernels, never the float32 ones
        assert emulator.aclemu_calls(f"{kernel}GetWorkspaceSize@BFLOAT16".encode()) > 0, kernel
        assert emulator.aclemu_calls(f"{kernel}GetWorkspaceSize@FLOAT32".encode()) == 0, kernel
    # float32 master weights: AdamW updates them in float32.
    assert emulator.aclemu_calls(b"aclnnApplyAdamWV2GetWorkspaceSize@FLOAT32") == len(trained)


def test_devices_that_are_not_there_are_named_cann_ep(artifacts):
    state = CheckpointState.load_checkpoint(artifacts["checkpoint"])
    with pytest.raises(ValueError, match="device 'gpu': expected 'cpu', 'npu' or 'npu:N'"):
        Module(artifacts["training"], state, device="gpu")
    if not aclnn_emulator.through_cann_ep():
        with pytest.raises(
            RuntimeError, match="device 'npu': this ONNX Runtime has no CANNExecutionProvider"
        ):
            Module(artifacts["training"], state, device="npu")
        return
    aclnn_emulator.activate()
    with pytest.raises(RuntimeError, match="device 'npu:7' is not there"):  # the emulator has one
        Module(artifacts["training"], state, device="npu:7")


def test_graphs_for_the_cann_ep_broadcast_no_operand_cann_ep():
    """``cann_ep``'s guard for the standard ops left to the EP expands each operand Add/Sub/Mul/Div would broadcast (both, for
    ``[1, 8, 1] * [4]``, where onnxruntime-cann 1.24 gives ``b * b``) and leaves same-shaped ones
    alone; the values are the product's, on the CPU and through the CANN EP."""
    from onnx import TensorProto, helper

    from ort_ascend_ops import make_session
    from ort_ascend_ops.cann_ep.broadcast_guard import expand_broadcast_operands

    def model(op, a_shape, b_shape):
        graph = helper.make_graph(
            [helper.make_node(op, ["a", "b"], ["y"])],
            "g",
            [
                helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                for n, s in (("a", a_shape), ("b", b_shape))
            ],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)

    same = model("Add", [2, 3], [2, 3])
    assert expand_broadcast_operands(same) is same
    rng = np.random.default_rng(0)
    for op, a_shape, b_shape, expanded in (("Mul", [1, 8, 1], [4], 2), ("Sub", [2, 3], [3], 1)):
        rewritten = expand_broadcast_operands(model(op, a_shape, b_shape))
        assert sum(n.op_type == "Expand" for n in rewritten.graph.node) == expanded
        a, b = (rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape))
        want = a * b if op == "Mul" else a - b
        for providers in (["CPUExecutionProvider"], *([ascend] if (ascend := _npu()) else [])):
            got = make_session(rewritten, providers=providers).run({"a": a, "b": b})[0]
            np.testing.assert_array_equal(got, want)


def _npu():
    if not aclnn_emulator.through_cann_ep():
        return None
    aclnn_emulator.activate()
    from ort_ascend_ops.runtime import ascend_providers

    return ascend_providers()


BYTE_LLAMA = Path(__file__).parents[1] / "models" / "byte_llama.onnx"


@needs_cann_ep
@pytest.mark.parametrize("precision", ["fp32", "bf16-mixed", "fp16-mixed"])
def test_a_step_runs_every_node_on_the_npu_and_moves_only_the_batch_cann_ep(precision, tmp_path):
    """Three AdamW steps of the committed byte Llama on ``device="npu"``: ONNX Runtime's profile
    places every node of the training and optimizer sessions on the CANN EP with no copy node,
    the emulator counts no more over the bus in a step than the batch twice and 4 KiB of scalars
    (the training state stays in device memory), and the losses are the CPU's (float32: to
    float32's rounding; the mixed precisions: within bfloat16's). fp16-mixed's loss scale, a host
    scalar bound each step, once reached its node as garbage: the copy of a host input runs after
    the bind, from a value that must still live (DeviceMemory's doc)."""
    from ort_ascend_ops.cann_ep.placement import read_profile

    paths = generate_artifacts(
        onnx.load(BYTE_LLAMA), optimizer=AdamW(lr=1e-2), artifact_directory=tmp_path, precision=precision
    )
    ids = np.random.default_rng(0).integers(0, 256, (2, 16)).astype(np.int64)
    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()

    def steps(device):
        options = {}
        for session in ("training", "optimizer"):
            options[session] = training_session_options()
            options[session].enable_profiling = device != "cpu"
            options[session].profile_file_prefix = str(tmp_path / session)
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        module = Module(paths["training"], state, device=device, session_options=options["training"])
        optimizer = Optimizer(paths["optimizer"], module, session_options=options["optimizer"])
        losses = []
        for step in range(3):
            if step == 2:
                emulator.aclemu_reset()
            losses.append(float(module(ids, ids)))
            assert optimizer.step()
            module.lazy_reset_grad()
        moved = {d: emulator.aclemu_copied_bytes(d.encode()) for d in ("H2D", "D2H")}
        return module, optimizer, np.array(losses), moved

    _, _, cpu_losses, _ = steps("cpu")
    module, optimizer, losses, moved = steps("npu")
    tolerance = 1e-5 if precision == "fp32" else BF16_TOLERANCE
    np.testing.assert_allclose(losses, cpu_losses, rtol=tolerance)
    assert sum(moved.values()) <= 2 * (2 * ids.nbytes) + 4096, moved
    for session in (module.training_session, optimizer.session):
        placement = read_profile(session.end_profiling())
        assert placement.on_host == {} and placement.copies == {}, placement.lines()
