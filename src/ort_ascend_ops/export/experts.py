"""Mixture-of-experts layers as ``export_torch`` exports them.

transformers runs the experts of its MoE models (``@use_experts_implementation``) one of three
ways that compute the same function: ``eager`` loops over the experts a batch routes to (a
data-dependent loop, which ``torch.export`` cannot trace), ``batched_mm`` gathers one weight
matrix per token and expert (``tokens x top_k x intermediate x hidden`` values), and ``grouped_mm``
sorts the token-expert pairs by expert and multiplies each expert's rows by its weights. The
export takes ``grouped_mm`` whatever the model is set to (and sets it back after), and writes
its grouped product as one ``GroupedMatmul`` of the sorted rows by the stacked weights, with each
expert's count of rows (``aclnnGroupedMatmulV4`` on the NPU). Its gradients are a GroupedMatmul
and a GroupedMatmulWeightGrad (autodiff/rules/grouped_matmul.py): one kernel each per layer,
never a kernel per expert, nor a scatter per expert into a tensor of every token."""

from __future__ import annotations

import contextlib

GROUPED = "grouped_mm"


def _switchable(module) -> list:
    """The outermost transformers models inside ``module`` whose experts can be switched (a model's
    own submodels follow it)."""
    found: list = []
    for sub in module.modules():
        can_set = getattr(sub, "_can_set_experts_implementation", None)
        if can_set is None or not hasattr(sub, "set_experts_implementation") or not can_set():
            continue
        if not any(sub in outer.modules() for outer in found):
            found.append(sub)
    return found


@contextlib.contextmanager
def grouped_experts(module):
    """Inside the block, every transformers model in ``module`` runs its experts as ``grouped_mm``."""
    models = _switchable(module)
    saved = [m.get_experts_implementation() for m in models]
    try:
        for m in models:
            m.set_experts_implementation(GROUPED)
        yield
    finally:
        for m, implementation in zip(models, saved, strict=True):
            m.set_experts_implementation(implementation)


def translations() -> dict:
    """torch.onnx's custom translations of the grouped product: ``aten._grouped_mm`` and the
    fallback custom op transformers traces on the CPU."""
    import torch
    from onnxscript.onnx_opset import opset18 as op

    from ..opschema import register_schemas
    from ..reference._opset import ascend

    register_schemas()  # onnxscript reads the op's outputs off its schema

    def grouped_mm(mat_a, mat_b, offs, bias=None, out_dtype=None):
        """``out[r] = mat_a[r] @ mat_b[g]`` for the rows ``r`` of group ``g``: ``mat_a`` (M, K)
        sorted by group, ``mat_b`` (G, K, N), ``offs`` (G,) each group's cumulative end."""
        if bias is not None or out_dtype is not None:
            raise NotImplementedError("export_torch: _grouped_mm with a bias or an out_dtype")
        ends = op.Cast(offs, to=7)  # int64
        counts = op.Sub(ends, op.Concat(op.Constant(value_ints=[0]), op.Slice(ends, [0], [-1]), axis=0))
        return ascend.GroupedMatmul(mat_a, mat_b, counts)

    table = {torch.ops.aten._grouped_mm.default: grouped_mm}
    fallback = getattr(getattr(torch.ops, "transformers", None), "grouped_mm_fallback", None)
    if fallback is not None:
        table[fallback.default] = grouped_mm
    return table
