"""onnxruntime-training's training API (``CheckpointState``, ``Module``, ``Optimizer``,
``LinearLRScheduler``) over current ONNX Runtime, for the artifacts of ``generate_artifacts``,
laid out as onnxruntime-training lays it out, one owner per concern:

- ``checkpoint_state``: the state (parameters, gradients, optimizer state, loss scaler,
  properties) and where its values live, the only code that touches their memory;
- ``module``: the training and eval models run over the state;
- ``optimizer``: the optimizer model's step;
- ``lr_scheduler``: learning-rate schedules of the step count;
- ``clipping``: ``clip_grad_norm_``;
- ``loss_scaler``: dynamic loss scaling (``torch.amp.GradScaler``'s);
- ``data_parallel``: many processes on ``torch.distributed``;
- ``sessions``: the ONNX Runtime sessions all of them run."""

from .checkpoint_state import CheckpointState, Parameter
from .clipping import clip_grad_norm_
from .data_parallel import DataParallel
from .loss_scaler import LossScaler
from .lr_scheduler import LinearLRScheduler, LRScheduler
from .module import Module
from .optimizer import Optimizer
from .sessions import training_session_options

__all__ = [
    "CheckpointState",
    "DataParallel",
    "LRScheduler",
    "LinearLRScheduler",
    "LossScaler",
    "Module",
    "Optimizer",
    "Parameter",
    "clip_grad_norm_",
    "training_session_options",
]
