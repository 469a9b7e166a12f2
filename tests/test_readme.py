"""The README's commands work exactly as typed in the root of a fresh clone: its two commands are
what .ci/run (which CI runs in a fresh clone) runs, word for word, and its Python examples run
from the checkout's root."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(language):
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def commands():
    """The two commands of the README's first shell block: main job, tests."""
    lines = [line for line in blocks("sh")[0].splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 2, lines
    return lines


def test_ci_runs_the_readme_commands_word_for_word():
    # .ci/run runs in the root of a fresh clone: the README's main job, then its tests.
    assert [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line in commands()
    ] == commands()


def test_the_readme_python_examples_run_from_the_clone_root():
    # One script, in the README's order (later examples use what earlier ones made), run from the
    # checkout's root as a reader pastes them: the source tree lives under src/, so it cannot
    # shadow the installed package.
    script = "\n".join(blocks("python"))
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
