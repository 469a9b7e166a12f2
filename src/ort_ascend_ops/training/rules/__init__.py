"""One gradient rule per forward op: ``rule(backward, node, output_grads) -> input_grads``, a
gradient name (or None) per node input, built with :class:`..graph.Backward`. Only the inputs
``backward.needs`` must get one."""

from ...domain import DOMAIN
from . import elementwise, linalg, loss, ours, reduce, shape

RULES = {
    # ort_ascend_ops forward ops -> our grad ops.
    (DOMAIN, "RmsNorm"): ours.rms_norm,
    (DOMAIN, "RotaryPositionEmbedding"): ours.rotary_position_embedding,
    (DOMAIN, "LightningIndexer"): ours.lightning_indexer,
    # Standard ops that our grad ops serve too.
    ("", "RMSNormalization"): ours.rms_normalization,
    ("", "RotaryEmbedding"): ours.rotary_embedding,
    # Standard ops of a Llama-style block and the DeepSeek indexer loss.
    ("", "MatMul"): linalg.matmul,
    ("", "Gemm"): linalg.gemm,
    ("", "Add"): elementwise.add,
    ("", "Sub"): elementwise.sub,
    ("", "Sum"): elementwise.sum_,
    ("", "Mul"): elementwise.mul,
    ("", "Div"): elementwise.div,
    ("", "Neg"): elementwise.neg,
    ("", "Pow"): elementwise.pow_,
    ("", "Sqrt"): elementwise.sqrt,
    ("", "Exp"): elementwise.exp,
    ("", "Log"): elementwise.log,
    ("", "Relu"): elementwise.relu,
    ("", "Sigmoid"): elementwise.sigmoid,
    ("", "Tanh"): elementwise.tanh,
    ("", "Where"): elementwise.where,
    ("", "Cast"): elementwise.cast,
    ("", "Identity"): elementwise.identity,
    ("", "Softmax"): reduce.softmax,
    ("", "LogSoftmax"): reduce.log_softmax,
    ("", "ReduceSum"): reduce.reduce_sum,
    ("", "ReduceMean"): reduce.reduce_mean,
    ("", "ReduceMax"): reduce.reduce_max,
    ("", "Transpose"): shape.transpose,
    ("", "Reshape"): shape.reshape,
    ("", "Flatten"): shape.reshape,
    ("", "Squeeze"): shape.reshape,
    ("", "Unsqueeze"): shape.reshape,
    ("", "Expand"): shape.expand,
    ("", "Concat"): shape.concat,
    ("", "Split"): shape.split,
    ("", "Slice"): shape.slice_,
    ("", "Gather"): shape.gather,
    # Standard ops of Hugging Face exports.
    ("", "Reciprocal"): elementwise.reciprocal,
    ("", "Abs"): elementwise.abs_,
    ("", "Sin"): elementwise.sin,
    ("", "Cos"): elementwise.cos,
    ("", "Erf"): elementwise.erf,
    ("", "Gelu"): elementwise.gelu,
    ("", "Softplus"): elementwise.softplus,
    ("", "Max"): elementwise.extremum,
    ("", "Min"): elementwise.extremum,
    ("", "Clip"): elementwise.clip,
    ("", "CastLike"): elementwise.cast,
    ("", "ReduceSumSquare"): reduce.reduce_sum_square,
    ("", "ReduceL2"): reduce.reduce_l2,
    ("", "Pad"): shape.pad,
    ("", "Tile"): shape.tile,
    ("", "ScatterND"): shape.scatter_nd,
    ("", "GatherElements"): shape.gather_elements,
    ("", "NegativeLogLikelihoodLoss"): loss.negative_log_likelihood_loss,
}
