"""The losses ``generate_artifacts`` appends to a model (``LossType``, onnxruntime-training 1.19's
enum and values), each torch's ``nn`` loss of the same name at ``reduction="mean"``, built from
standard ops the differentiator has rules for."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..autodiff import GradientError

# The input a LossType adds for what the output is compared with, unless loss_input_names
# names another, as onnxruntime-training names it.
TARGET = "target"
LABELS = "labels"
IGNORE_INDEX = -100  # torch.nn.CrossEntropyLoss's (and Hugging Face's padding label)


class LossType(enum.Enum):
    """A mean-reduced loss of the model's first output (or of ``loss_input_names[0]``) against a
    new input ``target`` shaped like it (``labels`` for cross-entropy): ``MSELoss``, ``L1Loss``,
    ``BCEWithLogitsLoss`` (on logits, computed as torch's ``max(x, 0) - x y + log(1 + exp(-|x|))``,
    finite for any logit) and ``CrossEntropyLoss`` of scores ``[N, C]`` or ``[N, ..., C]``
    (classes last, as a language model's logits; onnxruntime-training takes only ``[N, C]``)
    against int64 labels ``[N]`` or ``[N, ...]``, labels of -100 ignored as torch ignores them."""

    MSELoss = 1
    CrossEntropyLoss = 2
    BCEWithLogitsLoss = 3
    L1Loss = 4


def with_loss(
    model: onnx.ModelProto,
    loss: LossType | None,
    loss_output_name: str | None,
    loss_input_names: Sequence[str] | None,
) -> tuple[onnx.ModelProto, str, list[str]]:
    """A copy of the model with ``loss`` appended; the loss output's name and the other outputs
    ``loss_input_names`` asks for (``loss=None``: the outputs after the loss, as
    onnxruntime-training's training and eval models output every name it lists)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    outputs = [o.name for o in graph.output]
    names = list(loss_input_names or [])
    if loss is None:
        if names and loss_output_name is not None and loss_output_name != names[0]:
            raise ValueError(
                f"generate_artifacts: loss_output_name={loss_output_name!r} and loss_input_names[0]="
                f"{names[0]!r} both name the loss (with loss=None the first of loss_input_names is it)"
            )
        name = names[0] if names else loss_output_name or ("loss" if "loss" in outputs else outputs[0])
        if name not in outputs:
            raise GradientError(f"'{name}' is not an output of the model (its outputs: {outputs})")
        return model, name, names[1:]
    if len(names) > 2:
        raise ValueError(
            f"generate_artifacts: loss_input_names for {loss} are the scores' output and, optionally, "
            f"the name of the target (or labels) to compare it with; got {names}"
        )
    by_name = {o.name: o for o in graph.output}
    scores_name = names[0] if names else outputs[0]
    if scores_name not in by_name:
        raise GradientError(
            f"loss_input_names: '{scores_name}' is not an output of the model (its outputs: {outputs})"
        )
    scores = by_name[scores_name]
    name = loss_output_name or "loss"
    if name in outputs or name in {i.name for i in graph.input}:
        raise GradientError(f"the model already has a value '{name}'; pass loss_output_name")
    target = names[1] if len(names) == 2 else LABELS if loss is LossType.CrossEntropyLoss else TARGET
    # As onnxruntime-training: a name the model already has (an input, a computed value) is the
    # target itself; any other is a new input.
    existing = {i.name for i in graph.input} | {v for n in graph.node for v in [*n.input, *n.output] if v}
    if loss is LossType.CrossEntropyLoss:
        _cross_entropy(graph, scores, target, target not in existing, name)
    else:
        if target not in existing:
            graph.input.append(helper.make_value_info(target, scores.type))
        {
            LossType.MSELoss: _mse,
            LossType.L1Loss: _l1,
            LossType.BCEWithLogitsLoss: _bce_with_logits,
        }[loss](graph, scores.name, target, name)
    graph.output.insert(0, helper.make_tensor_value_info(name, scores.type.tensor_type.elem_type, []))
    return model, name, []


def _mean(graph: onnx.GraphProto, elements: str, name: str) -> None:
    graph.node.append(helper.make_node("ReduceMean", [elements], [name], keepdims=0))


def _mse(graph: onnx.GraphProto, x: str, y: str, name: str) -> None:
    diff = f"{name}/diff"
    graph.node.extend(
        [
            helper.make_node("Sub", [x, y], [diff]),
            helper.make_node("Mul", [diff, diff], [f"{name}/square"]),
        ]
    )
    _mean(graph, f"{name}/square", name)


def _l1(graph: onnx.GraphProto, x: str, y: str, name: str) -> None:
    graph.node.extend(
        [
            helper.make_node("Sub", [x, y], [f"{name}/diff"]),
            helper.make_node("Abs", [f"{name}/diff"], [f"{name}/abs"]),
        ]
    )
    _mean(graph, f"{name}/abs", name)


def _bce_with_logits(graph: onnx.GraphProto, x: str, y: str, name: str) -> None:
    """``max(x, 0) - x y + log(1 + exp(-|x|))``, with ``-|x|`` computed as ``x - 2 max(x, 0)``
    (exactly): through Relu's rule (slope 0 at 0) its gradient is ``sigmoid(x) - y`` at every x,
    0 included, as torch's backward gives, where Abs's zero subgradient would give ``-y`` at 0."""
    relu, negative_abs = f"{name}/relu", f"{name}/negative_abs"
    graph.node.extend(
        [
            helper.make_node("Relu", [x], [relu]),
            helper.make_node("Add", [relu, relu], [f"{name}/twice_relu"]),
            helper.make_node("Sub", [x, f"{name}/twice_relu"], [negative_abs]),
            helper.make_node("Softplus", [negative_abs], [f"{name}/log1p_exp"]),  # its argument <= 0
            helper.make_node("Mul", [x, y], [f"{name}/xy"]),
            helper.make_node("Sub", [relu, f"{name}/xy"], [f"{name}/linear"]),
            helper.make_node("Add", [f"{name}/linear", f"{name}/log1p_exp"], [f"{name}/elements"]),
        ]
    )
    _mean(graph, f"{name}/elements", name)


def _cross_entropy(
    graph: onnx.GraphProto, scores: onnx.ValueInfoProto, labels: str, new_input: bool, name: str
) -> None:
    rank = len(scores.type.tensor_type.shape.dim)
    if rank < 2:
        raise GradientError(
            f"CrossEntropyLoss needs scores of rank 2 or more; '{scores.name}' has rank {rank}"
        )
    if new_input:
        dims = [d.dim_param or d.dim_value or None for d in scores.type.tensor_type.shape.dim][:-1]
        graph.input.append(helper.make_tensor_value_info(labels, TensorProto.INT64, dims))
    flat_scores, flat_labels = scores.name, labels
    if rank > 2:  # [N, ..., C] and [N, ...] as rows of classes: the fast, 2-D form of the op
        flat_scores, flat_labels = f"{name}/scores", f"{name}/labels"
        graph.node.append(helper.make_node("Flatten", [scores.name], [flat_scores], axis=rank - 1))
        graph.node.append(helper.make_node("Reshape", [labels, f"{name}/rows"], [flat_labels]))
        graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), f"{name}/rows"))
    graph.node.append(
        helper.make_node(
            "SoftmaxCrossEntropyLoss",
            [flat_scores, flat_labels],
            [name],
            reduction="mean",
            ignore_index=IGNORE_INDEX,
        )
    )
