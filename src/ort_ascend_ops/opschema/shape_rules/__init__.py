"""The registration table of the shape rules: the named rules that TOML outputs refer to as
``shape = "rule:<name>"``, one module per family."""

from ..shapes import ShapeRule
from .flash_attention_score import (
    flash_attention_dk,
    flash_attention_dq,
    flash_attention_dv,
    flash_attention_out,
    flash_attention_stats,
)
from .grouped_matmul import grouped_matmul_dweight, grouped_matmul_y
from .lightning_indexer import lightning_indexer_grad, lightning_indexer_topk
from .rms_norm import rms_norm_rstd
from .rotary_position_embedding import rotary_dx, rotary_y
from .swi_glu import swi_glu_y

SHAPE_RULES: dict[str, ShapeRule] = {
    "rms_norm_rstd": rms_norm_rstd,
    "rotary_y": rotary_y,
    "rotary_dx": rotary_dx,
    "flash_attention_out": flash_attention_out,
    "flash_attention_dq": flash_attention_dq,
    "flash_attention_dk": flash_attention_dk,
    "flash_attention_dv": flash_attention_dv,
    "flash_attention_stats": flash_attention_stats,
    "lightning_indexer_topk": lightning_indexer_topk,
    "lightning_indexer_grad_query": lightning_indexer_grad("query"),
    "lightning_indexer_grad_key": lightning_indexer_grad("key"),
    "lightning_indexer_grad_weights": lightning_indexer_grad("weights"),
    "swi_glu_y": swi_glu_y,
    "grouped_matmul_y": grouped_matmul_y,
    "grouped_matmul_dweight": grouped_matmul_dweight,
}
