"""PyTorch modules exported to ONNX as training needs them (:func:`export_torch`, the ``[torch]``
extra), and what the export records in the model for the differentiator and the runtime."""

from .torch_module import FROZEN, PARAMETERS, export_torch, padding_rows, parameter_names

__all__ = ["FROZEN", "PARAMETERS", "export_torch", "padding_rows", "parameter_names"]
