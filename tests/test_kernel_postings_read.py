"""The BM25 leg's postings, read from SQLite as two JSON arrays (store/sqlite/arrays.py),
equal the rows the table holds, in chunk order, whichever way they come back."""

from __future__ import annotations

import numpy as np
import pytest

from brainbot.store.sqlite import arrays


def rows_of(db, term: str) -> np.ndarray:
    return np.array(db.execute(
        "SELECT p.chunk, p.tf FROM postings p JOIN terms t ON t.id = p.term "
        "WHERE t.term = ? ORDER BY p.chunk", (term,)).fetchall(), dtype=np.int64).reshape(-1, 2)


@pytest.mark.parametrize("how", ["json", "json, reversed"])
def test_postings_read_equal_the_table_rows(examples_db, monkeypatch, how):
    from brainbot.store.target import open_store

    if how == "json, reversed":  # a plan that returns the rows in another order
        monkeypatch.setattr(arrays, "POSTINGS_JSON", (
            "SELECT json_group_array(c), json_group_array(f) FROM (SELECT p.chunk AS c, "
            "p.tf AS f FROM postings p JOIN terms t ON t.id = p.term WHERE t.term = ? "
            "ORDER BY p.chunk DESC)"))
    with open_store(examples_db) as store:
        index = store.index
        index.sync(store.generation())
        db = index.db
        terms = [t for (t,) in db.execute("SELECT term FROM terms ORDER BY df DESC, term")]
        assert len(terms) > 100
        terms = terms[:40] + terms[::37] + ["no-such-term-at-all"]
        for term in terms:
            want = rows_of(db, term)
            chunks, tfs = index._read_postings(term)
            np.testing.assert_array_equal(chunks, want[:, 0], err_msg=term)
            np.testing.assert_array_equal(tfs, want[:, 1], err_msg=term)
            pos, ftf = index.postings(term)
            np.testing.assert_array_equal(index.rowids[pos], want[:, 0])
            np.testing.assert_array_equal(ftf, want[:, 1].astype(np.float32))
