"""Shared by the Postgres tests: a store-level snapshot that compares an index's content
across stores, and the crash harness for the Postgres writer."""

from __future__ import annotations

from pathlib import Path

from brainbot.store.target import open_store

# How far a vector (or hybrid) score from pgvector may be from the C kernel's: both sum
# 384 float products, in different orders and with SIMD paths chosen by the CPU, so they
# agree to a few ulps, not bit for bit. Measured over the 277 questions of examples/*.jsonl
# on examples/notes and examples/vault, top-10 in every mode, with the AVX2 path and with
# BRAINBOT_SIMD=scalar (AMD EPYC Zen 4, pgvector 0.8.5): ids and order identical, largest
# score difference 4.8e-7 (vector), 0 (bm25, hybrid RRF). BM25 stays bit for bit.
SCORE_TOLERANCE = 2e-6


def same_hits(a: list, b: list, why=None) -> None:
    """Two stores' hits: the same records in the same order, scores within tolerance."""
    assert [h.chunk_id for h in a] == [h.chunk_id for h in b], why
    for x, y in zip(a, b, strict=True):
        assert abs(float(x.score) - float(y.score)) <= SCORE_TOLERANCE, (why, x.score, y.score)
        dx, dy = x.to_dict(), y.to_dict()
        del dx["score"], dy["score"]
        assert dx == dy, why


# meta keys that count commits or cache sums, not content
# index_id: each index its own; languages: chunks written per language since the last
# rebuild (counts only grow: history, not content; text/analyzers.py)
VOLATILE_META = {"generation", "chunk_count", "length_sum", "index_id", "languages"}


def store_snapshot(target) -> dict:
    """Everything that defines an index's content, independent of ids and of the store:
    documents with their facts (date, tags, links as written), chunks with their vector
    bytes, terms and language, the links as resolved, and meta."""
    with open_store(target) as store:
        docs, chunks, links = [], [], []
        for d in store.export_documents():
            facts = d.facts and (d.facts.date, d.facts.date_source,
                                 tuple(sorted(d.facts.tags.items())), d.facts.links)
            docs.append((d.root, d.path, d.sha256, d.size, d.mtime_ns, d.title,
                         d.front_matter_json(), d.kind, tuple(d.warnings), repr(facts)))
            for c in d.chunks:
                rec = c.chunk.to_record()
                # None: the semantic phase has not reached it yet (a background one may be
                # running); such a snapshot differs from a clean one, so a wait goes on
                vector = None if c.vector is None else c.vector.astype("<f4").tobytes()
                chunks.append((d.path, rec["chunk_id"], rec["chunk_index"], repr(rec),
                               c.text_sha256, c.length, vector,
                               tuple(sorted(c.terms.items())), c.english))
        for d in store.documents():
            links += [repr(x) for x in store.links_from(d.id)]
        meta = {k: v for k, v in store.meta().items() if k not in VOLATILE_META}
        df = store.doc_freqs(sorted({t for c in chunks for t, _ in c[7]}))
    return {"documents": sorted(docs), "chunks": sorted(chunks), "links": sorted(links),
            "meta": meta, "df": sorted((t, n) for t, n in df.items() if n > 0)}


# Runs `brainbot` (cli.main) with the Postgres store's write points hooked, as
# reliability_kit.HARNESS does for SQLite:
#   BB_TEST_BATCH=n          chunks per write transaction
#   BB_TEST_KILL_AT=where:n  SIGKILL at the n-th insert (queued, inside the batch's
#                            transaction) or commit (after it)
#   BB_TEST_PAUSE=s          sleep s seconds after each commit
PG_HARNESS = r'''
import os, signal, sys, time
from contextlib import contextmanager

import brainbot.index.indexer as ix
from brainbot.store.pg.store import PostgresStore

if os.environ.get("BB_TEST_BATCH"):
    ix.BATCH_CHUNKS = ix.BATCH_MAX_CHUNKS = int(os.environ["BB_TEST_BATCH"])
where, _, n = os.environ.get("BB_TEST_KILL_AT", "").partition(":")
pause = float(os.environ.get("BB_TEST_PAUSE", "0"))
seen = {"insert": 0, "commit": 0}

def tick(kind):
    seen[kind] += 1
    if kind == where and seen[kind] == int(n):
        os.kill(os.getpid(), signal.SIGKILL)

insert = PostgresStore.add_document
def _insert(self, doc):
    out = insert(self, doc)
    if seen["insert"] + 1 == int(n or 0) and where == "insert":
        self._pending.flush(self.conn)  # the rows reach the server, uncommitted
    tick("insert")
    return out
PostgresStore.add_document = _insert

batch = PostgresStore.batch
@contextmanager
def _batch(self):
    with batch(self):
        yield
    tick("commit")
    if pause:
        time.sleep(pause)
PostgresStore.batch = _batch

from brainbot.cli import main
sys.exit(main(sys.argv[1:]))
'''


def write_pg_harness(folder: Path) -> Path:
    path = folder / "pg_harness.py"
    path.write_text(PG_HARNESS, encoding="utf-8")
    return path
