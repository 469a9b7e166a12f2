"""Opsets shared by the reference functions."""

from onnxscript import opset23 as op
from onnxscript.values import Opset

DOMAIN = "ort_ascend_ops"
VERSION = 1

ascend = Opset(DOMAIN, VERSION)

__all__ = ["DOMAIN", "VERSION", "ascend", "op"]
