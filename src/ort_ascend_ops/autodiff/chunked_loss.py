"""The cross-entropy of a language model's head computed in chunks of rows (MindSpeed's
``--loss-compute-mode chunk``), so that the whole ``[rows, vocab]`` logits never exist: each
chunk's head product, its elementwise ops (a soft cap, a logit scale), LogSoftmax and summed
NegativeLogLikelihoodLoss, the chunks' sums added and divided by the count of labels kept (for
``mean``). Each chunk is a recompute segment (``recompute.SEGMENT``): its backward computes its
logits again, one chunk after the other, so that the backward too holds one chunk's at a time."""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .graph import GradientError, attribute
from .recompute import SEGMENT, data_dependent

# Ops between the head's product and the loss that act on each row alone, with a second operand
# (if any) that is a constant or a parameter broadcast over the rows.
_ROWWISE = {"Cast", "Tanh", "Neg", "Relu", "Sigmoid", "Mul", "Div", "Add", "Sub", "Identity"}
_VIEWS = {"Reshape", "Flatten"}


def _refuse(loss: str, why: str) -> GradientError:
    return GradientError(f"loss_chunk_size: the loss '{loss}' cannot be computed in chunks: {why}")


def chunk_loss(model: onnx.ModelProto, loss: str, rows: int, parameters: set[str]) -> onnx.ModelProto:
    """``model`` (shape-inferred, its cross-entropy split into LogSoftmax and
    NegativeLogLikelihoodLoss) with the loss ``loss`` computed over chunks of ``rows`` rows, or
    ``model`` when its rows fit one chunk. The logits must feed the loss alone, their rows be
    static, and the ops between the head's MatMul and the LogSoftmax act on rows alone."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"loss_chunk_size must be None or an integer >= 1, got {rows!r}")
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output if o}
    # The forward's outputs but the loss (the logits a model returns) are not the training model's.
    uses = Counter(i for n in graph.node for i in n.input)
    types = {v.name: v.type.tensor_type for v in [*graph.value_info, *graph.input, *graph.output]}
    data = data_dependent(graph, parameters)

    nll = producer.get(loss)
    if nll is None or nll.op_type != "NegativeLogLikelihoodLoss" or len(nll.input) > 2 and nll.input[2]:
        raise _refuse(loss, "it is no cross-entropy without class weights")
    reduction = attribute(nll, "reduction", "mean")
    if reduction not in ("mean", "sum"):
        raise _refuse(loss, f"its reduction is {reduction!r}, not 'mean' or 'sum'")
    log_softmax = producer.get(nll.input[0])
    scores = log_softmax.input[0] if log_softmax is not None else ""
    dims = _dims(types[scores]) if scores in types else []
    if (
        log_softmax is None
        or log_softmax.op_type != "LogSoftmax"
        or len(dims) != 2
        or uses[nll.input[0]] != 1
    ):
        raise _refuse(loss, "its log-probabilities are not a LogSoftmax of [rows, classes] feeding it alone")
    if dims[0] is None:
        raise _refuse(loss, f"the rows of '{scores}' are not static: export at a fixed batch and sequence")
    chain = _chain(loss, scores, producer, uses, types, data)
    if dims[0] <= rows:
        return model
    sizes = [min(rows, dims[0] - start) for start in range(0, dims[0], rows)]
    new, sums = _chunks(loss, chain, log_softmax, nll, sizes, types, data, graph)
    new += _reduced(loss, nll, sums, reduction, types, graph)
    replaced = {n.output[0] for n in (*chain, log_softmax, nll)}
    position = next(i for i, n in enumerate(graph.node) if n.output[0] == nll.output[0])
    kept = [(i, n) for i, n in enumerate(graph.node) if n.output[0] not in replaced]
    nodes = [n for i, n in kept if i < position] + new + [n for i, n in kept if i > position]
    del graph.node[:]
    graph.node.extend(nodes)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def _dims(tensor_type) -> list[int | None]:
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]


def _chain(loss, scores, producer, uses, types, data) -> list[onnx.NodeProto]:
    """The nodes from the logits back to the head's MatMul (last), views left out."""
    chain: list[onnx.NodeProto] = []
    value = scores
    while True:
        node = producer.get(value)
        if node is None or uses[value] != 1:
            raise _refuse(loss, f"'{value}' is not the logits' alone (a graph input, or read elsewhere too)")
        operands = [i for i in node.input if i and i in data]
        if node.op_type == "MatMul" and node.input[1] not in data:
            return chain + [node]
        if node.op_type in _VIEWS:
            value = node.input[0]
            continue
        others = [i for i in node.input if i and i not in data]
        if (
            node.op_type not in _ROWWISE
            or len(operands) != 1
            or any(_broadcasts_over_rows(types, o) is False for o in others)
        ):
            label = f"{node.op_type} node '{node.name or node.output[0]}'"
            raise _refuse(loss, f"{label} lies between the head's MatMul and the LogSoftmax")
        chain.append(node)
        value = operands[0]


def _broadcasts_over_rows(types, name: str) -> bool:
    """Whether a constant operand applies to each row alike: a scalar or a vector of classes."""
    return name in types and len(types[name].shape.dim) <= 1


def _chunks(loss, chain, log_softmax, nll, sizes, types, data, graph):
    """The chunks' nodes (each marked as its recompute segment) and their summed losses."""
    head = chain[-1]
    hidden, labels = head.input[0], nll.input[1]
    split = f"{loss}/chunk_rows"
    graph.initializer.append(numpy_helper.from_array(np.array(sizes, np.int64), split))
    rank = len(types[hidden].shape.dim)
    flat = hidden if rank == 2 else f"{loss}/hidden_rows"
    new = [] if rank == 2 else [helper.make_node("Flatten", [hidden], [flat], axis=rank - 1)]
    hidden_parts = [f"{loss}/hidden_chunk{c}" for c in range(len(sizes))]
    label_parts = [f"{loss}/labels_chunk{c}" for c in range(len(sizes))]
    new.append(helper.make_node("Split", [flat, split], hidden_parts, axis=0))
    new.append(helper.make_node("Split", [labels, split], label_parts, axis=0))
    sums = []
    for c in range(len(sizes)):
        chunk = []
        x = hidden_parts[c]
        for node in reversed(chain):
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = f"{node.name or node.output[0]}/chunk{c}"
            source = head.input[0] if node is head else next(i for i in node.input if i in data)
            copy.input[:] = [x if i == source else i for i in node.input]
            x = f"{node.output[0]}/chunk{c}"
            copy.output[:] = [x]
            chunk.append(copy)
        log_prob = f"{nll.input[0]}/chunk{c}"
        chunk.append(
            helper.make_node("LogSoftmax", [x], [log_prob], axis=1, name=f"{log_softmax.name}/chunk{c}")
        )
        sums.append(f"{loss}/sum{c}")
        part = helper.make_node(
            "NegativeLogLikelihoodLoss", [log_prob, label_parts[c]], [sums[-1]], reduction="sum"
        )
        part.attribute.extend(a for a in nll.attribute if a.name == "ignore_index")
        chunk.append(part)
        for node in chunk:
            del node.metadata_props[:]
            node.metadata_props.add(key=SEGMENT, value=f"{loss} chunk {c}")
        new += chunk
    return new, sums


def _reduced(loss, nll, sums, reduction, types, graph) -> list[onnx.NodeProto]:
    """The chunks' sums added, divided for 'mean' by the count of labels not ignored (as
    NegativeLogLikelihoodLoss divides: 0/0 when every label is)."""
    elem = types[loss].elem_type
    if reduction == "sum":
        return [helper.make_node("Sum", sums, [loss])]
    labels = nll.input[1]
    ignore = attribute(nll, "ignore_index", None)
    nodes = [helper.make_node("Sum", sums, [f"{loss}/sum"])]
    if ignore is None:
        nodes += [
            helper.make_node("Size", [labels], [f"{loss}/labels"]),
            helper.make_node("Cast", [f"{loss}/labels"], [f"{loss}/kept"], to=elem),
        ]
    else:
        graph.initializer.append(
            helper.make_tensor(f"{loss}/ignore_index", types[labels].elem_type, [], [ignore])
        )
        nodes += [
            helper.make_node("Equal", [labels, f"{loss}/ignore_index"], [f"{loss}/ignored"]),
            helper.make_node("Not", [f"{loss}/ignored"], [f"{loss}/counted"]),
            helper.make_node("Cast", [f"{loss}/counted"], [f"{loss}/counted_values"], to=elem),
            helper.make_node("ReduceSum", [f"{loss}/counted_values"], [f"{loss}/kept"], keepdims=0),
        ]
    return nodes + [helper.make_node("Div", [f"{loss}/sum", f"{loss}/kept"], [loss])]
