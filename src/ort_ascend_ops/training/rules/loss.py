"""Rules for NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Both take, per label,
-w[label] x[n, label, d...] from log-probabilities x; a label equal to ignore_index weighs 0, and
'mean' divides the sum by the total weight of the labels left (their count without weights),
as ONNX and PyTorch's F.nll_loss and F.cross_entropy define it."""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..graph import Backward, GradientError, attribute, node_label
from .reduce import log_softmax_grad


def negative_log_likelihood_loss(b, node, grads):
    return [_log_prob_grad(b, node, grads[0])] + [None] * (len(node.input) - 1)


def softmax_cross_entropy_loss(b, node, grads):
    """The gradient reaching the log-probabilities (from the loss and from the log_prob output,
    when it has one) goes through LogSoftmax over the class axis."""
    scores, (g_loss, g_log_prob) = node.input[0], (list(grads) + [None])[:2]
    has_log_prob = len(node.output) > 1 and bool(node.output[1])
    log_prob = node.output[1] if has_log_prob else b.op("LogSoftmax", scores, axis=1)
    parts = [_log_prob_grad(b, node, g_loss)] if g_loss is not None else []
    parts += [g_log_prob] if g_log_prob is not None else []
    total = b.total(parts, f"{scores}_log_prob")
    return [log_softmax_grad(b, total, log_prob, 1)] + [None] * (len(node.input) - 1)


def _log_prob_grad(b: Backward, node: onnx.NodeProto, g: str) -> str:
    """d loss / d x for the loss gradient g: -c at [n, label, d...] and 0 elsewhere, with
    c = g w[label] (per label for reduction 'none'), over the total weight for 'mean'. The weights
    and that total are summed in float32 for half types."""
    x = node.input[0]
    weights = node.input[2] if len(node.input) > 2 and node.input[2] else None
    if weights is not None and b.needs(weights):
        raise GradientError(f"{node_label(node)}: the gradient of the class weights is not supported")
    elem, acc = b.elem_type(x), b.accumulation_type(x)
    labels, weight = _labels_and_weight(b, node, weights, acc)
    coefficient = b.convert(g, elem, acc)
    reduction = attribute(node, "reduction", "mean")
    if reduction == "mean":
        if weight is None:
            total = b.op("Cast", b.op("Size", labels), to=acc)
        else:
            total = b.op("ReduceSum", weight, keepdims=0)
        coefficient = b.op("Div", coefficient, total)
    if weight is not None:
        coefficient = b.op("Mul", coefficient, weight)
    if weight is not None or reduction == "none":  # per label: give it the class axis
        coefficient = b.op("Unsqueeze", coefficient, b.const([1]))
    picked = b.op("Mul", coefficient, _one_hot(b, x, labels, acc))
    return b.convert(b.op("Neg", picked), acc, elem)


def _labels_and_weight(b: Backward, node: onnx.NodeProto, weights: str | None, acc: int):
    """The labels as int64, ignored ones replaced by class 0 (an ignored label may lie outside
    the classes), and each label's weight in ``acc`` (0 where ignored; None when all weigh 1)."""
    labels = b.convert(node.input[1], b.elem_type(node.input[1]), TensorProto.INT64)
    ignore_index = attribute(node, "ignore_index")
    ignored = None
    if ignore_index is not None:
        ignored = b.op("Equal", labels, b.const(ignore_index))
        labels = b.op("Where", ignored, b.const(0), labels)
    weight = None
    if weights is not None:
        weight = b.convert(b.op("Gather", weights, labels, axis=0), b.elem_type(weights), acc)
    if ignored is not None:
        weight = b.op("Where", ignored, b.const(0.0, acc), b.const(1.0, acc) if weight is None else weight)
    return labels, weight


def _one_hot(b: Backward, x: str, labels: str, acc: int) -> str:
    """1 at [n, label, d...] in x's shape, as ``acc``. Built from Equal against the class numbers:
    ONNX Runtime's CPU OneHot takes no float64 values."""
    classes = b.op("Range", b.const(0), b.op("Gather", b.shape_of(x), b.const(1)), b.const(1))
    column = b.op("Reshape", classes, b.const([1, -1] + [1] * (b.rank(x) - 2)))
    hit = b.op("Equal", b.op("Unsqueeze", labels, b.const([1])), column)
    return b.op("Cast", hit, to=acc)
