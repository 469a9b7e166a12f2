"""The backward graph under construction: fresh names, nodes and constants, and what shape
inference knows about every forward value. Gradient rules build through it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Sums in float16 and bfloat16 lose integers past 2048 and 256 (and ONNX Runtime's CPU
# ScatterElements does not add them at all): rules sum them in float32.
_HALF_TYPES = {TensorProto.FLOAT16, TensorProto.BFLOAT16}


def grad_name(name: str) -> str:
    """The training model's output holding the gradient of ``name``."""
    return f"{name}_grad"


class GradientError(ValueError):
    """The model cannot be differentiated as asked (the message names the node or value)."""


def attribute(node: onnx.NodeProto, name: str, default=None):
    """A node attribute's value, or ``default`` when the node leaves it out."""
    for a in node.attribute:
        if a.name == name:
            value = helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def depends_on(graph: onnx.GraphProto, roots, *, whole_nodes: bool = True, stop_at=None) -> set[str]:
    """The values ``roots`` and everything they are computed from; with ``whole_nodes`` a node's
    other outputs too (a node runs whole, so pruning keeps them). ``stop_at(node)`` true: the
    walk takes the node's outputs but not what its inputs come from."""
    producer = {o: node for node in graph.node for o in node.output if o}
    needed: set[str] = set()
    stack = list(roots)
    while stack:
        value = stack.pop()
        if value in needed:
            continue
        needed.add(value)
        if value in producer:
            if stop_at is None or not stop_at(producer[value]):
                stack.extend(i for i in producer[value].input if i)
            if whole_nodes:
                stack.extend(o for o in producer[value].output if o)
    return needed


def node_label(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node '{node.name or node.output[0]}'"


class Backward:
    """Nodes appended to a training graph. ``model`` is the shape-inferred forward model (its
    nodes may be rewritten by rules, e.g. to expose a saved value); ``needs`` holds the values
    whose gradient is wanted; ``padding_rows`` the embedding tables' padding rows by table."""

    def __init__(self, model: onnx.ModelProto, needs: set[str], padding_rows: dict[str, int] | None = None):
        self.model = model
        self._padding_rows = padding_rows or {}
        graph = model.graph
        self._types = {v.name: v.type for v in [*graph.input, *graph.value_info, *graph.output]}
        self._constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
        for init in graph.initializer:
            self._types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, init.dims))
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.attribute:
                value = node.attribute[0]
                if value.name == "value":
                    self._constants[node.output[0]] = numpy_helper.to_array(value.t)
                elif value.name in ("value_int", "value_ints", "value_float", "value_floats"):
                    self._constants[node.output[0]] = np.array(helper.get_attribute_value(value))
        self._needs = needs
        self._originals: dict[str, str] = {}  # a recomputed value -> the forward's
        self._taken = {v for n in graph.node for v in [*n.input, *n.output]} | set(self._types)
        self._shapes: dict[str, str] = {}
        self._rows_added: dict[str, tuple[str, str, str]] = {}  # total's: result -> (table, rows, updates)
        self._picked: dict[str, tuple[str, str, int]] = {}  # one_picked's: result -> (indices, values, axis)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    # What is known about forward values.
    def needs(self, name: str) -> bool:
        """Whether the gradient of ``name`` is wanted (it lies on a path from ``wrt`` to the loss)."""
        return self._originals.get(name, name) in self._needs

    def recomputed(self, name: str, original: str) -> None:
        """Declares ``name`` a copy of forward value ``original`` (recomputed, or made to wait):
        its type, and whether its gradient is wanted, are the original's."""
        self._originals[name] = original
        if original in self._types:
            self._types[name] = self._types[original]

    def padding_row(self, table: str) -> int | None:
        """The row of an embedding table (``nn.Embedding``'s ``padding_idx``) that its lookups
        leave without gradient, as export_torch recorded it; None for any other value."""
        return self._padding_rows.get(table)

    def value_type(self, name: str) -> onnx.TypeProto:
        return self._types[name]

    def elem_type(self, name: str) -> int:
        return self._types[name].tensor_type.elem_type

    def known_elem_type(self, name: str) -> int | None:
        """``elem_type``, or None for a value shape inference left untyped."""
        return self._types[name].tensor_type.elem_type if name in self._types else None

    def shape(self, name: str) -> list[int | None] | None:
        """The static shape (None for an unknown dim), or None when even the rank is unknown."""
        dims = self.dims(name)
        return None if dims is None else [d if isinstance(d, int) else None for d in dims]

    def rank(self, name: str) -> int:
        return len(self.ranked_dims(name))

    def ranked_shape(self, name: str) -> list[int | None]:
        """``shape``, for a value whose rank a rule needs: raises when it is unknown."""
        return [d if isinstance(d, int) else None for d in self.ranked_dims(name)]

    def ranked_dims(self, name: str) -> list[int | str | None]:
        """``dims``, for a value whose rank a rule needs: raises when it is unknown."""
        dims = self.dims(name)
        if dims is None:
            raise ValueError(f"the rank of '{name}' is unknown; the gradient rules need it")
        return dims

    def accumulation_type(self, name: str) -> int:
        """The element type to sum ``name``'s values in: float32 for float16 and bfloat16, else
        the value's own."""
        elem = self.elem_type(name)
        return TensorProto.FLOAT if elem in _HALF_TYPES else elem

    def constant(self, name: str) -> np.ndarray | None:
        """The value of an initializer or Constant output, else None."""
        return self._constants.get(name)

    # Building.
    def reserve(self, names) -> None:
        """Keeps ``names`` (the training model's output names) from being handed out."""
        self._taken.update(names)

    def fresh(self, hint: str, suffix: str = "_grad") -> str:
        """An unused name from ``hint`` (``suffix=""`` for a forward value a rule exposes)."""
        base = hint if hint.endswith(suffix) else hint + suffix
        name, i = base, 1
        while name in self._taken:
            name, i = f"{base}_{i}", i + 1
        self._taken.add(name)
        return name

    def producer(self, name: str) -> onnx.NodeProto | None:
        """The backward node built that computes ``name``; None for a forward value."""
        return next((n for n in reversed(self.nodes) if name in n.output), None)

    def op(self, op_type: str, *inputs: str, outputs: int = 1, domain: str = "", hint: str = "", **attrs):
        """Appends a node; returns its output name, or the list of them when ``outputs`` > 1."""
        names = [self.fresh(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, domain=domain, **attrs))
        return names[0] if outputs == 1 else names

    def const(self, value, elem_type: int = TensorProto.INT64, hint: str = "const") -> str:
        """An initializer holding ``value`` (a scalar or nested list) with ``elem_type``."""
        array = np.asarray(value)
        name = self.fresh(hint)
        flat = array.reshape(-1).tolist()
        self.initializers.append(helper.make_tensor(name, elem_type, list(array.shape), flat))
        return name

    def scalar(self, value: float, like: str) -> str:
        """A scalar constant of ``like``'s element type."""
        return self.const(value, self.elem_type(like), hint="scalar")

    def convert(self, name: str, source: int, target: int) -> str:
        """``name`` (of element type ``source``) cast to ``target``; itself when they agree."""
        return name if source == target else self.op("Cast", name, to=target)

    def shape_of(self, name: str) -> str:
        if name not in self._shapes:
            self._shapes[name] = self.op("Shape", name, hint=f"{name}_shape")
        return self._shapes[name]

    def zeros_like(self, name: str, elem_type: int | None = None) -> str:
        """Zeros of ``name``'s shape, of its element type or ``elem_type``."""
        zero = helper.make_tensor("value", self.elem_type(name) if elem_type is None else elem_type, [1], [0])
        return self.op("ConstantOfShape", self.shape_of(name), value=zero, hint=f"{name}_zeros")

    def reshape_like(self, grad: str, target: str) -> str:
        return self.op("Reshape", grad, self.shape_of(target), hint=target)

    def dims(self, name: str) -> list[int | str | None] | None:
        """The shape with symbolic dims by name (one name is one size throughout the graph), None
        for an unknown dim; None when even the rank is unknown."""
        t = self._types.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        return [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.tensor_type.shape.dim
        ]

    def sum_to(self, grad: str, grad_dims: list[int | str | None] | None, target: str) -> str:
        """``grad`` (of shape ``grad_dims``, as ``dims`` gives it) summed back to ``target``'s
        shape, undoing broadcasting: over axes known at build time when the dims say which
        (equal sizes or names are kept; a 1 is summed, which is a no-op if grad's is 1 too; a size
        other than 1 was not broadcast, whatever grad's), else over axes found at run time."""
        g, t = grad_dims, self.dims(target)
        if g is None or t is None or len(g) < len(t):
            return self._sum_to_dynamic(grad, target)
        lead = len(g) - len(t)
        aligned = list(zip(t, g[lead:], strict=True))
        if any(
            td is None or (td != gd and td != 1 and not (isinstance(td, int) and gd is None))
            for td, gd in aligned
        ):
            return self._sum_to_dynamic(grad, target)
        axes = list(range(lead)) + [lead + i for i, (td, gd) in enumerate(aligned) if td == 1 and gd != 1]
        if axes:
            grad = self.op("ReduceSum", grad, self.const(axes), keepdims=1, hint=target)
        if lead:
            grad = self.op("Squeeze", grad, self.const(list(range(lead))), hint=target)
        return grad

    def _sum_to_dynamic(self, grad: str, target: str) -> str:
        # Axes where target (left-padded with 1s to grad's rank) is 1 and grad is not, found at run time.
        g_shape, t_shape = self.shape_of(grad), self.shape_of(target)
        g_rank = self.op("Size", g_shape)
        t_rank = self.op("Size", t_shape)
        pad = self.op("Sub", g_rank, t_rank)
        one = helper.make_tensor("value", TensorProto.INT64, [1], [1])
        ones = self.op("ConstantOfShape", self.op("Reshape", pad, self.const([1])), value=one)
        padded = self.op("Concat", ones, t_shape, axis=0)
        int_one = self.const(1)
        mask = self.op(
            "And", self.op("Equal", padded, int_one), self.op("Not", self.op("Equal", g_shape, int_one))
        )
        axes = self.op("Reshape", self.op("NonZero", mask), self.const([-1]))
        summed = self.op("ReduceSum", grad, axes, keepdims=1, noop_with_empty_axes=1, hint=target)
        return self.op("Reshape", summed, t_shape, hint=target)

    def one_picked(self, like: str, indices: str, values: str, axis: int, elem_type: int) -> str:
        """Zeros of ``like``'s shape but for ``values`` (of ``elem_type``) at ``indices`` along
        ``axis``, one per position of the other axes (both of size 1 along ``axis``): a likelihood
        loss's gradient. ``picked`` gives the LogSoftmax rule its parts."""
        zeros = self.zeros_like(like, elem_type)
        result = self.op("ScatterElements", zeros, indices, values, axis=axis)
        self._picked[result] = (indices, values, axis)
        return result

    def picked(self, grad: str) -> tuple[str, str, int] | None:
        """(indices, values, axis) of a gradient ``one_picked`` made, else None."""
        return self._picked.get(grad)

    def rows_added(self, table: str, rows: str, updates: str) -> str:
        """``updates`` (rows of ``table``'s shape, in its accumulation type) added into zeros of
        ``table``'s shape at ``rows`` (``[..., 1]`` row indices), in ``table``'s type. ``total``
        adds several of these for one table in one scatter."""
        acc = self.accumulation_type(table)
        summed = self.rows_scattered(self.zeros_like(table, acc), rows, updates, hint=table)
        result = self.convert(summed, acc, self.elem_type(table))
        self._rows_added[result] = (table, rows, updates)
        return result

    def rows_scattered(self, zeros: str, rows: str, updates: str, hint: str) -> str:
        """``updates`` added into ``zeros`` at ``rows`` (``[..., 1]`` row indices), as ScatterND
        with reduction 'add' but by ScatterElements over rows flattened to ``[n, width]``: ONNX
        Runtime's ScatterND adds with several threads and loses updates to one row (onnxruntime
        issue 18048: a Llama's embedding gradient off by 20% at 2 threads), its ScatterElements
        adds in index order on one. A table of rank 2 (an embedding's) is its own flat view: no
        Reshape writes the result (on the CANN EP that Reshape would copy with a synchronous
        aclrtMemcpy, which does not wait for the stream that computed its input)."""
        flat_table = self.rank(hint) == 2
        trailing = self.op("Slice", self.shape_of(zeros), self.const([1]), self.const([2**62]))
        flat = self.op("Concat", self.const([-1]), self.op("ReduceProd", trailing, keepdims=1), axis=0)
        flat_updates = self.op("Reshape", updates, flat)
        flat_rows = self.op(
            "Expand", self.op("Reshape", rows, self.const([-1, 1])), self.op("Shape", flat_updates)
        )
        summed = self.op(
            "ScatterElements",
            zeros if flat_table else self.op("Reshape", zeros, flat),
            flat_rows,
            flat_updates,
            axis=0,
            reduction="add",
            hint=hint,
        )
        return summed if flat_table else self.op("Reshape", summed, self.shape_of(zeros), hint=hint)

    def scattered(self, grad: str) -> bool:
        """Whether ``grad`` is a row scatter ``rows_added`` made (``total`` joins those)."""
        return grad in self._rows_added

    def total(self, grads: Sequence[str], hint: str) -> str:
        """The sum of the gradients reaching one value (fan-out). The row scatters among them
        (``rows_added``: the lookups of one weight, ``w[e]`` per expert of a hand-written MoE) are
        one scatter of all their rows: one table of zeros, not one per lookup (the single ones are
        left for the pruning of the backward)."""
        scattered = [self._rows_added[g] for g in grads if g in self._rows_added]
        if len(scattered) > 1:
            table = scattered[0][0]
            trailing = self.op("Slice", self.shape_of(table), self.const([1]), self.const([2**62]))
            flat = self.op("Concat", self.const([-1]), trailing, axis=0)
            rows = self.op(
                "Concat", *(self.op("Reshape", r, self.const([-1, 1])) for _, r, _ in scattered), axis=0
            )
            updates = self.op("Concat", *(self.op("Reshape", u, flat) for _, _, u in scattered), axis=0)
            grads = [self.rows_added(table, rows, updates)] + [g for g in grads if g not in self._rows_added]
        # Added as they come, in the backward's order: a weight's gradients from chunks of the
        # loss (or from many uses) need not all exist at once, as they would for one Sum.
        total = grads[0]
        for grad in grads[1:]:
            total = self.op("Add", total, grad, hint=hint)
        return total

    def pruned(self, outputs: Sequence[str]) -> list[onnx.NodeProto]:
        """The nodes built that the values ``outputs`` depend on, in order."""
        producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        keep, stack = set(), list(outputs)
        while stack:
            index = producer.get(stack.pop())
            if index is not None and index not in keep:
                keep.add(index)
                stack.extend(i for i in self.nodes[index].input if i)
        return [n for i, n in enumerate(self.nodes) if i in keep]


# One gradient name (or None: no gradient) per slot: a rule takes one per output of the node and
# returns one per input.
Grads = list[str | None]
# rule(backward, node, output_grads) -> input_grads; the registration table is rules.RULES.
GradientRule = Callable[[Backward, onnx.NodeProto, Grads], Grads]


def first_grad(grads: Grads) -> str:
    """``grads[0]``, for a rule that reads only its node's first output's gradient: a rule runs
    only when some output has one, and such a node's other outputs have none."""
    g = grads[0]
    if g is None:
        raise GradientError("no gradient reaches the node's first output")
    return g
