"""A query tokenized by multilingual-e5-small's unigram tokenizer without building the
whole tokenizer: the pieces a text can use, found in a cached table of the vocabulary.

Building the whole tokenizer (``model/unigram.py``) has ``tokenizers`` put all 250,002
pieces into a byte trie of hash maps: about 1 s of CPU and 270 MB resident (measured
here), which a `brainbot query` process paid to tokenize one line. But a unigram model's
Viterbi search only ever uses pieces that are substrings of a word of the text, and one
number of the rest of the vocabulary: the lowest score, which prices an unknown character
(``tokenizers``' Unigram: min score - 10). So ``PieceTokenizer``, for each batch of texts,
normalises and splits them as the whole tokenizer does, looks every substring of every
word (up to the longest piece, 16 characters) up in the table, builds a ``tokenizers``
Unigram model of the pieces found plus ``<unk>``, the lowest-scored piece, ``<s>`` and
``</s>`` (pieces the text cannot hold change nothing but could lower the minimum, so no
others), dresses it as the whole one (``unigram.dress``) and maps its ids back to the
vocabulary's. Its ids are the whole tokenizer's, truncation included (tests/test_e5.py
holds them equal on texts in many scripts and on the multilingual question sets).
It suits a few short texts (a query: about 1 ms); the Embedder takes it for queries and
the whole tokenizer for passages.

The table is crc32 of each piece's UTF-8 bytes, sorted, with the piece ids in that
order, and the normaliser's charsmap (``model/charsmap.py``; 0.1 s to build): 2 MB,
saved in the cache folder under the weights' sha256 and the unigram builder's version,
with its own sha256 in a sidecar, checked (``files.sha256_matches``) before it is used
and made again when it does not match; built in memory when the folder is not writable.
A hash hit is confirmed against the piece's bytes in the weights file, so a collision of
crc32 costs a comparison, never a wrong piece.

This module reads the table and tokenizes; it does not embed (``model/embed.py``).
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from brainbot.errors import WeightsFileError

from . import e5s1, unigram
from .files import UNIGRAM_BUILDER, cache_dir, sha256_file, sha256_matches, weights_path
from .records import ModelRecord, record

# Bump when the table's layout or how it is made changes: old files are then ignored.
TABLE_FORMAT = 1


@dataclass(frozen=True)
class Encoded:
    """What the Embedder reads of an encoding: the ids, and the pieces cut off by
    truncation (empty when the text fitted)."""

    ids: list[int]
    overflowing: list


class PieceTable:
    """The vocabulary of an E5S1 file, looked up by piece: ``ids_of`` a set of strings."""

    def __init__(self, f: e5s1.E5S1, hashes: np.ndarray, order: np.ndarray,
                 charsmap: bytes, longest: int) -> None:
        count = len(f.vocabulary)
        if len(hashes) != count or len(order) != count or (count and (
                order.min() < 0 or order.max() >= count or np.any(np.diff(hashes) < 0))):
            raise WeightsFileError(f"the piece table of {f.path} does not fit its vocabulary")
        self.file, self.hashes, self.order, self.charsmap = f, hashes, order, charsmap
        self.blob, self.offsets = f.vocabulary.blob, f.vocabulary.offsets
        self.longest = longest  # characters in the longest piece
        self.lowest = int(np.argmin(f.scores))  # its score prices an unknown character

    def ids_of(self, strings: set[str]) -> dict[str, int]:
        """The id of each of ``strings`` that is a piece of the vocabulary."""
        texts = list(strings)
        raw = [s.encode("utf-8") for s in texts]
        keys = np.fromiter((zlib.crc32(b) for b in raw), np.uint32, len(raw))
        lo = np.searchsorted(self.hashes, keys, "left")
        hi = np.searchsorted(self.hashes, keys, "right")
        found = {}
        for k in np.flatnonzero(hi > lo).tolist():
            for j in range(int(lo[k]), int(hi[k])):
                i = int(self.order[j])
                if self.blob[self.offsets[i]:self.offsets[i + 1]] == raw[k]:
                    found[texts[k]] = i
                    break
        return found


class PieceTokenizer:
    """multilingual-e5-small's tokenizer for a few texts at a time (module docstring):
    ``encode_batch(texts)`` gives the whole tokenizer's ids."""

    def __init__(self, table: PieceTable, max_length: int | None) -> None:
        self.table = table
        self.max_length = max_length
        self.normalizer = unigram.normalizer(table.charsmap)
        self.pre_tokenizer = unigram.pre_tokenizer()

    def substrings(self, texts: list[str]) -> set[str]:
        """Every substring, up to the longest piece, of every word of ``texts``."""
        words = {w for t in texts
                 for w, _ in self.pre_tokenizer.pre_tokenize_str(self.normalizer.normalize_str(t))}
        longest = self.table.longest
        return {w[i:j] for w in words for i in range(len(w))
                for j in range(i + 1, min(len(w), i + longest) + 1)}

    def encode_batch(self, texts: list[str]) -> list[Encoded]:
        from tokenizers import Tokenizer, models

        table, f = self.table, self.table.file
        special = f.special
        keep = sorted(set(table.ids_of(self.substrings(texts)).values())
                      | {special["unk"], special["bos"], special["eos"], table.lowest})
        local = {i: k for k, i in enumerate(keep)}
        entries = [(f.vocabulary.piece(i), float(f.scores[i])) for i in keep]
        unk = local[special["unk"]]
        entries[unk] = (unigram.UNMATCHABLE + entries[unk][0], entries[unk][1])
        tok = Tokenizer(models.Unigram(entries, unk_id=unk, byte_fallback=False))
        unigram.dress(tok, table.charsmap,
                      (f.vocabulary.piece(special["bos"]), local[special["bos"]]),
                      (f.vocabulary.piece(special["eos"]), local[special["eos"]]))
        tok.no_padding()
        if self.max_length:
            tok.enable_truncation(max_length=self.max_length)
        back = np.asarray(keep, np.int64)
        return [Encoded(back[e.ids].tolist(), e.overflowing) for e in tok.encode_batch(texts)]

    def encode(self, text: str) -> Encoded:
        return self.encode_batch([text])[0]


def query_tokenizer(model: ModelRecord | str | None = None, truncate: bool = True):
    """A tokenizer for a few texts of a model whose whole tokenizer is slow to build (a
    PieceTokenizer over the cached table), or None when the whole one is quick
    (MiniLM's wordpieces: 30 ms)."""
    spec = record(model)
    if spec.tokenizer != "unigram":
        return None
    return PieceTokenizer(piece_table(spec), spec.max_tokens if truncate else None)


def piece_table(model: ModelRecord | str | None = None) -> PieceTable:
    """The model's piece table, from the cache when it is there and checks out, else
    made (and cached when the folder is writable)."""
    spec = record(model)
    f = e5s1.read(weights_path(spec))
    path = cache_dir() / table_name(spec)
    arrays = _cached(path, spec)
    if arrays is None:
        arrays = make_arrays(f)
        _save(path, arrays, spec)
    return table_of(f, arrays)


def table_of(f: e5s1.E5S1, arrays: dict[str, np.ndarray]) -> PieceTable:
    """The PieceTable of a file from its arrays (``make_arrays``, or the cached ones)."""
    return PieceTable(f, arrays["hashes"], arrays["order"], arrays["charsmap"].tobytes(),
                      int(arrays["longest"]))


def table_name(spec: ModelRecord) -> str:
    return (f"{spec.cache_key}-{spec.weights_sha256[:16]}-unigram{UNIGRAM_BUILDER}"
            f"-pieces-v{TABLE_FORMAT}.npz")


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _expected(spec: ModelRecord) -> dict:
    return {"format": TABLE_FORMAT, "weights_sha256": spec.weights_sha256,
            "unigram_builder": UNIGRAM_BUILDER}


def _cached(path: Path, spec: ModelRecord) -> dict[str, np.ndarray] | None:
    """The cached table's arrays when its sidecar names this model and its sha256 matches."""
    try:
        meta = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return None
    expected = _expected(spec)
    if not isinstance(meta, dict) or {k: meta.get(k) for k in expected} != expected:
        return None
    if not isinstance(meta.get("sha256"), str) or not sha256_matches(path, meta["sha256"]):
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in ("hashes", "order", "charsmap", "longest")}
    except (OSError, ValueError, KeyError):
        return None


def make_arrays(f: e5s1.E5S1) -> dict[str, np.ndarray]:
    """The table's arrays, made from the file: crc32 of every piece, sorted (``hashes``),
    the piece ids in that order (``order``), the normaliser's charsmap, the longest
    piece's characters."""
    from .charsmap import build as build_charsmap

    pieces = f.pieces  # decoded: every piece is checked to be UTF-8
    hashes = np.fromiter((zlib.crc32(p.encode("utf-8")) for p in pieces), np.uint32, len(pieces))
    order = np.argsort(hashes, kind="stable").astype(np.int32)
    charsmap = build_charsmap({chr(cp): out for cp, out in f.normalization.items()})
    return {"hashes": hashes[order], "order": order, "charsmap": np.frombuffer(charsmap, np.uint8),
            "longest": np.array(max(map(len, pieces)), np.int64)}


def _save(path: Path, arrays: dict[str, np.ndarray], spec: ModelRecord) -> None:
    """Written beside, then moved in: the table first, its sidecar last. Best effort: an
    unwritable cache means making the table again next time."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".pieces-") as tmp:
            table = Path(tmp) / "table.npz"
            np.savez(table, **arrays)  # type: ignore[arg-type]  # numpy 2.x stubs read ** as allow_pickle
            sidecar = Path(tmp) / "meta.json"
            sidecar.write_text(json.dumps(_expected(spec) | {"sha256": sha256_file(table)}) + "\n")
            os.replace(table, path)
            os.replace(sidecar, _sidecar(path))
    except OSError:
        pass
