"""The README's Layout table tells the truth: each per-op and per-family file it names exists for
every op and family of the schemas, and every file in the folders it names is one of an op's, of a
family's, or of those it lists as shared. A new op that skips a layer, or a file the table does not
account for, fails here. tests/ is held to its per-op and per-family files only: its other files
are cross-cutting by design (they run over every op from the case tables). The packages above the
ops (the differentiator, the export, the runtime, the examples) hold exactly the files their
table lists."""

import re
import subprocess
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPS = sorted(p.stem for p in (ROOT / "schemas").glob("*.toml"))
# An op's family: the forward op its name extends (rms_norm_grad's is rms_norm, and
# grouped_matmul_weight_grad's grouped_matmul); an op no other extends is a family of its own.
FORWARD = [op for op in OPS if not op.endswith("_grad")]


def family(op):
    return max((f for f in FORWARD if op == f or op.startswith(f"{f}_")), key=len, default=op)


FAMILIES = sorted({family(op) for op in OPS})
# The families whose rows hold only some of them: the gradient rules and fusions are those of
# differentiated forward ops (an optimizer op has neither), the shape rules those of `rule:` shapes.
DIFFERENTIATED = sorted({family(op) for op in OPS if op.endswith("_grad")})
WITH_SHAPE_RULES = sorted(
    {family(op) for op in OPS if 'shape = "rule:' in (ROOT / "schemas" / f"{op}.toml").read_text()}
)
FAMILIES_OF = {
    "src/ort_ascend_ops/autodiff/rules": DIFFERENTIATED,
    "src/ort_ascend_ops/fusion": DIFFERENTIATED,
    "src/ort_ascend_ops/opschema/shape_rules": WITH_SHAPE_RULES,
}
CROSS_CUTTING = {"tests"}  # folders whose other files serve every op


def tracked_files():
    listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(listing.stdout.split())


def layout_rows():
    """(layer, per-op patterns, per-family patterns, shared names) of each row of the table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0].split("| package |", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| layer")]
    for line in rows:
        layer, per_op, per_family, shared, _ = (cell.strip() for cell in line.strip("|").split("|"))
        ticked = [re.findall(r"`([^`]+)`", cell) for cell in (per_op, per_family, shared)]
        yield layer, *ticked


ROWS = list(layout_rows())


def package_rows():
    """(package folder, the files its row lists) of the table of packages above the ops."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("| package | what it holds | files |", 1)[1]
    for line in table.splitlines():
        if line.startswith("| `"):
            folder, _, files = (cell.strip() for cell in line.strip("|").split("|"))
            yield folder.strip("`").rstrip("/"), re.findall(r"`([\w./]+)`", files)


PACKAGES = list(package_rows())


def test_the_table_has_every_layer():
    assert len(ROWS) >= 10, "README's Layout table not found or cut short"


@pytest.mark.parametrize("layer, per_op, per_family, shared", ROWS, ids=[r[0].split(" (")[0] for r in ROWS])
def test_layer_files_are_as_the_table_says(layer, per_op, per_family, shared):
    files = tracked_files()
    expanded = [p.replace("<op>", op) for p in per_op for op in OPS]
    families = FAMILIES_OF.get(str(Path((per_family or per_op or [""])[0]).parent), FAMILIES)
    expanded += [p.replace("<family>", family) for p in per_family for family in families]
    # A pattern without a wildcard names a file each op (or family) must have.
    missing = [p for p in expanded if "*" not in p and p not in files]
    assert not missing, f"{layer}: the table names files that do not exist: {missing}"

    folder = str(Path((per_op or per_family)[0]).parent)
    unknown = [name for name in shared if f"{folder}/{name}" not in files]
    assert not unknown, f"{layer}: shared files the table lists are not in {folder}/: {unknown}"
    if folder in CROSS_CUTTING:
        return
    in_folder = {f for f in files if str(Path(f).parent) == folder}
    accounted = {f for f in in_folder if any(fnmatch(f, p) for p in expanded)}
    accounted |= {f"{folder}/{name}" for name in shared}
    assert in_folder <= accounted, f"{layer}: files in {folder}/ the table does not account for: " + str(
        sorted(in_folder - accounted)
    )


def test_the_packages_table_has_every_package():
    assert {folder for folder, _ in PACKAGES} >= {
        "src/ort_ascend_ops/autodiff",
        "src/ort_ascend_ops/export",
        "src/ort_ascend_ops/training",
        "src/ort_ascend_ops/training/api",
        "src/ort_ascend_ops/trainer",
    }


@pytest.mark.parametrize("folder, listed", PACKAGES, ids=[p[0].rsplit("/", 1)[1] for p in PACKAGES])
def test_package_files_are_as_the_table_says(folder, listed):
    files = {f for f in tracked_files() if str(Path(f).parent) == folder}
    named = {f"{folder}/{name}" for name in listed if name.endswith(".py")}
    assert named <= files, f"{folder}: the table names files that do not exist: {sorted(named - files)}"
    assert files <= named, f"{folder}: files the table does not list: {sorted(files - named)}"
    for sub in (name for name in listed if name.endswith("/")):
        assert any(f.startswith(f"{folder}/{sub}") for f in tracked_files()), f"{folder}/{sub}"


RUNTIME = [
    *sorted((ROOT / "src/ort_ascend_ops/training/api").glob("*.py")),
    *sorted((ROOT / "src/ort_ascend_ops/trainer").glob("*.py")),
]
VALUE_OWNER = ROOT / "src/ort_ascend_ops/training/api/checkpoint_state.py"


@pytest.mark.parametrize("path", RUNTIME, ids=[p.name for p in RUNTIME])
def test_only_the_checkpoint_state_touches_the_values_memory(path):
    """Where the training state's values live is the checkpoint state's concern alone: no other
    module of the runtime makes, views or copies an OrtValue's memory (the NPU's device memory
    then changes one module)."""
    if path == VALUE_OWNER:
        return
    touching = re.findall(
        r"\b(ortvalue_memory|_as_numpy|ortvalue_copy|ortvalue_view|update_inplace|ortvalue_from_\w+)\b|\.numpy\(\)",
        path.read_text(),
    )
    assert not touching, f"{path.name} touches values' memory: {touching}"


@pytest.mark.parametrize("path", RUNTIME, ids=[p.name for p in RUNTIME])
def test_no_runtime_object_reaches_into_anothers_attributes(path):
    """Each object is given what it needs through public names: private attributes are read on
    ``self`` (and torch's one private getter of the rendezvous store) only."""
    reached = [
        m.group(0)
        for m in re.finditer(r"\b(\w+)\._[a-z]\w*", path.read_text())
        if m.group(1) not in ("self", "cls", "distributed_c10d")
        and not (path == VALUE_OWNER and m.group(1) in ("parameter", "parameters"))
    ]
    assert not reached, f"{path.name} reaches into private attributes: {reached}"
