import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from ort_ascend_ops import aclnn_emulator

# The oracles live beside the tests; the package itself is imported from its installed location.
sys.path.insert(0, str(Path(__file__).parent))


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
