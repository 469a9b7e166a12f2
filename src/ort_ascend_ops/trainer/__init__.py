"""``python -m ort_ascend_ops train``: one ``Settings`` dataclass for every option (``settings``),
what a run trains behind one protocol (``model_source``: an ONNX export; ``hf_directory``: a
Hugging Face directory), the text it trains on (``data``), its folder and identity
(``run_folder``), its history (``history``), what it shows (``report``) and the loop over the
training API (``loop``)."""

from .data import Corpus, DataError
from .history import HistoryError
from .loop import Outcome, TrainingError, train
from .model_source import ModelError, open_model
from .run_folder import RunFolder
from .settings import Settings, SettingsError

__all__ = [
    "Corpus",
    "DataError",
    "HistoryError",
    "ModelError",
    "Outcome",
    "RunFolder",
    "Settings",
    "SettingsError",
    "TrainingError",
    "open_model",
    "train",
]
