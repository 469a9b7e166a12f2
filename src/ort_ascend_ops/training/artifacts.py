"""``generate_artifacts``: onnxruntime-training's artifacts (a training, an eval and an optimizer
model and a checkpoint) for current ONNX Runtime, with this package's grad ops. Its users switch
by changing the import; the models are plain ONNX carrying the reference functions."""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..autodiff import GradientError, build_training_model, depends_on
from ..export import parameter_names
from ..fusion import fuse as fuse_patterns
from .checkpoint import Contents, write
from .optim import SGD, AdamW, optimizer_model
from .precision import LOSS_SCALE, LOSS_SCALED, PRECISIONS, autocast

# The files generate_artifacts writes, by the key it returns them under.
FILES = {
    "training": "training_model.onnx",
    "eval": "eval_model.onnx",
    "optimizer": "optimizer_model.onnx",
    "checkpoint": "checkpoint.safetensors",
}


def artifact_paths(artifact_directory: str | os.PathLike, prefix: str = "") -> dict[str, Path]:
    """Where ``generate_artifacts`` writes each file (the optimizer model only when asked)."""
    return {key: Path(artifact_directory) / f"{prefix}{name}" for key, name in FILES.items()}


# The inputs a LossType adds for what the output is compared with, as onnxruntime-training names them.
TARGET = "target"
LABELS = "labels"
IGNORE_INDEX = -100  # torch.nn.CrossEntropyLoss's (and Hugging Face's padding label)


class LossType(enum.Enum):
    """A loss appended to the model's first output, mean-reduced: ``MSELoss`` against a new input
    ``target`` shaped like the output; ``CrossEntropyLoss`` of scores ``[N, C]`` or ``[N, ..., C]``
    (classes last, as a language model's logits; onnxruntime-training takes only ``[N, C]``)
    against int64 ``labels`` ``[N]`` or ``[N, ...]``, labels of -100 ignored as torch ignores them."""

    MSELoss = "MSELoss"
    CrossEntropyLoss = "CrossEntropyLoss"


class OptimType(enum.Enum):
    """The optimizer of the optimizer model, with ``torch.optim``'s defaults (``optim.AdamW``,
    ``optim.SGD``; pass one of those instead for other hyperparameters)."""

    AdamW = AdamW
    SGD = SGD


_FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}


def _with_loss(
    model: onnx.ModelProto, loss: LossType | None, loss_name: str | None
) -> tuple[onnx.ModelProto, str]:
    """A copy of the model with ``loss`` appended; its loss output's name."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    outputs = [o.name for o in model.graph.output]
    if loss is None:
        name = loss_name or ("loss" if "loss" in outputs else outputs[0])
        if name not in outputs:
            raise GradientError(f"'{name}' is not an output of the model (its outputs: {outputs})")
        return model, name
    graph, scores = model.graph, model.graph.output[0]
    name = loss_name or "loss"
    if name in outputs or name in {i.name for i in graph.input}:
        raise GradientError(f"the model already has a value '{name}'; pass loss_output_name")
    if loss is LossType.MSELoss:
        graph.input.append(helper.make_value_info(TARGET, scores.type))
        diff = helper.make_node("Sub", [scores.name, TARGET], [f"{name}/diff"])
        square = helper.make_node("Mul", [f"{name}/diff", f"{name}/diff"], [f"{name}/square"])
        mean = helper.make_node("ReduceMean", [f"{name}/square"], [name], keepdims=0)
        graph.node.extend([diff, square, mean])
    else:
        rank = len(scores.type.tensor_type.shape.dim)
        if rank < 2:
            raise GradientError(
                f"CrossEntropyLoss needs scores of rank 2 or more; '{scores.name}' has rank {rank}"
            )
        labels = [d.dim_param or d.dim_value or None for d in scores.type.tensor_type.shape.dim][:-1]
        graph.input.append(helper.make_tensor_value_info(LABELS, TensorProto.INT64, labels))
        flat_scores, flat_labels = scores.name, LABELS
        if rank > 2:  # [N, ..., C] and [N, ...] as rows of classes: the fast, 2-D form of the op
            flat_scores, flat_labels = f"{name}/scores", f"{name}/labels"
            graph.node.append(helper.make_node("Flatten", [scores.name], [flat_scores], axis=rank - 1))
            graph.node.append(helper.make_node("Reshape", [LABELS, f"{name}/rows"], [flat_labels]))
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
    elem = scores.type.tensor_type.elem_type
    graph.output.insert(0, helper.make_tensor_value_info(name, elem, []))
    return model, name


def _without_parameters(
    model: onnx.ModelProto, parameters: Sequence[str]
) -> tuple[onnx.ModelProto, dict[str, onnx.TensorProto]]:
    """A copy of the model without the initializers ``parameters`` (copying everything else, never
    their data), and those initializers, in the model's order: the source's own messages."""
    names = set(parameters)
    weights = {i.name: i for i in model.graph.initializer if i.name in names}
    light = onnx.ModelProto()
    for descriptor, value in model.ListFields():
        if descriptor.name != "graph":
            _copy_field(light, descriptor, value)
    for descriptor, value in model.graph.ListFields():
        if descriptor.name == "initializer":
            light.graph.initializer.extend(i for i in value if i.name not in names)
        else:
            _copy_field(light.graph, descriptor, value)
    return light, weights


def _copy_field(message, descriptor, value) -> None:
    target = getattr(message, descriptor.name)
    if descriptor.is_repeated:
        target.extend(value)
    elif descriptor.type == descriptor.TYPE_MESSAGE:
        target.CopyFrom(value)
    else:
        setattr(message, descriptor.name, value)


def _parameters_as_inputs(graph: onnx.GraphProto, weights: Mapping[str, onnx.TensorProto]) -> None:
    """The parameters declared as graph inputs (after the user's inputs), fed from the
    checkpoint by the training API."""
    graph.input.extend(
        helper.make_tensor_value_info(n, w.data_type, list(w.dims)) for n, w in weights.items()
    )


def pruned(model: onnx.ModelProto, outputs: Sequence[str]) -> onnx.ModelProto:
    """The model computing only ``outputs`` (which may be inner values): the nodes and inputs
    they need."""
    graph = model.graph
    needed = depends_on(graph, outputs)
    known = {o for n in graph.node for o in n.output if o} | {
        i.name for i in [*graph.input, *graph.initializer]
    }
    unknown = [o for o in outputs if o not in known]
    if unknown:
        raise GradientError(f"the model has no values {unknown}")
    if any(o not in {v.name for v in [*graph.value_info, *graph.output, *graph.input]} for o in outputs):
        model = onnx.shape_inference.infer_shapes(model)
        graph = model.graph
    # An output dropped here stays declared, for a later export to take it again.
    declared = {v.name: v for v in [*graph.value_info, *graph.output, *graph.input]}
    missing = [o for o in outputs if o not in declared]
    if missing:
        raise GradientError(f"shape inference gives no type for {missing}")
    kept = helper.make_graph(
        [n for n in graph.node if any(o in needed for o in n.output)],
        graph.name,
        [i for i in graph.input if i.name in needed],
        [declared[o] for o in outputs],
        initializer=[i for i in graph.initializer if i.name in needed],
        value_info=[
            v for v in [*graph.value_info, *graph.output] if v.name in needed and v.name not in outputs
        ],
    )
    result = helper.make_model(
        kept,
        opset_imports=list(model.opset_import),
        ir_version=model.ir_version,
        functions=list(model.functions),
    )
    result.metadata_props.extend(model.metadata_props)
    return result


def _dims(value: onnx.ValueInfoProto) -> tuple | None:
    shape = value.type.tensor_type.shape
    dims = tuple(d.dim_param or d.dim_value or None for d in shape.dim)
    return dims if value.type.tensor_type.HasField("shape") and None not in dims else None


def _shapes_from_one_source(graph: onnx.GraphProto) -> None:
    """Rewires ``Shape(b)`` to ``Shape(a)`` when inputs ``a`` and ``b`` are declared with the same
    dims, ``a`` first: the exporter takes a dynamic dim from any input that has it (the labels,
    say), which would make the inference model exported from the eval model ask for labels."""
    first: dict[tuple, str] = {}
    source = {}
    for value in graph.input:
        dims = _dims(value)
        if dims is not None:
            source[value.name] = first.setdefault(dims, value.name)
    for node in graph.node:
        if node.op_type == "Shape" and node.domain in ("", "ai.onnx") and node.input[0] in source:
            node.input[0] = source[node.input[0]]


def _float_initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {i.name: i for i in model.graph.initializer if i.data_type in _FLOATS}


def split_parameters(model, requires_grad=None, frozen_params=None) -> tuple[list[str], list[str]]:
    """The trainable and the frozen parameters. By default the trainable ones are the module's
    parameters ``export_torch`` recorded, or else every floating-point initializer of more than
    one element (a scalar initializer is usually a constant of the graph)."""
    floats = _float_initializers(model)
    frozen = list(frozen_params or [])
    if requires_grad is None:
        recorded = parameter_names(model)
        candidates = (
            recorded if recorded is not None else [n for n, i in floats.items() if math.prod(i.dims) > 1]
        )
        requires_grad = [n for n in candidates if n in floats and n not in frozen]
    trainable = list(requires_grad)
    unknown = [n for n in trainable + frozen if n not in floats]
    if unknown:
        raise GradientError(f"{unknown} are not floating-point initializers of the model")
    both = sorted(set(trainable) & set(frozen))
    if both:
        raise GradientError(f"{both} are both in requires_grad and in frozen_params")
    return trainable, frozen


def generate_artifacts(
    model: onnx.ModelProto | str | os.PathLike,
    requires_grad: Sequence[str] | None = None,
    frozen_params: Sequence[str] | None = None,
    loss: LossType | None = None,
    optimizer: OptimType | AdamW | SGD | None = None,
    artifact_directory: str | os.PathLike | None = None,
    *,
    prefix: str = "",
    additional_output_names: Sequence[str] = (),
    loss_output_name: str | None = None,
    fuse: bool = True,
    precision: str = "fp32",
) -> dict[str, Path]:
    """Writes ``training_model.onnx`` (the loss and one ``<name>_grad`` per trainable
    parameter), ``eval_model.onnx`` (the loss), ``optimizer_model.onnx`` (if ``optimizer``) and
    ``checkpoint.safetensors`` (every parameter, trainable or frozen) into ``artifact_directory``
    (default: the current one), each name after ``prefix``; returns their paths.

    The parameters become inputs of the models, fed from the checkpoint by
    ``ort_ascend_ops.training.api``; other initializers stay constants. ``loss=None``: the model
    already outputs the scalar loss (``loss_output_name``, default the output named ``loss`` or
    else the first); a ``LossType`` is applied to the first output against a new input
    ``target``. ``fuse`` rewrites norm, rotary and DeepSeek-indexer patterns to our ops first.

    ``precision``: ``"fp32"``, or ``"bf16-mixed"`` / ``"fp16-mixed"`` as ``torch.autocast`` over
    the float32 parameters of the checkpoint (``precision.autocast``); the training model of
    ``"fp16-mixed"`` takes the loss scale as its input ``loss_scale`` and gives scaled gradients,
    which the training API unscales."""
    if precision not in PRECISIONS:
        raise ValueError(
            f"generate_artifacts: precision must be one of {list(PRECISIONS)}, got {precision!r}"
        )
    source = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
    trainable, frozen = split_parameters(source, requires_grad, frozen_params)
    if not trainable:
        raise GradientError("no parameter requires a gradient")
    # The parameters' values never enter the passes below, whatever their size (protobuf cannot
    # serialize a model past 2 GB, and fusion, differentiation and shape inference copy it).
    light, weights = _without_parameters(source, [*trainable, *frozen])
    with_loss, loss_name = _with_loss(light, loss, loss_output_name)
    _shapes_from_one_source(with_loss.graph)
    _parameters_as_inputs(with_loss.graph, weights)
    forward = fuse_patterns(with_loss, keep=[*trainable, *frozen]) if fuse else with_loss
    parameters = list(weights)
    forward = autocast(forward, precision, parameters)
    scale = LOSS_SCALE if precision in LOSS_SCALED else None
    training = build_training_model(forward, loss_name, trainable, fuse=False, loss_scale=scale)
    extra = list(additional_output_names)
    evaluation = pruned(forward, [loss_name, *extra])
    if extra:
        declared = {v.name: v for v in training.graph.value_info}
        missing = [name for name in extra if name not in declared]
        if missing:
            raise GradientError(f"additional outputs {missing} are not values of the training graph")
        outputs = list(training.graph.output)
        del training.graph.output[:]
        training.graph.output.extend([outputs[0], *(declared[name] for name in extra), *outputs[1:]])

    paths = artifact_paths(artifact_directory or ".", prefix)
    paths["training"].parent.mkdir(parents=True, exist_ok=True)
    for key, graph_model in (("training", training), ("eval", evaluation)):
        onnx.checker.check_model(graph_model)
        onnx.save(graph_model, paths[key])
    if optimizer is None:
        del paths["optimizer"]
    else:
        options = optimizer.value() if isinstance(optimizer, OptimType) else optimizer
        types = {
            n: helper.make_tensor_type_proto(weights[n].data_type, list(weights[n].dims)) for n in trainable
        }
        onnx.save(optimizer_model(types, options), paths["optimizer"])
    contents = Contents(
        parameters={n: numpy_helper.to_array(weights[n]) for n in parameters},
        requires_grad={n: n in set(trainable) for n in parameters},
    )
    write(paths["checkpoint"], contents)
    return paths
