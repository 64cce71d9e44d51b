"""brainbot: local question answering over markdown notes, in one SQLite file.

Importing brainbot loads nothing heavy: the ONNX runtime, the tokenizer and the C kernel
are loaded the first time they are used.
"""

from __future__ import annotations

from .errors import BrainbotError

__version__ = "0.1.0"
__all__ = ["BrainbotError", "Embedder", "__version__"]


def __getattr__(name: str):
    if name == "Embedder":
        from brainbot.model.embed import Embedder

        return Embedder
    raise AttributeError(f"module 'brainbot' has no attribute {name!r}")
