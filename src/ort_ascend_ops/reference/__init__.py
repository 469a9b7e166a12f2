"""onnxscript reference implementations of the ort_ascend_ops operators, and the FunctionProtos
that make a model carrying them portable (``function_protos``, ``attach_functions``)."""

from .lightning_indexer import LightningIndexer
from .lightning_indexer_grad import LightningIndexerGrad
from .portable import attach_functions, function_protos
from .registry import FUNCTIONS, HELPERS, VARIANTS
from .rms_norm import RmsNorm
from .rms_norm_grad import RmsNormGrad
from .rotary_position_embedding import RotaryPositionEmbedding
from .rotary_position_embedding_grad import RotaryPositionEmbeddingGrad

__all__ = [
    "FUNCTIONS",
    "HELPERS",
    "VARIANTS",
    "LightningIndexer",
    "LightningIndexerGrad",
    "RmsNorm",
    "RmsNormGrad",
    "RotaryPositionEmbedding",
    "RotaryPositionEmbeddingGrad",
    "attach_functions",
    "function_protos",
]
