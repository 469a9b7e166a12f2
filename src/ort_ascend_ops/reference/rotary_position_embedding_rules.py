"""The rules RotaryPositionEmbedding and its grad share (checks.py tells how they become ONNX)."""

from onnxscript import script

from ..opschema import choice_rule, choices
from ._opset import ascend, op
from .checks import All, AnyOf, Check, ElemType, IsFloatT, PadPair, SameType, SameVector

# The family's modes, as its forward op's schema lists them (tests/test_opschema.py holds the
# grad's to the same).
MODES = choices("RotaryPositionEmbedding", "mode")
MODE_RULE = choice_rule("RotaryPositionEmbedding", "mode")


@script(opset=ascend, default_opset=op)
def RotaryRules(data, cos, sin, mode: int):
    """data's shape (data: x, or dy for the grad), once the mode and the types and shapes of data,
    cos and sin are checked against the contract."""
    _ = SameType(cos, data, rule="input 'cos' must have the element type of '{data}'")
    _ = SameType(sin, data, rule="input 'sin' must have the element type of '{data}'")
    mode_value = op.Constant(value_int=mode)
    known_mode = AnyOf(op.Equal(op.Constant(value_ints=MODES), mode_value))
    shape = Check(op.Shape(data), known_mode, rule=MODE_RULE)
    shape = Check(shape, IsFloatT(ElemType(data)), rule="input '{data}' must be float32, float16 or bfloat16")
    rank = op.Shape(shape)
    shape = Check(
        shape,
        All(op.Greater(rank, op.Constant(value_ints=[0]))),
        rule="input '{data}' must have rank >= 1",
    )
    cos_shape = op.Shape(cos)
    shape = Check(
        shape, SameVector(cos_shape, op.Shape(sin)), rule="inputs 'cos' and 'sin' must have one shape"
    )
    multiple = op.Where(
        op.Equal(mode_value, op.Constant(value_int=2)), op.Constant(value_int=4), op.Constant(value_int=2)
    )
    last = op.Slice(shape, op.Constant(value_ints=[-1]), rank)
    shape = Check(
        shape,
        All(op.Equal(op.Mod(last, multiple), op.Constant(value_int=0))),
        rule="the last axis D of '{data}' must be even (modes 0, 1, 3) or a multiple of 4 (mode 2)",
    )
    shape = Check(
        shape,
        SameVector(op.Shape(cos_shape), rank),
        rule="input 'cos' must have the rank of '{data}' (a layout's table, e.g. [1, S, 1, D] for BSND)",
    )
    # Each axis of cos is data's or 1, and its last axis is D.
    padded_cos, padded_shape = PadPair(cos_shape, shape)
    table = op.Or(op.Equal(padded_cos, padded_shape), op.Equal(padded_cos, op.Constant(value_int=1)))
    broadcasts = op.And(
        All(table), All(op.Equal(op.Slice(cos_shape, op.Constant(value_ints=[-1]), rank), last))
    )
    return Check(
        shape,
        broadcasts,
        rule="input 'cos' must broadcast to '{data}' unchanged, its last axis D never broadcast",
    )
