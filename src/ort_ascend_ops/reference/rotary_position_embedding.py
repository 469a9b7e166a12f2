"""Reference RotaryPositionEmbedding, written in onnxscript."""

from onnxscript import FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .rotary_position_embedding_layout import RotatedViews
from .rotary_position_embedding_rules import RotaryRules


@script(opset=ascend, default_opset=op)
def RotaryPositionEmbedding(x, cos, sin, mode: int = default("RotaryPositionEmbedding", "mode", int)):
    """y = x * cos + rotate(x) * sin; computes in float32, y cast back to T."""
    # Every mode is a permutation with sign of the last axis D: y = P(x) * cos + rotate(P(x)) * sin.
    shape = RotaryRules(x, cos, sin, mode=mode)
    permuted, rotated = RotatedViews(
        op.Reshape(op.Cast(x, to=FLOAT.dtype), shape, allowzero=1), shape, mode=mode
    )
    y = permuted * op.Cast(cos, to=FLOAT.dtype) + rotated * op.Cast(sin, to=FLOAT.dtype)
    return op.CastLike(y, x)
