"""The list of standard ops a session for the NPU moves (``cann_ep.STANDARD_OPS``) is the list the
family tests run through the native rows: each case asserts that its node moved and ran its aclnn
function (aclnn_standard.check), so an op listed without a row, or a row without a case, fails
here."""

import importlib
from pathlib import Path

from aclnn_standard import Case

from ort_ascend_ops.cann_ep import STANDARD_OPS

FAMILIES = sorted(
    p.stem for p in Path(__file__).parent.glob("test_aclnn_standard_*.py") if p.stem != Path(__file__).stem
)


def cases_of(module) -> set[str]:
    ops = set()
    for value in vars(module).values():
        items = value if isinstance(value, list | tuple) else [value]
        ops |= {item.op for item in items if isinstance(item, Case)}
    return ops


def test_every_listed_op_has_cases_and_every_case_is_listed():
    tested = set().union(*(cases_of(importlib.import_module(name)) for name in FAMILIES))
    assert sorted(STANDARD_OPS - tested) == [], "listed in STANDARD_OPS without a case"
    assert sorted(tested - STANDARD_OPS) == [], "cases of ops STANDARD_OPS does not list"
