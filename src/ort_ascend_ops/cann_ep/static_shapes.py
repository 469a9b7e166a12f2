"""A model specialized to the shapes of its inputs, as the NPU runs it (torch_npu and CANN compile
per shape too): every ``Shape`` and ``Size`` whose input's shape is then known, and the shape
arithmetic after it, folded into constants. ONNX Runtime runs a ``Shape`` of a device tensor on
the CPU and copies the whole tensor to the host for it (measured: a MemcpyToHost before every
one); folded, nothing is left on the host but constants, and the masks computed from positions
alone are computed once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass
from onnxscript import optimizer

from ..domain import DOMAIN
from ..opschema import register_schemas

# Folded constants up to these sizes (elements): a causal mask of 4096 x 4096 booleans folds, a
# weight of a model whose initializers feed no data node does not get copied.
_INPUT_LIMIT = 1 << 22
_OUTPUT_LIMIT = 1 << 24
_ROUNDS = 4  # inference sees through what the last round folded; two sufficed for every model here


def _shape_nodes(model: onnx.ModelProto) -> int:
    return sum(n.op_type in ("Shape", "Size") for n in model.graph.node)


def _unname_unused_outputs(model: onnx.ModelProto) -> None:
    """onnx_ir names the outputs a node leaves out; ours must stay left out (their inference
    refuses some without inputs the node does not give)."""
    used = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    for node in model.graph.node:
        if node.domain == DOMAIN:
            for k, name in enumerate(node.output):
                if k and name not in used:
                    node.output[k] = ""


def with_static_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """``model`` with the inputs named in ``shapes`` fixed to them and its shape computations
    folded (``model``'s other inputs keep theirs). An input named that the model lacks, or a
    shape of another rank than its input's, is a ValueError naming it."""
    register_schemas()
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    inputs = {i.name: i for i in fixed.graph.input}
    for name, shape in shapes.items():
        if name not in inputs:
            raise ValueError(f"static shapes: the model has no input {name!r} (its inputs: {list(inputs)})")
        dims = inputs[name].type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise ValueError(
                f"static shapes: input {name!r} has {len(dims)} axes, the shape given {list(shape)}"
            )
        for dim, size in zip(dims, shape, strict=True):
            dim.Clear()
            dim.dim_value = int(size)
    before = None
    for _ in range(_ROUNDS):
        del fixed.graph.value_info[:]
        fixed = onnx.shape_inference.infer_shapes(fixed, data_prop=True)
        folded = ir.serde.deserialize_model(fixed)
        optimizer.fold_constants(folded, input_size_limit=_INPUT_LIMIT, output_size_limit=_OUTPUT_LIMIT)
        RemoveUnusedNodesPass()(folded)
        fixed = ir.serde.serialize_model(folded)
        _unname_unused_outputs(fixed)
        left = _shape_nodes(fixed)
        if left == 0 or left == before:
            break
        before = left
    return fixed
