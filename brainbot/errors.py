"""The typed errors of brainbot.

Library code raises these; only the CLI turns them into one-line messages and exit
codes. Errors caused by bad input also subclass ValueError so callers that do not know
brainbot can still catch them idiomatically.
"""

from __future__ import annotations


class BrainbotError(Exception):
    """Base class of every error brainbot raises on purpose."""

    exit_code = 1


class InputError(BrainbotError, ValueError):
    """The caller passed something brainbot cannot use (a bad path, option or value)."""

    exit_code = 2


class ModelFilesError(BrainbotError):
    """The MiniLM model files are missing or do not match their checksums."""


class ExportError(BrainbotError):
    """The ONNX export of the model could not be built or failed verification."""


class StoreError(BrainbotError):
    """The SQLite database cannot be opened, read or written."""


class IncompatibleIndexError(StoreError):
    """The database was written by another schema version, model or chunker."""


class StoreBusyError(StoreError):
    """Another process holds the database's write lock."""


class KernelError(BrainbotError, ValueError):
    """A search kernel was called with invalid arguments (shape, dtype, k, NaN)."""


class NotFoundError(BrainbotError):
    """A document, chunk or note that was asked for is not in the index."""


class AnswerError(BrainbotError):
    """The answering agent could not finish (API errors after retries, bad responses)."""
