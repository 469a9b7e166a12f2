"""Opsets shared by the reference functions."""

from onnxscript import opset18 as op
from onnxscript.values import Opset

from ..domain import DOMAIN, VERSION

# The functions are written with the operators of opset 18, whose meaning no later opset up to the
# newest has changed for the types they use, and emitted at the opset of the model that carries
# them (ONNX requires a function's default-domain opset to equal its model's).
MIN_ONNX_OPSET = 18

ascend = Opset(DOMAIN, VERSION)

__all__ = ["MIN_ONNX_OPSET", "ascend", "op"]
