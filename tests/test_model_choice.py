"""An index records its model (issue 41): a new index of mostly non-English notes takes
multilingual-e5-small and says so, English notes keep all-MiniLM-L6-v2, `--model` chooses;
chunks are counted in the model's tokenizer; queries, copies, the watch and the rebuild's
salvage follow the index's model; status and doctor say whether it suits the notes.

The German vault (tests/data/german-vault) was written for these tests.
"""

from __future__ import annotations

import json
import random

import pytest
from conftest import EXAMPLES, REPO, copy_tree
from reliability_kit import meta_value

from brainbot.cli import main
from brainbot.errors import ModelFilesError
from brainbot.model.records import E5_SMALL, MINILM, for_index, record
from brainbot.store import identity
from brainbot.text.tokens import TokenCounter

GERMAN = REPO / "tests" / "data" / "german-vault"
E5_ID = "intfloat/multilingual-e5-small"

try:
    from brainbot.model.files import verified_model_dir

    verified_model_dir(E5_SMALL)
except ModelFilesError as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"multilingual-e5-small unavailable: {exc}", allow_module_level=True)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def german_db(tmp_path_factory):
    """The German vault indexed with no flags (the CLI's defaults: int8)."""
    folder = tmp_path_factory.mktemp("german")
    vault = copy_tree(GERMAN, folder / "vault")
    db = folder / "de.db"
    code = main(["index", str(vault), "--db", str(db)])
    assert code == 0
    return db, vault


def test_a_german_vault_indexed_without_flags_gets_e5_and_says_so(tmp_path, capsys):
    vault = copy_tree(GERMAN, tmp_path / "vault")
    code, out, err = run(capsys, "index", vault, "--db", tmp_path / "de.db", "--no-embed")
    assert code == 0
    said = [line for line in err.splitlines() if "multilingual-e5-small" in line]
    assert len(said) == 1 and "not English" in said[0], err
    assert meta_value(tmp_path / "de.db", "model") == E5_ID
    assert meta_value(tmp_path / "de.db", "tokenizer").endswith("-unigram1")
    # said once: the next run follows what the index records, silently
    code, out, err = run(capsys, "index", vault, "--db", tmp_path / "de.db", "--no-embed")
    assert code == 0 and "multilingual-e5-small" not in err


def test_english_notes_keep_minilm_and_nothing_is_said(tmp_path, capsys):
    code, out, err = run(capsys, "index", EXAMPLES, "--db", tmp_path / "en.db", "--no-embed",
                         "--json")
    assert code == 0 and json.loads(out)["model"] == "all-MiniLM-L6-v2"
    assert json.loads(out)["model_note"] is None
    assert meta_value(tmp_path / "en.db", "model") == MINILM.model_id
    assert meta_value(tmp_path / "en.db", "tokenizer") == MINILM.files["tokenizer.json"][:16]


def test_model_chooses_explicitly_and_doctor_says_an_english_model_does_not_suit(
        tmp_path, capsys):
    vault = copy_tree(GERMAN, tmp_path / "vault")
    db = tmp_path / "de.db"
    code, out, err = run(capsys, "index", vault, "--db", db, "--model", "all-MiniLM-L6-v2")
    assert code == 0 and "not English: indexing" not in err
    assert meta_value(db, "model") == MINILM.model_id
    assert "--rebuild --model multilingual-e5-small" in err  # the language note says how
    code, out, _ = run(capsys, "doctor", "--db", db, "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1 and not checks["model"]["ok"]
    assert checks["model"]["detail"].startswith("all-MiniLM-L6-v2 reads English only")
    assert checks["model"]["fix"].endswith("--rebuild --model multilingual-e5-small")
    code, out, _ = run(capsys, "status", "--db", db, "--json")
    assert "reads English only" in json.loads(out)["model_fit"]


def test_status_and_doctor_name_the_indexs_model(german_db, capsys):
    db, _ = german_db
    code, out, _ = run(capsys, "status", "--db", db, "--json")
    info = json.loads(out)
    assert info["model"] == E5_ID and info["model_fit"].startswith("multilingual-e5-small")
    code, out, _ = run(capsys, "doctor", "--db", db, "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 0 and checks["model"]["ok"], checks
    assert checks["model files"]["detail"] == f"{E5_ID}, sha256 verified"


def test_chunks_are_counted_in_the_indexs_own_tokenizer(german_db):
    import sqlean

    db, _ = german_db
    conn = sqlean.connect(str(db))
    rows = conn.execute("SELECT retrieval_text, retrieval_tokens FROM chunks").fetchall()
    conn.close()
    e5 = TokenCounter(model=E5_SMALL, cache_size=0)
    minilm = TokenCounter(cache_size=0)
    texts = [t for t, _ in rows]
    assert [n for _, n in rows] == e5.count_many(texts)
    assert max(n for _, n in rows) <= 256
    assert sum(minilm.count_many(texts)) > sum(e5.count_many(texts))  # German: fewer pieces


def test_a_query_is_embedded_with_the_indexs_model(german_db, capsys):
    from brainbot.search.searcher import Searcher

    db, _ = german_db
    with Searcher(db) as s:
        assert s.embedder.model is E5_SMALL and s.embedder.precision == "int8"
        hits = s.search("Wie flicke ich einen platten Reifen?", 3, mode="vector")
    assert hits[0].path == "Haushalt/Fahrrad.md"
    code, out, _ = run(capsys, "query", "Wann pflanzt man Tomaten ins Beet?", "--db", db,
                       "--mode", "vector", "-k", "1", "--json")
    assert code == 0 and json.loads(out)[0]["path"] == "Garten.md"


@pytest.mark.parametrize("mode, loaded", [("hybrid", ["onnxruntime", "tokenizers"]),
                                           ("bm25", [])])
def test_a_query_process_on_an_e5_index_builds_no_250k_piece_tokenizer(german_db, mode, loaded):
    """A query embeds with the piece table's tokenizer (model/piece_table.py), never the
    whole one (1 s and 270 MB); a bm25 query loads no model at all."""
    import subprocess
    import sys

    db, _ = german_db
    code = ("import sys; import brainbot.model.unigram as u\n"
            "def refuse(*a, **k): raise SystemExit('the whole tokenizer was built')\n"
            "u.build = refuse\n"
            "from brainbot.cli import main\n"
            f"rc = main(['query', 'Wann pflanzt man Tomaten?', '--db', {str(db)!r}, '--mode', "
            f"{mode!r}, '--json'])\n"
            "print(sorted(m for m in ('onnxruntime', 'tokenizers') if m in sys.modules), "
            "file=sys.stderr); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["path"] == "Garten.md"
    assert done.stderr.strip().splitlines()[-1] == str(loaded)


def test_switching_model_re_embeds_and_a_running_reader_follows(tmp_path, capsys):
    from brainbot.search.searcher import Searcher

    vault = copy_tree(GERMAN, tmp_path / "vault")
    db = tmp_path / "de.db"
    assert run(capsys, "index", vault, "--db", db, "--model", "all-MiniLM-L6-v2")[0] == 0
    reader = Searcher(db)
    assert reader.embedder.model is MINILM
    code, out, err = run(capsys, "index", vault, "--db", db, "--model", "multilingual-e5-small")
    assert code != 0 and "--rebuild" in err  # another model: only by a rebuild
    code, out, err = run(capsys, "index", vault, "--db", db, "--rebuild", "--model",
                         "multilingual-e5-small", "--json")
    stats = json.loads(out)
    assert code == 0 and stats["embedded"] == stats["chunks"] > 0  # nothing reused
    reader.search("Sauerteig", 1)  # the store notices the new file
    assert reader.embedder.model is E5_SMALL
    reader.close()
    # a rebuild without --model keeps the index's model, and its vectors
    code, out, _ = run(capsys, "index", vault, "--db", db, "--rebuild", "--json")
    assert code == 0 and json.loads(out)["embedded"] == 0 and meta_value(db, "model") == E5_ID


def test_a_copy_keeps_its_model_and_its_readers_follow(german_db, tmp_path, capsys):
    from brainbot.search.searcher import Searcher

    db, _ = german_db
    target = tmp_path / "copy.db"
    assert run(capsys, "copy", "--from", db, "--to", target)[0] == 0
    assert meta_value(target, "model") == E5_ID
    with Searcher(target) as s, Searcher(db) as original:
        q = "Was brauche ich für die Steuererklärung?"
        assert s.embedder.model is E5_SMALL
        a, b = s.search(q, 3, mode="vector"), original.search(q, 3, mode="vector")
    assert [h.chunk_id for h in a] == [h.chunk_id for h in b]


def test_an_index_from_before_model_records_is_minilms_for_readers():
    """Indexes before issue 41 record MiniLM's id and nothing new: their reader fields are
    exactly MiniLM's record's, so they open without a rebuild."""
    old = {"model": "sentence-transformers/all-MiniLM-L6-v2",
           "model_sha256": MINILM.weights_sha256, "dimension": "384",
           "analyzer": identity.reader_wants()["analyzer"], "fingerprint": "x"}
    assert for_index(old) is MINILM
    identity.check(old, "old.db")
    assert identity.current("int8").tokenizer == MINILM.files["tokenizer.json"][:16]
    unknown = dict(old, model="someone/else")
    with pytest.raises(Exception, match="someone/else"):
        identity.check(unknown, "other.db")


def test_a_model_is_one_record():
    assert record("multilingual-e5-small") is record(E5_ID) is E5_SMALL
    assert E5_SMALL.query_prefix == "query: " and E5_SMALL.passage_prefix == "passage: "
    assert (E5_SMALL.layers, E5_SMALL.dimension, E5_SMALL.max_tokens) == (12, 384, 512)
    assert E5_SMALL.weight_for("de") == E5_SMALL.weight_for(None) == 1.0
    with pytest.raises(Exception, match="unknown model"):
        record("bert-base")


WORDS = ["Straße", "naïve", "ＦＵＬＬ", "機械学習", "ひらがな", "тест", "ﬁne", "½", "¨",
         "a\x01b", "x\u00a0y", "emoji🚀", "tab\tin", "<s>", "", " ", "Ａ\u0301", "end "]


def test_unigram_word_sums_equal_whole_counts():
    """The e5 counter's sums of cached words equal the tokenizer's own counts, whatever
    the whitespace and characters (controls, spacing accents: counted whole)."""
    summed = TokenCounter(model=E5_SMALL)
    oracle = TokenCounter(model=E5_SMALL, cache_size=0)
    rng = random.Random(41)
    texts = []
    for _ in range(300):
        parts = rng.choices(WORDS, k=rng.randint(0, 8))
        seps = rng.choices([" ", "  ", "\n", "\t", "\r\n", "\u3000", ""], k=len(parts))
        texts.append("".join(p + s for p, s in zip(parts, seps)))
    assert summed.count_many(texts) == oracle.count_many(texts)


def test_a_watch_writes_with_the_indexs_model_and_chooses_for_a_new_one(german_db, tmp_path):
    """A pass of the watch over an e5 index writes as e5 (a MiniLM writer would be
    refused by the index's identity); over a new index of German notes it takes e5."""
    from brainbot.serve.watch import Watcher

    db, _ = german_db
    mine = tmp_path / "mine.db"
    mine.write_bytes(db.read_bytes())
    vault = copy_tree(GERMAN, tmp_path / "vault")
    (vault / "Neu.md").write_text("# Neu\n\nDer Kühlschrank brummt seit gestern laut und "
                                  "muss dringend abgetaut werden.\n", encoding="utf-8")
    w = Watcher([vault], str(mine))
    report = w.index(vault.absolute(), {"Neu.md"})
    assert report is not None and report.error is None and w.embedder.model is E5_SMALL
    fresh = Watcher([vault], str(tmp_path / "fresh.db"))
    report = fresh.index(vault.absolute(), None)
    assert report.error is None and meta_value(tmp_path / "fresh.db", "model") == E5_ID
