"""``clip_grad_norm_``: ``torch.nn.utils.clip_grad_norm_`` over a module's gradients, one session
reading every gradient once for the norm and once to scale it in its own buffer."""

from __future__ import annotations

import math
import weakref

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from ..optim import MAX_NORM, TOTAL_NORM, clip_model
from .checkpoint_state import HostMemory
from .module import Module

# Per module, its clipping sessions by (norm type, gradients, part): built once each.
_sessions: weakref.WeakKeyDictionary[Module, dict[tuple, ort.InferenceSession]] = weakref.WeakKeyDictionary()


def clip_grad_norm_(module: Module, max_norm: float, norm_type: float = 2.0) -> float:
    """``torch.nn.utils.clip_grad_norm_`` over ``module``'s gradients (``error_if_nonfinite=False``):
    the ``norm_type`` norm (2, inf or any p > 0) of every gradient's norm, returned; each gradient
    scaled in its own buffer by ``max_norm / (norm + 1e-6)`` where that is below 1. Under ZeRO
    stage 1 each rank holds the mean of its own share of the gradients only: the norm is combined
    over the ranks from each one's, and each rank scales its share."""
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (2, inf or p > 0), got {norm_type}")
    if not (math.isfinite(float(max_norm)) and max_norm >= 0):
        raise ValueError(f"clip_grad_norm_: max_norm must be finite and >= 0, got {max_norm}")
    if not module.computed_gradients:
        raise RuntimeError("clip_grad_norm_: no gradients yet: run the module first")
    views = module.gradients.views
    grads = {n: views[n] for n in module.trained if int(np.prod(views[n].shape(), dtype=np.int64))}
    if not grads:
        return 0.0  # torch's norm of no gradients
    memory = module.state.memory
    parallel = module.data_parallel
    shards = parallel.shards if parallel is not None else None
    if parallel is None or shards is None:
        return _run(module, memory, (norm_type, "both"), grads, {MAX_NORM: max_norm}, "clipped", TOTAL_NORM)
    own = {n: g for n, g in grads.items() if shards.owners[n] == parallel.rank}
    local = _run(module, memory, (norm_type, "norm"), own, {}, None, TOTAL_NORM) if own else 0.0
    total = parallel.norm(local, norm_type)
    if own:
        scalars = {MAX_NORM: max_norm, TOTAL_NORM: total}
        _run(module, memory, (norm_type, "scale"), own, scalars, "clipped", None)
    return total


def _run(
    module: Module,
    memory: HostMemory,
    kind: tuple[float, str],
    grads: dict[str, ort.OrtValue],
    scalars: dict[str, float],
    rewritten: str | None,
    result: str | None,
) -> float:
    """Runs ``clip_model`` of ``kind`` (norm type, part) over ``grads``: its float32 ``scalars``,
    each gradient as ``g<i>``, written back into its own buffer as ``<rewritten><i>``; returns
    its output ``result`` (0 without one)."""
    sessions = _sessions.setdefault(module, {})
    key = (*kind, tuple(grads))
    if key not in sessions:
        types = [helper.make_tensor_type_proto(TensorProto.FLOAT, g.shape()) for g in grads.values()]
        model: onnx.ModelProto = clip_model(types, *kind)
        sessions[key] = module.session_settings.session(model, native=False)
    session = sessions[key]
    binding = session.io_binding()
    held = {name: memory.scalar(value, np.float32) for name, value in scalars.items()}  # till the run ends
    for name, value in held.items():
        binding.bind_ortvalue_input(name, value)
    if result is not None:
        binding.bind_output(result)  # the first output, as get_outputs() gives them
    for i, grad in enumerate(grads.values()):
        binding.bind_ortvalue_input(f"g{i}", grad)
        if rewritten is not None:
            binding.bind_ortvalue_output(f"{rewritten}{i}", grad)
    session.run_with_iobinding(binding)
    return float(memory.numpy(binding.get_outputs()[0])) if result is not None else 0.0
