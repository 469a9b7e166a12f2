import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

# The oracles live beside the tests; the package itself is imported from its installed location.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def rng(request):
    # A different, reproducible stream per test case.
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
