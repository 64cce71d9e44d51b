"""The invariants ``brainbot doctor`` checks on a Postgres index, each a count of the rows
that break it (SQLite's are ``PRAGMA integrity_check`` and the file's own checks).
"""

from __future__ import annotations

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
