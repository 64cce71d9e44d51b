"""`brainbot copy`: move an index between stores (SQLite and Postgres, either way, or
file to file) without re-embedding anything.

Documents, chunks, vectors, postings, the vault's facts (links, tags, dates, each chunk's
language) and the index's identity are read from the source in one snapshot and written
to the target through the store interface, one transaction per batch, with the source's
ids kept (so both stores break score ties alike); the target then resolves the links
itself. Before
anything is written, the source's identity (model, weights, dimension, tokenizer,
chunker, analyzer, embedder) is checked against what the target already records, and a
target that holds documents is refused unless ``replace`` is given: then the copy is
written beside the old index (``store.publish()`` puts it in its place once complete; on
SQLite, ``store/sqlite/rebuild.py``), and a target that is not a brainbot index is refused.
A copy killed midway leaves the old index (with --replace) or the batches it committed:
run it again with ``--replace``. A source without notes never replaces a target that has
some unless ``allow_empty`` (EmptyRebuildError, as a rebuild of nothing). The
conversations kept beside the source (``store/conversations.py``) are read before anything
is written and added to the target's afterwards, in one transaction. They never fail a
copy after the index was written (a rerun would then be refused): a target whose
conversations cannot be read is refused before anything is written, and what still goes
wrong (a source whose conversations cannot be read, a full disk) is said in
``conversations_note``, a warning.

Nothing here knows SQL: it only speaks ``store/interface.py``'s interface.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from brainbot.errors import EmptyRebuildError, InputError, StoreError
from brainbot.store.identity import IndexIdentity
from brainbot.store.target import open_conversations, open_store, public_target, whereabouts
from brainbot.text.analyzers import LANGUAGES_KEY

# Chunks a write transaction: more than the indexer's 64 (nothing is embedded here, so a
# batch costs only its rows), few enough that a kill loses little.
COPY_BATCH_CHUNKS = 512


@dataclass
class CopyStats:
    documents: int = 0
    chunks: int = 0
    source: str = ""
    target: str = ""
    replaced: bool = False
    conversations: int = 0
    conversations_note: str | None = None  # why they were not copied (the index was)

    def summary(self) -> str:
        talk = f", {self.conversations:,} conversations" if self.conversations else ""
        return (f"copied {self.documents:,} documents, {self.chunks:,} chunks{talk} from "
                f"{self.source} to {self.target}" + (" (replaced)" if self.replaced else ""))

    def to_dict(self) -> dict:
        return asdict(self)


def identity_of(meta: dict[str, str], target: str) -> IndexIdentity:
    """The identity an index records (every field), or StoreError."""
    missing = [f.name for f in fields(IndexIdentity) if f.name not in meta]
    if missing:
        raise StoreError(f"{target} records no {', '.join(missing)}: it was never "
                         "written by `brainbot index`, so there is nothing to copy")
    values = {f.name: meta[f.name] for f in fields(IndexIdentity)}
    return IndexIdentity(**{**values, "dimension": int(values["dimension"])})


def refuse_same_index(source, target) -> None:
    """InputError when ``source`` and ``target`` are one index under two spellings
    (``n.db`` and ``./n.db``, a symlink or a hard link, two URLs of one database),
    found by where each lives and by its index_id and generation, before anything is
    opened for writing (a --replace would empty the source before reading it)."""
    where_from, stamp_from = whereabouts(source)
    where_to, stamp_to = whereabouts(target)
    named = f"--from {public_target(source)} and --to {public_target(target)}"
    if str(source) == str(target) or (where_from is not None and where_from == where_to):
        raise InputError(f"{named} name the same index")
    # one index_id and generation: the same index reached another way, or a byte copy
    # of it that nothing has written to since (a copy would change nothing). An older
    # backup of an index differs in generation, so it may be copied back.
    if stamp_from is not None and stamp_from == stamp_to:
        raise InputError(f"{named} name the same index (index_id {stamp_from[0]}, "
                         f"generation {stamp_from[1]})")


def copy_index(source, target, *, replace: bool = False, allow_empty: bool = False) -> CopyStats:
    """Copy the index at ``source`` to ``target`` (paths or postgresql:// URLs)."""
    refuse_same_index(source, target)
    talks, talks_note = conversations_to_copy(source, target)
    with open_store(source) as src:
        ident = identity_of(src.meta(), src.target)
        # writer mode checks every identity field against a target that records one
        dst = open_store(target, write=True, identity=None if replace else ident,
                         rebuild=replace)
        with dst:
            if not replace and dst.counts()["documents"]:
                raise InputError(f"{dst.target} already holds an index; pass --replace to "
                                 "overwrite it")
            dst.record_identity(ident)
            stats = CopyStats(source=src.target, target=dst.target, replaced=replace)
            with dst.bulk_load():
                _copy_documents(src, dst, stats)
            with dst.batch():
                # links travel as written; which document each names is the target's to
                # work out (it holds the same notes, so it finds the same ones)
                dst.resolve_links()
                # a source not yet re-read after migration 4 passes that on, which
                # roots were indexed as folders, and the languages its chunks were
                # analysed in (its queries are analysed in them)
                for key in ("vault_refresh", "folder_roots", LANGUAGES_KEY):
                    dst.set_meta(key, src.meta().get(key))
            old, _ = dst.replaced() or (0, 0)
            if old and not stats.documents and not allow_empty:
                raise EmptyRebuildError(dst.target, old, source=src.target)
            dst.publish()  # --replace: the copy takes the old index's place only now
    stats.conversations_note = talks_note
    try:
        stats.conversations = open_conversations(target).absorb(talks)
    except StoreError as exc:
        stats.conversations_note = (f"the index was copied, but not its conversations: {exc}; "
                                    f"they are still beside {public_target(source)}")
    return stats


def conversations_to_copy(source, target) -> tuple[list, str | None]:
    """The source index's conversations, whole, to add to the target's (they live beside
    an index, so they travel with it: store/conversations.py), and why there are none
    when they cannot be read (a warning: the index is copied all the same). StoreError
    when the target's cannot be read: then nothing was written yet."""
    try:
        talks = list(open_conversations(source).export())
    except StoreError as exc:
        return [], f"the conversations of {public_target(source)} were not copied: {exc}"
    if talks:
        try:
            open_conversations(target).count()
        except StoreError as exc:
            raise StoreError(f"nothing was copied: the conversations of "
                             f"{public_target(source)} go beside the copy, and {exc}") from None
    return talks, None


def _copy_documents(src, dst, stats: CopyStats) -> None:
    batch, pending = [], 0
    for doc in src.export_documents():
        batch.append(doc)
        pending += len(doc.chunks)
        if pending >= COPY_BATCH_CHUNKS:
            _write(dst, batch, stats)
            batch, pending = [], 0
    if batch:
        _write(dst, batch, stats)


def _write(dst, docs: list, stats: CopyStats) -> None:
    with dst.batch():
        for doc in docs:
            dst.add_document(doc)
    stats.documents += len(docs)
    stats.chunks += sum(len(d.chunks) for d in docs)

