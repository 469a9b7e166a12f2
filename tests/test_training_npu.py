"""The training API on an NPU (``Module(..., device="npu")``), run by the CANN job (.ci/cann-ep)
through onnxruntime-cann's execution provider on the emulated CANN runtime: a bf16-mixed step of
the committed Llama export gives the CPU's loss and gradients within bfloat16's tolerance, ONNX
Runtime's profile places every node of ours on the CANN EP, and the emulator's call counts say
the bfloat16 aclnn kernels ran. Devices that are not there are errors naming them, everywhere."""

import json
import subprocess
import sys
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


@needs_cann_ep
def test_the_loss_scale_lives_on_the_npu_cann_ep(tmp_path):
    """fp16-mixed's loss-scale state (scale, growth tracker, found-inf flag) stays in device
    memory: the NPU's run skips, backs off and grows where the CPU's does (whose scaler
    test_precision holds to GradScaler's), a skipped step moves the batch alone to the NPU and
    the loss and the flag back (no scale crosses), and the checkpoint saves the device's state."""
    from ort_ascend_ops.training.api import LossScaler

    paths = generate_artifacts(
        onnx.load(BYTE_LLAMA), optimizer=AdamW(lr=1e-2), artifact_directory=tmp_path, precision="fp16-mixed"
    )
    ids = np.random.default_rng(0).integers(0, 256, (2, 16)).astype(np.int64)
    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()

    def steps(device):
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        # A scale whose gradients overflow float16 twice before it trains; growth every 2 steps.
        module = Module(
            paths["training"], state, device=device, loss_scaler=LossScaler(2.0**19, growth_interval=2)
        )
        optimizer = Optimizer(paths["optimizer"], module)
        trajectory, moved = [], []
        for _ in range(6):
            emulator.aclemu_reset()
            module(ids, ids)
            updated = optimizer.step()
            moved.append({d: emulator.aclemu_copied_bytes(d.encode()) for d in ("H2D", "D2H")})
            trajectory.append((updated, optimizer.get_loss_scale()))
            module.lazy_reset_grad()
        CheckpointState.save_checkpoint(state, tmp_path / f"{device}.ckpt")
        saved = CheckpointState.load_checkpoint(tmp_path / f"{device}.ckpt").loss_scaler
        return trajectory, moved, module.loss_scaler.state_dict(), saved.state_dict()

    cpu, _, cpu_state, _ = steps("cpu")
    npu, moved, npu_state, saved = steps("npu")
    assert npu == cpu and npu_state == cpu_state == saved
    updates = [u for u, _ in npu]
    scales = [s for _, s in npu]
    assert updates[:2] == [False, False] and all(updates[2:]) and max(scales) > min(scales[2:])
    assert moved[1] == {"H2D": 2 * ids.nbytes, "D2H": 8}, moved[
        1
    ]  # step 1 skips: the batch; the loss, the flag


@needs_cann_ep
def test_a_checkpoint_loads_tensor_by_tensor_into_the_npu_cann_ep(tmp_path):
    """``load_checkpoint(..., device="npu")`` moves each tensor from the file to the device before
    reading the next: NumPy holds about one tensor at a time (tracemalloc), every byte crosses the
    bus once (the emulator's counter), a Module on the NPU trains the state where it lies (nothing
    moved again), and from the CPU's losses."""
    import safetensors.numpy
    from memory import traced_peak

    paths = generate_artifacts(onnx.load(BYTE_LLAMA), optimizer=AdamW(lr=1e-2), artifact_directory=tmp_path)
    ids = np.random.default_rng(0).integers(0, 256, (2, 16)).astype(np.int64)
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state)
    optimizer = Optimizer(paths["optimizer"], module)
    module(ids, ids)
    optimizer.step()
    saved = tmp_path / "stepped.safetensors"
    CheckpointState.save_checkpoint(state, saved, include_optimizer_state=True)
    tensors = safetensors.numpy.load_file(saved)
    total, largest = sum(t.nbytes for t in tensors.values()), max(t.nbytes for t in tensors.values())
    assert total > 4 * largest

    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()
    emulator.aclemu_reset()
    peak, loaded = traced_peak(lambda: CheckpointState.load_checkpoint(saved, device="npu"))
    assert peak < 2 * largest + 2**16, f"{peak:,} bytes held at once of {total:,}"
    assert emulator.aclemu_copied_bytes(b"H2D") == total
    emulator.aclemu_reset()
    on_npu = Module(paths["training"], loaded, device="npu")
    assert emulator.aclemu_copied_bytes(b"H2D") < 64  # the loss scale and the like: no tensor again
    on_cpu = Module(paths["training"], CheckpointState.load_checkpoint(saved))
    losses = {}
    for device, m in (("npu", on_npu), ("cpu", on_cpu)):
        step = Optimizer(paths["optimizer"], m)
        losses[device] = [float(m(ids, ids)), step.step(), m.lazy_reset_grad(), float(m(ids, ids))]
    np.testing.assert_allclose(losses["npu"][::3], losses["cpu"][::3], rtol=1e-5)


_MODULES_COME_AND_GO = """
import gc, sys
import numpy as np
from ort_ascend_ops import aclnn_emulator
from ort_ascend_ops.training.api import CheckpointState, Module, Optimizer
from ort_ascend_ops.training.artifacts import artifact_paths

aclnn_emulator.activate()
emulator = aclnn_emulator.control()
paths = artifact_paths(sys.argv[1])
ids = np.random.default_rng(0).integers(0, 256, (2, 16)).astype(np.int64)
for _ in range(3):
    module = Module(paths["training"], CheckpointState.load_checkpoint(paths["checkpoint"], device="npu"), device="npu")
    optimizer = Optimizer(paths["optimizer"], module)
    module(ids, ids)
    optimizer.step()
    del module, optimizer
    gc.collect()
    print(emulator.aclemu_device_bytes())
"""


@needs_cann_ep
@pytest.mark.parametrize("precision", ["fp32", "fp16-mixed"])
def test_modules_that_come_and_go_leave_no_device_memory_cann_ep(precision, tmp_path):
    """A process that makes, steps and drops a module on the NPU three times holds no device
    memory after each (the emulator's count), the uploads the library's kernels share included:
    they used to outlive the sessions (8 bytes a module here, 4 MiB for a model with a causal mask),
    in memory nothing named once ONNX Runtime unloaded the library. In a child process, so that
    no other test's session holds the library."""
    generate_artifacts(
        onnx.load(BYTE_LLAMA), optimizer=AdamW(lr=1e-2), artifact_directory=tmp_path, precision=precision
    )
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_COME_AND_GO, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0", "0", "0"], done.stdout


@needs_cann_ep
def test_bench_npu_step_reports_the_goals_cann_ep(tmp_path):
    """``bench npu_step`` as a user runs it (a child process): for llama under bf16-mixed (and
    fp32, its baseline), every node on the NPU, the bus within the goal, the device's peak beside
    the model state; and a row outside the matrix is refused. (The matrix test holds every row to
    the same.)"""
    pytest.importorskip("transformers")
    out = tmp_path / "npu.json"
    command = [sys.executable, "-m", "ort_ascend_ops", "bench", "npu_step", "llama"]
    done = subprocess.run(
        [*command, "--precision", "bf16-mixed", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["row"], r["precision"]) for r in results] == [
        ("llama", "fp32"),
        ("llama", "bf16-mixed"),
    ]
    for r in results:
        assert r["on_npu"] == r["nodes"] and r["h2d"] + r["d2h"] <= r["bound"] and r["peak"] > r["state"], r
    assert "| llama | bf16-mixed |" in done.stdout
    refused = subprocess.run([*command[:-1], "gpt2"], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "unknown rows ['gpt2']" in refused.stderr


# The matrix's rows the NPU trains (issue 47): dense, sliding-window, mixture-of-experts, MLA.
NPU_ROWS = ["llama", "qwen3", "gemma2", "mixtral", "qwen3_moe", "deepseek_v3"]
# The NPU's mixed runs round where the vendor's kernels do (every product's output in the low
# type, attention's probabilities too), so their drift from fp32 is their own: held, as
# tests/test_architectures.py holds ours against torch.autocast, to a multiple of the CPU's.
DRIFT_MULTIPLE = 3.0
# ... and at least the low type's unit roundoff: two valid roundings of a run whose drift is below
# it (float16's 11 bits, a router's near-tie) differ by that much.
ROUNDING = {"bf16-mixed": 2.0**-8, "fp16-mixed": 2.0**-11}
# Under fp16-mixed the NPU's chains of elementwise ops round to float16 at every node, as the
# vendor's kernels do, where the CPU's widened chains stay float32: gemma2's logit soft-capping
# overflows there at the first loss scale, and the scaler skips steps the CPU takes (two, then the
# same losses). The runs are compared loss by loss after the same number of updates.
STEPS = {"fp32": 3, "bf16-mixed": 3, "fp16-mixed": 5}
COMPARED = 3  # losses after 0, 1 and 2 updates
# Float32 over three AdamW steps: each moves a weight by about lr whatever its gradient's size, so
# a gradient near zero whose sign follows the summation order moves the loss past float32's
# rounding (mixtral's router: 2e-5). The first step's loss is the forward alone: to 1e-6.
FP32_STEPS, FP32_FORWARD = 1e-4, 1e-6


def _row_steps(paths, data, device, tmp_path, steps=3):
    """AdamW steps; on the NPU, each session's placement from ONNX Runtime's profile and the
    emulator's bus counters over the last step."""
    options = {}
    for session in ("training", "optimizer"):
        options[session] = training_session_options()
        options[session].enable_profiling = device != "cpu"
        options[session].profile_file_prefix = str(tmp_path / f"{device}-{session}")
    state = CheckpointState.load_checkpoint(paths["checkpoint"])
    module = Module(paths["training"], state, device=device, session_options=options["training"])
    optimizer = Optimizer(paths["optimizer"], module, session_options=options["optimizer"])
    emulator = aclnn_emulator.control()
    losses, updated = [], []
    for step in range(steps):
        if step == steps - 1:
            emulator.aclemu_reset()
        losses.append(float(module(data["input_ids"], data["labels"])))
        updated.append(optimizer.step())
        module.lazy_reset_grad()
    moved = {d: emulator.aclemu_copied_bytes(d.encode()) for d in ("H2D", "D2H")}
    if device == "cpu":
        return np.array(losses), updated, moved
    from ort_ascend_ops.cann_ep.placement import read_profile

    placed = [read_profile(s.end_profiling()) for s in (module.training_session, optimizer.session)]
    return np.array(losses), (updated, placed), moved


def by_updates(losses, updated) -> dict[int, float]:
    """Each loss by the number of updates before it (a skipped step updates nothing): the first
    loss at each count."""
    keyed: dict[int, float] = {}
    done = 0
    for loss, update in zip(losses, updated, strict=True):
        keyed.setdefault(done, float(loss))
        done += bool(update)
    return keyed


@needs_cann_ep
@pytest.mark.parametrize("name", NPU_ROWS)
def test_matrix_rows_train_on_the_npu_as_on_the_cpu_cann_ep(name, tmp_path):
    """Each row's Hugging Face export, AdamW steps under fp32, bf16-mixed and fp16-mixed on
    ``device="npu"`` against ``device="cpu"``, loss by loss after the same number of updates:
    fp32 within float32's rounding, the mixed precisions within a few times the drift the CPU's
    own mixed run has from its fp32 run; every node of
    the training and optimizer sessions on the CANN EP, no copy node (routed rows: but those of
    the counts to the host), and over the bus in a step no more than the batch twice and 4 KiB."""
    pytest.importorskip("transformers")
    from ort_ascend_ops.examples import architectures
    from ort_ascend_ops.examples.hf_models import torch_inputs
    from ort_ascend_ops.training import export_torch

    aclnn_emulator.activate()
    arch = next(a for a in architectures.ARCHITECTURES if a.name == name)
    data = architectures.batch(arch)
    exported = export_torch(architectures.language_model(arch), torch_inputs(data))
    batch_bytes = data["input_ids"].nbytes + data["labels"].nbytes
    cpu: dict[str, dict[int, float]] = {}
    for precision, steps in STEPS.items():
        folder = tmp_path / precision
        paths = generate_artifacts(
            exported, optimizer=AdamW(lr=1e-2), artifact_directory=folder, precision=precision
        )
        cpu_losses, cpu_updated, _ = _row_steps(paths, data, "cpu", folder, steps)
        npu_losses, (updated, placed), moved = _row_steps(paths, data, "npu", folder, steps)
        if precision != "fp16-mixed":
            assert updated == cpu_updated == [True] * steps
        cpu[precision] = by_updates(cpu_losses, cpu_updated)
        npu = by_updates(npu_losses, updated)
        common = sorted(set(npu) & set(cpu[precision]) & set(range(COMPARED)))
        assert len(common) == COMPARED, (precision, updated, cpu_updated)
        apart = max(abs(npu[k] / cpu[precision][k] - 1) for k in common)
        if precision == "fp32":
            drift = FP32_STEPS
            np.testing.assert_allclose(npu[0], cpu["fp32"][0], rtol=FP32_FORWARD)
        else:
            shared = set(cpu[precision]) & set(cpu["fp32"])
            drift = DRIFT_MULTIPLE * max(abs(cpu[precision][k] / cpu["fp32"][k] - 1) for k in shared)
            drift = max(drift, ROUNDING[precision])
        print(
            f"npu-matrix | {name} | {precision} | {apart:.1e} from the CPU (its drift {drift:.1e}) | "
            f"skipped {updated.count(False)} (CPU {cpu_updated.count(False)}) | {moved}"
        )
        assert apart <= drift, (precision, npu, cpu[precision])
        for placement in placed:
            assert placement.on_host == {}, (precision, placement.lines())
            # Mixture-of-experts rows too: GroupedMatmul's group list stays on the device (its
            # kernels read the counts back to check them, a few bytes within `moved`).
            assert placement.copies == {}, (precision, placement.lines())
        assert sum(moved.values()) <= 2 * batch_bytes + 4096, (precision, moved)


@needs_cann_ep
@pytest.mark.parametrize("precision", ["bf16-mixed", "fp16-mixed"])
def test_the_bus_carries_the_same_bytes_at_any_depth_cann_ep(precision, tmp_path):
    """Llama at 2 and 6 layers: the bytes a step moves over the bus are the same (the batch and
    the scalars), while the state grows 2.6 times; the device's peak holds the state at each
    depth and does not shrink with it (at these sizes ONNX Runtime's arena chunks and the 4 MiB
    causal mask dominate it: equal peaks are expected); each printed beside the state's bytes."""
    pytest.importorskip("transformers")
    import dataclasses

    from ort_ascend_ops.examples import architectures
    from ort_ascend_ops.examples.hf_models import torch_inputs
    from ort_ascend_ops.training import export_torch

    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()
    llama = next(a for a in architectures.ARCHITECTURES if a.name == "llama")
    data = architectures.batch(llama)
    moved, peaks, states = {}, {}, {}
    for depth in (2, 6):
        arch = dataclasses.replace(llama, settings={"num_hidden_layers": depth})
        model = architectures.language_model(arch)
        states[depth] = state_bytes = (
            4 * 4 * sum(p.numel() for p in model.parameters())
        )  # value, grad, moments
        exported = export_torch(model, torch_inputs(data))
        folder = tmp_path / str(depth)
        paths = generate_artifacts(
            exported, optimizer=AdamW(lr=1e-2), artifact_directory=folder, precision=precision
        )
        _, (_, placed), moved[depth] = _row_steps(paths, data, "npu", folder)
        peaks[depth] = emulator.aclemu_device_bytes_peak()
        print(
            f"npu-depth | {precision} | {depth} layers | bus {moved[depth]} | device peak {peaks[depth]:,} B, state {state_bytes:,} B"
        )
        assert all(p.on_host == {} and p.copies == {} for p in placed)
    assert moved[2] == moved[6]
    assert states[6] > 2 * states[2] and all(peaks[d] >= states[d] for d in peaks) and peaks[6] >= peaks[2]


@needs_cann_ep
def test_train_on_the_npu_reports_placement_and_bus_cann_ep(tmp_path):
    """``train --device npu`` (a child process, as users run it) prints after its first step
    where every node ran, from ONNX Runtime's profile, and after its second what crossed the bus
    and the device's memory, from the emulator's counters; with gradient clipping on (the
    default), the bus still carries the batch and scalars alone."""
    import re

    out = tmp_path / "run"
    command = [sys.executable, "-m", "ort_ascend_ops", "train", str(BYTE_LLAMA), "--device", "npu"]
    command += ["--steps", "3", "--batch", "2", "--seq", "16", "--eval-every", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    for session in ("training", "optimizer"):
        nodes = re.search(rf"^{session}: nodes per run: (\d+), on the NPU (\d+) \(100.0%\)$", text, re.M)
        assert nodes and nodes[1] == nodes[2], text
    bus = re.search(r"bus in step 2: ([\d,]+) bytes to the NPU, ([\d,]+) back", text)
    assert bus, text
    batch = 2 * 2 * 16 * 8  # input ids and labels, int64
    assert sum(int(b.replace(",", "")) for b in bus.groups()) <= 2 * batch + 4096, bus[0]
    assert re.search(r"device memory in step 2: peak [\d.,]+ MB", text), text
    assert (out / "checkpoint.safetensors").exists()


@needs_cann_ep
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_device_faults_name_the_allocation_and_change_nothing_cann_ep(threads, tmp_path):
    """``npu_faults.py`` in a child process at 1, 2 and 4 intra-op threads: device allocation
    failures in the load, the training step and the optimizer step are errors naming them, and
    change nothing."""
    generate_artifacts(onnx.load(BYTE_LLAMA), optimizer=AdamW(lr=1e-2), artifact_directory=tmp_path)
    script = Path(__file__).parent / "npu_faults.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(threads)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_train_names_a_device_it_cannot_reach_cann_ep(tmp_path, capsys):
    """``train --device``: an NPU this ONNX Runtime cannot reach (no CANN EP), or one that is not
    there (the emulator has one), is an error naming the option and the device, before any work."""
    from ort_ascend_ops.__main__ import main

    device = "npu:7" if aclnn_emulator.through_cann_ep() else "npu"
    if aclnn_emulator.through_cann_ep():
        aclnn_emulator.activate()
    code = main(["train", str(BYTE_LLAMA), "--device", device, "--out", str(tmp_path / "run")])
    said = capsys.readouterr().err
    assert code == 2
    assert f"--device {device}: device '{device}'" in said, said
    assert not (tmp_path / "run").exists()


@needs_cann_ep
def test_recompute_and_the_loss_in_chunks_run_on_the_npu_as_on_the_cpu_cann_ep(tmp_path):
    """The byte Llama at a fixed [2, 16] with full recompute and the loss in chunks of 12 rows:
    every node on the CANN EP, nothing over the bus but the batch and the loss, and the NPU's
    gradients are the NPU's without recompute, bit for bit (our kernels and the emulator's are
    deterministic), and the CPU's to float32's rounding."""
    from ort_ascend_ops.cann_ep.placement import read_profile

    model = onnx.load(BYTE_LLAMA)
    for value in model.graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, (2, 16), strict=True):
            dim.Clear()
            dim.dim_value = size
    ids = np.random.default_rng(1).integers(0, 256, (2, 16)).astype(np.int64)
    aclnn_emulator.activate()
    emulator = aclnn_emulator.control()

    def gradients(device, **memory):
        folder = tmp_path / f"{device}-{memory['recompute']}"
        paths = generate_artifacts(model, optimizer=AdamW(), artifact_directory=folder, **memory)
        options = training_session_options()
        options.enable_profiling = device != "cpu"
        options.profile_file_prefix = str(folder / "profile")
        state = CheckpointState.load_checkpoint(paths["checkpoint"])
        module = Module(paths["training"], state, device=device, session_options=options)
        module(ids, ids)
        emulator.aclemu_reset()
        loss = float(module(ids, ids))
        moved = sum(emulator.aclemu_copied_bytes(d.encode()) for d in ("H2D", "D2H"))
        grads = {n: np.array(p.grad) for n, p in state.parameters.items()}
        if device != "cpu":
            placement = read_profile(module.training_session.end_profiling())
            assert placement.on_host == {} and placement.copies == {}, placement.lines()
            assert moved <= 2 * ids.nbytes + 4096, moved
        return loss, grads

    memory = {"recompute": "full", "loss_chunk_size": 12}
    cpu_loss, cpu_grads = gradients("cpu", **memory)
    plain_loss, plain_grads = gradients("npu", recompute="none", loss_chunk_size=12)
    loss, grads = gradients("npu", **memory)
    assert loss == plain_loss
    for name, grad in grads.items():
        assert grad.tobytes() == plain_grads[name].tobytes(), name
        np.testing.assert_allclose(grad, cpu_grads[name], rtol=1e-4, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(loss, cpu_loss, rtol=1e-5)
