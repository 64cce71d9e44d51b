"""Text -> sentence embeddings of a model record (all-MiniLM-L6-v2 by default,
multilingual-e5-small), with onnxruntime and no torch.

``Embedder`` puts the model's prefix before each text (e5: "passage: " for what is
indexed, "query: " for a query; MiniLM: none), tokenizes with the model's own tokenizer
(truncated at its max_tokens, special tokens included: MiniLM 256 wordpieces exactly as
sentence-transformers does, e5 512 pieces), runs the ONNX graph from
``model/onnx_export.py`` (which pools and L2-normalises) and returns the vectors in input
order. Its precision: int8 by default (``model/int8_graph.py``, issue #33), or
fp32, which gives sentence-transformers' vectors; either way a text's vector does not
depend on the texts embedded beside it. fp32 sorts the texts by token count and pads
batches of one length bucket (``_batches``); int8 runs each text alone at its own length,
as many at once as the Embedder has threads (``_run_alone``).
Nothing is loaded before the first call; the session comes from ``model/session.py``, over a
pre-optimized copy of the graph that gives bit-identical vectors. Queries are tokenized by
the model's query tokenizer where it has one (multilingual-e5-small:
``model/piece_table.py``, the same ids without building its 250k-piece tokenizer) until
passages have loaded the whole tokenizer.

This module does not chunk: texts longer than max_tokens are truncated (counted in
``texts_truncated``); keeping chunks within the budget is the chunker's job. It does not
cache vectors either; the store skips texts whose hash it already holds.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from brainbot.errors import InputError

from .onnx_export import EXPORT_VERSIONS, PRECISIONS
from .records import ModelRecord, record

# The precision of a new index and of an Embedder that is not told one (issue #33: int8
# met its targets against fp32, README "Embedding precision"). An index keeps the
# precision it was built with; fp32 gives sentence-transformers' own vectors.
DEFAULT_PRECISION = "int8"
# Measured on this machine (2 cores, ~200-word chunks): batches of about 8 sorted by
# length were fastest; 32 was 20-25 % slower and used more memory.
DEFAULT_BATCH_SIZE = 8
# int8 takes no batches: each text runs alone (its graph has no padding mask), ``threads``
# texts at a time on one onnxruntime thread each (benchmarks/results/int8_race.json).
BATCH_SIZES = {"fp32": DEFAULT_BATCH_SIZE, "int8": 1}
# Texts tokenized at a time: enough to sort well, few enough to bound memory when an
# indexer passes 100k texts at once.
TOKENIZE_WINDOW = 512
KINDS = ("passage", "query")  # what a text is: indexed, or asked
# Texts are padded to a multiple of this many tokens (see _batches: reproducibility).
PAD_BUCKET = 16


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
    """A model's embeddings: (n, dimension) float32, L2-normalised, in input order."""

    def __init__(self, precision: str = DEFAULT_PRECISION, threads: int | None = None,
                 batch_size: int | None = None,
                 model: ModelRecord | str | None = None) -> None:
        self.model = record(model)
        if precision not in PRECISIONS:
            raise InputError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InputError(f"threads must be a positive integer, not {threads!r}")
        batch_size = BATCH_SIZES[precision] if batch_size is None else batch_size
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch_size must be a positive integer, not {batch_size!r}")
        self.precision = precision
        self.threads = threads
        self.batch_size = 1 if precision == "int8" else batch_size  # int8: each text alone
        self.tokens_seen = 0  # wordpieces (special tokens included) sent to the model
        self.texts_seen = 0  # texts sent to the model
        self.texts_truncated = 0  # texts cut at the model's max_tokens
        self._tokenizer = None  # the whole tokenizer, for any text
        self._query_tokenizer = None  # one for a few texts, where the whole is slow to build
        self._session = None
        self._lock = threading.Lock()

    @property
    def dimension(self) -> int:
        return self.model.dimension

    @property
    def fingerprint(self) -> str:
        """What produced the vectors; an index built with another fingerprint is stale."""
        m = self.model
        return f"{m.model_id}@{m.weights_sha256[:12]}:{self.precision}:onnx-v{EXPORT_VERSIONS[self.precision]}"

    def _load(self, kind: str = "passage"):
        """The tokenizer for texts of ``kind`` and the session, loaded on first use.

        Queries take the model's query tokenizer when it has one (multilingual-e5-small:
        ``model/piece_table.py``, the same ids without building the 250k-piece tokenizer,
        ~1 s and 270 MB), unless the whole tokenizer is loaded already; passages, which
        come by the thousand, take the whole one.
        """
        with self._lock:
            if self._session is None:
                from .session import open_session

                alone = self.precision == "int8"  # texts side by side, one thread each
                self._session = open_session(self.precision, 1 if alone else self._workers(),
                                             self.model)
            if self._tokenizer is None and kind == "query" and self._query_tokenizer is None:
                from .piece_table import query_tokenizer

                self._query_tokenizer = query_tokenizer(self.model)  # None: the whole is quick
            if self._tokenizer is None and kind == "query" and self._query_tokenizer is not None:
                return self._query_tokenizer, self._session
            if self._tokenizer is None:
                from .files import load_tokenizer

                self._tokenizer = load_tokenizer(truncate=True, model=self.model)
        return self._tokenizer, self._session

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        """Embed ``texts`` as passages (what is indexed) or queries (``kind``); returns
        (len(texts), dimension) float32 rows of unit norm."""
        if isinstance(texts, str):
            raise InputError("embed() takes a sequence of texts; use embed_query() for one text")
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InputError(f"embed() needs str texts; item {i} is {type(text).__name__}")
        prefix = self.model.query_prefix if kind == "query" else self.model.passage_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        out = np.empty((len(texts), self.dimension), np.float32)
        if not texts:
            return out
        tokenizer, session = self._load(kind)
        for start in range(0, len(texts), TOKENIZE_WINDOW):
            window = texts[start : start + TOKENIZE_WINDOW]
            encodings = tokenizer.encode_batch(window)
            ids = [e.ids for e in encodings]
            self.texts_truncated += sum(1 for e in encodings if e.overflowing)
            del encodings
            if self.precision == "int8":
                out[start : start + len(ids)] = self._run_alone(session, ids)
                self.tokens_seen += sum(map(len, ids))
                self.texts_seen += len(ids)
                continue
            for rows, batch_ids, mask in _batches(ids, self.batch_size, self.model):
                vectors = session.run(["sentence_embedding"],
                                      {"input_ids": batch_ids, "attention_mask": mask})[0]
                out[[start + i for i in rows]] = vectors[: len(rows)]
                self.tokens_seen += int(mask[: len(rows)].sum())
                self.texts_seen += len(rows)
        return out

    def _workers(self) -> int:
        return self.threads or physical_cores()

    def _run_alone(self, session, ids: list[list[int]]) -> np.ndarray:
        """Each text's vector from a run of that text alone, ``_workers()`` runs at once
        (onnxruntime's run is thread-safe and releases the GIL), longest first so that
        no worker is left with a long text at the end."""
        def one(i: int) -> np.ndarray:
            return session.run(["sentence_embedding"], {"input_ids": np.array([ids[i]], np.int64)})[0][0]

        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(ids), self.dimension), np.float32)
        workers = min(self._workers(), len(ids))
        if workers == 1:
            out[order] = [one(i) for i in order]
            return out
        pool = ThreadPoolExecutor(workers, initializer=_block_interrupts)
        try:
            out[order] = list(pool.map(one, order))
        finally:  # on Ctrl-C or an error, the texts not yet started are dropped at once
            pool.shutdown(wait=True, cancel_futures=True)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query (with the model's query prefix); returns a (dimension,) float32
        vector of unit norm."""
        if not isinstance(text, str):
            raise InputError(f"embed_query() needs a str, got {type(text).__name__}")
        return self.embed([text], kind="query")[0]


def _block_interrupts() -> None:
    """In a worker thread: leave SIGINT (Ctrl-C) to the main thread, which handles it."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _batches(ids: list[list[int]], batch_size: int, model: ModelRecord):
    """Group token id lists into (rows, input_ids, attention_mask) batches whose result
    for each text is bit-for-bit the same whatever else is in the batch.

    Measured here with onnxruntime's CPU kernels: a text's vector changes in the last
    bits (up to 7e-8) with the padded length of its batch, and again when it runs alone
    (a batch of one takes another GEMM path). So every text is padded to its own length
    bucket (a multiple of PAD_BUCKET) and batched only with texts of the same bucket, and
    a batch of one gets a filler row. Then a resumed or incremental index stores exactly
    the bytes a clean one does. Sorting by length keeps buckets full; padding costs at
    most PAD_BUCKET - 1 tokens a text (about 3 % at 250 tokens). fp32 only: int8 runs
    every text alone (``Embedder._run_alone``).
    """
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i]), i))
    groups: dict[int, list[int]] = {}
    for i in order:
        groups.setdefault(-(-len(ids[i]) // PAD_BUCKET) * PAD_BUCKET, []).append(i)
    for width, members in groups.items():
        for b in range(0, len(members), batch_size):
            rows = members[b : b + batch_size]
            height = max(len(rows), 2)
            batch = np.full((height, width), model.pad_id, np.int64)
            mask = np.zeros((height, width), np.int64)
            for j, i in enumerate(rows):
                batch[j, : len(ids[i])] = ids[i]
                mask[j, : len(ids[i])] = 1
            if len(rows) == 1:
                batch[1, :2] = model.ends  # [CLS] [SEP] / <s> </s>: a filler text
                mask[1, :2] = 1
            yield rows, batch, mask
