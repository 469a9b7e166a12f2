"""Reference SwiGluGrad, written in onnxscript."""

from onnxscript import FLOAT, script

from ..opschema import default
from ._opset import ascend, op
from .checks import Check, SameType, SameVector
from .swi_glu_rules import GluRules


@script(opset=ascend, default_opset=op)
def SwiGluGrad(dy, x, dim: int = default("SwiGluGrad", "dim", int)):
    """Gradient of SwiGlu w.r.t. x, the gate recomputed from x; computes in float32, dx cast back
    to T."""
    view, y_shape = GluRules(x, dim=dim)
    _ = SameType(dy, x, rule="input 'dy' must have x's element type")
    view = Check(
        view,
        SameVector(op.Shape(dy), y_shape),
        rule="input 'dy' must have x's shape with x.shape[dim] halved",
    )
    x_f = op.Reshape(op.Cast(x, to=FLOAT.dtype), view, allowzero=1)
    a, b = op.Split(x_f, axis=1, num_outputs=2)
    one_half = view * op.Constant(value_ints=[1, 0, 1]) + op.Constant(
        value_ints=[0, 1, 0]
    )  # [outer, 1, half]
    g = op.Reshape(op.Cast(dy, to=FLOAT.dtype), one_half, allowzero=1)
    s = op.Sigmoid(a)
    one = op.Constant(value_float=1.0)
    da = g * b * (s * (one + a * (one - s)))
    db = g * (a * s)
    return op.CastLike(op.Reshape(op.Concat(da, db, axis=1), op.Shape(x), allowzero=1), x)
