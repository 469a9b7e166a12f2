"""The optimizers of ``generate_artifacts``, as ONNX graphs of standard ops: one update per
trainable parameter, written in the order ``torch.optim``'s single-tensor (CPU) implementations
compute it, so that a step equals PyTorch's to float32 rounding."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping

import onnx
from onnx import TensorProto, helper

from ..autodiff import grad_name

_OPSET = 18
# ONNX value names of the optimizer model; the training API binds by them.
LEARNING_RATE = "learning_rate"
STEP = "step"  # int64, the number of the step being taken (1 for the first), as torch counts
METADATA = "ort_ascend_ops.optimizer"


def state_name(parameter: str, state: str) -> str:
    return f"{parameter}.{state}"


def updated(name: str) -> str:
    return f"{name}.updated"


@dataclasses.dataclass(frozen=True)
class AdamW:
    """``torch.optim.AdamW``'s defaults (amsgrad and maximize off)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 1e-2

    states = ("exp_avg", "exp_avg_sq")


@dataclasses.dataclass(frozen=True)
class SGD:
    """``torch.optim.SGD``'s defaults: plain ``p -= lr * g`` unless momentum is asked for."""

    lr: float = 1e-3
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False

    @property
    def states(self) -> tuple[str, ...]:
        return ("momentum_buffer",) if self.momentum else ()


OPTIMIZERS = {cls.__name__: cls for cls in (AdamW, SGD)}


def describe(options: AdamW | SGD) -> str:
    """The optimizer as the model's metadata records it (``from_metadata`` reads it back)."""
    return json.dumps({"type": type(options).__name__, **dataclasses.asdict(options)})


def from_metadata(model: onnx.ModelProto) -> AdamW | SGD:
    recorded = next((p.value for p in model.metadata_props if p.key == METADATA), None)
    if recorded is None:
        raise ValueError(f"not an optimizer model of ort_ascend_ops: no '{METADATA}' metadata")
    fields = json.loads(recorded)
    cls = OPTIMIZERS[fields.pop("type")]
    if "betas" in fields:
        fields["betas"] = tuple(fields["betas"])
    return cls(**fields)


class _Builder:
    """Nodes of the update graph, scalars computed in float64 (as torch computes them in
    Python) and rounded to float32 once."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self._count = 0

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        self._count += 1
        out = f"_{op_type.lower()}{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, value: float, elem: int = TensorProto.DOUBLE) -> str:
        return self.op("Constant", value=helper.make_tensor("value", elem, [], [value]))

    def to_float(self, value: str) -> str:
        return self.op("Cast", value, to=TensorProto.FLOAT)

    def lerp(self, start: str, end: str, weight: float) -> str:
        """``torch.lerp`` for a weight below 0.5: start + weight * (end - start)."""
        f32 = TensorProto.FLOAT
        return self.op("Add", start, self.op("Mul", self.op("Sub", end, start), self.const(weight, f32)))


def _adamw_scalars(b: _Builder, o: AdamW, lr: str, t: str) -> dict[str, str]:
    one = b.const(1.0)
    beta1, beta2 = (b.const(beta) for beta in o.betas)
    correction1 = b.op("Sub", one, b.op("Pow", beta1, t))
    correction2 = b.op("Sub", one, b.op("Pow", beta2, t))
    return {
        "decay": b.to_float(b.op("Sub", one, b.op("Mul", lr, b.const(o.weight_decay)))),
        "step_size": b.to_float(b.op("Div", lr, correction1)),
        "correction2_sqrt": b.to_float(b.op("Sqrt", correction2)),
    }


def _adamw(
    b: _Builder, o: AdamW, s: dict[str, str], p: str, g: str, states: dict[str, str]
) -> dict[str, str]:
    f32 = TensorProto.FLOAT
    beta1, beta2 = o.betas
    m, v = states["exp_avg"], states["exp_avg_sq"]
    decayed = b.op("Mul", p, s["decay"])
    m_new = b.lerp(m, g, 1 - beta1)
    v_new = b.op(
        "Add", b.op("Mul", v, b.const(beta2, f32)), b.op("Mul", b.op("Mul", g, g), b.const(1 - beta2, f32))
    )
    denom = b.op("Add", b.op("Div", b.op("Sqrt", v_new), s["correction2_sqrt"]), b.const(o.eps, f32))
    p_new = b.op("Sub", decayed, b.op("Mul", b.op("Div", m_new, denom), s["step_size"]))
    return {p: p_new, m: m_new, v: v_new}


def _sgd_scalars(b: _Builder, o: SGD, lr: str, t: str) -> dict[str, str]:
    return {"lr": b.to_float(lr), "first": b.op("Equal", t, b.const(1.0))}


def _sgd(b: _Builder, o: SGD, s: dict[str, str], p: str, g: str, states: dict[str, str]) -> dict[str, str]:
    f32 = TensorProto.FLOAT
    if o.weight_decay:
        g = b.op("Add", g, b.op("Mul", p, b.const(o.weight_decay, f32)))
    updates = {}
    if o.momentum:
        buffer = states["momentum_buffer"]
        blended = b.op(
            "Add",
            b.op("Mul", buffer, b.const(o.momentum, f32)),
            b.op("Mul", g, b.const(1 - o.dampening, f32)),
        )
        # torch starts the buffer at the first gradient itself, not at (1 - dampening) times it.
        buffer_new = b.op("Where", s["first"], g, blended)
        updates[buffer] = buffer_new
        g = b.op("Add", g, b.op("Mul", buffer_new, b.const(o.momentum, f32))) if o.nesterov else buffer_new
    updates[p] = b.op("Sub", p, b.op("Mul", g, s["lr"]))
    return updates


# Per optimizer: the scalars of a step (once per graph), then the update of one parameter.
_UPDATES: dict[type, tuple[Callable[..., dict[str, str]], Callable[..., dict[str, str]]]] = {
    AdamW: (_adamw_scalars, _adamw),
    SGD: (_sgd_scalars, _sgd),
}


def optimizer_model(parameters: Mapping[str, onnx.TypeProto], options: AdamW | SGD) -> onnx.ModelProto:
    """The update of every parameter in ``parameters`` (name -> float32 tensor type): inputs
    ``learning_rate`` (float32 scalar), ``step`` (int64 scalar), then per parameter its value, its
    gradient (``<name>_grad``) and its states (``.exp_avg`` ...); outputs each of those but the gradient,
    ``.updated``."""
    b = _Builder()
    lr = b.op("Cast", LEARNING_RATE, to=TensorProto.DOUBLE)
    t = b.op("Cast", STEP, to=TensorProto.DOUBLE)
    scalar_f32 = helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    inputs = [
        helper.make_value_info(LEARNING_RATE, scalar_f32),
        helper.make_value_info(STEP, helper.make_tensor_type_proto(TensorProto.INT64, [])),
    ]
    outputs, renamed = [], {}
    step_scalars, update = _UPDATES[type(options)]
    scalars = step_scalars(b, options, lr, t)
    for name, value_type in parameters.items():
        if value_type.tensor_type.elem_type != TensorProto.FLOAT:
            raise ValueError(f"the optimizers update float32 parameters; '{name}' is not float32")
        states = {s: state_name(name, s) for s in options.states}
        ins = [name, grad_name(name), *states.values()]
        inputs += [helper.make_value_info(i, value_type) for i in ins]
        news = update(b, options, scalars, name, grad_name(name), states)
        for old in [name, *states.values()]:
            renamed[news[old]] = updated(old)
            outputs.append(helper.make_value_info(updated(old), value_type))
    # Each update's last node writes the output itself: an Identity would copy the tensor again.
    for node in b.nodes:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        node.output[:] = [renamed.get(o, o) for o in node.output]
    graph = helper.make_graph(b.nodes, f"{type(options).__name__}_step", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], ir_version=10)
    model.metadata_props.add(key=METADATA, value=describe(options))
    onnx.checker.check_model(model, full_check=True)
    return model
