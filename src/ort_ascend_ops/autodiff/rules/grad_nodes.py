"""Building blocks the rules share: the forward outputs they read (a saved rstd, TopK's indices,
Dropout's mask) and our grad nodes."""

from __future__ import annotations

import onnx
from onnx import helper

from ...domain import DOMAIN
from ..graph import Backward


def forward_output(b: Backward, node: onnx.NodeProto, index: int, hint: str) -> str:
    """The name of the forward node's output ``index``; one the node leaves out gets a fresh name
    (the node is the copy that goes into the training model, so the backward can read it)."""
    while len(node.output) <= index:
        node.output.append("")
    if not node.output[index]:
        node.output[index] = b.fresh(f"{node.output[0]}_{hint}", suffix="")
    return node.output[index]


def grad_node(
    b: Backward, op_type: str, inputs: list[str], wanted: list[str], total: int, **attrs
) -> list[str]:
    """One of our grad nodes whose first outputs are the gradients of the forward values
    ``wanted`` (named after them), listing all ``total`` output slots (``""`` for the rest):
    ONNX Runtime inlines a reference function only for a node that lists every output it has."""
    names = [b.fresh(value) for value in wanted]
    outputs = names + [""] * (total - len(wanted))
    b.nodes.append(helper.make_node(op_type, inputs, outputs, domain=DOMAIN, **attrs))
    return names
