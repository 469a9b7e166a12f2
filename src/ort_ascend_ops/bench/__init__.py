"""``python -m ort_ascend_ops bench``: each op's native kernel against its inlined reference, the
peers a user would otherwise pick (PyTorch, ONNX Runtime's standard ops) and the machine's own
roofline, all measured in the same run; then the kernels at power-of-two widths against nearby
ones (``cliffs``)."""

from . import (
    apply_adam_w,
    flash_attention_score,
    flash_attention_score_grad,
    grouped_matmul,
    grouped_matmul_weight_grad,
    lightning_indexer,
    lightning_indexer_grad,
    non_finite_check_and_unscale,
    rms_norm,
    rms_norm_grad,
    rotary_position_embedding,
    rotary_position_embedding_grad,
    swi_glu,
    swi_glu_grad,
)

# The registration table: bench name -> module with ``cases(quick, dtypes)`` (a list of cases'
# parameters), ``make(params)`` (a ``runner.Case``) and ``PEERS`` (what the peers run, in words).
BENCHES = {
    "rms_norm": rms_norm,
    "rms_norm_grad": rms_norm_grad,
    "rotary_position_embedding": rotary_position_embedding,
    "rotary_position_embedding_grad": rotary_position_embedding_grad,
    "lightning_indexer": lightning_indexer,
    "lightning_indexer_grad": lightning_indexer_grad,
    "apply_adam_w": apply_adam_w,
    "flash_attention_score": flash_attention_score,
    "flash_attention_score_grad": flash_attention_score_grad,
    "non_finite_check_and_unscale": non_finite_check_and_unscale,
    "swi_glu": swi_glu,
    "swi_glu_grad": swi_glu_grad,
    "grouped_matmul": grouped_matmul,
    "grouped_matmul_weight_grad": grouped_matmul_weight_grad,
}
# Short names for the command line.
ALIASES = {
    "rope": "rotary_position_embedding",
    "rope_grad": "rotary_position_embedding_grad",
    "indexer": "lightning_indexer",
    "indexer_grad": "lightning_indexer_grad",
    "flash_attention": "flash_attention_score",
    "flash_attention_grad": "flash_attention_score_grad",
    "unscale": "non_finite_check_and_unscale",
}
# Across the ops rather than one of them: the power-of-two pairs of cliffs.py, after the ops' cases.
CLIFFS = "cliffs"
