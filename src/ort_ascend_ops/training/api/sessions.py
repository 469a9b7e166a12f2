"""The ONNX Runtime sessions of the training API: every session a module, its optimizer, the
clipping and the loss scaling run is made here, on the module's device, threads and options."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import onnx
import onnxruntime as ort

from ...runtime import check_device, device_providers, make_session, session_options


def training_session_options(*, threads: int | None = None, native: bool = True) -> ort.SessionOptions:
    """``session_options`` for the training API's sessions: a step runs the training session, then
    the optimizer's (and the eval's), so a thread pool left spinning after one takes the cores the
    next one needs (measured 2x slower steps on two threads). Spinning is off. So is ONNX
    Runtime's memory pattern: its one block for a run's activations comes on top of the arena
    chunks the first run of each shape grew, which the arena keeps (a Llama's step at S=1024:
    peak 4360 MB with it, 2902 MB without, and no slower; docs/PERFORMANCE.md)."""
    options = session_options(threads=threads, native=native)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_mem_pattern = False
    return options


@dataclasses.dataclass(frozen=True)
class SessionSettings:
    """Where and how a module's sessions run: ``device`` (``"cpu"``, ``"npu"``, ``"npu:N"``), ONNX
    Runtime's intra-op ``threads``, ``native`` (False: the reference functions instead of the
    library) and the user's ``options`` (None: ``training_session_options``)."""

    device: str = "cpu"
    threads: int | None = None
    native: bool = True
    options: ort.SessionOptions | None = None

    def __post_init__(self):
        device_providers(self.device)  # an unknown or absent device named before any work
        if self.threads is not None and (
            isinstance(self.threads, bool) or int(self.threads) != self.threads or self.threads < 0
        ):
            raise ValueError(
                f"threads must be a non-negative integer (0: ONNX Runtime's default), got {self.threads!r}"
            )

    @property
    def on_npu(self) -> bool:
        return self.device != "cpu"

    def session(
        self,
        model: onnx.ModelProto | str,
        *,
        native: bool | None = None,
        options: ort.SessionOptions | None = None,
        input_shapes: Mapping[str, Sequence[int]] | None = None,
    ) -> ort.InferenceSession:
        """A session of ``model`` on the device; ``native`` and ``options`` override the module's
        (the in-place optimizer needs options of its own; graphs of standard ops need no library on
        the CPU, and always get it on the NPU, whose kernels for them it holds). On the NPU the
        model is specialized to ``input_shapes`` and the shapes it fixes itself
        (``cann_ep.with_static_shapes``)."""
        native = self.native if native is None else native
        native = native or self.on_npu
        options = (
            options or self.options or training_session_options(threads=self.threads or None, native=native)
        )
        session = make_session(
            model,
            native=native,
            options=options,
            providers=device_providers(self.device),
            input_shapes=dict(input_shapes or {}) if self.on_npu else None,
        ).ort
        check_device(session, self.device)
        return session
