"""``export_torch``: a PyTorch module exported to ONNX for training (needs the ``[torch]`` extra)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping

import onnx

from . import batch_norm, packed_attention
from .experts import grouped_experts, translations
from .patches import exportable


def _torch():
    try:
        import torch
    except ImportError as error:
        raise ImportError("export_torch needs PyTorch: pip install 'ort_ascend_ops[torch]'") from error
    return torch


def _named_tensors(result) -> dict:
    """The tensors a module returned, by name: a bare tensor is the loss; a dict or a Hugging
    Face ModelOutput keeps its tensor entries (not a cache); a tuple numbers them."""
    torch = _torch()
    if isinstance(result, torch.Tensor):
        return {"loss": result}
    if isinstance(result, Mapping):
        return {k: v for k, v in result.items() if isinstance(v, torch.Tensor)}
    if isinstance(result, tuple | list):
        return {f"output_{i}": v for i, v in enumerate(result) if isinstance(v, torch.Tensor)}
    raise TypeError(f"the module returned {type(result).__name__}; export_torch needs tensors")


def _rename(graph: onnx.GraphProto, names: Mapping[str, str]) -> None:
    for init in graph.initializer:
        init.name = names.get(init.name, init.name)
    for value in [*graph.input, *graph.value_info]:
        value.name = names.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [names.get(i, i) for i in node.input]


def export_torch(module, args, *, dynamic_shapes=None, opset: int | None = None) -> onnx.ModelProto:
    """``module`` exported with ``torch.onnx.export(dynamo=True)`` as training needs it: one
    initializer per parameter, named by its ``state_dict`` key and holding the parameter as torch
    stores it (the exporter's optimizer, which transposes, renames and merges weights, is off;
    weights torch ties are one initializer under the first name). ``args`` is a tuple of
    positional inputs or a dict of keyword inputs (a Hugging Face batch with ``labels`` puts the
    loss in the graph); the outputs are named as ``_named_tensors`` says. ``opset``: the
    exporter's default when None."""
    torch = _torch()
    kwargs = dict(args) if isinstance(args, Mapping) else {}
    positional = () if isinstance(args, Mapping) else tuple(args)

    class Outputs(torch.nn.Module):  # type: ignore[name-defined]  # torch is imported when called
        def __init__(self):
            super().__init__()
            self.module = module

        def forward(self, *a, **k):
            return tuple(_named_tensors(self.module(*a, **k)).values())

    # torch.export binds a dict of dynamic_shapes to the names of forward's parameters: those of
    # the inputs given (a Hugging Face forward has dozens more, and **kwargs).
    given = list(kwargs) or list(inspect.signature(module.forward).parameters)[: len(positional)]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    # inspect.signature, which torch.export calls, reads a function's __signature__.
    signature = inspect.Signature([inspect.Parameter(n, kind) for n in ["self", *given]])
    Outputs.forward.__signature__ = signature  # type: ignore[attr-defined]

    # The packed attention's translation only where it runs: the exporter traces every function
    # of its table on each export.
    packing = packed_attention.active(module)
    with grouped_experts(module), exportable():
        with torch.no_grad():
            names = list(_named_tensors(module(*positional, **kwargs)))
        exported = torch.onnx.export(
            Outputs(),
            positional,
            kwargs=kwargs,
            dynamo=True,
            optimize=False,
            opset_version=opset,
            dynamic_shapes=dynamic_shapes,
            output_names=names,
            custom_translation_table=translations()
            | batch_norm.translations()
            | (packed_attention.translations() if packing else {}),
            verbose=False,
        )
    model = exported.model_proto
    _rename(model.graph, _parameter_names(model.graph, module))
    _check_parameters(model, module)
    _record_padding_rows(model, module)
    _record_parameters(model, module)
    return model


# The initializers that are the module's trainable parameters, and those that are its frozen ones
# (requires_grad False: a LoRA model's base weights); the rest are buffers and constants.
# generate_artifacts trains the first and feeds the second from the checkpoint by default.
PARAMETERS = "ort_ascend_ops.parameters"
FROZEN = "ort_ascend_ops.frozen_parameters"


def _record_parameters(model: onnx.ModelProto, module) -> None:
    stored = {i.name for i in model.graph.initializer}
    for key, wanted in ((PARAMETERS, True), (FROZEN, False)):
        names = [n for n, p in module.named_parameters() if p.requires_grad is wanted and n in stored]
        if names or key == PARAMETERS:  # a module without frozen parameters records none
            model.metadata_props.add(key=key, value=json.dumps(names))


def parameter_names(model: onnx.ModelProto, key: str = PARAMETERS) -> list[str] | None:
    """The trainable parameters export_torch recorded (``key=FROZEN``: the frozen ones), or None
    for a model it did not export."""
    recorded = next((p.value for p in model.metadata_props if p.key == key), None)
    return None if recorded is None else json.loads(recorded)


# An nn.Embedding's padding_idx: torch's embedding backward sends its row nothing from the lookup
# (what other uses of the weight send it, a tied lm_head's, stays). ONNX's Gather has no such
# notion, so the export records the rows and the Gather rule masks the lookups of them.
PADDING_ROWS = "ort_ascend_ops.padding_rows"


def _record_padding_rows(model: onnx.ModelProto, module) -> None:
    torch = _torch()
    rows = {}
    names = _first_names(module)
    for sub in module.modules():
        if isinstance(sub, torch.nn.Embedding) and sub.padding_idx is not None:
            rows[names[id(sub.weight)]] = sub.padding_idx % sub.num_embeddings
    if rows:
        model.metadata_props.add(key=PADDING_ROWS, value=json.dumps(rows))


def padding_rows(model: onnx.ModelProto) -> dict[str, int]:
    """The parameters (by name) whose one row takes no gradient, as export_torch recorded them."""
    recorded = next((p.value for p in model.metadata_props if p.key == PADDING_ROWS), "{}")
    return json.loads(recorded)


def _first_names(module) -> dict[int, str]:
    """Each parameter (by id) -> the one name ``named_parameters`` gives it (a tied one has more)."""
    return {id(p): n for n, p in module.named_parameters()}


def _parameter_names(graph: onnx.GraphProto, module) -> dict[str, str]:
    """Exported initializer name -> state_dict key: without the wrapper's prefix, and a tied
    parameter (stored under any of its names) under the name ``named_parameters`` gives it."""
    prefix = "module."
    first = _first_names(module)
    canonical = {n: first[id(p)] for n, p in module.named_parameters(remove_duplicate=False)}
    names = {}
    for init in graph.initializer:
        name = init.name.removeprefix(prefix)
        names[init.name] = canonical.get(name, name)
    return names


def _check_parameters(model: onnx.ModelProto, module) -> None:
    """Each parameter is stored as torch holds it (one the forward never reads is left out)."""
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    for name, parameter in module.named_parameters():
        if name in shapes and shapes[name] != list(parameter.shape):
            raise RuntimeError(f"the export stored '{name}' as {shapes[name]}, not {list(parameter.shape)}")
