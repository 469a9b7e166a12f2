"""Runs ``python -m ort_ascend_ops`` with an audit hook that records every file this rank opens
for writing, or renames, under $AUDIT_OUT, into $AUDIT_LOG.rank<RANK>: the proof that a rank
other than 0 wrote nothing into --out. $AUDIT_PACKAGE_VERSION, where set, is the version this
rank reports for ort_ascend_ops (a rank of another release)."""

import importlib.metadata
import os
import runpy
import sys

if "AUDIT_PACKAGE_VERSION" in os.environ:
    _version = importlib.metadata.version
    importlib.metadata.version = lambda name: (
        os.environ["AUDIT_PACKAGE_VERSION"] if name == "ort_ascend_ops" else _version(name)
    )

out, log = (
    os.path.realpath(os.environ["AUDIT_OUT"]),
    f"{os.environ['AUDIT_LOG']}.rank{os.environ.get('RANK', '0')}",
)
written: list[str] = []


def hook(event, args):
    path = None
    if (
        event == "open"
        and isinstance(args[0], str | bytes | os.PathLike)
        and args[1]
        and set(str(args[1])) & set("wax+")
    ):
        path = args[0]
    elif event in ("os.rename", "os.replace", "os.mkdir"):
        path = args[1] if event != "os.mkdir" else args[0]
    if path is not None and os.path.realpath(os.fsdecode(path)).startswith(out):
        written.append(os.fsdecode(path))


sys.addaudithook(hook)
sys.argv = ["ort_ascend_ops", *sys.argv[1:]]
try:
    runpy.run_module("ort_ascend_ops", run_name="__main__")
finally:
    with open(log, "w") as f:
        f.write("\n".join(written))
