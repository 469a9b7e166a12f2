"""The package type-checks: mypy over src/ort_ascend_ops with pyproject.toml's [tool.mypy]
settings (mypy is in the ``test`` extra)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_mypy_finds_no_errors():
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
