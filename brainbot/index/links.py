"""A note's link reports: its outgoing links, backlinks (with the linking line) and
unresolved links, as `brainbot links`, `get`'s backlinks and the MCP server show them,
over the store's vault reads (links_from, links_to, find_note)."""

from __future__ import annotations

from brainbot.store.interface import Store

from .reading import CHUNK_ID, document, parse_ref


def _link_dict(link, side: str) -> dict:
    return {side: link.source if side == "source" else link.target_path, "line": link.line,
            "kind": link.kind, "target": link.target, "heading": link.heading,
            "alias": link.alias, "line_text": link.line_text}


def note_links(store: Store, note: str) -> dict:
    """A note's outgoing links, backlinks (with the linking line) and unresolved links;
    ``note`` is a path relative to the root or a name resolved like a wikilink."""
    doc = store.find_note(note)
    outgoing = store.links_from(doc.id)
    return {"note": doc.path, "root": doc.root,
            "outgoing": [_link_dict(x, "target") for x in outgoing if x.target_path],
            "backlinks": [_link_dict(x, "source") for x in store.links_to(doc.id)],
            "unresolved": [_link_dict(x, "target") for x in outgoing if not x.target_path]}


def backlinks_of(store: Store, ref: str) -> list[dict]:
    """The links into the note that ``ref`` (PATH[:LINE[:COUNT]] or a chunk id) reads."""
    row = store.chunk_by_public_id(ref) if CHUNK_ID.match(ref) else None
    doc = row.document if row is not None else document(store, parse_ref(ref)[0])
    return [_link_dict(x, "source") for x in store.links_to(doc.id)]


LINK_KINDS = ("wikilink", "embed", "markdown")


def resolve_link(store: Store, source: str, kind: str, target: str) -> dict:
    """The note a link written in ``source`` ([ROOT::]PATH) names, as {"root", "path"}:
    the page opens it when a reader clicks [[target]] or [text](target.md). The index's
    own resolution of that link when it holds one; else resolved now as the indexer
    would, among the notes of the source's folder (a note edited since it was indexed).
    NotFoundError when no note has that name."""
    from brainbot.errors import InputError, NotFoundError
    from brainbot.notes.vault import Resolver

    if kind not in LINK_KINDS:
        raise InputError(f"kind must be one of {', '.join(LINK_KINDS)}, not {kind!r}")
    doc = document(store, source)
    want = target.strip()
    if not want:
        return {"root": doc.root, "path": doc.path}
    for link in store.links_from(doc.id):
        if link.target == want and link.target_path and (link.kind == "markdown") == (
                kind == "markdown"):
            return {"root": doc.root, "path": link.target_path}
    paths = [d.path for d in store.documents() if d.root == doc.root and d.kind == "note"]
    found = Resolver(paths).resolve(doc.path, kind, want)
    if found is None:
        raise NotFoundError(f"no note named {target!r} in {doc.root}")
    return {"root": doc.root, "path": found}
