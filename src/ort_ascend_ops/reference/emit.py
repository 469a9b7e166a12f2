"""The reference functions as the FunctionProtos one model carries: one per op, at the model's
opset, with every helper it calls inlined. Inlined, the rule-named helpers (``Check``,
``ReadPresent``: checks.py) have the node that fails when the rule is broken named after the rule,
and a helper's rules name the inputs its caller passed it. (ONNX Runtime also inlines nested
functions, but one call at a time, and creating a session took ten times as long.)"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping

import onnx
from onnx import AttributeProto, helper
from onnxscript import OnnxFunction

from ..domain import DOMAIN
from .checks import Check, ReadPresent, SameType

# Helpers whose output's node is named "<op>: <rule>" (their ``rule`` attribute), and which input
# their output is (it goes by that input's name in later rules).
_RULE_NAMED = {Check.name: 0, ReadPresent.name: 1, SameType.name: 0}


@functools.cache
def _proto(function: OnnxFunction) -> onnx.FunctionProto:
    return function.to_function_proto()


class Emitter:
    """Emits op functions written in onnxscript, which call the helpers of ``helpers`` (name ->
    function, the rule-named ones among them)."""

    def __init__(self, helpers: Mapping[str, OnnxFunction], opset: int):
        self.helpers = {**dict(helpers), **{f.name: f for f in (Check, ReadPresent, SameType)}}
        self.opset = opset

    def emit(self, function: OnnxFunction, op_name: str, overload: str = "") -> onnx.FunctionProto:
        """op_name's FunctionProto from ``function``, its helpers inlined."""
        proto = copy.deepcopy(_proto(function))
        words = {i: i for i in proto.input}
        body = self._flatten(proto.node, op_name, words, "")
        named = [n.name for n in body if n.name.startswith(f"{op_name}: ")]
        if len(set(named)) != len(named):
            raise ValueError(f"{op_name}: two checks state one rule (ONNX needs unique node names): {named}")
        del proto.node[:]
        proto.node.extend(_share_constants(body))
        proto.name, proto.overload = op_name, overload
        del proto.opset_import[:]  # inlined, the body calls standard operators only
        proto.opset_import.append(helper.make_opsetid("", self.opset))
        return proto

    def refusal(
        self, spec_inputs, spec_outputs, op_name: str, overload: str, message: str
    ) -> onnx.FunctionProto:
        """A function for a node the contract refuses whatever its inputs hold: it fails with
        ``message``. ``spec_outputs`` are (name, element type or the input whose type it has)."""
        call = helper.make_node(Check.name, ["refusal_empty", "refusal_ok"], ["refusal_gate"], domain=DOMAIN)
        false = helper.make_tensor("false", onnx.TensorProto.BOOL, [], [False])
        nodes = [
            helper.make_node("Constant", [], ["refusal_empty"], value_ints=[0]),
            helper.make_node("Constant", [], ["refusal_ok"], value=false),
            *_inline(call, _proto(Check), "refusal_"),
        ]
        nodes[-1].name = message
        for name, elem in spec_outputs:
            nodes.append(helper.make_node("ConstantOfShape", ["refusal_gate"], [f"refusal_{name}"]))
            nodes.append(
                helper.make_node("Cast", [f"refusal_{name}"], [name], to=elem)
                if isinstance(elem, int)
                else helper.make_node("CastLike", [f"refusal_{name}", elem], [name])
            )
        opsets = [helper.make_opsetid("", self.opset)]
        proto = helper.make_function(
            DOMAIN, op_name, list(spec_inputs), [n for n, _ in spec_outputs], nodes, opsets
        )
        proto.overload = overload
        return proto

    def _flatten(self, nodes, op_name: str, words: dict[str, str], path: str) -> list[onnx.NodeProto]:
        """``nodes`` with every helper call replaced by the helper's body (flattened in turn), and
        the subgraphs of If nodes flattened alike. ``words``: value name -> the op input it is,
        for the {parameter} placeholders of rules; it learns the names of checked values."""
        result = []
        for index, node in enumerate(nodes):
            for attr in node.attribute:
                for graph in [attr.g] if attr.type == AttributeProto.GRAPH else attr.graphs:
                    body = self._flatten(graph.node, op_name, words, f"{path}{index}_")
                    del graph.node[:]
                    graph.node.extend(body)
            if node.domain != DOMAIN:
                result.append(node)
                continue
            if node.op_type not in self.helpers:
                raise ValueError(f"{op_name} calls {node.op_type}, which is not among the helpers")
            callee = _proto(self.helpers[node.op_type])
            prefix = f"{path}{node.op_type}{index}_"
            if node.op_type in _RULE_NAMED:
                (rule,) = (helper.get_attribute_value(a).decode() for a in node.attribute if a.name == "rule")
                inlined = _inline(node, callee, prefix)
                inlined[-1].name = f"{op_name}: {rule.format_map(words)}"
                data = node.input[_RULE_NAMED[node.op_type]]
                if data in words:
                    words[node.output[0]] = words[data]
                result += inlined
                continue
            callee_words = {f: words[a] for f, a in zip(callee.input, node.input, strict=False) if a in words}
            body = self._flatten(copy.deepcopy(callee.node), op_name, callee_words, "")
            flat = copy.deepcopy(callee)
            del flat.node[:]
            flat.node.extend(body)
            result += _inline(node, flat, prefix)
        return result


def _inline(call: onnx.NodeProto, callee: onnx.FunctionProto, prefix: str) -> list[onnx.NodeProto]:
    """``callee``'s body in place of ``call``: its inputs and outputs bound to the call's, its
    other values and nodes prefixed, its attribute references resolved from the call's attributes
    (or the callee's defaults)."""
    names = {formal: actual for formal, actual in zip(callee.input, call.input, strict=False)}
    names |= {formal: "" for formal in callee.input[len(call.input) :]}
    names |= dict(zip(callee.output, call.output, strict=True))
    given = {a.name: a for a in callee.attribute_proto} | {a.name: a for a in call.attribute}

    def rename(nodes) -> None:
        for node in nodes:
            for slots in (node.input, node.output):
                slots[:] = [names.setdefault(v, prefix + v) if v else v for v in slots]
            if node.name and ": " not in node.name:  # rule names (see Emitter) stay as they are
                node.name = prefix + node.name
            attrs = []
            for attr in node.attribute:
                if attr.ref_attr_name:
                    if attr.ref_attr_name not in given:
                        continue  # an optional attribute the call leaves out
                    resolved = copy.deepcopy(given[attr.ref_attr_name])
                    resolved.name = attr.name
                    attr = resolved
                for graph in [attr.g] if attr.type == AttributeProto.GRAPH else attr.graphs:
                    # A Loop body's inputs too: its nodes read them by their renamed names.
                    for value in (*graph.input, *graph.output):
                        value.name = names.setdefault(value.name, prefix + value.name)
                    rename(graph.node)
                attrs.append(attr)
            del node.attribute[:]
            node.attribute.extend(attrs)

    body = copy.deepcopy(list(callee.node))
    rename(body)
    return body


def _share_constants(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """``nodes`` with one Constant node per value, first: inlined helpers repeat the same few
    (0, 1, [0], ...), and every node costs time when ONNX Runtime builds a session."""
    first: dict[bytes, str] = {}
    renamed: dict[str, str] = {}
    constants, rest = [], []
    for node in nodes:
        if (
            node.op_type == "Constant"
            and node.domain == ""
            and not any(a.ref_attr_name for a in node.attribute)
        ):
            key = b"".join(a.SerializeToString() for a in node.attribute)
            if key in first:
                renamed[node.output[0]] = first[key]
                continue
            first[key] = node.output[0]
            constants.append(node)
        else:
            rest.append(node)

    def rename(nodes) -> None:
        for node in nodes:
            node.input[:] = [renamed.get(v, v) for v in node.input]
            for attr in node.attribute:
                for graph in [attr.g] if attr.type == AttributeProto.GRAPH else attr.graphs:
                    rename(graph.node)
                    for value in graph.output:
                        value.name = renamed.get(value.name, value.name)

    rename(rest)
    return constants + rest
