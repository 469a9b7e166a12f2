"""One small valid call per op, for the tests that need some call of every op rather than a
particular one (hostile attributes and input counts, attribute defaults, the aclnn probe): valid on
every engine, the aclnn backend's default product included, and with every attribute that has a
default valid at it (BSND, sparse mode 3)."""

import numpy as np

from oracles import F32, lightning_indexer_grad_inputs, rms_norm_grad_inputs, rope_inputs
from ort_ascend_ops.opschema import load_op_specs

ROPE_LAYOUT = ("BSND-1S1D", (1, 2, 3, 8), (1, 2, 1, 8))


def small(op, t=F32):
    """(inputs, attrs) of a small valid call of op with inputs of float type t."""
    rng = np.random.default_rng(0)
    # aclnnLightningIndexer(Grad) takes head dims of 128 alone.
    grad = lightning_indexer_grad_inputs(rng, "BSND", 3, t, np.int32, n1=4, d=128, skip_fraction=0)
    return {
        "RmsNorm": (
            {"x": rng.standard_normal((2, 16)).astype(t), "gamma": rng.standard_normal(16).astype(t)},
            {},
        ),
        "RmsNormGrad": (rms_norm_grad_inputs(rng, (2, 16), (16,), t, t), {}),
        "RotaryPositionEmbedding": (rope_inputs(rng, ROPE_LAYOUT, t, "x", "cos", "sin"), {}),
        "RotaryPositionEmbeddingGrad": (rope_inputs(rng, ROPE_LAYOUT, t, "dy", "cos", "sin", "x"), {}),
        "LightningIndexer": ({n: grad[n] for n in ("query", "key", "weights")}, {"sparse_count": 4}),
        "LightningIndexerGrad": (grad, {"head_num": 4}),
    }[op]


def raw_outputs(op, t=F32):
    """op's outputs as ``raw_model`` takes them (name -> NumPy type): t for every output typed by a
    type parameter, the fixed type otherwise (LightningIndexer's int32 indices)."""
    fixed = {"tensor(int32)": np.int32, "tensor(float)": F32}
    return {p.name: fixed.get(p.type, t) for p in load_op_specs()[op].outputs}
