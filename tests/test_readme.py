"""The README's commands work exactly as typed in the root of a fresh clone: the main job (its
first command, which builds the package in a new virtual environment), the test command (what
.ci/run runs, word for word) and every Python example."""

import re
import shutil
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


def fresh_clone(tmp_path):
    """What `git clone` of this checkout gives (its committed state), or, outside a git work tree,
    a copy without what .gitignore names (builds, virtual environments, caches)."""
    clone = tmp_path / "clone"
    if (ROOT / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    else:
        ignored = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()]
        patterns = [p.rsplit("/", 1)[-1] for p in ignored if p and not p.startswith("#")]
        shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(".git", *patterns))
    return clone


def test_ci_runs_the_readme_test_command():
    assert commands()[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_readme_main_command_works_as_typed_in_a_fresh_clone(tmp_path):
    clone = fresh_clone(tmp_path)
    result = subprocess.run(["bash", "-c", commands()[0]], cwd=clone, capture_output=True, text=True)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert result.stdout.strip().splitlines()[-1].startswith("verdict: PASS"), out[-4000:]


def test_the_readme_python_examples_run_from_the_clone_root():
    # One script, in the README's order (later examples use what earlier ones made), run from the
    # checkout's root as a reader pastes them: the source tree lives under src/, so it cannot
    # shadow the installed package.
    script = "\n".join(blocks("python"))
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
