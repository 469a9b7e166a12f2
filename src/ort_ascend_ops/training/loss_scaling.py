"""The graphs of dynamic loss scaling (``torch.amp.GradScaler``'s), which ``api.LossScaler`` runs
where its state lives, on the NPU included: the unscaling of the gradients with their inf/NaN
test, and the update of the scale and its growth tracker after a step."""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper

from ..domain import DOMAIN, VERSION
from ..reference.portable import attach_functions
from .precision import LOSS_SCALE

_OPSET = 18
# ONNX value names; the training API binds by them. The scale is the training model's input.
SCALE, GROWTH_TRACKER, FOUND_INF, FOUND_BEFORE = LOSS_SCALE, "growth_tracker", "found_inf", "found_before"
NEW_SCALE, NEW_GROWTH_TRACKER = "new_loss_scale", "new_growth_tracker"
RANKS, SEED = "ranks", "seed"


def _model(nodes, name, inputs, outputs, opsets) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = attach_functions(helper.make_model(graph, opset_imports=opsets, ir_version=10))
    onnx.checker.check_model(model, full_check=True)
    return model


def unscale_model(types: list[onnx.TypeProto]) -> onnx.ModelProto:
    """``GradScaler.unscale_`` over gradient buffers ``g0, g1, ...`` of ``types`` (one per element
    type, each holding every gradient of its type): one ``NonFiniteCheckAndUnscale`` per buffer,
    each times the reciprocal of ``loss_scale`` as ``unscaled<i>`` (may be bound to ``g<i>``'s
    buffer), the flags chained from ``found_before`` to ``found_inf``, 1.0 where any gradient holds
    an inf or a NaN. The reciprocal is float32's, which equals torch's float64 one rounded to
    float32 (``scale.double().reciprocal().float()``): double rounding of a quotient from 53 bits
    to 24 is exact (53 >= 2 * 24 + 2)."""
    scalar = helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    inputs = [helper.make_value_info(SCALE, scalar), helper.make_value_info(FOUND_BEFORE, scalar)]
    inputs += [helper.make_value_info(f"g{i}", t) for i, t in enumerate(types)]
    outputs = [helper.make_value_info(FOUND_INF, scalar)]
    nodes, found = [helper.make_node("Reciprocal", [SCALE], ["inv_scale"])], FOUND_BEFORE
    for i, t in enumerate(types):
        after = FOUND_INF if i == len(types) - 1 else f"found{i}"
        nodes.append(
            helper.make_node(
                "NonFiniteCheckAndUnscale",
                [f"g{i}", found, "inv_scale"],
                [f"unscaled{i}", after],
                domain=DOMAIN,
            )
        )
        outputs.append(helper.make_value_info(f"unscaled{i}", t))
        found = after
    opsets = [helper.make_opsetid("", _OPSET), helper.make_opsetid(DOMAIN, VERSION)]
    return _model(nodes, "unscale", inputs, outputs, opsets)


def seed_model() -> onnx.ModelProto:
    """The scale each of ``ranks`` data-parallel processes seeds its backward with: ``loss_scale /
    ranks`` in float32, correctly rounded (float32's division, which equals the float64 quotient
    rounded to float32 for the same reason as the reciprocal above)."""
    f32 = TensorProto.FLOAT
    return _model(
        [helper.make_node("Div", [SCALE, RANKS], [SEED])],
        "loss_scale_seed",
        [helper.make_tensor_value_info(SCALE, f32, []), helper.make_tensor_value_info(RANKS, f32, [])],
        [helper.make_tensor_value_info(SEED, f32, [])],
        [helper.make_opsetid("", _OPSET)],
    )


def update_model(growth_factor: float, backoff_factor: float, growth_interval: int) -> onnx.ModelProto:
    """``GradScaler.update`` (torch's ``_amp_update_scale_``) of the float32 ``loss_scale`` and the
    int32 ``growth_tracker`` from ``found_inf``: a step that found an inf or a NaN (any nonzero
    flag) multiplies the scale by ``backoff_factor`` and zeroes the tracker; otherwise the tracker
    counts it, and at ``growth_interval`` the scale is multiplied by ``growth_factor`` (kept where
    that overflows float32, as torch keeps it) and the tracker zeroed. The new values may be bound
    to the old ones' buffers: every node reading an input is upstream of the one writing its new
    value. The factors are float32 constants, as the state is float32."""
    f32, i32 = TensorProto.FLOAT, TensorProto.INT32
    nodes: list[onnx.NodeProto] = []

    def op(op_type: str, *inputs: str) -> str:
        out = f"_{op_type.lower()}{len(nodes)}"
        nodes.append(helper.make_node(op_type, list(inputs), [out]))
        return out

    def const(value, elem: int) -> str:
        out = f"_const{len(nodes)}"
        nodes.append(
            helper.make_node("Constant", [], [out], value=helper.make_tensor(out, elem, [], [value]))
        )
        return out

    clean = op("Equal", FOUND_INF, const(0.0, f32))
    successful = op("Add", GROWTH_TRACKER, const(1, i32))
    due = op("Equal", successful, const(growth_interval, i32))
    grown = op("Mul", SCALE, const(growth_factor, f32))
    grown_if_finite = op("Where", op("Less", grown, const(math.inf, f32)), grown, SCALE)
    kept_or_grown = op("Where", due, grown_if_finite, SCALE)
    backed_off = op("Mul", SCALE, const(backoff_factor, f32))
    zero = const(0, i32)
    nodes.append(helper.make_node("Where", [clean, kept_or_grown, backed_off], [NEW_SCALE]))
    nodes.append(
        helper.make_node("Where", [clean, op("Where", due, zero, successful), zero], [NEW_GROWTH_TRACKER])
    )
    inputs = [
        helper.make_tensor_value_info(SCALE, f32, []),
        helper.make_tensor_value_info(GROWTH_TRACKER, i32, []),
        helper.make_tensor_value_info(FOUND_INF, f32, []),
    ]
    outputs = [
        helper.make_tensor_value_info(NEW_SCALE, f32, []),
        helper.make_tensor_value_info(NEW_GROWTH_TRACKER, i32, []),
    ]
    return _model(nodes, "update_loss_scale", inputs, outputs, [helper.make_opsetid("", _OPSET)])
