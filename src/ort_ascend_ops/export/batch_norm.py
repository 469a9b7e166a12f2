"""BatchNormalization as ``export_torch`` exports a module in ``train()``: in training mode.

torch.onnx's own translation of ``aten._native_batch_norm_legit_functional`` (onnxscript's
torchlib) sets ``training`` to False whatever torch traced, so a BatchNorm module that normalizes
by its batch's statistics in torch would normalize by its running statistics in the export, and
its training graph would compute another loss and other gradients. This translation keeps the
training mode (``BatchNormalization`` with ``training_mode`` 1, which ONNX Runtime runs), and the
rest of torchlib's: eval modules, and modules without running statistics (whose batch statistics
torchlib computes in the graph)."""

from __future__ import annotations


def translations() -> dict:
    """torch.onnx's custom translation of ``aten._native_batch_norm_legit_functional``, the op a
    BatchNorm module's forward is traced as."""
    import torch
    from onnxscript.function_libs.torch_lib.ops import core
    from onnxscript.onnx_opset import opset18 as op

    def functional(input, weight=None, bias=None, running_mean=None, running_var=None, training=False,
                   momentum=0.9, eps=1e-05):  # fmt: skip
        if not training or running_mean is None or running_var is None:
            return core.aten__native_batch_norm_legit_functional(
                input, weight, bias, running_mean, running_var, training, momentum, eps
            )
        channels = op.Shape(input, start=1, end=2)
        if weight is None:
            weight = op.Expand(op.CastLike(op.Constant(value_floats=[1.0]), input), channels)
        if bias is None:
            bias = op.Expand(op.CastLike(op.Constant(value_floats=[0.0]), input), channels)
        # ONNX's momentum weighs the running statistic, torch's the batch's.
        norm, new_mean, _ = op.BatchNormalization(
            input,
            weight,
            bias,
            running_mean,
            running_var,
            epsilon=eps,
            momentum=1.0 - momentum,
            training_mode=1,
        )
        # The op's other results as torch's decomposition has them: the batch's mean and 1 / std
        # in float32, and a running variance updated by the batch's unbiased variance.
        axes = op.Constant(value_ints=[0, *range(2, len(input.shape))])
        x = op.Cast(input, to=1)
        mean = op.ReduceMean(x, axes, keepdims=0)
        centered = op.Sub(x, op.ReduceMean(x, axes, keepdims=1))
        variance = op.ReduceMean(op.Mul(centered, centered), axes, keepdims=0)
        rstd = op.Reciprocal(op.Sqrt(op.Add(variance, op.Constant(value_float=eps))))
        count = op.Cast(op.Div(op.Size(input), channels), to=1)
        unbiased = op.Div(op.Mul(variance, count), op.Sub(count, op.Constant(value_float=1.0)))
        new_var = op.Add(
            op.Mul(
                op.CastLike(unbiased, running_var),
                op.CastLike(op.Constant(value_float=momentum), running_var),
            ),
            op.Mul(running_var, op.CastLike(op.Constant(value_float=1.0 - momentum), running_var)),
        )
        return norm, mean, rstd, new_mean, new_var

    return {torch.ops.aten._native_batch_norm_legit_functional.default: functional}
