"""Reference SwiGlu, written in onnxscript."""

from onnxscript import FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .swi_glu_rules import GluRules


@script(opset=ascend, default_opset=op)
def SwiGlu(x, dim: int = default("SwiGlu", "dim", int)):
    """silu(A) * B of x's halves A, B along dim; computes in float32, y cast back to T."""
    view, y_shape = GluRules(x, dim=dim)
    x_f = op.Reshape(op.Cast(x, to=FLOAT.dtype), view, allowzero=1)
    a, b = op.Split(x_f, axis=1, num_outputs=2)
    return op.CastLike(op.Reshape(a * op.Sigmoid(a) * b, y_shape, allowzero=1), x)
