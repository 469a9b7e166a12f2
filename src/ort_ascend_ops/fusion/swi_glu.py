"""LLaMA-style gated MLPs, ``silu(gate) * up`` with SiLU as exporters spell it
(``gate * Sigmoid(gate)``), rewritten to ``SwiGlu`` over the gate and up halves side by side.

- Separate projections ``gate = h @ Wg``, ``up = h @ Wu`` of one ``h`` (Llama, Qwen, Mistral)
  become one product ``h @ [Wg | Wu]``: the weights are joined, not the activations, and the two
  products are one. Weights that come transposed (``Transpose(W)``, as torch.onnx exports
  ``nn.Linear``) are joined before the transpose, which ONNX Runtime then folds into the product.
- A merged projection split in two (Phi-3's ``gate_up_proj``, ``chunk(2, -1)``) becomes SwiGlu of
  the projection itself.
- Any other ``silu(gate) * up`` of one shape becomes SwiGlu of the two joined along the last axis.

The training graph then keeps one ``[tokens, 2 * intermediate]`` tensor per MLP for the backward,
where the decomposed form keeps the gate, its sigmoid, the SiLU and the up projection."""

from __future__ import annotations

import onnx_ir as ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN
from .values import allows_types, constant_list, dims, known_rank, produced_by, same_dim


def _silu_times(op, gate, up):
    return op.Mul(op.Mul(gate, op.Sigmoid(gate)), up, _outputs=["out"])


def _same_shape(a: ir.Value, b: ir.Value) -> bool:
    da, db = dims(a), dims(b)
    return da is not None and db is not None and len(da) == len(db) and all(map(same_dim, da, db))


class SeparateSwiGlu(pattern.RewriteRuleClassBase):
    """``silu(gate) * up`` of two values of one shape."""

    def pattern(self, op, gate, up):
        return _silu_times(op, gate, up)

    def check(self, context, gate, up, **_):
        result = pattern.MatchResult()
        if not _same_shape(gate, up) or known_rank(gate) == 0:
            return result.fail("the gate and up values are not known to have one shape")
        if not allows_types("SwiGlu", x=gate) or not allows_types("SwiGlu", x=up):
            return result.fail("the gate's type is not one SwiGlu takes")
        return result

    def rewrite(self, op, gate, up, **_):
        return op.SwiGlu(_joined(op, gate, up), dim=-1, _domain=DOMAIN)


def _joined(op, gate: ir.Value, up: ir.Value) -> ir.Value:
    """[gate | up] along the last axis: one product of the shared input by the joined weights
    where both are products of one input by 2-D weights, the two values joined otherwise."""
    gate_mm, up_mm = produced_by(gate, "MatMul"), produced_by(up, "MatMul")
    if gate_mm is None or up_mm is None or gate_mm.inputs[0] is not up_mm.inputs[0]:
        return op.Concat(gate, up, axis=-1)
    wg, wu = gate_mm.inputs[1], up_mm.inputs[1]
    shape = dims(wg)
    if wg is None or wu is None or shape is None or len(shape) != 2 or not _same_shape(wg, wu):
        return op.Concat(gate, up, axis=-1)
    tg, tu = produced_by(wg, "Transpose"), produced_by(wu, "Transpose")
    if tg is not None and tu is not None and all(_is_swap(t) for t in (tg, tu)):
        weights = op.Transpose(op.Concat(tg.inputs[0], tu.inputs[0], axis=0), perm=[1, 0])
    else:
        weights = op.Concat(wg, wu, axis=1)
    return op.MatMul(gate_mm.inputs[0], weights)


def _is_swap(transpose: ir.Node) -> bool:
    return list(transpose.attributes.get_ints("perm", [1, 0])) == [1, 0]


class MergedSwiGlu(pattern.RewriteRuleClassBase):
    """``silu(gate) * up`` of the two equal halves of one value's last axis (Split)."""

    def pattern(self, op, x):
        gate, up = op.Split(x, _allow_other_inputs=True, _outputs=["gate", "up"])
        return _silu_times(op, gate, up)

    def check(self, context, x, gate, up, **_):
        result = pattern.MatchResult()
        shape = dims(x)
        if shape is None or not shape:
            return result.fail("unknown rank")
        split = gate.producer()
        axis = split.attributes.get_int("axis", 0)
        if axis not in (-1, len(shape) - 1):
            return result.fail("the split is not along the last axis")
        sizes = (
            constant_list(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] is not None else None
        )
        if sizes is not None and (len(sizes) != 2 or sizes[0] != sizes[1]):
            return result.fail("the halves differ in size")
        if sizes is None and split.attributes.get_int("num_outputs", 2) != 2:
            return result.fail("the split makes more than two parts")
        if not _same_shape(gate, up) or not allows_types("SwiGlu", x=x):
            return result.fail("the halves are not known equal, or the type is not SwiGlu's")
        return result

    def rewrite(self, op, x, **_):
        return op.SwiGlu(x, dim=-1, _domain=DOMAIN)


SWI_GLU_RULES = [MergedSwiGlu.rule(), SeparateSwiGlu.rule()]
