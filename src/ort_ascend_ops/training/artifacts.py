"""``generate_artifacts``: onnxruntime-training's artifacts (a training, an eval and an optimizer
model and a checkpoint) for current ONNX Runtime, with this package's grad ops. Its users switch
by changing the import; the models are plain ONNX carrying the reference functions."""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

from ..autodiff import GradientError, build_training_model, depends_on
from ..autodiff.recompute import MODES as RECOMPUTE_MODES
from ..export import FROZEN, parameter_names
from ..fusion import fuse as fuse_patterns
from ..reference._opset import MIN_ONNX_OPSET
from .checkpoint import SUFFIX, Contents, write
from .input_guards import guard_inputs
from .losses import LossType, with_loss
from .optim import SGD, AdamW, optimizer_model
from .precision import LOSS_SCALE, LOSS_SCALED, PRECISIONS, autocast

__all__ = ["LossType", "OptimType", "artifact_paths", "generate_artifacts", "pruned", "split_parameters"]

# The files generate_artifacts writes, by the key it returns them under. onnxruntime-training
# names its checkpoint "checkpoint": CheckpointState.load_checkpoint finds this one under that name.
FILES = {
    "training": "training_model.onnx",
    "eval": "eval_model.onnx",
    "optimizer": "optimizer_model.onnx",
    "checkpoint": f"checkpoint{SUFFIX}",
}


def artifact_paths(artifact_directory: str | os.PathLike, prefix: str = "") -> dict[str, Path]:
    """Where ``generate_artifacts`` writes each file (the optimizer model only when asked)."""
    return {key: Path(artifact_directory) / f"{prefix}{name}" for key, name in FILES.items()}


class OptimType(enum.Enum):
    """The optimizer of the optimizer model (onnxruntime-training 1.19's enum and values), with
    ``torch.optim``'s defaults: ``optim.AdamW()``, ``optim.SGD()``; pass one of those instead for
    other hyperparameters."""

    AdamW = 1
    SGD = 2


_OPTIMIZERS = {OptimType.AdamW: AdamW, OptimType.SGD: SGD}
_FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}


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


def _running_statistics(model: onnx.ModelProto) -> set[str]:
    """BatchNormalization's running mean and variance: buffers, which torch never trains."""
    return {
        node.input[i]
        for node in model.graph.node
        if node.op_type == "BatchNormalization" and node.domain in ("", "ai.onnx")
        for i in (3, 4)
        if len(node.input) > i
    }


def split_parameters(model, requires_grad=None, frozen_params=None) -> tuple[list[str], list[str]]:
    """The trainable and the frozen parameters. By default the trainable ones are the module's
    parameters ``export_torch`` recorded, or else every floating-point initializer of more than
    one element (a scalar initializer is usually a constant of the graph) but BatchNormalization's
    running statistics; the frozen ones are those it recorded with ``requires_grad`` off (a
    ``peft`` model's base weights), but any named trainable."""
    floats = _float_initializers(model)
    if frozen_params is None:
        named = set(requires_grad or ())
        frozen = [n for n in parameter_names(model, FROZEN) or () if n not in named]
    else:
        frozen = list(frozen_params)
    if requires_grad is None:
        recorded = parameter_names(model)
        if recorded is None:
            statistics = _running_statistics(model)
            recorded = [n for n, i in floats.items() if math.prod(i.dims) > 1 and n not in statistics]
        requires_grad = [n for n in recorded if n in floats and n not in frozen]
    trainable = list(requires_grad)
    unknown = [n for n in trainable + frozen if n not in floats]
    if unknown:
        raise GradientError(f"{unknown} are not floating-point initializers of the model")
    both = sorted(set(trainable) & set(frozen))
    if both:
        raise GradientError(f"{both} are both in requires_grad and in frozen_params")
    return trainable, frozen


def _default_opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _at_least_opset(model: onnx.ModelProto, weights: Mapping[str, onnx.TensorProto]) -> onnx.ModelProto:
    """The model at the default domain's opset ``MIN_ONNX_OPSET`` if it imports an older one, by
    ``onnx.version_converter`` (which reads the parameters' declarations, not their values)."""
    opset = _default_opset(model)
    if opset >= MIN_ONNX_OPSET:
        return model
    declared = onnx.ModelProto.FromString(model.SerializeToString())
    _parameters_as_inputs(declared.graph, weights)
    try:
        converted = version_converter.convert_version(declared, MIN_ONNX_OPSET)
    except Exception as error:  # the converter raises its own types, and RuntimeError
        raise GradientError(
            f"generate_artifacts: the model imports opset {opset} of the default domain, and "
            f"onnx.version_converter could not bring it to opset {MIN_ONNX_OPSET}, the oldest the "
            f"training models are built at ({type(error).__name__}: {error}); export the model at "
            f"opset {MIN_ONNX_OPSET} or newer"
        ) from None
    inputs = [i for i in converted.graph.input if i.name not in weights]
    del converted.graph.input[:]
    converted.graph.input.extend(inputs)
    # The converter keeps the IR version, which may predate the functions the models carry.
    converted.ir_version = max(converted.ir_version, helper.find_min_ir_version_for(converted.opset_import))
    return converted


def _eval_mode(model: onnx.ModelProto) -> None:
    """Training mode off, as onnxruntime-training's eval models have it: Dropout's
    ``training_mode`` input left out (so it is the identity) and BatchNormalization's
    ``training_mode`` 0, normalizing by its running statistics. BatchNormalization in inference
    mode has one output (ONNX Runtime refuses the running statistics' outputs there, which
    onnxruntime-training 1.19 leaves in its eval models): a value of the eval model reading them
    is an error."""
    graph = model.graph
    dropped: dict[str, str] = {}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Dropout" and len(node.input) > 2:
            node.input[2] = ""
        elif node.op_type == "BatchNormalization":
            for attr in node.attribute:
                if attr.name == "training_mode":
                    attr.i = 0
            dropped.update((o, node.name or node.output[0]) for o in node.output[1:] if o)
            del node.output[1:]
    read = [i for n in graph.node for i in n.input if i in dropped] + [
        o.name for o in graph.output if o.name in dropped
    ]
    if read:
        raise GradientError(
            f"the eval model reads {sorted(set(read))}, the running statistics BatchNormalization "
            f"{sorted({dropped[r] for r in read})} outputs in training mode only"
        )


def _eval_model(forward: onnx.ModelProto, outputs: Sequence[str]) -> onnx.ModelProto:
    """The forward model computing ``outputs``, training mode off, taking the inputs the training
    model takes (the training API passes a module's inputs to either model)."""
    evaluation = pruned(forward, outputs)
    _eval_mode(evaluation)
    evaluation = pruned(evaluation, outputs)  # without what fed the training modes
    del evaluation.graph.input[:]
    evaluation.graph.input.extend(forward.graph.input)
    return evaluation


def _output_after_loss(training: onnx.ModelProto, forward: onnx.ModelProto, names: Sequence[str]) -> None:
    """``names`` (forward values) made outputs of the training model after the loss, with the
    forward nodes computing those the loss and the gradients do not need."""
    graph = training.graph
    have = {o for n in graph.node for o in n.output} | {v.name for v in [*graph.input, *graph.initializer]}
    extra = pruned(forward, [n for n in names if n not in have])
    graph.node.extend(n for n in extra.graph.node if not all(o in have for o in n.output if o))
    graph.initializer.extend(i for i in extra.graph.initializer if i.name not in have)
    declared = {v.name: v for v in [*graph.value_info, *graph.input, *extra.graph.output]}
    missing = [n for n in names if n not in declared]
    if missing:
        raise GradientError(f"the training graph declares no type for the additional outputs {missing}")
    kept = list(graph.output)
    del graph.output[:]
    graph.output.extend([kept[0], *(declared[n] for n in names), *kept[1:]])


def _unsupported(ort_format: bool, custom_op_library, nominal_checkpoint: bool) -> None:
    """onnxruntime-training's options this implementation does not have, at another value than
    their default: each is an error naming it."""
    if ort_format:
        raise ValueError(
            "generate_artifacts: ort_format=True is not supported: the artifacts are ONNX models "
            "carrying our reference functions for ONNX Runtime's full builds, not ORT-format (.ort) "
            "models for its minimal builds. Pass ort_format=False and load the .onnx files."
        )
    if custom_op_library is not None:
        raise ValueError(
            "generate_artifacts: custom_op_library is not supported: the training graph is built by "
            "our differentiator, which has gradient rules for standard ops and ours, not for the "
            "ops of another library. Pass custom_op_library=None with a model of standard ops."
        )
    if nominal_checkpoint:
        raise ValueError(
            "generate_artifacts: nominal_checkpoint=True is not supported: a nominal checkpoint "
            "(the parameters' names and shapes, no values) is not written. Pass "
            "nominal_checkpoint=False and ship the checkpoint, or load its values into a state "
            "with state.parameters[name] = array."
        )


def _described(value) -> str:
    """A wrong argument's type by its full name (onnxblock's AdamW is not ours), a string's value."""
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" + (f" {value!r}" if isinstance(value, str) else "")


def _optimizer_options(optimizer) -> AdamW | SGD | None:
    if optimizer is None or isinstance(optimizer, AdamW | SGD):
        return optimizer
    if isinstance(optimizer, OptimType):
        return _OPTIMIZERS[optimizer]()
    raise TypeError(
        f"generate_artifacts: optimizer must be an OptimType (AdamW, SGD), an "
        f"ort_ascend_ops.training.optim.AdamW or SGD (other hyperparameters) or None; got "
        f"{_described(optimizer)}. onnxruntime-training's onnxblock optimizer blocks are not "
        f"supported: for onnxblock.optim.AdamW(weight_decay=w) pass optim.AdamW(weight_decay=w)."
    )


def _check_loss(loss) -> None:
    if loss is not None and not isinstance(loss, LossType):
        raise TypeError(
            f"generate_artifacts: loss must be a LossType ({', '.join(t.name for t in LossType)}) "
            f"or None, got {_described(loss)}. onnxruntime-training's onnxblock custom "
            f"loss blocks are not supported: compute the loss inside the model (its output, as "
            f"export_torch exports a module that returns its loss) and pass loss=None."
        )


def generate_artifacts(
    model: onnx.ModelProto | str | os.PathLike,
    requires_grad: Sequence[str] | None = None,
    frozen_params: Sequence[str] | None = None,
    loss: LossType | None = None,
    optimizer: OptimType | AdamW | SGD | None = None,
    artifact_directory: str | os.PathLike | None = None,
    prefix: str = "",
    ort_format: bool = False,
    custom_op_library: str | os.PathLike | None = None,
    additional_output_names: Sequence[str] | None = None,
    nominal_checkpoint: bool = False,
    loss_input_names: Sequence[str] | None = None,
    *,
    loss_output_name: str | None = None,
    fuse: bool = True,
    precision: str = "fp32",
    recompute: str = "none",
    recompute_layers: int | None = None,
    loss_chunk_size: int | None = None,
) -> dict[str, Path]:
    """Writes ``training_model.onnx`` (the loss and one ``<name>_grad`` per trainable
    parameter), ``eval_model.onnx`` (the loss, training mode off: Dropout is the identity and
    BatchNormalization uses its running statistics), ``optimizer_model.onnx`` (if ``optimizer``)
    and ``checkpoint.safetensors`` (every parameter, trainable or frozen) into
    ``artifact_directory`` (default: the current one), each name after ``prefix``; returns their
    paths. onnxruntime-training 1.19's arguments, in its order, with its meanings but where said.

    The parameters become inputs of the models, fed from the checkpoint by
    ``ort_ascend_ops.training.api``; other initializers stay constants. Without a trainable
    parameter the training model computes the loss alone, as onnxruntime-training's does, and
    there is nothing for an optimizer to update. A model importing a default-domain opset older
    than 18 is brought to 18 by ``onnx.version_converter`` (other domains are left as they are).

    ``loss=None``: the model already outputs the scalar loss: ``loss_output_name``, default the
    output named ``loss`` or else the first (onnxruntime-training's training model outputs every
    output of the model instead). A ``LossType`` is applied to the first output against a new
    input ``target`` (``labels``). ``loss_input_names`` as onnxruntime-training's: the names the
    loss takes instead: for a ``LossType`` the output it applies to and, optionally, the target's
    name (a value of the model, or else a new input of that name); for ``loss=None`` the loss
    output first, then other values to output after it. ``additional_output_names``: values
    (outputs or inner) both models output after the loss. ``fuse`` rewrites norm, rotary and
    DeepSeek-indexer patterns to our ops first.

    ``precision``: ``"fp32"``, or ``"bf16-mixed"`` / ``"fp16-mixed"`` as ``torch.autocast`` over
    the float32 parameters of the checkpoint (``precision.autocast``); the training model of
    ``"fp16-mixed"`` takes the loss scale as its input ``loss_scale`` and gives scaled gradients,
    which the training API unscales.

    ``recompute`` (``"none"``, ``"selective"``, ``"full"``) and ``recompute_layers``: activation
    recompute of the decoder layers, as Hugging Face's ``gradient_checkpointing_enable()``
    (``"full"``) or Megatron's selective recompute; ``loss_chunk_size``: the cross-entropy over
    chunks of that many tokens, so that the whole logits never exist (``build_training_model``).
    The gradients do not change with either, but by the order of the loss's sums for chunks.

    Not supported, each an error naming it: ``ort_format=True``, ``custom_op_library``,
    ``nominal_checkpoint=True``, and onnxblock's blocks as ``loss`` or ``optimizer``."""
    _unsupported(ort_format, custom_op_library, nominal_checkpoint)
    lists = {
        "requires_grad": requires_grad,
        "frozen_params": frozen_params,
        "additional_output_names": additional_output_names,
        "loss_input_names": loss_input_names,
    }
    for keyword, names in lists.items():
        if isinstance(names, str):  # a string is a sequence too: of one-letter names
            raise TypeError(f"generate_artifacts: {keyword} is a list of names, got the string {names!r}")
    _check_loss(loss)
    options = _optimizer_options(optimizer)
    if precision not in PRECISIONS:
        raise ValueError(
            f"generate_artifacts: precision must be one of {list(PRECISIONS)}, got {precision!r}"
        )
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(
            f"generate_artifacts: recompute must be one of {list(RECOMPUTE_MODES)}, got {recompute!r}"
        )
    source = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
    trainable, frozen = split_parameters(source, requires_grad, frozen_params)
    if not trainable and options is not None:
        raise GradientError(
            "generate_artifacts: no parameter requires a gradient, so an optimizer has nothing to "
            "update: pass optimizer=None (or name the parameters to train in requires_grad)"
        )
    # The parameters' values never enter the passes below, whatever their size (protobuf cannot
    # serialize a model past 2 GB, and fusion, differentiation and shape inference copy it).
    light, weights = _without_parameters(source, [*trainable, *frozen])
    light = _at_least_opset(light, weights)
    with_loss_model, loss_name, listed = with_loss(light, loss, loss_output_name, loss_input_names)
    _shapes_from_one_source(with_loss_model.graph)
    _parameters_as_inputs(with_loss_model.graph, weights)
    forward = fuse_patterns(with_loss_model, keep=[*trainable, *frozen]) if fuse else with_loss_model
    parameters = list(weights)
    forward = autocast(guard_inputs(forward, parameters), precision, parameters)
    scale = LOSS_SCALE if precision in LOSS_SCALED else None
    training = build_training_model(
        forward,
        loss_name,
        trainable,
        fuse=False,
        loss_scale=scale,
        recompute=recompute,
        recompute_layers=recompute_layers,
        loss_chunk_size=loss_chunk_size,
        frozen=frozen,
    )
    outputs = [loss_name, *listed, *(additional_output_names or [])]
    evaluation = _eval_model(forward, outputs)
    if outputs[1:]:
        _output_after_loss(training, forward, outputs[1:])

    paths = artifact_paths(artifact_directory or ".", prefix)
    paths["training"].parent.mkdir(parents=True, exist_ok=True)
    for key, graph_model in (("training", training), ("eval", evaluation)):
        onnx.checker.check_model(graph_model)
        onnx.save(graph_model, paths[key])
    if options is None:
        del paths["optimizer"]
    else:
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
