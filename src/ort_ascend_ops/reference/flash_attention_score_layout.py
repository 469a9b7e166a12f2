"""The views both FlashAttentionScore reference functions take of their tensors: every layout as
rows of tokens [T, N, W] (T = B * S; TND's rows as they are), one batch of rows as heads
[N2, G, S_b, W], and back. Dims come in as 1-D [1] tensors b, s, n, w (TND: b = 1, s = T), the
layout as its index in LAYOUTS (``AttentionLayout``)."""

from onnxscript import FLOAT, script

from ..opschema import choices
from ._opset import ascend, op

# The family's layouts, as its forward op's schema lists them (tests/test_opschema.py holds the
# grad's to the same), and the index of each.
LAYOUTS = choices("FlashAttentionScore", "input_layout")
BSND, BNSD, BSH, SBH, TND = (LAYOUTS.index(name) for name in ("BSND", "BNSD", "BSH", "SBH", "TND"))


@script(opset=ascend, default_opset=op)
def AttentionLayout(layout: str):
    """The index of the string attribute ``layout`` in LAYOUTS, len(LAYOUTS) if it is none of them
    (ONNX compares strings only from opset 19 on: Unique, in order of first occurrence, tells the
    index)."""
    names = op.Constant(value_strings=LAYOUTS)
    given = op.Reshape(op.Constant(value_string=layout), op.Constant(value_ints=[1]))
    _, _, inverse, _ = op.Unique(op.Concat(names, given, axis=0), sorted=0)
    return op.Gather(inverse, op.Size(names))


@script(opset=ascend, default_opset=op)
def AttentionViews(b, s, n, w, index):
    """A tensor's 5-D view in its layout, and the view's transpose by perm [0, 2, 1, 3, 4], which
    is [B, S, ., ., W] with N and a 1 between: one fixed perm serves every layout (BSND/BSH/TND
    swap S with a 1, BNSD swaps N and S, SBH swaps S and B)."""
    one = op.Constant(value_ints=[1])
    bnsd = op.Equal(index, op.Constant(value_int=BNSD))
    sbh = op.Equal(index, op.Constant(value_int=SBH))
    view = op.Where(
        bnsd,
        op.Concat(b, n, s, one, w, axis=0),
        op.Where(sbh, op.Concat(one, s, b, n, w, axis=0), op.Concat(b, one, s, n, w, axis=0)),
    )
    turned = op.Where(
        bnsd,
        op.Concat(b, s, n, one, w, axis=0),
        op.Where(sbh, op.Concat(one, b, s, n, w, axis=0), op.Concat(b, s, one, n, w, axis=0)),
    )
    return view, turned


@script(opset=ascend, default_opset=op)
def AttentionShape(b, s, n, w, index):
    """The shape in the layout of a tensor of N heads of W dims: [B, S, N, W], [B, N, S, W],
    [B, S, N * W], [S, B, N * W] or [T, N, W]."""
    zero = op.Constant(value_ints=[0])
    hidden = n * w
    shape = op.Where(
        op.Equal(index, op.Constant(value_int=BNSD)),
        op.Concat(b, n, s, w, axis=0),
        op.Where(
            op.Equal(index, op.Constant(value_int=BSH)),
            op.Concat(b, s, hidden, zero, axis=0),
            op.Where(
                op.Equal(index, op.Constant(value_int=SBH)),
                op.Concat(s, b, hidden, zero, axis=0),
                op.Where(
                    op.Equal(index, op.Constant(value_int=TND)),
                    op.Concat(s, n, w, zero, axis=0),
                    op.Concat(b, s, n, w, axis=0),
                ),
            ),
        ),
    )
    four = op.Or(op.Equal(index, op.Constant(value_int=BSND)), op.Equal(index, op.Constant(value_int=BNSD)))
    rank = op.Where(four, op.Constant(value_ints=[4]), op.Constant(value_ints=[3]))
    return op.Slice(shape, zero, rank)


@script(opset=ascend, default_opset=op)
def AttentionRows(x, b, s, n, w, index):
    """x (of checked shape) as float32 rows [B * S, N, W]."""
    view, _ = AttentionViews(b, s, n, w, index)
    x5 = op.Reshape(op.Cast(x, to=FLOAT.dtype), view, allowzero=1)
    return op.Reshape(op.Transpose(x5, perm=[0, 2, 1, 3, 4]), op.Concat(b * s, n, w, axis=0), allowzero=1)


@script(opset=ascend, default_opset=op)
def AttentionFromRows(rows, b, s, n, w, index):
    """Rows [B * S, N, W] back in the layout (AttentionRows' inverse)."""
    _, turned = AttentionViews(b, s, n, w, index)
    x5 = op.Transpose(op.Reshape(rows, turned, allowzero=1), perm=[0, 2, 1, 3, 4])
    return op.Reshape(x5, AttentionShape(b, s, n, w, index), allowzero=1)


@script(opset=ascend, default_opset=op)
def AttentionStatsShape(b, s, n, index):
    """softmax_max's and softmax_sum's shape: [B, N1, S1, 8], or [T1, N1, 8] in TND."""
    eight = op.Constant(value_ints=[8])
    tnd = op.Equal(index, op.Constant(value_int=TND))
    shape = op.Where(
        tnd, op.Concat(s, n, eight, op.Constant(value_ints=[0]), axis=0), op.Concat(b, n, s, eight, axis=0)
    )
    rank = op.Where(tnd, op.Constant(value_ints=[3]), op.Constant(value_ints=[4]))
    return op.Slice(shape, op.Constant(value_ints=[0]), rank)


@script(opset=ascend, default_opset=op)
def AttentionStatViews(b, s, n, index):
    """Rows of statistics [B * S1, N1, 1] as a 4-D view, and that view's transpose by perm
    [0, 2, 1, 3], which is [B, N1, S1, 1] (TND: [1, 1, T1, N1])."""
    one = op.Constant(value_ints=[1])
    tnd = op.Equal(index, op.Constant(value_int=TND))
    view = op.Where(tnd, op.Concat(one, s, one, n, axis=0), op.Concat(b, s, n, one, axis=0))
    turned = op.Where(tnd, op.Concat(one, one, s, n, axis=0), op.Concat(b, n, s, one, axis=0))
    return view, turned


@script(opset=ascend, default_opset=op)
def AttentionStats(rows, b, s, n, index):
    """Rows of statistics [B * S1, N1, 1] as softmax_max's shape, the value repeated 8 times."""
    view, _ = AttentionStatViews(b, s, n, index)
    turned = op.Transpose(op.Reshape(rows, view, allowzero=1), perm=[0, 2, 1, 3])
    shape = AttentionStatsShape(b, s, n, index)
    one_last = op.Concat(
        op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[-1])),
        op.Constant(value_ints=[1]),
        axis=0,
    )
    return op.Expand(op.Reshape(turned, one_last, allowzero=1), shape)


@script(opset=ascend, default_opset=op)
def AttentionStatRows(stats, b, s, n, index):
    """The first of the 8 values of statistics of checked shape, as rows [B * S1, N1, 1]."""
    _, turned = AttentionStatViews(b, s, n, index)
    first = op.Slice(
        stats, op.Constant(value_ints=[0]), op.Constant(value_ints=[1]), op.Constant(value_ints=[-1])
    )
    view = op.Transpose(op.Reshape(first, turned, allowzero=1), perm=[0, 2, 1, 3])
    return op.Reshape(view, op.Concat(b * s, n, op.Constant(value_ints=[1]), axis=0), allowzero=1)


@script(opset=ascend, default_opset=op)
def AttentionBatch(rows, start, end, heads, group):
    """Rows [start, end) of rows [T, heads * group, W] (start, end: 1-D [1]) as
    [heads, group, S_b, W]."""
    block = op.Transpose(op.Slice(rows, start, end, op.Constant(value_ints=[0])), perm=[1, 0, 2])
    width = op.Shape(rows, start=2)
    return op.Reshape(block, op.Concat(heads, group, end - start, width, axis=0), allowzero=1)


@script(opset=ascend, default_opset=op)
def AttentionBatchRows(block):
    """A batch's [heads, group, S_b, W] as rows [S_b, heads * group, W] (AttentionBatch's inverse)."""
    shape = op.Shape(block)
    merged = op.Concat(
        op.ReduceProd(op.Slice(shape, op.Constant(value_ints=[0]), op.Constant(value_ints=[2])), keepdims=1),
        op.Slice(shape, op.Constant(value_ints=[2]), op.Constant(value_ints=[4])),
        axis=0,
    )
    return op.Transpose(op.Reshape(block, merged, allowzero=1), perm=[1, 0, 2])
