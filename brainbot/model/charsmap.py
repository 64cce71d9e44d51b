"""A normalisation table as SentencePiece's "precompiled charsmap", the form the
``tokenizers`` library's ``Precompiled`` normalizer reads.

The charsmap is a u32 byte length, a double-array trie of the table's keys (UTF-8 bytes)
in darts-clone's unit layout, then the replacements, each ended by a NUL. A unit holds a
node's incoming byte (bits 0-7), whether a key ends there (bit 8) and the XOR offset from
its position to its children's base (bits 10-31); the child reached by byte c sits at
base ^ c and the value of a key ending at the node sits at base itself, a unit whose bit
31 is set (so that no byte's check ever matches it) holding the replacement's offset.
Lookups walk ``pos ^= offset; pos ^= c`` and check that the unit found carries c, as
``spm_precompiled``'s ``common_prefix_search`` does.

``build`` places the nodes greedily, breadth first, each at the lowest base whose slots
are free and that no other node uses (a shared base would let one node's lookup find
another's child). Tables of a few thousand short keys give a few thousand units; the
trie never nears darts-clone's 2^21 limit for a plain offset.

This module builds bytes; which table goes in is ``model/unigram.py``'s concern.
"""

from __future__ import annotations

import struct
from collections import deque

from brainbot.errors import WeightsFileError

LEAF_BIT = 1 << 31
HAS_LEAF = 1 << 8
OFFSET_SHIFT = 10
MAX_OFFSET = 1 << 21  # darts-clone's largest offset without its extension bit


def build(table: dict[str, str]) -> bytes:
    """The precompiled charsmap of ``table`` (key -> replacement, keys non-empty and
    without NUL)."""
    blob = bytearray()
    values: dict[bytes, int] = {}
    for key, out in sorted(table.items()):
        if not key or "\0" in key or "\0" in out:
            raise WeightsFileError(f"a normalisation key or value cannot hold NUL: {key!r}")
        values[key.encode("utf-8")] = len(blob)
        blob += out.encode("utf-8") + b"\0"
    units = _double_array(values)
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def _trie(values: dict[bytes, int]) -> dict:
    """Nested dicts: byte -> child node; key None -> the value of a key ending here."""
    root: dict = {}
    for key, value in values.items():
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    return root


def _double_array(values: dict[bytes, int]) -> list[int]:
    import numpy as np

    size = 1 << 12
    used = np.zeros(size, bool)  # slots holding a unit
    bases = np.zeros(size, bool)  # bases taken by a node
    used[0] = True  # the root's unit
    units: dict[int, int] = {}
    queue = deque([(0, _trie(values), 0)])  # (position, node, its incoming byte)
    lowest = 1
    while queue:
        pos, node, label = queue.popleft()
        labels = sorted(k for k in node if k is not None)
        slots = np.array(([0] if None in node else []) + labels, np.int64)
        while used[lowest]:
            lowest += 1
        base = -1
        while base < 0:
            top = (lowest | 0xFF) + 1
            while top + 256 > size:  # every base of the window and its 256 slots fit
                used, bases, size = np.resize(used, 2 * size), np.resize(bases, 2 * size), 2 * size
                used[size // 2:] = bases[size // 2:] = False
            window = np.arange(lowest, top + 256)
            free = ~bases[window] & ((window ^ pos) != 0)
            for c in slots:
                free &= ~used[window ^ c]
            hits = np.flatnonzero(free)
            if len(hits):
                base = int(window[hits[0]])
            else:
                lowest = top
        offset = base ^ pos
        if offset >= MAX_OFFSET:
            raise WeightsFileError("the normalisation table is too large for one trie")
        bases[base] = True
        used[base ^ slots] = True
        units[pos] = label | (HAS_LEAF if None in node else 0) | (offset << OFFSET_SHIFT)
        if None in node:
            units[base] = LEAF_BIT | node[None]
        queue.extend((base ^ c, node[c], c) for c in labels)
    return [units.get(i, 0) for i in range(max(units) + 1)]


def lookup(charsmap: bytes, key: str) -> str | None:
    """The replacement of the shortest key of ``charsmap`` that is a prefix of ``key``
    (the first ``common_prefix_search`` result, which the Precompiled normalizer takes);
    None when no key is. For tests."""
    (trie_len,) = struct.unpack_from("<I", charsmap)
    units = struct.unpack_from(f"<{trie_len // 4}I", charsmap, 4)
    blob = charsmap[4 + trie_len:]

    def offset(unit: int) -> int:
        return (unit >> OFFSET_SHIFT) << ((unit & (1 << 9)) >> 6)

    pos = offset(units[0])
    for c in key.encode("utf-8"):
        pos ^= c
        if pos >= len(units) or units[pos] & (LEAF_BIT | 0xFF) != c:
            return None
        unit = units[pos]
        pos ^= offset(unit)
        if unit & HAS_LEAF:
            start = units[pos] & (LEAF_BIT - 1)
            return blob[start:blob.index(b"\0", start)].decode("utf-8")
    return None
