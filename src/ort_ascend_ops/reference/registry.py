"""The registration table of the reference functions."""

from collections.abc import Collection

from onnxscript import OnnxFunction

from . import (
    apply_adam_w_rules,
    checks,
    flash_attention_score,
    flash_attention_score_grad,
    flash_attention_score_layout,
    flash_attention_score_rules,
    lightning_indexer,
    lightning_indexer_grad,
    lightning_indexer_rules,
    non_finite_check_and_unscale_rules,
    rotary_position_embedding_grad,
)
from .apply_adam_w import ApplyAdamW
from .flash_attention_score import FlashAttentionScore
from .flash_attention_score_grad import FlashAttentionScoreGrad
from .flash_attention_score_mask import AttentionAllowed
from .grouped_matmul import GroupedMatmul
from .grouped_matmul_rules import AsKn, GroupedRows, GroupSlice
from .grouped_matmul_weight_grad import GroupedMatmulWeightGrad
from .lightning_indexer import IndexerSelect, LightningIndexer
from .lightning_indexer_grad import IndexerGradRows, LightningIndexerGrad
from .lightning_indexer_tokens import IndexerTokens
from .non_finite_check_and_unscale import NonFiniteCheckAndUnscale
from .rms_norm import RmsNorm
from .rms_norm_grad import RmsNormGrad
from .rms_norm_rules import NormRules
from .rotary_position_embedding import RotaryPositionEmbedding
from .rotary_position_embedding_grad import RotaryGradDx, RotaryPositionEmbeddingGrad, RotarySums
from .rotary_position_embedding_layout import RotaryLayout, RotatedViews, RowView
from .rotary_position_embedding_rules import RotaryRules
from .swi_glu import SwiGlu
from .swi_glu_grad import SwiGluGrad
from .swi_glu_rules import GluRules

# One entry per op, keyed by op name. Each op's function serves every node of it that stock ONNX
# Runtime can inline (an op with optional inputs tests for them at run time).
FUNCTIONS: dict[str, OnnxFunction] = {
    f.name: f
    for f in (
        RmsNorm,
        RmsNormGrad,
        RotaryPositionEmbedding,
        RotaryPositionEmbeddingGrad,
        LightningIndexer,
        LightningIndexerGrad,
        ApplyAdamW,
        FlashAttentionScore,
        FlashAttentionScoreGrad,
        NonFiniteCheckAndUnscale,
        SwiGlu,
        SwiGluGrad,
        GroupedMatmul,
        GroupedMatmulWeightGrad,
    )
}

# For the ops with optional inputs, one function per set of present optional inputs, which reads
# them directly: ONNX Runtime cannot test every type for presence (OptionalHasElement takes no
# bfloat16, and has no kernel from opset 28 on). op -> present optional inputs -> (overload, function).
VARIANTS: dict[str, dict[frozenset[str], tuple[str, OnnxFunction]]] = {
    "RotaryPositionEmbeddingGrad": rotary_position_embedding_grad.VARIANTS,
    "LightningIndexer": lightning_indexer.VARIANTS,
    "LightningIndexerGrad": lightning_indexer_grad.VARIANTS,
    "FlashAttentionScore": flash_attention_score.VARIANTS,
    "FlashAttentionScoreGrad": flash_attention_score_grad.VARIANTS,
}

# Functions the op functions call, each callee before its callers (onnx.reference resolves a
# function only from those listed before it).
HELPERS: tuple[OnnxFunction, ...] = (
    checks.ElemType,
    checks.IsFloatT,
    checks.IsIndexType,
    checks.All,
    checks.AnyOf,
    checks.PadPair,
    checks.SameVector,
    checks.WithoutOnes,
    NormRules,
    RotaryLayout,
    RowView,
    RotatedViews,
    RotaryRules,
    RotaryGradDx,
    RotarySums,
    lightning_indexer_rules.IsLayout,
    lightning_indexer_rules.IndexerRules,
    lightning_indexer_rules.SeqEnds,
    lightning_indexer_rules.ShapeEnds,
    lightning_indexer_rules.LayoutInputs,
    lightning_indexer_rules.TestedInputs,
    lightning_indexer_rules.TndInputs,
    lightning_indexer_rules.BsndInputs,
    lightning_indexer_rules.BatchCounts,
    IndexerTokens,
    IndexerSelect,
    IndexerGradRows,
    apply_adam_w_rules.AdamWRules,
    apply_adam_w_rules.TorchDecimal,
    non_finite_check_and_unscale_rules.UnscaleRules,
    GluRules,
    GroupedRows,
    GroupSlice,
    AsKn,
    flash_attention_score_layout.AttentionLayout,
    flash_attention_score_layout.AttentionViews,
    flash_attention_score_layout.AttentionShape,
    flash_attention_score_layout.AttentionRows,
    flash_attention_score_layout.AttentionFromRows,
    flash_attention_score_layout.AttentionStatsShape,
    flash_attention_score_layout.AttentionStatViews,
    flash_attention_score_layout.AttentionStats,
    flash_attention_score_layout.AttentionStatRows,
    flash_attention_score_layout.AttentionBatch,
    flash_attention_score_layout.AttentionBatchRows,
    flash_attention_score_rules.AttentionAxes,
    flash_attention_score_rules.AttentionRules,
    flash_attention_score_rules.AttentionInputs,
    flash_attention_score_rules.AttentionMask,
    flash_attention_score_rules.AttentionNoMask,
    flash_attention_score_rules.AttentionShapeEnds,
    flash_attention_score_rules.AttentionSeqEnds,
    flash_attention_score_rules.AttentionGradRules,
    AttentionAllowed,
    flash_attention_score.AttentionForwardLoop,
    flash_attention_score.AttentionForward,
    flash_attention_score.AttentionAnyRank,
    flash_attention_score_grad.AttentionBackwardLoop,
    flash_attention_score_grad.AttentionBackward,
)


def function_for(op_name: str, inputs: Collection[str]) -> tuple[str, OnnxFunction]:
    """(overload, function) that ``attach_functions`` gives a node of ``op_name`` passing
    ``inputs`` (names of the op's inputs): the variant for its optional inputs, or the function
    that tests for them at run time where no variant has them (sets the contract refuses)."""
    variants = VARIANTS.get(op_name, {})
    present = set(inputs) & _optional(variants)
    return next(
        (variant for given, variant in variants.items() if given == present), ("", FUNCTIONS[op_name])
    )


def _optional(variants: dict[frozenset[str], tuple[str, OnnxFunction]]) -> frozenset[str]:
    return frozenset().union(*variants)
