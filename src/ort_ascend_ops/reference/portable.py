"""What makes a model portable: the reference functions as FunctionProtos at its opset, chosen for
its nodes (``attach_functions``), or every op's function for any node (``function_protos``)."""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Iterator

import onnx
from onnx import helper
from onnxscript import OnnxFunction

from ..domain import DOMAIN, VERSION
from ..opschema import OpSpec, attribute_values, elem_type, infer_outputs, load_op_specs
from ._opset import MIN_ONNX_OPSET
from .emit import Emitter
from .registry import FUNCTIONS, HELPERS, function_for

DEFAULT_ONNX_OPSET = 23


@functools.cache
def _emitter(opset: int) -> Emitter:
    newest = onnx.defs.onnx_opset_version()
    if not MIN_ONNX_OPSET <= opset <= newest:
        raise ValueError(f"the reference functions need opset {MIN_ONNX_OPSET} to {newest}, got {opset}")
    return Emitter({f.name: f for f in HELPERS}, opset)


@functools.cache
def _emitted(opset: int, function: OnnxFunction, op_name: str, overload: str) -> onnx.FunctionProto:
    """Emitted once per process: callers copy it (``model.functions.extend`` does)."""
    return _emitter(opset).emit(function, op_name, overload)


def function_protos(opset: int = DEFAULT_ONNX_OPSET) -> list[onnx.FunctionProto]:
    """A FunctionProto of every op (domain ``ort_ascend_ops``, the helpers it calls inlined), ready
    for ``model.functions`` of a model whose default-domain opset is ``opset`` (18 or newer).
    Each op's function serves any node of it, testing for its optional inputs at run time, which
    ONNX Runtime does not do for every type: ``attach_functions`` chooses per node instead."""
    return [copy.deepcopy(_emitted(opset, function, name, "")) for name, function in FUNCTIONS.items()]


def _our_nodes(nodes) -> Iterator[onnx.NodeProto]:
    """Nodes of our domain among ``nodes`` and, depth first, their subgraphs' nodes."""
    for node in nodes:
        if node.domain == DOMAIN:
            yield node
        for attr in node.attribute:
            for graph in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                yield from _our_nodes(graph.node)


# A node's function, (overload, function), or the message it is refused with.
_Choice = tuple[str, OnnxFunction] | str


def _choice(node: onnx.NodeProto, spec: OpSpec) -> _Choice:
    """(overload, function) for the node, or the refusal's message when the contract refuses the
    node whatever its inputs hold (its schema says why)."""
    present = {p.name for p, name in zip(spec.inputs, node.input, strict=False) if name}
    produced = [p.name for p, name in zip(spec.outputs, node.output, strict=False) if name]
    try:
        infer_outputs(spec, {name: (None, None) for name in present}, attribute_values(node), produced)
    except ValueError as error:
        # Printable, as the native kernels write it: the message becomes a node name.
        return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(error))
    return function_for(spec.name, present)


def _outputs(spec: OpSpec) -> list[tuple[str, int | str]]:
    """Each output with its element type, or the first required input that binds its type."""
    binds = {p.type: p.name for p in reversed(spec.inputs) if not p.optional}
    return [(p.name, binds[p.type] if p.type in binds else elem_type(p.type)) for p in spec.outputs]


def attach_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Attaches to ``model`` (in place; returns it) the reference functions its nodes of our
    domain need, at its default-domain opset (18 or newer), replacing those of our domain it
    carried. Each node gets its op's function for the optional inputs it passes (reading them
    directly, which every engine can inline), and a node the contract refuses whatever its inputs
    hold (an output that needs an absent input, a layout without its inputs, an attribute out of
    range) gets one that fails with the rule. Where the nodes of one op need different functions,
    each is an overload (IR 10) that its nodes name; otherwise the op has just the one function.
    The nodes come to list every input and output slot of their op ("" for the absent ones)."""
    specs = load_op_specs()
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise ValueError("the model imports no default-domain opset")
    emitter = _emitter(opset)
    graphs = [model.graph.node, *(f.node for f in model.functions if f.domain != DOMAIN)]
    nodes = [n for n in itertools.chain.from_iterable(map(_our_nodes, graphs)) if n.op_type in specs]
    choices: dict[str, dict[str, _Choice]] = {}  # op -> overload -> choice
    for node in nodes:
        # Every slot listed, "" for the absent: ONNX Runtime refuses a function call with fewer
        # outputs than the function has, onnx.reference one with fewer inputs.
        spec = specs[node.op_type]
        node.input.extend([""] * (len(spec.inputs) - len(node.input)))
        node.output.extend([""] * (len(spec.outputs) - len(node.output)))
        choice = _choice(node, spec)
        per_op = choices.setdefault(node.op_type, {})
        if isinstance(choice, str):
            overload = next((o for o, c in per_op.items() if c == choice), f"refused_{len(per_op)}")
        else:
            overload = choice[0] or "default"
        per_op[overload] = choice
        node.overload = overload
    protos = []
    for op_name, per_op in choices.items():
        for overload, choice in per_op.items():
            name = overload if len(per_op) > 1 else ""
            spec = specs[op_name]
            if isinstance(choice, str):
                protos.append(
                    emitter.refusal([p.name for p in spec.inputs], _outputs(spec), op_name, name, choice)
                )
            else:
                protos.append(_emitted(opset, choice[1], op_name, name))
    for node in nodes:
        if len(choices[node.op_type]) == 1:
            node.overload = ""
    others = [f for f in model.functions if f.domain != DOMAIN]
    del model.functions[:]
    model.functions.extend([*protos, *others])
    if not any(o.domain == DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
    if any(len(per_op) > 1 for per_op in choices.values()):
        model.ir_version = max(model.ir_version, 10)
    return model
