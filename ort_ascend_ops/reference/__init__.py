"""onnxscript reference implementations of the ort_ascend_ops operators."""

import onnx
from onnxscript import OnnxFunction

from ._opset import DOMAIN, VERSION
from .lightning_indexer import LightningIndexer
from .lightning_indexer_grad import LightningIndexerGrad
from .rms_norm import RmsNorm
from .rms_norm_grad import RmsNormGrad
from .rotary_position_embedding import RotaryPositionEmbedding
from .rotary_position_embedding_grad import RotaryPositionEmbeddingGrad

# The registration table: one entry per op, keyed by op name.
FUNCTIONS: dict[str, OnnxFunction] = {
    f.name: f
    for f in (
        RmsNorm,
        RmsNormGrad,
        RotaryPositionEmbedding,
        RotaryPositionEmbeddingGrad,
        LightningIndexer,
        LightningIndexerGrad,
    )
}


def function_protos() -> list[onnx.FunctionProto]:
    """FunctionProtos of every op (domain ``ort_ascend_ops``), ready for ``model.functions``."""
    return [f.to_function_proto() for f in FUNCTIONS.values()]


__all__ = [
    "DOMAIN",
    "FUNCTIONS",
    "VERSION",
    "LightningIndexer",
    "LightningIndexerGrad",
    "RmsNorm",
    "RmsNormGrad",
    "RotaryPositionEmbedding",
    "RotaryPositionEmbeddingGrad",
    "function_protos",
]
