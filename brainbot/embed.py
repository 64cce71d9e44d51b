"""Text -> all-MiniLM-L6-v2 sentence embeddings, with onnxruntime and no torch.

``Embedder`` tokenizes with the model's own wordpiece tokenizer (truncated at 256
wordpieces, special tokens included, exactly as sentence-transformers does), sorts the
texts by token count, pads each batch to its longest text, runs the ONNX graph from
``export.py`` (which pools and L2-normalises) and returns the vectors in input order.
Nothing is loaded before the first call.

This module does not chunk: texts longer than 256 wordpieces are truncated (counted in
``texts_truncated``); keeping chunks within the budget is the chunker's job. It does not
cache vectors either; the store skips texts whose hash it already holds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .errors import InputError
from .export import EXPORT_VERSION, PRECISIONS, onnx_path
from .model import DIMENSION, MAX_TOKENS, MODEL_ID, weights_sha256

# Measured on this machine (2 cores, ~200-word chunks): batches of about 8 sorted by
# length were fastest; 32 was 20-25 % slower and used more memory.
DEFAULT_BATCH_SIZE = 8
# Texts tokenized at a time: enough to sort well, few enough to bound memory when an
# indexer passes 100k texts at once.
TOKENIZE_WINDOW = 512
PAD_ID = 0  # [PAD] in MiniLM's vocab.txt


def physical_cores() -> int:
    """Physical cores this process may run on (hyper-threads counted once)."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # macOS, Windows
        return max(1, (os.cpu_count() or 2) // 2)
    cores = set()
    for cpu in cpus:
        siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        try:
            cores.add(siblings.read_text().strip())
        except OSError:
            cores.add(str(cpu))
    return max(1, len(cores))


class Embedder:
    """all-MiniLM-L6-v2 embeddings: (n, 384) float32, L2-normalised, in input order."""

    def __init__(self, precision: str = "fp32", threads: int | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if precision not in PRECISIONS:
            raise InputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InputError(f"threads must be a positive integer, not {threads!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, not {batch_size!r}")
        self.precision = precision
        self.threads = threads
        self.batch_size = batch_size
        self.tokens_seen = 0  # wordpieces (special tokens included) sent to the model
        self.texts_seen = 0  # texts sent to the model
        self.texts_truncated = 0  # texts cut at MAX_TOKENS wordpieces
        self._tokenizer = None
        self._session = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def fingerprint(self) -> str:
        """What produced the vectors; an index built with another fingerprint is stale."""
        return f"{MODEL_ID}@{weights_sha256()[:12]}:{self.precision}:onnx-v{EXPORT_VERSION}"

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort

                from .model import load_tokenizer

                options = ort.SessionOptions()
                options.intra_op_num_threads = self.threads or physical_cores()
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                self._tokenizer = load_tokenizer(max_length=MAX_TOKENS, truncate=True)
                self._session = ort.InferenceSession(
                    str(onnx_path(self.precision)), options, providers=["CPUExecutionProvider"])
        return self._tokenizer, self._session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns (len(texts), 384) float32 rows of unit norm."""
        if isinstance(texts, str):
            raise InputError("embed() takes a sequence of texts; use embed_query() for one text")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"embed() needs str texts; item {i} is {type(text).__name__}")
        out = np.empty((len(texts), DIMENSION), np.float32)
        if not texts:
            return out
        tokenizer, session = self._load()
        for start in range(0, len(texts), TOKENIZE_WINDOW):
            window = texts[start : start + TOKENIZE_WINDOW]
            encodings = tokenizer.encode_batch(window)
            ids = [e.ids for e in encodings]
            self.texts_truncated += sum(1 for e in encodings if e.overflowing)
            del encodings
            # Sorted by length, so each batch pads little; stable, so runs are repeatable.
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            for b in range(0, len(order), self.batch_size):
                rows = order[b : b + self.batch_size]
                batch_ids, mask = _pad([ids[i] for i in rows])
                vectors = session.run(["sentence_embedding"],
                                      {"input_ids": batch_ids, "attention_mask": mask})[0]
                out[[start + i for i in rows]] = vectors
                self.tokens_seen += int(mask.sum())
                self.texts_seen += len(rows)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one text; returns a (384,) float32 vector of unit norm."""
        if not isinstance(text, str):
            raise InputError(f"embed_query() needs a str, got {type(text).__name__}")
        return self.embed([text])[0]


def _pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists -> (input_ids, attention_mask), int64 [batch, longest]."""
    longest = max(len(r) for r in rows)
    ids = np.full((len(rows), longest), PAD_ID, np.int64)
    mask = np.zeros((len(rows), longest), np.int64)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask
