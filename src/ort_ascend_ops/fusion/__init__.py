"""``fuse(model)``: the norm, rotary and DeepSeek-indexer patterns of an exported model rewritten to this package's
ops, with onnxscript's pattern rewriter after its constant folder. ``fold_constants`` is the
folding step alone, which the training-graph builder runs when it does not fuse."""

from .passes import fold_constants, fuse

__all__ = ["fold_constants", "fuse"]
