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
