"""Mixed precision as ``torch.autocast`` gives it, over float32 master weights: ``autocast``
rewrites a float32 forward graph so that matrix products, attention and our ops compute in the
low type, the ops torch keeps in float32 stay there, and the rest take the widest type of their
operands. Differentiated afterwards, each Cast's gradient is a Cast back, so every parameter's
gradient reaches the optimizer in float32.

The table is torch's autocast op lists (``aten/src/ATen/autocast_mode.cpp``) said in ONNX ops:
``lower_precision_fp`` (CPU and CUDA: mm, bmm, matmul, linear, addmm, conv*, prelu,
scaled_dot_product_attention) is ``LOWER``; ``fp32`` is ``FLOAT32``, where we take CUDA's list,
the longer one (softmax, log_softmax, the losses, sum and the other reductions, exp, log, pow,
rsqrt, layer and group norm: on the CPU torch lets a softmax of bfloat16 values run in bfloat16);
everything else runs in the type its operands promote to, as torch's ops outside the lists do
(``PROMOTE``, with torch's rule that a scalar does not widen a tensor). An op in none of the
three computes in float32, which every graph of float32 ops accepts."""

from __future__ import annotations

from collections.abc import Collection

import onnx
from onnx import TensorProto, helper

from ..bfloat16 import namer, node_graphs
from ..domain import DOMAIN
from ..opschema import load_op_specs, register_schemas

FLOAT = TensorProto.FLOAT
PRECISIONS = {"fp32": FLOAT, "bf16-mixed": TensorProto.BFLOAT16, "fp16-mixed": TensorProto.FLOAT16}
LOSS_SCALED = frozenset({"fp16-mixed"})  # the precisions whose gradients need a loss scale
LOSS_SCALE = "loss_scale"  # the training model's input for it (float32 scalar; api.LossScaler's)


# Default-domain ops computing in the low type, each with the inputs cast to it (all its float
# inputs when None).
LOWER: dict[str, tuple[int, ...] | None] = {
    "MatMul": None,
    "Gemm": None,  # its bias too: torch's linear and addmm cast all three
    "Conv": None,
    "ConvTranspose": None,
    "Einsum": None,  # torch's einsum runs bmm
    "PRelu": None,
    "Attention": None,  # scaled_dot_product_attention (a float mask is cast as torch's is)
}
# Ops of our domain compute in the low type too; which inputs take it is read from the schemas.

# Ops kept in float32: their low inputs cast up.
FLOAT32 = frozenset(
    {
        "Softmax",
        "LogSoftmax",
        "SoftmaxCrossEntropyLoss",
        "NegativeLogLikelihoodLoss",
        "ReduceSum",
        "ReduceMean",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
        "CumSum",
        "Exp",
        "Log",
        "Pow",
        "Reciprocal",
        "Sqrt",
        "LayerNormalization",
        "GroupNormalization",
        "InstanceNormalization",
        "BatchNormalization",
        "RMSNormalization",
    }
)

# Ops running in the widest type of their operands, by the inputs that are operands (all float
# inputs when None; Dropout's ratio is not one).
PROMOTE: dict[str, tuple[int, ...] | None] = {
    **dict.fromkeys(
        (
            "Abs Add Ceil Clip Concat Cos Div Elu Equal Erf Expand Flatten Floor Gather "
            "GatherElements GatherND Gelu Greater GreaterOrEqual HardSigmoid HardSwish Identity "
            "IsInf IsNaN LeakyRelu Less LessOrEqual Max Mean Min Mish Mod Mul Neg Pad ReduceMax "
            "ReduceMin Relu Reshape Round ScatterElements ScatterND Selu Shape Sigmoid Sign Sin "
            "Size Slice Softplus Softsign Split Squeeze Sub Sum Tanh Tile Transpose Trilu Unsqueeze "
            "Where ArgMax ArgMin Celu"
        ).split()
    ),
    "Dropout": (0,),
}

_MATRIX_PRODUCTS = frozenset({"MatMul", "Gemm", "Einsum"})
# Ops that only move a tensor's elements: one of a parameter read only by low ops (an exported
# linear's weight transposed) runs after the parameter's Cast, in the low type.
_LAYOUT = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})


def _our_low_inputs(op_type: str, low: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The inputs and outputs of our op ``op_type`` whose type constraint admits ``low``."""
    spec = load_op_specs()[op_type]
    name = onnx.helper.tensor_dtype_to_string(low).removeprefix("TensorProto.").lower()
    admits = {c.name for c in spec.type_constraints if f"tensor({name})" in c.types}
    return (
        tuple(i for i, p in enumerate(spec.inputs) if p.type in admits),
        tuple(i for i, p in enumerate(spec.outputs) if p.type in admits),
    )


def _outer_names(graph: onnx.GraphProto) -> set[str]:
    """The names ``graph`` (and its subgraphs) read from enclosing scopes."""
    local = {v.name for v in [*graph.input, *graph.initializer]} | {o for n in graph.node for o in n.output}
    read = {i for n in graph.node for i in n.input if i}
    for node in graph.node:
        for sub in node_graphs(node):
            read |= _outer_names(sub)
    return read - local


def _rename_outer(graph: onnx.GraphProto, renamed: dict[str, str]) -> None:
    for node in graph.node:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        for sub in node_graphs(node):
            _rename_outer(sub, renamed)


class _Rewriter:
    def __init__(self, model: onnx.ModelProto, low: int, parameters: Collection[str]):
        register_schemas()
        inferred = onnx.shape_inference.infer_shapes(model)
        graph = inferred.graph
        self.low = low
        self.suffix: dict[int, str] = {
            TensorProto.BFLOAT16: "bf16",
            TensorProto.FLOAT16: "fp16",
            FLOAT: "fp32",
        }
        self.types = {
            v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]
        }
        self.types |= {i.name: i.data_type for i in graph.initializer}
        self.parameters = set(parameters)
        sizes = {i.name: len(i.dims) == 0 or all(d == 1 for d in i.dims) for i in graph.initializer}
        self.scalar_constants = {n for n, one in sizes.items() if one and n not in self.parameters}
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = next((a.t for a in node.attribute if a.name == "value"), None)
                if value is None or all(d == 1 for d in value.dims):
                    self.scalar_constants.add(node.output[0])
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.producer: dict[str, str] = {}
        self.fresh = namer(model)
        self.casts: dict[tuple[str, int], str] = {}
        self.nodes: list[onnx.NodeProto] = []

    def is_float(self, name: str) -> bool:
        return bool(name) and self.types.get(name) in (FLOAT, self.low)

    def cast(self, name: str, to: int) -> str:
        """``name`` as ``to``: itself, or its one Cast (shared by every reader)."""
        if self.types.get(name) == to:
            return name
        if (name, to) not in self.casts:
            target = self.fresh(f"{name}/{self.suffix[to]}")
            self.nodes.append(
                helper.make_node("Cast", [name], [target], name=self.fresh(f"{target}/Cast"), to=to)
            )
            self.types[target] = to
            self.casts[(name, to)] = target
        return self.casts[(name, to)]

    def _set_inputs(self, node: onnx.NodeProto, indices, to: int) -> None:
        for i in indices:
            if i < len(node.input) and self.is_float(node.input[i]):
                node.input[i] = self.cast(node.input[i], to)

    def _set_outputs(self, node: onnx.NodeProto, to: int, indices=None) -> None:
        for i, name in enumerate(node.output):
            if (indices is None or i in indices) and self.types.get(name) == FLOAT:
                self.types[name] = to

    def _computes_low(self, node: onnx.NodeProto) -> bool:
        domain = node.domain or ""
        return (domain == DOMAIN and node.op_type in load_op_specs()) or (
            domain in ("", "ai.onnx") and node.op_type in LOWER
        )

    def _read_low_only(self, name: str) -> bool:
        """Whether every reader of ``name`` computes in the low type (through layout ops)."""
        readers = self.readers.get(name, [])
        return bool(readers) and all(
            self._computes_low(r) or (r.op_type in _LAYOUT and all(map(self._read_low_only, r.output)))
            for r in readers
        )

    def _promote(self, node: onnx.NodeProto, operands) -> None:
        if (
            node.op_type in _LAYOUT
            and node.input[0] in self.parameters
            and self.types.get(node.input[0]) == FLOAT
            and all(map(self._read_low_only, node.output))
        ):
            node.input[0] = self.cast(node.input[0], self.low)
        indices = [i for i in (operands or range(len(node.input))) if i < len(node.input)]
        floats = [i for i in indices if self.is_float(node.input[i])]
        # A scalar does not widen a tensor (torch's rule for Python numbers and 0-d tensors), nor
        # does a linear's bias: torch's linear casts it with the weight.
        after_product = any(
            self.types.get(node.input[i]) == self.low and self.producer.get(node.input[i]) in _MATRIX_PRODUCTS
            for i in floats
        )
        followers = {
            i
            for i in floats
            if node.input[i] in self.scalar_constants
            or (node.op_type == "Add" and after_product and node.input[i] in self.parameters)
        }
        leaders = [i for i in floats if i not in followers]
        result = (
            FLOAT if not leaders or any(self.types.get(node.input[i]) == FLOAT for i in leaders) else self.low
        )
        self._set_inputs(node, floats, result)
        self._set_outputs(node, result)

    def visit(self, node: onnx.NodeProto) -> None:
        domain = node.domain or ""
        if domain == DOMAIN and node.op_type in load_op_specs():
            inputs, outputs = _our_low_inputs(node.op_type, self.low)
            self._set_inputs(node, inputs, self.low)
            self._set_outputs(node, self.low, outputs)
        elif domain in ("", "ai.onnx") and node.op_type in LOWER:
            self._set_inputs(node, LOWER[node.op_type] or range(len(node.input)), self.low)
            self._set_outputs(node, self.low)
        elif domain in ("", "ai.onnx") and node.op_type in PROMOTE:
            self._promote(node, PROMOTE[node.op_type])
        elif domain in ("", "ai.onnx") and node.op_type == "Cast":
            self.types[node.output[0]] = next(a.i for a in node.attribute if a.name == "to")
        else:  # FLOAT32, and any op the table does not name
            self._set_inputs(node, range(len(node.input)), FLOAT)
            outer = [
                n for sub in node_graphs(node) for n in _outer_names(sub) if self.types.get(n) == self.low
            ]
            if outer:
                renamed = {n: self.cast(n, FLOAT) for n in outer}
                for sub in node_graphs(node):
                    _rename_outer(sub, renamed)
        for output in node.output:
            self.producer[output] = node.op_type
        self.nodes.append(node)


def autocast(model: onnx.ModelProto, precision: str, parameters: Collection[str]) -> onnx.ModelProto:
    """A copy of the float32 forward ``model`` computing as ``torch.autocast`` does at
    ``precision`` (see the module's doc), ``model`` itself at fp32; ``parameters`` (float32
    master weights) are cast where an op reads them in the low type, once each. Graph outputs
    keep their declared types."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    low = PRECISIONS[precision]
    if low == FLOAT:
        return model  # no copy of the weights for nothing
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    rewriter = _Rewriter(result, low, parameters)
    for node in graph.node:
        rewriter.visit(node)
    # An output computed in the low type keeps its name and type: the value inside is renamed.
    renamed = {}
    for output in graph.output:
        if rewriter.types.get(output.name) == low:
            renamed[output.name] = rewriter.fresh(f"{output.name}/{rewriter.suffix[low]}")
    nodes = rewriter.nodes
    for node in nodes:
        node.input[:] = [renamed.get(i, i) for i in node.input]
        node.output[:] = [renamed.get(o, o) for o in node.output]
    nodes += [
        helper.make_node("Cast", [inner], [name], name=rewriter.fresh(f"{name}/Cast"), to=FLOAT)
        for name, inner in renamed.items()
    ]
    del graph.node[:]
    graph.node.extend(nodes)
    # The exporter's shapes stay (ONNX's inference cannot redo all of them); the types follow.
    for value in graph.value_info:
        elem = rewriter.types.get(value.name)
        value.name = renamed.get(value.name, value.name)
        if elem is not None and value.type.HasField("tensor_type"):
            value.type.tensor_type.elem_type = elem
    return result
