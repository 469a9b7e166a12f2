"""Example models with their training graphs (the scripts in ``models/`` save them): a Llama-style
decoder block (:mod:`.llama_block`) and the DeepSeek indexer training loss (:mod:`.indexer_loss`).

Each module has a ``Config`` of sizes, ``forward_model(config)``, ``build(config)`` returning the
forward and training ``onnx.ModelProto``s, ``WRT`` (the differentiated inputs), ``LOSS`` (the loss
output) and ``example_inputs(rng, config)`` (every graph input as a NumPy array)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import onnx
from onnxscript import FLOAT, OnnxFunction
from onnxscript.onnx_types import TensorType

from ..op_model import IR_VERSION
from ..reference import attach_functions

PRODUCER = "ort_ascend_ops.examples"


def finish(model: onnx.ModelProto, doc: str) -> onnx.ModelProto:
    """Fixed IR version and producer, so that the saved files depend on nothing but the code."""
    model.ir_version = IR_VERSION
    model.producer_name = PRODUCER
    model.producer_version = ""
    model.doc_string = doc
    return model


def committed_model(file: str) -> Path:
    """A committed export the wheel ships: beside this package in the wheel, or in a source
    checkout's ``models/`` (or ``models/hf/``)."""
    checkout = Path(__file__).parents[3] / "models"
    for folder in (Path(__file__).parent, checkout, checkout / "hf"):
        if (folder / file).is_file():
            return folder / file
    raise FileNotFoundError(f"{file} is neither in {Path(__file__).parent} nor in the checkout's models/")


def without_debug_metadata(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model without the exporter's per-node and per-value debug metadata (source lines, which
    would more than double a file), in place."""
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for value in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        del value.metadata_props[:]
    return model


def to_model(
    function: OnnxFunction,
    input_shapes: Mapping[str, Sequence[int]],
    output_shapes: Mapping[str, Sequence[int]],
    doc: str,
    output_types: Mapping[str, type[TensorType]] | None = None,
) -> onnx.ModelProto:
    """The model of a script-mode function with static float32 input and output shapes (given in
    the function's parameter and return order; ``output_types`` overrides an output's element
    type), carrying the reference functions so that it runs on stock ONNX Runtime."""
    output_types = output_types or {}
    model = function.to_model_proto(
        input_types=[FLOAT[tuple(shape)] for shape in input_shapes.values()],
        output_types=[output_types.get(name, FLOAT)[tuple(shape)] for name, shape in output_shapes.items()],
    )
    assert [i.name for i in model.graph.input] == list(input_shapes), "input shapes out of order"
    assert [o.name for o in model.graph.output] == list(output_shapes), "output shapes out of order"
    return finish(attach_functions(model), doc)


def save_models(directory: Path, files: Sequence[str], models: Iterable[onnx.ModelProto]) -> int:
    """Saves ``models`` as ``files`` in ``directory``, saying so: the scripts in ``models/``."""
    for name, model in zip(files, models, strict=True):
        onnx.save(model, directory / name)
        print(f"wrote {directory / name} ({(directory / name).stat().st_size} bytes)")
    return 0


def run_hash_seeded(main: Callable[[], int]) -> None:
    """Exits with ``main()`` run under ``PYTHONHASHSEED=0``, this process re-executed with it if
    needed: onnxscript names a few values of the reference functions in set order, and a script
    in ``models/`` must write the same bytes every time."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    sys.exit(main())
