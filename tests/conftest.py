import os
import sys
import zlib
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, settings

from ort_ascend_ops import aclnn_emulator

# The fuzz tests' profiles: "ci" (the default) replays the same derandomized corpus every run;
# "nightly" (--hypothesis-profile=nightly) draws thousands of fresh cases per op and test.
_FUZZ_HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile(
    "ci", max_examples=200, derandomize=True, database=None, deadline=None, suppress_health_check=_FUZZ_HEALTH
)
settings.register_profile("nightly", max_examples=3000, deadline=None, suppress_health_check=_FUZZ_HEALTH)
# .ci/sanitize: the first 60 cases of the same corpus, for memory errors (the suite checks all 200).
settings.register_profile(
    "sanitize",
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=_FUZZ_HEALTH,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_NO_ARENA = bool(os.environ.get("ORT_ASCEND_OPS_TEST_NO_ARENA"))  # .ci/sanitize


class _TestSessionOptions(ort.SessionOptions):
    """Every session the tests make. Its idle intra-op threads sleep rather than spin (ONNX
    Runtime's default): pytest runs a worker per core, and threads spinning in one worker's
    sessions take the cores the other worker's kernels run on. The results are the same bits.
    Under the sanitizer job, every tensor is an allocation of its own (no arena)."""

    def __init__(self):
        super().__init__()
        self.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if _NO_ARENA:
            self.enable_cpu_mem_arena = False


ort.SessionOptions = _TestSessionOptions
if _NO_ARENA:
    # Its output is not captured (sanitizer reports must reach the log): keep ORT's own error
    # lines for the thousands of expected failures out of it.
    ort.set_default_logger_severity(4)

# The oracles live beside the tests; the package itself is imported from its installed location.
sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "reference_functions: runs the reference functions alone, no native code of ours"
    )
    config.addinivalue_line(
        "markers",
        "slow: left out of the test command (addopts), run by hand with -m slow; docs give their figures",
    )


@pytest.fixture
def rng(request):
    # A different, reproducible stream per test case.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def emulator():
    """The aclnn host emulator's controls, reset for the test; the test must leave no aclTensor
    or executor alive."""
    aclnn_emulator.activate()
    controls = aclnn_emulator.control()
    controls.aclemu_reset()
    yield controls
    assert (controls.aclemu_live_tensors(), controls.aclemu_live_executors()) == (0, 0)
    controls.aclemu_reset()


@pytest.fixture
def command(capsys):
    """The command line's ``main`` in this process, where a child process would only add seconds
    of start-up (the tests that kill, limit or time a run keep their child): ``command("train",
    ...)`` gives the exit code (argparse's refusals included) and what it wrote to stderr."""
    from ort_ascend_ops.__main__ import main

    def run(*args) -> tuple[int, str]:
        try:
            code = main([*map(str, args)])
        except SystemExit as e:
            code = e.code
        return code, capsys.readouterr().err

    return run
