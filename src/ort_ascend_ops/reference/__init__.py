"""onnxscript reference implementations of the ort_ascend_ops operators."""

import onnx
from onnxscript import OnnxFunction

from ._opset import DOMAIN, VERSION
from .indexer_tokens import IndexerTokens
from .lightning_indexer import LightningIndexer
from .lightning_indexer_grad import LightningIndexerGrad
from .rms_norm import RmsNorm
from .rms_norm_grad import RmsNormGrad
from .rotary_layout import RotaryLayout
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


# Functions the op functions call; listed first, as onnx.reference knows only those before.
HELPERS: tuple[OnnxFunction, ...] = (RotaryLayout, IndexerTokens)


def function_protos() -> list[onnx.FunctionProto]:
    """FunctionProtos of every op and of the helpers they call (domain ``ort_ascend_ops``), ready
    for ``model.functions``."""
    return [f.to_function_proto() for f in (*HELPERS, *FUNCTIONS.values())]


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
