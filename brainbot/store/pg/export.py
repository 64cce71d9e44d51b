"""Reading a whole Postgres index back: every document as the indexer wrote it (for
``brainbot copy``), and the invariants ``brainbot doctor`` checks.

The export pages through documents by id (keyset, ``EXPORT_PAGE`` at a time) and reads
their chunks, vectors, postings, links and tags with one query each, so memory stays bounded by a
page however large the index is. The caller holds the snapshot (a repeatable-read
transaction).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator

from brainbot.store.interface import NewDocument, new_chunk, new_document

from .vault import export_facts

EXPORT_PAGE = 200  # documents a page: ~500 chunks of NFCorpus, ~2 MB of rows

_DOCS = ("SELECT id, root, path, sha256, size, mtime_ns, title, front_matter, kind, "
         "warnings, date, date_source FROM documents WHERE id > %s ORDER BY id LIMIT %s")
# the columns new_document and new_chunk (store/interface.py) read, in their order
_CHUNKS = ("SELECT c.id, c.document_id, c.chunk_id, c.chunk_index, c.heading_path, "
           "c.source_text, c.retrieval_text, c.start_line, c.end_line, c.start_char, "
           "c.end_char, c.source_tokens, c.retrieval_tokens, c.text_sha256, "
           "c.lexical_length, c.english, e.vector FROM chunks c "
           "LEFT JOIN embeddings e ON e.chunk = c.id "
           "WHERE c.document_id = ANY(%s) ORDER BY c.document_id, c.chunk_index")
_POSTINGS = ("SELECT p.chunk, t.term, p.tf FROM postings p JOIN terms t ON t.id = p.term "
             "WHERE p.chunk = ANY(%s)")


def export(conn) -> Iterator[NewDocument]:
    last = 0
    while True:
        docs = conn.execute(_DOCS, (last, EXPORT_PAGE)).fetchall()
        if not docs:
            return
        last = docs[-1][0]
        rows = conn.execute(_CHUNKS, ([d[0] for d in docs],)).fetchall()
        terms: dict[int, Counter] = defaultdict(Counter)
        for chunk, term, tf in conn.execute(_POSTINGS, ([r[0] for r in rows],)):
            terms[chunk][term] = tf
        by_doc: dict[int, list] = defaultdict(list)
        paths = {d[0]: d[2] for d in docs}
        for r in rows:
            by_doc[r[1]].append(new_chunk(r, paths[r[1]],
                                            None if r[16] is None else r[16].to_numpy(),
                                            terms[r[0]]))
        facts = export_facts(conn, docs)
        for d in docs:
            yield new_document(d, by_doc[d[0]], facts[d[0]])


# name, the count of rows breaking an invariant (0 when it holds)
_CHECKS = [
    ("vectors of a chunk whose text changed",  # (chunks without one: a partial index)
     "SELECT count(*) FROM embeddings e WHERE NOT EXISTS "
     "(SELECT 1 FROM chunks c WHERE c.id = e.chunk)"),
    ("postings of a missing chunk",
     "SELECT count(*) FROM postings p WHERE NOT EXISTS "
     "(SELECT 1 FROM chunks c WHERE c.id = p.chunk)"),
    ("postings whose dl is not their chunk's length",
     "SELECT count(*) FROM postings p JOIN chunks c ON c.id = p.chunk "
     "WHERE p.dl != c.lexical_length"),
    ("postings of a missing term",
     "SELECT count(*) FROM postings p WHERE NOT EXISTS "
     "(SELECT 1 FROM terms t WHERE t.id = p.term)"),
    ("terms whose df differs from their postings",
     "SELECT count(*) FROM terms t LEFT JOIN (SELECT term, count(*) AS n FROM postings "
     "GROUP BY term) p ON p.term = t.id WHERE t.df != coalesce(p.n, 0)"),
    ("documents with a gap in their chunks",
     "SELECT count(*) FROM (SELECT document_id FROM chunks GROUP BY document_id "
     "HAVING max(chunk_index) + 1 != count(*)) g"),
    ("chunk count in meta",
     "SELECT count(*) FROM meta WHERE key = 'chunk_count' AND value::bigint != "
     "(SELECT count(*) FROM chunks)"),
    ("length sum in meta",
     "SELECT count(*) FROM meta WHERE key = 'length_sum' AND value::bigint != "
     "(SELECT coalesce(sum(lexical_length), 0) FROM chunks)"),
    ("HNSW index missing or invalid",
     "SELECT count(*) FROM (SELECT 1) x WHERE NOT EXISTS (SELECT 1 FROM pg_index i "
     "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = 'embeddings_hnsw' "
     "AND c.relnamespace = current_schema()::regnamespace AND i.indisvalid)"),
]


def problems(conn) -> list[str]:
    """The invariants that do not hold, as '<n> <what>' (empty: all hold)."""
    out = []
    for name, sql in _CHECKS:
        n = conn.execute(sql).fetchone()[0]
        if n:
            out.append(name if n == 1 and name.startswith(("HNSW", "chunk count", "length"))
                       else f"{n} {name}")
    return out
