"""What a vault's habits say about a note: its links, its tags and its date.

Links come from ``notes/inline.py``'s one parser: wikilinks (``[[Note#Heading|alias]]``, embeds
``![[Note]]``) and markdown links to other notes (``[text](other.md#heading)``; web
addresses and attachments are not notes). A wikilink names a note unless its extension is
an attachment's (``[[photo.png]]``): ``[[Node.js]]`` and ``[[v1.2 release]]`` are notes, as
in Obsidian; a markdown link names one only with a markdown extension or none. Each link belongs to the chunk it sits in.
Resolving a link needs every note of the vault, so ``Resolver`` does it after indexing,
the way Obsidian does: case-insensitive, ``.md`` optional, the shortest path that ends
with what was written; when several notes share a name, the one in the linking note's
folder, then the shortest path. A markdown link is relative to the linking note.

Tags: front matter ``tags:`` (a list or a string) and inline ``#tag`` / ``#nested/tag``,
lowercased, once per note; one longer than MAX_TAG_CHARS is dropped with a warning. A
note's date: front matter ``date``, ``created`` or ``updated``, else ``YYYY-MM-DD`` in its
file name, else the file's mtime. Dates are local: an mtime, and a front-matter date-time
with a UTC offset (``2026-01-05T23:30:00-08:00``), count on the date they fall on in the
indexing machine's time zone; a date, or a date-time without an offset, counts as written.

This module reads notes; it does not store or search anything.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import re
from bisect import bisect_right
from dataclasses import dataclass
from urllib.parse import unquote

from .files import EXTENSIONS
from .inline import ATTACHMENTS, InlineMarkup, Link, WikiLink

DATE_KEYS = ("date", "created", "updated")
# Tags longer than this are dropped with a warning: real tags are words or short paths
# (the longest in examples/vault has 17 characters), while a tag past Postgres's btree
# row limit (~2.7 kB) fails the tags index and with it every write of the batch. A
# hostile or broken note (a base64 blob after a "#") must not block the index.
MAX_TAG_CHARS = 100
_FILE_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
_ISO_DATE = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})")
_OFFSET = re.compile(r"\d[T ]\d{2}:\d{2}.*(Z|[+-]\d{2}:?\d{2})\s*$", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


@dataclass(frozen=True)
class NoteLink:
    """One link of a note, as written, and where it is."""

    chunk_index: int
    line: int  # 1-based line of the note
    kind: str  # wikilink | embed | markdown
    target: str  # the note as written ("Note", "dir/Note.md", "../other.md"); "" = itself
    heading: str | None
    alias: str | None  # the text shown in place of the link, if any


@dataclass(frozen=True)
class NoteFacts:
    links: tuple[NoteLink, ...]
    tags: dict[str, str]  # tag -> front_matter | inline | both
    date: str  # YYYY-MM-DD
    date_source: str  # front_matter | filename | mtime
    warnings: tuple[str, ...] = ()  # what was dropped (a tag too long to keep)


def facts(parsed, markup: InlineMarkup, chunks, relpath: str, mtime_ns: int) -> NoteFacts:
    warnings: list[str] = []
    tags = note_tags(parsed, markup, warnings)
    return NoteFacts(tuple(note_links(markup, parsed, chunks)), tags,
                     *note_date(parsed.front_matter, relpath, mtime_ns), tuple(warnings))


# -- links -------------------------------------------------------------------------------
def _chunk_at(chunks, pos: int) -> int:
    """Index of the first chunk whose span holds ``pos`` (else the one before it)."""
    for c in chunks:
        if c.start_char <= pos < c.end_char:
            return c.chunk_index
    starts = [c.start_char for c in chunks]
    return chunks[max(0, bisect_right(starts, pos) - 1)].chunk_index


def _is_note_target(target: str, kind: str) -> bool:
    """A note, not a picture or a web page: no scheme; for a wikilink, no attachment's
    extension (a dot is part of many names: "Node.js", "John D. Smith", "2024.01.05");
    for a markdown link, a path to a file, no extension but markdown's."""
    if _SCHEME.match(target):
        return False
    name = target.rsplit("/", 1)[-1]
    if kind != "markdown":
        return name.rpartition(".")[2].lower() not in ATTACHMENTS if "." in name else True
    return "." not in name or name.lower().endswith(EXTENSIONS)


def note_links(markup: InlineMarkup, parsed, chunks) -> list[NoteLink]:
    if not chunks:
        return []
    starts = parsed.line_starts
    out = []
    for el in markup.elements:
        if isinstance(el, WikiLink):
            kind, target, heading, alias = ("embed" if el.embed else "wikilink", el.target,
                                            el.heading, el.alias)
        elif isinstance(el, Link) and not el.image:
            path, _, fragment = el.destination.partition("#")
            kind, target, heading, alias = "markdown", unquote(path), fragment or None, el.text
        else:
            continue
        if target and not _is_note_target(target, kind):
            continue
        line = bisect_right(starts, el.start) if starts else 1
        out.append(NoteLink(_chunk_at(chunks, el.start), line, kind, target.strip(),
                            heading, alias))
    return out


class Resolver:
    """Finds the note a link names among the notes of one vault (relative paths)."""

    def __init__(self, paths) -> None:
        self.exact: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = {}
        for path in paths:
            key = _stem(path).casefold()
            self.exact.setdefault(key, path)
            self.by_name.setdefault(key.rsplit("/", 1)[-1], []).append(path)

    def resolve(self, source: str, kind: str, target: str) -> str | None:
        if not target:
            return source  # [[#Heading]], [text](#heading): the note itself
        if kind == "markdown":
            here = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
            return self.exact.get(_stem(here).casefold()) or self.exact.get(
                _stem(target.lstrip("/")).casefold())
        want = _stem(target.strip("/")).casefold()
        found = [p for p in self.by_name.get(want.rsplit("/", 1)[-1], [])
                 if _stem(p).casefold() == want or _stem(p).casefold().endswith("/" + want)]
        if not found:
            return None
        folder = posixpath.dirname(source)
        return min(found, key=lambda p: (posixpath.dirname(p) != folder, p.count("/"), p))

    def note(self, name: str) -> str | None:
        """A note named on the command line: a path, or a name resolved like a wikilink."""
        return self.exact.get(_stem(name).casefold()) or self.resolve("", "wikilink", name)


def relink(documents, links) -> list[tuple[int | None, int]]:
    """(the document it names now, or None; link id) for each link whose target changed.
    ``documents``: (id, root, path) rows; ``links``: (link id, root, source path, kind,
    target as written, current target id) rows. Each folder is a vault of its own."""
    paths: dict[str, dict[str, int]] = {}
    for doc_id, root, path in documents:
        paths.setdefault(root, {})[path] = doc_id
    resolvers = {root: Resolver(docs) for root, docs in paths.items()}
    changes = []
    for link_id, root, source, kind, target, current in links:
        found = resolvers[root].resolve(source, kind, target)
        target_id = paths[root].get(found) if found else None
        if target_id != current:
            changes.append((target_id, link_id))
    return changes


# -- naming a note of one of several indexed folders ---------------------------------------
# ROOT::PATH names PATH under the indexed folder ROOT: its full path as indexed, or its
# last components (``work::README.md``, ``me/work::README.md``). A single colon is taken
# by PATH:LINE:COUNT, hence two.
ROOT_SEPARATOR = "::"


def split_root(ref: str) -> tuple[str | None, str]:
    """``ROOT::PATH`` as (ROOT, PATH); (None, ref) when ref names no root."""
    root, sep, rest = ref.partition(ROOT_SEPARATOR)
    return (root, rest) if sep and root and rest else (None, ref)


def root_matches(root: str, spec: str) -> bool:
    """Whether ``spec`` (the ROOT of ROOT::PATH) names the indexed folder ``root``."""
    root, spec = root.rstrip("/\\"), spec.rstrip("/\\")
    return root == spec or root.replace("\\", "/").endswith("/" + spec.replace("\\", "/"))


def one_root(path: str, roots: list[str], spec: str | None) -> str | None:
    """The one root among ``roots`` (those holding ``path``) that ``spec`` leaves, None
    when none does; an InputError naming them when several do."""
    from brainbot.errors import InputError

    if spec is not None:
        roots = [r for r in roots if root_matches(r, spec)]
    if len(roots) > 1:
        names = " and ".join(sorted(roots))
        short = posixpath.basename(sorted(roots)[0].replace("\\", "/").rstrip("/"))
        raise InputError(f"{path} is in more than one indexed folder ({names}); name one "
                         f"as ROOT{ROOT_SEPARATOR}PATH, e.g. {short}{ROOT_SEPARATOR}{path}")
    return roots[0] if roots else None


def find_in_roots(rows, name: str) -> tuple[str, str] | None:
    """(root, path) of the note ``name`` (a path or a wikilink-like name, optionally
    ROOT::NAME) among (root, path) rows, each folder resolved as a vault of its own; None
    when no folder has it, an InputError when several do."""
    spec, name = split_root(name.strip())
    by_root: dict[str, list[str]] = {}
    for root, path in rows:
        if spec is None or root_matches(root, spec):
            by_root.setdefault(root, []).append(path)
    found = {root: Resolver(paths).note(name) for root, paths in by_root.items()}
    found = {root: path for root, path in found.items() if path is not None}
    root = one_root(name, list(found), None)
    return (root, found[root]) if root is not None else None


def _stem(path: str) -> str:
    lower = path.lower()
    for ext in EXTENSIONS:
        if lower.endswith(ext):
            return path[: -len(ext)]
    return path


# -- tags --------------------------------------------------------------------------------
def _front_tags(front: dict) -> list[str]:
    value = front.get("tags", front.get("tag")) if isinstance(front, dict) else None
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list):
        return []
    return [str(t) for t in value if t is not None and str(t).strip()]


def normal_tag(tag: str) -> str:
    return tag.strip().lstrip("#").strip("/").lower()


def note_tags(parsed, markup: InlineMarkup, warnings: list[str] | None = None
              ) -> dict[str, str]:
    """tag -> front_matter | inline | both; a dropped tag adds a line to ``warnings``."""
    out: dict[str, str] = {}
    for tag in _front_tags(parsed.front_matter):
        if _kept(name := normal_tag(tag), warnings):
            out[name] = "front_matter"
    for tag in markup.tags:
        if _kept(name := normal_tag(tag.name), warnings):
            out[name] = "both" if out.get(name) in ("front_matter", "both") else "inline"
    return out


def _kept(name: str, warnings: list[str] | None) -> bool:
    if len(name) <= MAX_TAG_CHARS:
        return bool(name)
    if warnings is not None:
        warnings.append(f"tag #{name[:24]}… ({len(name):,} characters) is longer than "
                        f"{MAX_TAG_CHARS}; dropped")
    return False


# -- dates ---------------------------------------------------------------------------------
def _as_date(value) -> str | None:
    if isinstance(value, dt.datetime):
        return (value.astimezone() if value.tzinfo else value).date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    m = _ISO_DATE.match(str(value)) if isinstance(value, str) else None
    if m and _valid(*m.groups()):
        return _local(value) or "-".join(m.groups())
    return None


def _local(value: str) -> str | None:
    """The local date of an ISO date-time with a UTC offset (front matter reaches here as
    JSON text: YAML's date-times are written back with isoformat()); None for any other."""
    if not _OFFSET.search(value):
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.astimezone().date().isoformat() if when.tzinfo else None


def _valid(y: str, m: str, d: str) -> bool:
    try:
        dt.date(int(y), int(m), int(d))
    except ValueError:
        return False
    return True


_RELATIVE = re.compile(r"^(\d+)([dwmy])$")


def parse_when(text: str, today: dt.date | None = None) -> str:
    """``--since``/``--before``: an ISO date (YYYY-MM-DD), or 7d / 3w / 2m / 1y ago, in
    local time. Raises InputError naming the forms."""
    from brainbot.errors import InputError

    value, today = text.strip().lower(), today or dt.date.today()
    forms = "use YYYY-MM-DD, or 7d, 3w, 2m, 1y (days, weeks, months, years ago)"
    m = _RELATIVE.match(value)
    if m:
        try:
            return _ago(int(m.group(1)), m.group(2), today).isoformat()
        except (ValueError, OverflowError):  # "3000y", "99999999d": before year 1
            raise InputError(f"{text!r} goes back before the year 1; {forms}") from None
    found = _as_date(value) if _ISO_DATE.fullmatch(value) else None
    if found is None:
        raise InputError(f"cannot read the date {text!r}: {forms}")
    return found


def _ago(n: int, unit: str, today: dt.date) -> dt.date:
    if unit in "dw":
        return today - dt.timedelta(days=n * (7 if unit == "w" else 1))
    months = n * (12 if unit == "y" else 1)
    y, mo = divmod(today.year * 12 + today.month - 1 - months, 12)
    day = min(today.day, [31, 29 if y % 4 == 0 and (y % 100 or y % 400 == 0) else 28,
                          31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo])
    return dt.date(y, mo + 1, day)


def note_date(front: dict, relpath: str, mtime_ns: int) -> tuple[str, str]:
    for key in DATE_KEYS:
        found = _as_date(front.get(key)) if isinstance(front, dict) else None
        if found:
            return found, "front_matter"
    for m in _FILE_DATE.finditer(relpath.rsplit("/", 1)[-1]):
        if _valid(*m.groups()):
            return "-".join(m.groups()), "filename"
    return dt.datetime.fromtimestamp(mtime_ns / 1e9).date().isoformat(), "mtime"
