"""The aclnn backend's machinery against the host emulator: vendor errors and failed allocations
become ORT errors that carry the vendor's message and leak nothing, the CANN libraries are found
(or their absence reported) as the vendor lays them out, and the Ascend session helper."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from aclnn_checks import host_waits
from memory import assert_memory_flat
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, RuntimeException

import ort_ascend_ops
from engines import run
from oracles import F16, F32, TOL, assert_close, rms_norm_grad_inputs, rms_norm_grad_oracle
from ort_ascend_ops import aclnn_emulator, make_op_model, make_session

OP = "RmsNormGrad"


@pytest.fixture
def inputs(rng):
    return rms_norm_grad_inputs(rng, (4, 64), (64,), F16, F32)


@pytest.mark.parametrize(
    ("symbol", "code", "error", "name"),
    [
        ("aclnnRmsNormGradGetWorkspaceSize", 161002, InvalidArgument, "ACLNN_ERR_PARAM_INVALID"),
        ("aclnnRmsNormGradGetWorkspaceSize", 561002, InvalidArgument, "ACLNN_ERR_INNER_TILING_ERROR"),
        ("aclnnRmsNormGradGetWorkspaceSize", 561003, Exception, "ACLNN_ERR_INNER_FIND_KERNEL_ERROR"),
        ("aclnnRmsNormGrad", 361001, RuntimeException, "ACLNN_ERR_RUNTIME_ERROR"),
        ("aclnnRmsNormGrad", 507035, RuntimeException, "unknown aclnn status"),
    ],
)
def test_vendor_error_carries_code_and_message(symbol, code, error, name, inputs, emulator):
    emulator.aclemu_fail(symbol.encode(), code, b"the emulated vendor says no")
    with pytest.raises(error) as raised:
        run("aclnn", OP, inputs)
    message = str(raised.value)
    for part in (OP, f"{symbol} failed with {code}", name, "the emulated vendor says no"):
        assert part in message


def test_workspace_allocation_failure_frees_the_executor(inputs, emulator):
    emulator.aclemu_set_workspace_size(1 << 60)
    with pytest.raises(Fail, match="RmsNormGrad"):
        run("aclnn", OP, inputs)
    assert emulator.aclemu_calls(b"aclDestroyAclOpExecutor") == 1
    assert emulator.aclemu_calls(b"aclnnRmsNormGrad") == 0


def test_tensor_creation_failure_releases_the_tensors_made(inputs, emulator):
    emulator.aclemu_fail(b"aclCreateTensor", 1, b"")
    with pytest.raises(Fail, match="aclCreateTensor refused"):
        run("aclnn", OP, inputs)


def test_ten_thousand_failing_calls_leak_nothing(inputs, emulator):
    model = make_op_model(OP, {name: (a.dtype, a.shape) for name, a in inputs.items()}, {})
    session = aclnn_emulator.make_session(model, threads=1)
    failures = [
        lambda: emulator.aclemu_fail(b"aclnnRmsNormGradGetWorkspaceSize", 561002, b"first phase"),
        lambda: emulator.aclemu_fail(b"aclnnRmsNormGrad", 361001, b"second phase"),
        lambda: emulator.aclemu_set_workspace_size(1 << 60),
    ]

    def fail_calls(count):
        for i in range(count):
            emulator.aclemu_reset()
            failures[i % 3]()
            with pytest.raises((InvalidArgument, RuntimeException, Fail)):
                session.run(inputs)

    assert_memory_flat(lambda: fail_calls(1000), calls_per_block=1000)
    assert (emulator.aclemu_live_tensors(), emulator.aclemu_live_executors()) == (0, 0)
    emulator.aclemu_reset()
    dx, _ = session.run(inputs)
    assert_close(dx, rms_norm_grad_oracle(**inputs)[0], TOL[F16])


def probe(op, tmp_path, libraries, custom=None):
    """Runs aclnn_probe.py with an ASCEND_HOME_PATH holding only `libraries` of the emulator."""
    home = tmp_path / "ascend"
    (home / "lib64").mkdir(parents=True)
    for name in libraries:
        (home / "lib64" / name).symlink_to(Path(aclnn_emulator.home()) / "lib64" / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "LD_LIBRARY_PATH"))}
    env["ASCEND_HOME_PATH"] = str(home)
    if custom:
        env["ASCEND_CUSTOM_OPP_PATH"] = custom
    script = Path(__file__).with_name("aclnn_probe.py")
    result = subprocess.run(
        [sys.executable, str(script), op], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


BASE = ["libnnopbase.so", "libascendcl.so"]


def test_the_emulator_home_runs_every_family(tmp_path):
    libraries = BASE + ["libopapi_nn.so", "libopapi_transformer.so"]
    for op in ("RmsNormGrad", "RotaryPositionEmbedding", "LightningIndexer"):
        assert probe(op, tmp_path / op, libraries) == "ok"


def test_without_cann_the_op_says_so(tmp_path):
    out = probe("RmsNormGrad", tmp_path, [])
    assert out.startswith("Fail:") and "RmsNormGrad: the CANN runtime is not installed" in out, out
    assert "libnnopbase.so" in out


def test_a_missing_symbol_is_named(tmp_path):
    out = probe("RotaryPositionEmbedding", tmp_path, BASE + ["libopapi_nn.so"])
    assert "CANN symbol 'aclnnRotaryPositionEmbeddingGetWorkspaceSize' not found" in out, out
    assert "libopapi_nn.so" in out


def test_old_custom_package_indexer_is_refused(tmp_path):
    out = probe("LightningIndexer", tmp_path, BASE + ["libopapi_nn.so"], custom=aclnn_emulator.custom_opp())
    assert "older signature" in out and "libcust_opapi.so" in out, out


def test_ascend_providers_force_single_op_mode():
    providers = ort_ascend_ops.ascend_providers(1, arena_extend_strategy="kSameAsRequested")
    assert providers == [
        (
            "CANNExecutionProvider",
            {"device_id": "1", "enable_cann_graph": "0", "arena_extend_strategy": "kSameAsRequested"},
        ),
        "CPUExecutionProvider",
    ]
    with pytest.raises(ValueError, match="enable_cann_graph must be 0"):
        ort_ascend_ops.ascend_providers(enable_cann_graph=1)


def check_rms_norm_grad(session, inputs):
    dx, dgamma = session.run(inputs)
    dx_ref, dgamma_ref = rms_norm_grad_oracle(**inputs)
    assert_close(dx, dx_ref, TOL[F16])
    assert_close(dgamma, dgamma_ref, TOL[F32])
    assert np.asarray(dgamma).dtype == F32


@pytest.mark.skipif(aclnn_emulator.through_cann_ep(), reason="onnxruntime-cann has the CANN EP")
def test_ascend_session_without_cann_runs_on_the_cpu(inputs):
    model = make_op_model(OP, {name: (a.dtype, a.shape) for name, a in inputs.items()}, {})
    with pytest.warns(UserWarning, match="CANNExecutionProvider"):
        session = ort_ascend_ops.make_ascend_session(model)
    assert session.ort.get_providers() == ["CPUExecutionProvider"]
    check_rms_norm_grad(session, inputs)


@pytest.mark.skipif(not aclnn_emulator.through_cann_ep(), reason="needs onnxruntime-cann (.ci/cann-ep)")
def test_ascend_session_runs_on_the_cann_ep(inputs, emulator):
    model = make_op_model(OP, {name: (a.dtype, a.shape) for name, a in inputs.items()}, {})
    session = ort_ascend_ops.make_ascend_session(model)
    assert session.ort.get_providers() == ["CANNExecutionProvider", "CPUExecutionProvider"]
    check_rms_norm_grad(session, inputs)
    # The EP copied the inputs in and the outputs out on its stream, and waited once for the run.
    assert emulator.aclemu_calls(b"aclnnRmsNormGrad") == 1
    assert emulator.aclemu_calls(b"aclrtMemcpyAsync") >= len(inputs) + 2
    assert emulator.aclemu_calls_from(b"aclrtSynchronizeStream", b"libonnxruntime_providers_cann") >= 1
    assert host_waits(emulator) == 0


@pytest.mark.skipif(not aclnn_emulator.through_cann_ep(), reason="needs onnxruntime-cann (.ci/cann-ep)")
def test_cann_graph_mode_hands_our_nodes_to_the_onnx_parser(inputs, emulator):
    """Why ascend_providers refuses enable_cann_graph=1: the EP claims the node in graph mode too,
    but compiles it through CANN's ONNX parser, and our kernel never runs."""
    model = make_op_model(OP, {name: (a.dtype, a.shape) for name, a in inputs.items()}, {})
    session = make_session(model, providers=[("CANNExecutionProvider", {"enable_cann_graph": "1"})])
    assert session.ort.get_providers()[0] == "CANNExecutionProvider"
    with pytest.raises(Fail, match="aclgrphParseONNXFromMem"):
        session.run(inputs)
    assert emulator.aclemu_calls(b"aclnnRmsNormGradGetWorkspaceSize") == 0
