"""Per-token bookkeeping both LightningIndexer reference functions need."""

from onnxscript import INT64, script

from ._opset import ascend, op


@script(opset=ascend, default_opset=op)
def IndexerTokens(ends_q, ends_k, t1_1d):
    """For tokens 0 .. T1 - 1 (t1_1d = [T1]) and the cumulative batch ends of queries and keys:
    the tokens, and per token its batch's first query and key rows and its lengths S1_b, S2_b
    (a token's batch is the number of batch ends at or before it)."""
    zero = op.Constant(value_int=0)
    one = op.Constant(value_int=1)
    zero_1d = op.Constant(value_ints=[0])
    one_1d = op.Constant(value_ints=[1])
    tokens = op.Range(zero, op.Squeeze(t1_1d), one)
    ends_before = op.LessOrEqual(op.Unsqueeze(ends_q, zero_1d), op.Unsqueeze(tokens, one_1d))
    batch = op.ReduceSum(op.Cast(ends_before, to=INT64.dtype), one_1d, keepdims=0)
    q_start = op.Gather(op.Concat(zero_1d, ends_q, axis=0), batch)
    k_start = op.Gather(op.Concat(zero_1d, ends_k, axis=0), batch)
    s1_b = op.Gather(ends_q, batch) - q_start
    s2_b = op.Gather(ends_k, batch) - k_start
    return tokens, q_start, k_start, s1_b, s2_b
