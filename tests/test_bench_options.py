"""``bench`` refuses a bad option before anything runs: exit status 2, a message naming the option
and the rule, no traceback, nothing timed (no heading, no row). In process (``main(argv)`` never
re-executes itself), but for the one check of the command itself."""

import subprocess
import sys

import pytest

from ort_ascend_ops.__main__ import main

MISSING = "no-such-folder"  # under the test's tmp_path


def _refusal(argv: list[str], capsys) -> str:
    """What ``main(argv)`` said on stderr, having exited 2 with nothing on stdout."""
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's refusal
        code = exit.code
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    return err


# Each run would be a short one if it were not refused.
OPS = ["rms_norm", "--quick", "--threads", "1"]
TRAINING = ["training_step", "byte_llama", "--quick", "--threads", "1"]


@pytest.mark.parametrize(
    "argv, named, rule",
    [
        (["rms_norm", "--quick", "--threads", "abc"], "argument --threads", "integers of at least 1"),
        (["rms_norm", "--quick", "--threads", "0"], "argument --threads", "integers of at least 1"),
        (["rms_norm", "--quick", "--threads", "-2"], "argument --threads", "integers of at least 1"),
        (["rms_norm", "--quick", "--threads", "1,"], "argument --threads", "integers of at least 1"),
        ([*OPS, "--repeats", "0"], "argument --repeats", "an integer of at least 1"),
        ([*OPS, "--repeats", "many"], "argument --repeats", "an integer of at least 1"),
        (
            [*OPS, "--dtypes", "float32,float8"],
            "argument --dtypes",
            "['float8']; choose from float32, bfloat16",
        ),
        (["training_step", "--quick", "--nproc", "0"], "argument --nproc", "integers of at least 1"),
        ([*TRAINING, "--precision", "fp8"], "argument --precision", "choose from fp32, bf16-mixed"),
        (
            [*OPS, "--json", f"{MISSING}/bench.json"],
            "argument --json",
            f"the folder {MISSING} does not exist",
        ),
        ([*OPS, "--markdown", f"{MISSING}/bench.md"], "argument --markdown", "does not exist"),
        ([*OPS, "--png", f"{MISSING}/bench.png"], "argument --png", "does not exist"),
        ([*TRAINING, "--json", f"{MISSING}/bench.json"], "argument --json", "does not exist"),
        ([*OPS, "--json", "."], "argument --json", "is a folder, not a file"),
        ([*OPS, "--json", "/proc/bench.json"], "argument --json", "the folder /proc is not writable"),
        ([*TRAINING, "--peer-venv", MISSING], "argument --peer-venv", "bin/python does not exist"),
        (["no_such_op", "--quick"], "unknown benchmarks ['no_such_op']", "'cliffs'"),
        (["training_step", "llama1", "--quick"], "unknown training_step configs ['llama1']", "'byte_llama'"),
        ([*OPS, "--nproc", "2"], "--nproc does not apply", "per-op benchmarks"),
        ([*OPS, "--precision", "bf16-mixed"], "--precision does not apply", "per-op benchmarks"),
        ([*TRAINING, "--dtypes", "bfloat16"], "--dtypes does not apply", "training_step"),
        (
            ["training_step", "--quick", "--nproc", "1", "--threads", "1"],
            "--threads does not apply",
            "--nproc",
        ),
        (["cliffs", "--quick", "--png", "cliffs.png"], "--png", "cliffs alone has none"),
        (
            ["training_step", "--quick", "--recompute", "--threads", "1"],
            "--threads does not apply",
            "--recompute",
        ),
        (
            ["training_step", "llama512", "--recompute"],
            "unknown training_step configs ['llama512']",
            "'vocab128k'",
        ),
        ([*OPS, "--recompute"], "--recompute does not apply", "per-op benchmarks"),
        (["fine_tuning", "lora", "--threads", "1"], "--threads does not apply", "fine_tuning"),
        (["fine_tuning", "qlora", "--quick"], "unknown fine_tuning parts ['qlora']", "'packing'"),
    ],
)
def test_a_bad_option_is_refused_before_anything_runs(argv, named, rule, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the relative paths: MISSING, and the files that must not appear
    err = _refusal(["bench", *argv], capsys)
    assert named in err and rule in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "bad, said",
    [
        (
            ["--json", "{folder}/bench.json"],
            "argument --json: {folder}/bench.json: the folder {folder} does not exist",
        ),
        (["--threads", "abc"], "argument --threads: 'abc': want comma-separated integers of at least 1"),
        (["--repeats", "0"], "argument --repeats: '0': want an integer of at least 1"),
    ],
    ids=["json-folder", "threads", "repeats"],
)
def test_the_command_refuses_a_bad_option_before_the_run(bad, said, tmp_path):
    # The user's cases: a traceback (or the whole run, then a traceback from the JSON's open()).
    # As a command, which re-executes itself first (see _bench): the refusal comes before that too.
    folder = tmp_path / MISSING
    argv = ["bench", "rms_norm", "--quick", "--threads", "1", *(a.format(folder=folder) for a in bad)]
    done = subprocess.run([sys.executable, "-m", "ort_ascend_ops", *argv], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert said.format(folder=folder) in done.stderr
    assert "Traceback" not in done.stderr
