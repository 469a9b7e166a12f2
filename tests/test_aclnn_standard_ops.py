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


def test_a_second_pass_moves_only_the_nodes_added_since():
    """``widen_bfloat16`` runs after the rewrite and adds default-domain Casts around what no row
    takes: a second ``to_aclnn_domain`` moves them, reusing the first pass's functions (ONNX
    refuses a function defined twice)."""
    import onnx
    from onnx import TensorProto, helper

    from ort_ascend_ops.cann_ep.aclnn_ops import to_aclnn_domain
    from ort_ascend_ops.domain import ACLNN_DOMAIN

    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
            helper.make_node("Softplus", ["c"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    once = to_aclnn_domain(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    assert to_aclnn_domain(once) is once  # nothing new: the model itself
    later = onnx.ModelProto()
    later.CopyFrom(once)
    later.graph.node.append(helper.make_node("Cast", ["y"], ["z"], to=TensorProto.BFLOAT16))
    twice = to_aclnn_domain(later)
    assert [n.domain for n in twice.graph.node] == [ACLNN_DOMAIN, "", ACLNN_DOMAIN]
    assert [(f.name, f.overload) for f in twice.functions] == [(f.name, f.overload) for f in once.functions]
    assert [o.domain for o in twice.opset_import].count(ACLNN_DOMAIN) == 1
    onnx.checker.check_model(twice)
