"""Gradient buffers: every gradient of one element type a view into one buffer, as torch's
DDP keeps gradients as views of its buckets, so that a pass over all of them (loss scaling's
inf/NaN test and unscaling) is one node per element type, not one per parameter."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper

from ..opschema import elem_type
from ..runtime import ortvalue_view

# Each view starts on a cache line, as ONNX Runtime's own allocations do.
ALIGN = 64


def _dtype(value: ort.OrtValue) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type(value.data_type())))


class Buffers:
    """Zeroed tensors shaped and typed as ``like``'s values, by name (``views``), laid end to end
    in one buffer per element type (``arrays``, and ``flat``, 1-D OrtValues over the same memory;
    the gaps between views stay zero). ``spans``: where each view lies, as (buffer index, first
    element, element count)."""

    def __init__(self, like: dict[str, ort.OrtValue]):
        self.views: dict[str, ort.OrtValue] = {}
        self.spans: dict[str, tuple[int, int, int]] = {}
        self.arrays: list[np.ndarray] = []
        self.flat: list[ort.OrtValue] = []
        by_type: dict[np.dtype, list[str]] = {}
        for name, value in like.items():
            by_type.setdefault(_dtype(value), []).append(name)
        for dtype, names in by_type.items():
            step = ALIGN // dtype.itemsize
            shapes = [like[n].shape() for n in names]
            sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
            starts = np.cumsum([0] + [-(-n // step) * step for n in sizes])
            raw = np.zeros(int(starts[-1]) + step, dtype)
            skip = (-raw.ctypes.data % ALIGN) // dtype.itemsize
            buffer = raw[skip : skip + int(starts[-1])]
            self.arrays.append(buffer)
            self.flat.append(ortvalue_view(buffer))
            for name, start, size, shape in zip(names, starts[:-1], sizes, shapes, strict=True):
                self.spans[name] = (len(self.arrays) - 1, int(start), size)
                self.views[name] = ortvalue_view(buffer[start : start + size].reshape(shape))
