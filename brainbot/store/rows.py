"""Rows of the stores' tables, to and from the records (``store/records.py``).

Both stores keep the same columns in the same order, so these are shared: what one
writes, the other reads back the same way (a copy round-trips exactly). The select lists
that document_row and chunk_row read are here; the queries are ``store/reads.py``'s.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from .records import ChunkRow, DocumentRow, LinkRow, NewChunk, NewDocument

if TYPE_CHECKING:  # notes/vault.py (and notes/inline.py under it) costs ~14 ms: a query never needs it
    from brainbot.notes.vault import NoteFacts


DOC_COLUMNS = ("d.id, d.root, d.path, d.sha256, d.size, d.mtime_ns, d.title, d.kind, "
               "d.warnings, d.date, d.date_source, d.read_ns")
CHUNK_COLUMNS = ("c.id, c.chunk_id, c.heading_path, c.start_line, c.end_line, c.start_char, "
                 "c.end_char, c.source_text, " + DOC_COLUMNS
                 + ", EXISTS (SELECT 1 FROM embeddings e WHERE e.chunk = c.id)")


def document_row(r) -> DocumentRow:
    """A DocumentRow from a row selecting DOC_COLUMNS."""
    return DocumentRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6] or "", r[7],
                       tuple(json.loads(r[8] or "[]")), r[9], r[10], r[11])


def chunk_row(r) -> ChunkRow:
    """A ChunkRow from a row selecting CHUNK_COLUMNS."""
    doc = document_row(r[8:20])
    return ChunkRow(r[0], r[1], doc.path, doc.root, json.loads(r[2]), r[3], r[4], r[5], r[6],
                    r[7], doc, bool(r[20]))


def chunk_record(r) -> dict:
    """The chunk record (README "The chunk record") from a row of reads.chunk_records_sql."""
    return {"chunk_id": r[0], "chunk_index": r[1], "source_text": r[2], "retrieval_text": r[3],
            "metadata": {"source_file": r[4], "heading_path": json.loads(r[5]),
                         "start_line": r[6], "end_line": r[7], "start_char": r[8],
                         "end_char": r[9]},
            "measurements": {"source_tokens": r[10], "retrieval_tokens": r[11]}}


def new_document(d, chunks: list[NewChunk], facts: NoteFacts | None = None) -> NewDocument:
    """A NewDocument from a documents row (id, root, path, sha256, size, mtime_ns, title,
    front_matter, kind, warnings, date, date_source, read_ns)."""
    return NewDocument(d[1], d[2], d[3], d[4], d[5], d[6] or "", json.loads(d[7]), d[8],
                       json.loads(d[9] or "[]"), chunks, facts, id=d[0], read_ns=d[12])


def new_chunk(r, path: str, vector, terms: Counter) -> NewChunk:
    """A NewChunk from a chunks row as the exports select it (id, document id, chunk_id,
    chunk_index, heading_path, texts, spans, tokens, text_sha256, length, english, ...)."""
    from brainbot.text.chunking import Chunk

    chunk = Chunk(r[2], r[3], path, tuple(json.loads(r[4])), r[5], r[6], r[7], r[8], r[9],
                  r[10], r[11], r[12])
    english = None if r[15] is None else bool(r[15])
    return NewChunk(chunk, r[13], vector, terms, r[14], english, id=r[0])


def exported_facts(docs, links, tags) -> dict[int, NoteFacts | None]:
    """Each document's facts, from its row (date and date_source at 10 and 11), its links
    ((document, chunk_index, line, kind, target, heading, alias), in the order written)
    and its tags ((document, tag, source)). None for a document with none (a dataset
    record; a note not yet re-read after migration 4), as the indexer writes them."""
    from brainbot.notes.vault import NoteFacts, NoteLink

    by_links: dict[int, list[NoteLink]] = defaultdict(list)
    for r in links:
        by_links[r[0]].append(NoteLink(*r[1:7]))
    by_tags: dict[int, dict[str, str]] = defaultdict(dict)
    for doc, tag, source in tags:
        by_tags[doc][tag] = source
    return {d[0]: NoteFacts(tuple(by_links[d[0]]), dict(sorted(by_tags[d[0]].items())),
                            d[10], d[11])
            if d[10] is not None or by_links[d[0]] or by_tags[d[0]] else None
            for d in docs}


def fact_rows(document_id: int, facts: NoteFacts, chunk_rows: dict[int, int]
              ) -> tuple[list[tuple], list[tuple]]:
    """A note's rows for the tags table (document, tag, source) and the links table
    (source_chunk, source_document, line, kind, target, target_heading, alias), given its
    chunks' ids by chunk_index."""
    tags = [(document_id, tag, source) for tag, source in sorted(facts.tags.items())]
    links = [(chunk_rows[link.chunk_index], document_id, link.line, link.kind, link.target,
              link.heading, link.alias) for link in facts.links
             if link.chunk_index in chunk_rows]
    return tags, links


def link_row(r) -> LinkRow:
    """A LinkRow from (source path, line, kind, target, heading, alias, target path, the
    source chunk's text and start line): the linking line is cut from the chunk."""
    lines = r[7].split("\n")
    k = r[1] - r[8]
    return LinkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                   lines[k].strip() if 0 <= k < len(lines) else "")
