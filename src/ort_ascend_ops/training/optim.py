"""The optimizers of ``generate_artifacts``: one update per trainable parameter, computed in the
order ``torch.optim``'s single-tensor (CPU) implementations compute it, so that a step equals
PyTorch's to float32 rounding. AdamW is one ``ApplyAdamW`` node per parameter (its reference
function travels with the model); SGD is a graph of standard ops.

``in_place`` turns an AdamW model into the form the training API runs natively, where each update
lands in its inputs' buffers. Why that is safe, from ONNX Runtime's allocation planner
(``FindReusableInput``): an output the kernel declares an alias of an input
(``OrtCustomOp::GetAliasMap``) *must* reuse that input's buffer, a graph input's included, unless
the output is a graph output (those are always allocated for the caller). So the in-place model
has no updated tensors among its outputs: each ``ApplyAdamW``'s new parameter feeds a ``Size``,
and the graph returns the number of elements updated. ``ApplyAdamW`` reads each element before it
writes it, and in this graph nothing else reads a parameter or a state, so no reader can see a
half-updated tensor. The planner honours aliases in sequential execution only, and an inlined reference function
has none: the training API runs this form in sessions of its own options (the library registered,
sequential), and the functional model (a second buffer per tensor) otherwise. The in-place form
carries no function, so that a session without the library fails instead of dropping updates.

SGD's graph of standard ops runs with each update's output bound (IOBinding) to the buffer it
replaces, on any session: ONNX Runtime writes a bound graph output into the memory given and
never reuses a graph input's buffer for anything else. That is safe for the graph ``_sgd``
builds: the node writing a tensor's update is elementwise over same-shaped operands (each
element read before its own write), and every other node reading that tensor (the weight
decay's product, the momentum's) is upstream of it. ``OWN_BUFFERS`` names the optimizers whose
graphs keep to that."""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable, Mapping

import onnx
from onnx import TensorProto, helper

from ..autodiff import grad_name
from ..domain import DOMAIN, VERSION
from ..reference.portable import attach_functions

_OPSET = 18
# ONNX value names of the optimizer model; the training API binds by them.
LEARNING_RATE = "learning_rate"
STEP = "step"  # int64, the number of the step being taken (1 for the first), as torch counts
METADATA = "ort_ascend_ops.optimizer"
UPDATED_ELEMENTS = "updated_elements"  # the in-place model's one output


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


def _adamw(b: _Builder, o: AdamW, lr: str, t: str, p: str, g: str, states: dict[str, str]) -> dict[str, str]:
    m, v = states["exp_avg"], states["exp_avg_sq"]
    outputs = [f"{x}_new" for x in (p, m, v)]  # renamed to the graph's outputs
    b.nodes.append(
        helper.make_node(
            "ApplyAdamW",
            [p, m, v, g, STEP, LEARNING_RATE],
            outputs,
            domain=DOMAIN,
            beta1=o.betas[0],
            beta2=o.betas[1],
            weight_decay=o.weight_decay,
            eps=o.eps,
        )
    )
    return dict(zip((p, m, v), outputs, strict=True))


def _sgd(b: _Builder, o: SGD, lr: str, t: str, p: str, g: str, states: dict[str, str]) -> dict[str, str]:
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
        buffer_new = b.op("Where", b.op("Equal", t, b.const(1.0)), g, blended)
        updates[buffer] = buffer_new
        g = b.op("Add", g, b.op("Mul", buffer_new, b.const(o.momentum, f32))) if o.nesterov else buffer_new
    updates[p] = b.op("Sub", p, b.op("Mul", g, b.to_float(lr)))
    return updates


# Per optimizer, the update of one parameter: {old value: new value}.
_UPDATES: dict[type, Callable[..., dict[str, str]]] = {AdamW: _adamw, SGD: _sgd}
# The optimizers whose functional graph may write each update into the buffer it replaces (the
# module's doc says why).
OWN_BUFFERS = frozenset({SGD})


def optimizer_model(parameters: Mapping[str, onnx.TypeProto], options: AdamW | SGD) -> onnx.ModelProto:
    """The update of every parameter in ``parameters`` (name -> float32 tensor type): inputs
    ``learning_rate`` (float32 scalar), ``step`` (int64 scalar), then per parameter its value, its
    gradient (``<name>_grad``) and its states (``.exp_avg`` ...); outputs each of those but the gradient,
    ``.updated``."""
    b = _Builder()
    # SGD's scalars in float64, as torch computes them in Python (ApplyAdamW computes its own).
    lr, t = LEARNING_RATE, STEP
    if isinstance(options, SGD):
        lr = b.op("Cast", LEARNING_RATE, to=TensorProto.DOUBLE)
        t = b.op("Cast", STEP, to=TensorProto.DOUBLE)
    scalar_f32 = helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    inputs = [
        helper.make_value_info(LEARNING_RATE, scalar_f32),
        helper.make_value_info(STEP, helper.make_tensor_type_proto(TensorProto.INT64, [])),
    ]
    outputs, renamed = [], {}
    update = _UPDATES[type(options)]
    for name, value_type in parameters.items():
        if value_type.tensor_type.elem_type != TensorProto.FLOAT:
            raise ValueError(f"the optimizers update float32 parameters; '{name}' is not float32")
        states = {s: state_name(name, s) for s in options.states}
        ins = [name, grad_name(name), *states.values()]
        inputs += [helper.make_value_info(i, value_type) for i in ins]
        news = update(b, options, lr, t, name, grad_name(name), states)
        for old in [name, *states.values()]:
            renamed[news[old]] = updated(old)
            outputs.append(helper.make_value_info(updated(old), value_type))
    # Each update's last node writes the output itself: an Identity would copy the tensor again.
    for node in b.nodes:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        node.output[:] = [renamed.get(o, o) for o in node.output]
    graph = helper.make_graph(b.nodes, f"{type(options).__name__}_step", inputs, outputs)
    opsets = [helper.make_opsetid("", _OPSET), helper.make_opsetid(DOMAIN, VERSION)]
    model = attach_functions(helper.make_model(graph, opset_imports=opsets, ir_version=10))
    model.metadata_props.add(key=METADATA, value=describe(options))
    onnx.checker.check_model(model, full_check=True)
    return model


def in_place(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model``'s updates written into their inputs (see the module's doc): a copy whose one
    output is ``updated_elements`` (int64, the parameters' element count); None for a model with
    other nodes than ``ApplyAdamW`` (SGD's) or one where something else reads a parameter or
    state."""
    nodes = list(model.graph.node)
    if not nodes or any((n.domain, n.op_type) != (DOMAIN, "ApplyAdamW") for n in nodes):
        return None
    read = collections.Counter(i for n in nodes for i in n.input)
    if any(read[name] > 1 for n in nodes for name in n.input[:3]):
        return None  # a parameter or state read twice: a reader could see it half updated
    b = _Builder()
    sizes = [b.op("Size", n.output[0]) for n in nodes]
    for size in sizes[1:]:
        sizes[0] = b.op("Add", sizes[0], size)
    b.nodes[-1].output[0] = UPDATED_ELEMENTS
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.output[:]
    out.graph.output.append(
        helper.make_value_info(UPDATED_ELEMENTS, helper.make_tensor_type_proto(TensorProto.INT64, []))
    )
    out.graph.node.extend(b.nodes)
    del out.functions[:]
    return out


MAX_NORM, TOTAL_NORM = "max_norm", "total_norm"


def clip_model(types: list[onnx.TypeProto], norm_type: float, part: str = "both") -> onnx.ModelProto:
    """``torch.nn.utils.clip_grad_norm_`` over gradients ``g0, g1, ...`` of ``types`` (float32):
    the ``norm_type`` norm of their norms (``total_norm``), and each gradient times
    ``min(max_norm / (total_norm + 1e-6), 1)`` as ``clipped<i>``. Each product is elementwise
    and its gradient's norm is upstream of it, so ``clipped<i>`` may be bound to ``g<i>``'s
    buffer (as SGD's updates are: this module's doc). ``part``: ``"norm"`` computes the norm
    alone, ``"scale"`` takes ``total_norm`` as an input and scales (one rank's share of the
    gradients under ZeRO stage 1, the norm combined over the ranks in between)."""
    b = _Builder()
    f32 = TensorProto.FLOAT
    scalar = helper.make_tensor_type_proto(f32, [])
    inputs = [helper.make_value_info(f"g{i}", t) for i, t in enumerate(types)]
    outputs = []

    def norm(x: str) -> str:
        if norm_type == 2.0:
            return b.op("ReduceL2", x, keepdims=0)
        if norm_type == float("inf"):
            return b.op("ReduceMax", b.op("Abs", x), keepdims=0)
        powered = b.op("ReduceSum", b.op("Pow", b.op("Abs", x), b.const(norm_type, f32)), keepdims=0)
        return b.op("Pow", powered, b.const(1.0 / norm_type, f32))

    if part in ("both", "norm"):
        axis = b.op("Constant", value=helper.make_tensor("axis", TensorProto.INT64, [1], [0]))
        norms = [b.op("Unsqueeze", norm(f"g{i}"), axis) for i in range(len(types))]
        norm(b.op("Concat", *norms, axis=0))
        b.nodes[-1].output[0] = TOTAL_NORM  # the norm's last node writes the output itself
        outputs.append(helper.make_value_info(TOTAL_NORM, scalar))
    else:
        inputs.append(helper.make_value_info(TOTAL_NORM, scalar))
    if part in ("both", "scale"):
        inputs.append(helper.make_value_info(MAX_NORM, scalar))
        coefficient = b.op("Div", MAX_NORM, b.op("Add", TOTAL_NORM, b.const(1e-6, f32)))
        clamped = b.op("Min", coefficient, b.const(1.0, f32))
        for i, t in enumerate(types):
            b.nodes.append(helper.make_node("Mul", [f"g{i}", clamped], [f"clipped{i}"]))
            outputs.append(helper.make_value_info(f"clipped{i}", t))
    graph = helper.make_graph(b.nodes, "clip_grad_norm", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model
