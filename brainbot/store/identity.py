"""What must match between an index and the code that reads or writes it.

An index records the model, its weights, the dimension, the tokenizer, the chunker, the
BM25 analyzer and the embedder that built it (the ``meta`` table, or its Postgres twin).
The model is the index's own: a reader takes the record of the model the index names
(``model/records.for_index``) and needs its weights, dimension and the analyzer to match
this code's (it then embeds queries with that model); a writer adds chunks next to the
old ones, so it needs every field of the identity it writes with to match. One function
checks both ways. An index from before model records names MiniLM, whose record gives
exactly the fields it recorded.

This module builds and compares identities; it does not open any store.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass

from brainbot.errors import IdentityMismatchError

READER_KEYS = ("model", "model_sha256", "dimension", "analyzer")
# What makes a vector, given its text: a rebuild reuses an old index's vectors when these
# match (store/sqlite/salvage.py, store/pg/rebuild.py).
VECTOR_KEYS = ("model", "model_sha256", "dimension", "tokenizer", "embedder")


@dataclass(frozen=True)
class IndexIdentity:
    """The fields recorded in an index's meta; ``fingerprint`` hashes them all."""

    model: str
    model_sha256: str
    dimension: int
    tokenizer: str
    chunker: str
    analyzer: str
    embedder: str

    def fingerprint(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_meta(self) -> dict[str, str]:
        meta = {k: str(v) for k, v in asdict(self).items()}
        meta["fingerprint"] = self.fingerprint()
        return meta


def new_index_id() -> str:
    """A fresh ``index_id``: written to meta when an index is created (or first opened by
    a writer, for one from before index ids), never copied, new after a rebuild. Two
    spellings of one index (``n.db``, ``./n.db``, a symlink, another URL) share it; a
    reader that sees it change knows the index was rebuilt or replaced under it."""
    return os.urandom(16).hex()  # 128 random bits; uuid would cost a cold query ~0.6 ms


def stamp(meta: dict[str, str]) -> tuple[str, str] | None:
    """(index_id, generation) from an index's meta: it changes when a batch commits or
    the index is rebuilt or replaced; None for an index from before index ids."""
    if "index_id" not in meta:
        return None
    return meta["index_id"], meta.get("generation", "0")


def current(precision: str = "fp32", params=None, model=None) -> IndexIdentity:
    """The identity this code writes with a model (a record or its name; the default
    model's for None): model, tokenizer, chunker, analyzer, embedder."""
    from brainbot.model.embed import Embedder
    from brainbot.model.files import tokenizer_fingerprint
    from brainbot.model.records import record
    from brainbot.text import analyzers
    from brainbot.text.chunking import ChunkParams

    spec = record(model)
    params = params or ChunkParams()
    return IndexIdentity(
        model=spec.model_id,
        model_sha256=spec.weights_sha256,
        dimension=spec.dimension,
        tokenizer=tokenizer_fingerprint(spec),
        chunker=params.fingerprint(),
        analyzer=analyzers.VERSION,
        embedder=Embedder(precision=precision, model=spec).fingerprint,
    )


def same_vectors(meta: dict[str, str], identity: IndexIdentity) -> bool:
    """Whether the vectors of an index with this ``meta`` were made as ``identity`` makes
    them, so that each is still the vector of its text."""
    return all(meta.get(k) == str(getattr(identity, k)) for k in VECTOR_KEYS)


def reader_wants(meta: dict[str, str] | None = None) -> dict[str, str]:
    """What a reader needs an index of ``meta`` to match: the record of the model it
    names (the default model's without meta), the analyzer; constants, nothing loaded.
    For a model no record names, the default's, which it then fails to match."""
    from brainbot.model.records import for_index, record
    from brainbot.text import analyzers

    spec = for_index(meta or {}) or record()
    return {"model": spec.model_id, "model_sha256": spec.weights_sha256,
            "dimension": str(spec.dimension), "analyzer": analyzers.VERSION}


def model_of(meta: dict[str, str]):
    """The model record of an index's meta (the default's for one that records none yet),
    or None for a model this code does not know."""
    from brainbot.model.records import for_index

    return for_index(meta)


def _recorded(meta: dict[str, str], key: str) -> str | None:
    if key == "analyzer" and "analyzer" not in meta and "+" in meta.get("chunker", ""):
        return meta["chunker"].split("+", 1)[1]  # schema 1 kept it inside the chunker field
    return meta.get(key)


def check(meta: dict[str, str], target, *, writer: IndexIdentity | None = None) -> None:
    """Refuse an index whose recorded identity does not match: with ``writer`` every field
    of that identity, else (a reader) the fields of READER_KEYS. An index that records
    no identity yet (never written) passes."""
    from brainbot.text import analyzers

    if "fingerprint" not in meta:
        return
    wanted = writer.as_meta() if writer is not None else reader_wants(meta)
    for key, ours in wanted.items():
        if key == "fingerprint":
            continue
        theirs = _recorded(meta, key)
        if theirs != ours and not (key == "analyzer" and writer is None
                                   and analyzers.readable(theirs)):
            raise IdentityMismatchError(target, key, "none" if theirs is None else theirs, ours,
                                        _why(key, theirs))


# The fingerprint of int8 vectors before issue #33: onnxruntime's dynamic quantization,
# one activation scale per batch, so a vector depended on the texts embedded beside it.
BATCH_DEPENDENT_INT8 = ":int8:onnx-v1"
# The first per-token int8 graph: texts padded into batches under an attention mask; one
# text a run (export version 3) gives other last bits.
PADDED_INT8 = ":int8:onnx-v2"
# The chunker before issue 40: an HTML comment ending a section after a block that filled
# the model's budget became a chunk of its own, which showed nothing.
LONE_COMMENT_CHUNKER = "chunker3-"


def _why(key: str, theirs: str | None) -> str:
    if key == "embedder" and (theirs or "").endswith(BATCH_DEPENDENT_INT8):
        return "its int8 vectors depend on the texts each was embedded beside"
    if key == "embedder" and (theirs or "").endswith(PADDED_INT8):
        return "its int8 vectors come from an earlier int8 graph, which padded texts into batches"
    if key == "chunker" and (theirs or "").startswith(LONE_COMMENT_CHUNKER):
        return ("its chunker made a chunk that shows nothing of a comment ending a section "
                "after a full block")
    return ""


def precision_of(meta: dict[str, str]) -> str | None:
    """The embedding precision ("fp32", "int8") an index records in its ``embedder``
    (``model@weights:precision:onnx-vN``), whatever its version; None when it records
    none (never written) or one this code does not know."""
    from brainbot.model.onnx_export import PRECISIONS

    parts = meta.get("embedder", "").split(":")
    return parts[-2] if len(parts) >= 3 and parts[-2] in PRECISIONS else None
