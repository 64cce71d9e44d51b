"""The Postgres store's write side: one batch's rows, buffered and sent by binary COPY.

``add_document`` only takes ids from the sequences and queues rows; the batch's rows go
to the server at once, before anything else in the batch runs and before its commit:
new terms by one ``INSERT ... ON CONFLICT``, then documents, chunks, vectors,
postings, tags and links by binary COPY (10k vectors: 0.11 s by binary COPY, 0.19 s by a pipelined
executemany, 1.9 s by text COPY in our measurements), then every term's df by one
UPDATE. Deleting a document deletes its postings explicitly (they carry no foreign key)
and keeps df exact. Everything runs inside the batch's transaction, so a killed writer
leaves nothing of an unfinished batch.

The batch also keeps the deltas of the chunk count and of the summed chunk lengths, which
the store writes to ``meta`` with the generation: BM25's N and average length.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from brainbot.store.records import NewDocument
from brainbot.store.rows import fact_rows

_DOC_COLS = ("id", "root", "path", "sha256", "size", "mtime_ns", "title", "front_matter",
             "indexed_at", "warnings", "kind", "date", "date_source", "read_ns")
_DOC_TYPES = ["int8", "text", "text", "text", "int8", "int8", "text", "text", "text", "text",
              "text", "text", "text", "int8"]
_CHUNK_COLS = ("id", "chunk_id", "document_id", "chunk_index", "heading_path", "source_text",
               "retrieval_text", "start_line", "end_line", "start_char", "end_char",
               "source_tokens", "retrieval_tokens", "text_sha256", "lexical_length",
               "generation", "english")
_CHUNK_TYPES = ["int8", "text", "int8", "int4", "text", "text", "text", "int4", "int4",
                "int4", "int4", "int4", "int4", "text", "int4", "int8", "bool"]
# the rows of store.fact_rows
TAG_COLS, TAG_TYPES = ("document", "tag", "source"), ["int8", "text", "text"]
LINK_COLS = ("source_chunk", "source_document", "line", "kind", "target", "target_heading",
             "alias")
LINK_TYPES = ["int8", "int8", "int4", "text", "text", "text", "text"]


@dataclass
class Pending:
    """The rows of one batch not yet sent, and the batch's count deltas."""

    generation: int
    docs: list[tuple] = field(default_factory=list)
    chunks: list[tuple] = field(default_factory=list)
    vectors: list[tuple] = field(default_factory=list)
    postings: list[tuple[str, int, int, int]] = field(default_factory=list)
    tags: list[tuple] = field(default_factory=list)
    links: list[tuple] = field(default_factory=list)
    explicit_ids: bool = False
    chunk_delta: int = 0
    length_delta: int = 0

    def add(self, conn, doc: NewDocument, indexed_at: str) -> int:
        """Queue ``doc`` with its chunks; its id (given, or the sequence's next)."""
        doc_id = doc.id
        if doc_id is None:
            doc_id = conn.execute(
                "SELECT nextval(pg_get_serial_sequence('documents', 'id'))").fetchone()[0]
        else:
            self.explicit_ids = True
        facts = doc.facts
        self.docs.append((doc_id, doc.root, doc.path, doc.sha256, doc.size, doc.mtime_ns,
                          _text(doc.title), _text(doc.front_matter_json()), indexed_at,
                          json.dumps(doc.warnings, ensure_ascii=False), doc.kind,
                          facts.date if facts else None, facts.date_source if facts else None,
                          doc.read_ns))
        ids = [c.id for c in doc.chunks]
        if any(i is None for i in ids) and doc.chunks:
            fresh = iter(r[0] for r in conn.execute(
                "SELECT nextval(pg_get_serial_sequence('chunks', 'id')) "
                "FROM generate_series(1, %s)", (len(ids),)))
            ids = [i if i is not None else next(fresh) for i in ids]
        self.explicit_ids |= any(c.id is not None for c in doc.chunks)
        for chunk_id, new in zip(ids, doc.chunks):
            c = new.chunk
            self.chunks.append((
                chunk_id, c.chunk_id, doc_id, c.chunk_index,
                _text(json.dumps(list(c.heading_path), ensure_ascii=False)),
                _text(c.source_text), _text(c.retrieval_text), c.start_line, c.end_line,
                c.start_char, c.end_char,
                c.source_tokens, c.retrieval_tokens, new.text_sha256, new.length,
                self.generation, new.english))
            if new.vector is not None:  # None: the semantic phase embeds it later
                self.vectors.append((chunk_id, np.ascontiguousarray(new.vector, np.float32)))
            self.postings.extend((t, n, new.length, chunk_id) for t, n in new.terms.items())
            self.chunk_delta += 1
            self.length_delta += new.length
        if facts is not None:
            self.add_facts(doc_id, facts, {new.chunk.chunk_index: i
                                           for i, new in zip(ids, doc.chunks)})
        return doc_id

    def add_facts(self, doc_id: int, facts, chunk_rows: dict[int, int]) -> None:
        """Queue a note's tags and links (chunk_rows: its chunks' ids by chunk_index)."""
        tags, links = fact_rows(doc_id, facts, chunk_rows)
        self.tags.extend((d, _text(t), s) for d, t, s in tags)
        self.links.extend(row[:4] + tuple(_text(x) for x in row[4:]) for row in links)

    def flush(self, conn) -> None:
        """Send every queued row (inside the caller's transaction)."""
        if not self.docs and not self.tags and not self.links:
            return
        words = sorted({p[0] for p in self.postings})
        conn.execute("INSERT INTO terms(term) SELECT unnest(%s::text[]) "
                     "ON CONFLICT (term) DO NOTHING", (words,))
        ids = dict(conn.execute("SELECT term, id FROM terms WHERE term = ANY(%s)", (words,)))
        _copy(conn, "documents", _DOC_COLS, _DOC_TYPES, self.docs)
        _copy(conn, "chunks", _CHUNK_COLS, _CHUNK_TYPES, self.chunks)
        _copy(conn, "embeddings", ("chunk", "vector"), ["int8", "vector"], self.vectors)
        _copy(conn, "postings", ("term", "tf", "dl", "chunk"), ["int4", "int2", "int2", "int8"],
              ((ids[t], tf, dl, chunk) for t, tf, dl, chunk in self.postings))
        _copy(conn, "tags", TAG_COLS, TAG_TYPES, self.tags)
        _copy(conn, "links", LINK_COLS, LINK_TYPES, self.links)
        df = Counter(ids[p[0]] for p in self.postings)
        conn.execute("UPDATE terms t SET df = t.df + d.n FROM unnest(%s::int[], %s::int[]) "
                     "AS d(id, n) WHERE t.id = d.id", (list(df), list(df.values())))
        if self.explicit_ids:  # ids given by a copy: the sequences must move past them
            for table in ("documents", "chunks"):
                conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                             f"GREATEST((SELECT max(id) FROM {table}), 1))")
        self.docs, self.chunks, self.vectors, self.postings = [], [], [], []
        self.tags, self.links = [], []
        self.explicit_ids = False

    def delete(self, conn, doc_ids: Sequence[int]) -> None:
        """Documents with their chunks, vectors and postings; df kept exact."""
        ids = [int(i) for i in doc_ids]
        if not ids:
            return
        n, total = conn.execute(
            "SELECT count(*), coalesce(sum(lexical_length), 0) FROM chunks "
            "WHERE document_id = ANY(%s)", (ids,)).fetchone()
        conn.execute(
            "UPDATE terms t SET df = t.df - d.n FROM (SELECT p.term, count(*) AS n "
            "FROM postings p JOIN chunks c ON c.id = p.chunk WHERE c.document_id = ANY(%s) "
            "GROUP BY p.term) d WHERE t.id = d.term", (ids,))
        conn.execute("DELETE FROM postings WHERE chunk IN "
                     "(SELECT id FROM chunks WHERE document_id = ANY(%s))", (ids,))
        conn.execute("DELETE FROM documents WHERE id = ANY(%s)", (ids,))
        self.chunk_delta -= int(n)
        self.length_delta -= int(total)


def _text(value: str | None) -> str | None:
    """Postgres text cannot hold NUL (SQLite can): a note may carry one past the 8 KiB
    that notes/files.py sniffs for binary files. It becomes U+FFFD, one character for one, so
    every span still points at the same place."""
    return value.replace("\x00", "\ufffd") if value and "\x00" in value else value


def _copy(conn, table: str, cols: Sequence[str], types: list[str], rows) -> None:
    with conn.cursor() as cur, cur.copy(
            f"COPY {table} ({', '.join(cols)}) FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(types)
        for row in rows:
            cp.write_row(row)
