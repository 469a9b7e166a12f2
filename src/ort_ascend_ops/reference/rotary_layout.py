"""The row views both RoPE reference functions take of the last axis, by mode."""

from onnxscript import script

from ._opset import ascend, op


@script(opset=ascend, default_opset=op)
def RotaryLayout(d, mode: int):
    """(a, b, blocks, w) for D = d (1-D int64): P views a row as [a, 2, b] and brings the 2-axis
    first (mode 3 de-interleaves; the others have a = 1 and keep the row), and rotate views it as
    [blocks, 2, w] and turns the halves (u, v) of every block into (-v, u)."""
    one = op.Constant(value_ints=[1])
    two = op.Constant(value_ints=[2])
    half = d / two
    quarter = half / two
    # fmt: off
    layouts = op.Concat(  # a   b     blocks  w
        one,  half, one,  half,     # 0 half
        one,  half, half, one,      # 1 interleave
        one,  half, two,  quarter,  # 2 quarter
        half, one,  one,  half,     # 3 interleave-half
        axis=0,
    )
    # fmt: on
    layout = op.Gather(op.Reshape(layouts, op.Constant(value_ints=[4, 4])), op.Constant(value_int=mode))
    a, b, blocks, w = op.Split(layout, num_outputs=4)
    return a, b, blocks, w
