"""The passes over a whole model: folding that keeps every parameter an initializer (and folds the
boolean masks a static export computes from constants, whatever their size), then the rewrite
rules of ``rules.py``."""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import Collection

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript.optimizer import fold_constants_ir
from onnxscript.rewriter import pattern

from ..domain import DOMAIN, VERSION
from ..export import parameter_names
from ..opschema import register_schemas
from ..reference import attach_functions
from .flash_attention_score import FLASH_ATTENTION_RULES
from .grouped_matmul import GROUPED_MATMUL_RULES
from .lightning_indexer import LIGHTNING_INDEXER_RULES
from .rms_norm import RMS_NORM_RULES
from .rotary_position_embedding import ROTARY_RULES
from .swi_glu import SWI_GLU_RULES

logger = logging.getLogger(__name__)

# Norms first: a rotary pattern never contains one, and its cos/sin checks then see final shapes.
# Attention last: its q and k are then the rotary op's outputs.
_RULES = pattern.RewriteRuleSet(
    [
        *RMS_NORM_RULES,
        *ROTARY_RULES,
        *LIGHTNING_INDEXER_RULES,
        *FLASH_ATTENTION_RULES,
        *SWI_GLU_RULES,
        *GROUPED_MATMUL_RULES,
    ],
    commute=True,
)


def _is_parameter(value: ir.Value | None, keep: Collection[str]) -> bool:
    """An initializer named in ``keep`` (the parameters to train, however small: a learned scalar
    too), or any floating-point initializer with more than one element: a weight (or a buffer
    such as inv_freq, which folding gains nothing from either). Folding a node that reads one
    would bake a transposed or cast copy into the graph, and the weight would no longer be
    trainable."""
    if value is None or not value.is_initializer() or value.const_value is None:
        return False
    if value.name in keep:
        return True
    return value.dtype is not None and value.dtype.is_floating_point() and value.const_value.size > 1


# Elements of the largest boolean mask folded past onnxscript's size limits (a 16k x 16k causal
# mask): the causal mask a static export computes from constant [S, S] comparisons, folded, is what
# the attention fusion reads as a sparse mode, with no S1 x S2 mask left to apply at run time.
MASK_FOLD_LIMIT = 1 << 28


def _builds_mask(node: ir.Node) -> bool:
    """A node whose outputs are boolean, computed from boolean or integer constants alone (not
    parameters), within MASK_FOLD_LIMIT elements (bounded by the product of its inputs' sizes,
    which its broadcast cannot exceed, where shape inference left its output's shape unknown)."""
    if not all(o.dtype == ir.DataType.BOOL for o in node.outputs):
        return False
    inputs = [v for v in node.inputs if v is not None]
    if any(v.dtype is None or v.dtype.is_floating_point() for v in inputs):
        return False
    constants = [v.const_value for v in inputs]
    if any(c is None for c in constants):
        return False
    bound = math.prod(max(1, c.size) for c in constants if c is not None)
    for o in node.outputs:
        if o.shape is not None and o.shape.is_static():
            bound = min(bound, math.prod(o.shape.numpy()))
    return bound <= MASK_FOLD_LIMIT


def _kept(model: onnx.ModelProto, keep: Collection[str]) -> frozenset[str]:
    """``keep`` and the trainable parameters export_torch recorded in the model."""
    return frozenset(keep) | frozenset(parameter_names(model) or ())


def _ours(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node if n.domain == DOMAIN)


def _folded(model: onnx.ModelProto, keep: Collection[str]) -> ir.Model:
    """The model in onnxscript's IR, shapes inferred (the rules read them), constants folded but
    for the nodes that read a parameter (``_is_parameter``)."""
    kept = _kept(model, keep)

    def should_fold(node: ir.Node) -> bool | None:
        if node.domain == DOMAIN or any(_is_parameter(v, kept) for v in node.inputs):
            return False
        return None  # onnxscript's own limits decide

    register_schemas()
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)  # a copy: ours to edit
    # Without our reference functions, which attach_functions makes anew (onnx_ir 0.1 cannot
    # write back the string constants it reads in them).
    others = [f for f in inferred.functions if f.domain != DOMAIN]
    del inferred.functions[:]
    inferred.functions.extend(others)
    ir_model = ir.serde.deserialize_model(inferred)
    fold_constants_ir(ir_model, should_fold=should_fold)
    fold_constants_ir(
        ir_model,
        input_size_limit=MASK_FOLD_LIMIT,
        output_size_limit=MASK_FOLD_LIMIT,
        should_fold=_builds_mask,
    )
    common_passes.RemoveUnusedNodesPass()(ir_model)
    return ir_model


def fold_constants(model: onnx.ModelProto, *, keep: Collection[str] = ()) -> onnx.ModelProto:
    """``model`` with every value computed from constants alone (shapes, axes, masks of a static
    export) folded into a constant, every initializer that holds weights, and those named in
    ``keep``, left as it is."""
    return attach_functions(ir.serde.serialize_model(_folded(model, keep)))


def fuse(model: onnx.ModelProto, *, keep: Collection[str] = ()) -> onnx.ModelProto:
    """A copy of ``model`` with every RMSNorm (decomposed, or the standard ``RMSNormalization``)
    rewritten to ``RmsNorm`` and every rotary embedding (rotate-half or interleaved, or the
    standard ``RotaryEmbedding``) to ``RotaryPositionEmbedding``, and the DeepSeek-V3.2 indexer's
    scoring and top-k to ``LightningIndexer``, where the contract's layouts and broadcasts express
    it; constants folded first, weights kept as initializers. It carries the
    reference functions of the ops it adds and logs how many of each it made. ``keep``: initializers
    to leave in the graph however small (fold_constants)."""
    before = _ours(model)
    ir_model = _folded(model, keep)
    ir_model.opset_imports.setdefault(DOMAIN, VERSION)
    _RULES.apply_to_model(ir_model)
    common_passes.RemoveUnusedNodesPass()(ir_model)
    fused = attach_functions(ir.serde.serialize_model(ir_model))
    counts = _ours(fused) - before
    logger.info("fused %s", ", ".join(f"{n} {op}" for op, n in sorted(counts.items())) or "nothing")
    return fused
