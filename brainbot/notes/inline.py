"""Inline markup: what a reader sees, and the links and tags in it.

`InlineMarkup.of_note(parsed)` scans a note once and records each inline element with its
exact span (``text[e.start:e.end]`` is its source): HTML comments, code spans, wikilinks and
embeds, links and images (inline, and reference links whose label the note defines),
definitions, autolinks, bare URLs and #tags. From them it knows the *visible text* of any
span, what a reader of the rendered note sees:

    [text](url) -> text     ![alt](src) -> alt      <!-- ... -->, [label]: url -> nothing
    [[Note]], [[dir/Note.md]], ![[Note]] -> Note    [[Note|alias]] -> alias
    [[Note#Heading]] -> Note > Heading (as Obsidian shows it)    [[#Heading]] -> Heading
    [[Note#^block]] -> Note    ![[photo.png]] -> nothing (a reader sees the picture)

All else stays as written: emphasis, raw HTML tags, escapes, URLs (a reader sees those). An
element that vanishes from a line of its own takes the line along.

Code blocks (and fences in list items and quotes) are never scanned, HTML blocks only for
comments; definitions are one line each at the start of a paragraph. Within a block the
rules are CommonMark's where notes go (backtick runs close on a run of the same length;
code spans, comments and autolinks bind tighter than links; no link inside a link), and
simpler where they do not: an unbracketed destination holds no ``[`` or ``]`` and one level
of parentheses at most. Linear on any input: each element is matched by an anchored,
unambiguous regex or a bracket stack from a position the scan then moves past, and a failed
search is never repeated (a 1 MB line of ``[[[[`` or ``<!--``).

This module does not resolve links, render, or strip emphasis.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from .files import EXTENSIONS
from .markdown import Block, ParsedNote, fence_closes, fence_open, parse

# How a wikilink's heading parts are joined in its visible text: Obsidian shows
# [[Note#Heading]] as "Note > Heading", the way chunk heading paths are written too.
HEADING_SEPARATOR = " > "
# Embeds of these show the file itself, never its name (Obsidian's accepted formats).
ATTACHMENTS = frozenset("png jpg jpeg gif bmp svg webp avif heic tif tiff ico mp3 wav m4a ogg "
                        "oga flac 3gp mp4 webm ogv mov mkv pdf canvas excalidraw".split())


@dataclass(frozen=True, slots=True)
class Span:
    """Where an element lies: text[start:end] is its source."""
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Comment(Span):
    """<!-- ... -->: never shown."""


@dataclass(frozen=True, slots=True)
class CodeSpan(Span):
    """`code`: shown as written; nothing inside it is markup."""


@dataclass(frozen=True, slots=True)
class WikiLink(Span):
    """[[target#heading|alias]]; ![[...]] when embed."""
    target: str  # as written: "Note", "dir/Note.md"; "" for a heading of the same note
    heading: str | None  # after the first "#": "Heading", "Heading#Sub", "^block-id"
    alias: str | None  # after the first "|" (written "\|" inside a table)
    embed: bool

    @property
    def name(self) -> str:
        """The target's last path component, without ".md" or ".markdown"."""
        name = self.target.rsplit("/", 1)[-1]
        stem, dot, ext = name.rpartition(".")
        return stem if dot and f".{ext.lower()}" in EXTENSIONS else name

    @property
    def visible(self) -> str:
        name = self.name
        if self.embed and "." in name and name.rpartition(".")[2].lower() in ATTACHMENTS:
            return ""  # a picture, a sound, a PDF: the reader sees the file
        if not self.embed and self.alias and self.alias.strip():
            return self.alias.strip()
        heading = "" if not self.heading or self.heading.startswith("^") else self.heading
        return HEADING_SEPARATOR.join(p.strip() for p in [name, *heading.split("#")] if p.strip())


@dataclass(frozen=True, slots=True)
class Link(Span):
    """[text](destination "title"), or ![alt](src) when image. A reference link
    ([text][label], [label][], [label]) carries its definition's destination and title."""
    text_start: int  # text[text_start:text_end] is the link text (the image's alt)
    text_end: int
    text: str
    destination: str  # as written, without <>; backslash escapes kept
    title: str | None  # as written, without its quotes
    image: bool
    label: str | None = None  # a reference link's label as written, else None

    @property
    def fragment(self) -> str | None:
        """What follows "#" in the destination ("Setup" of "guide.md#Setup"), else None."""
        _, sep, fragment = self.destination.partition("#")
        return fragment if sep else None


@dataclass(frozen=True, slots=True)
class Autolink(Span):
    """<https://example.org> or <me@example.org>: the address is its visible text."""
    destination: str


@dataclass(frozen=True, slots=True)
class BareUrl(Span):
    """https://example.org or www.example.org in running text: visible as written."""
    url: str


@dataclass(frozen=True, slots=True)
class Definition(Span):
    """A link reference definition line, [label]: destination "title": never shown."""
    label: str
    destination: str
    title: str | None


@dataclass(frozen=True, slots=True)
class Tag(Span):
    """#tag or #nested/tag, outside code, links and URLs; name as written, without "#"."""
    name: str


Element = Comment | CodeSpan | WikiLink | Link | Autolink | BareUrl | Definition

# --- the patterns: anchored where used, and unambiguous (alternatives start with distinct
# characters, a repeat is followed by what it cannot match), so any backtracking is linear.

# What may start an element: an escape, a backtick run, "<", brackets. Found by a character
# class first: sre scans for a class far faster than for an alternation (measured 6x).
_FIRST = re.compile(r"[\\`<\[\]!]")
_SPECIAL = re.compile(r"\\[!-/:-@\[-`{-~]|`+|<!--|<|!?\[\[?|\]")
_BACKTICKS = re.compile(r"`+")
_AUTOLINK = re.compile(
    r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\x00-\x20<>]*)>"
    r"|<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>"
)
# Obsidian forbids [ ] in note names, so a wikilink holds none and ends at the first "]]".
_WIKILINK = re.compile(r"!?\[\[([^\[\]\n]+)\]\]")
_SPACE = r"[ \t]*(?:\n[ \t]*)?"  # spaces, at most one line break
_TITLE = r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\))"
_INLINE_TAIL = re.compile(
    rf"\({_SPACE}(?:<((?:[^<>\n\\]|\\.)*)>|((?:[^\s()\\\[\]]|\\.|\((?:[^\s()\\]|\\.)*\))*))"
    rf"(?:(?:[ \t]+(?:\n[ \t]*)?|\n[ \t]*){_TITLE})?{_SPACE}\)",
    re.S,
)
_LABEL = re.compile(r"\[((?:[^\[\]\\]|\\.){0,999})\]", re.S)
_DEFINITION = re.compile(
    r" {0,3}\[((?:[^\[\]\\\n]|\\.){1,999})\]:[ \t]*(?:<((?:[^<>\n\\]|\\.)*)>|(\S+))"
    r"(?:[ \t]+(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|\((?:[^()\\\n]|\\.)*\)))?[ \t]*"
)
_URL_HINT = re.compile(r"://|www\.")  # a literal first: found at memchr speed
_BARE_URL = re.compile(r"(?i:https?://|www\.)[^\s<>\[\]`|]+")
# After whitespace or at a line start; letters, digits, "_", "-", "/" (Obsidian's rule).
_TAG = re.compile(r"#([\w/-]+)")
_COLOUR = re.compile(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}")


def _normal_label(label: str) -> str:  # CommonMark: case-folded, whitespace collapsed
    return " ".join(label.split()).casefold()


def _whole_line(text: str, s: int, e: int) -> tuple[int, int]:
    """(s, e) widened to its line and line break when nothing else stands on the line."""
    ls = s
    while ls > 0 and text[ls - 1] in " \t":
        ls -= 1
    if ls > 0 and text[ls - 1] != "\n":
        return s, e
    le, n = e, len(text)
    while le < n and text[le] in " \t":
        le += 1
    if le < n and text[le] != "\n":
        return s, e
    return ls, min(le + 1, n)


def _trim_url(text: str, s: int, e: int) -> int:
    """GFM's end of a bare URL: no trailing punctuation, no unbalanced ")"."""
    opened, closed = text.count("(", s, e), text.count(")", s, e)
    while e > s and (text[e - 1] in "?!.,:;*_~'\"" or text[e - 1] == ")" and closed > opened):
        closed -= text[e - 1] == ")"
        e -= 1
    return e


class _Scanner:
    """Scans the inline runs of one text, left to right, and keeps what it finds."""

    def __init__(self, text: str, labels: dict[str, Definition]) -> None:
        self.text, self.labels = text, labels
        self.elements: list[Element] = []
        self.edits: list[tuple[int, int, str]] = []  # text[a:b] reads as the replacement
        self.opaque: list[tuple[int, int]] = []  # code, comments, link targets, URLs
        self.handlers = {"\\": lambda p, _: p + 2, "`": self.code_span, "<": self.angle,
                         "]": self.close, "[": self.open, "!": self.open}  # "\\": escaped

    def add(self, element: Element, *edits: tuple[int, int, str], opaque=None) -> None:
        self.elements.append(element)
        self.edits.extend(edits)
        self.opaque.append(opaque or (element.start, element.end))

    def vanish(self, element: Element) -> None:
        """An element with no visible text: it is deleted, with its line when alone."""
        self.add(element, (*_whole_line(self.text, element.start, element.end), ""))

    def scan(self, a: int, b: int, inline: bool) -> None:
        """One block's run text[a:b]; inline=False for raw HTML, where only comments hide
        (an unclosed one to the end of the block, as a browser would)."""
        text, self.a, self.b = self.text, a, b
        self.openers: list[tuple[int, bool]] = []  # "[" and "![" not yet closed
        self.floor = 0  # "[" openers below this index are inside a link: no link opens
        self.runs: dict[int, list[int]] | None = None  # backtick run starts by length
        self.comments_close = True  # False once a "<!--" found no "-->" after it
        pos, found = a, len(self.opaque)
        if not inline:
            while (p := text.find("<!--", pos, b)) != -1:
                close = text.find("-->", p + 2, b)
                pos = b if close == -1 else close + 3
                self.vanish(Comment(p, pos))
            return
        while (m := _FIRST.search(text, pos, b)) is not None:
            p = m.start()
            token = _SPECIAL.match(text, p, b)
            pos = p + 1 if token is None else self.handlers[text[p]](p, token.group())
        self.bare_urls(sorted(self.opaque[found:]))

    def code_span(self, p: int, token: str) -> int:
        if self.runs is None:
            self.runs = {}
            for m in _BACKTICKS.finditer(self.text, self.a, self.b):
                self.runs.setdefault(m.end() - m.start(), []).append(m.start())
        n = len(token)
        starts = self.runs.get(n, [])
        k = bisect_left(starts, p + n)
        if k == len(starts):
            return p + n  # no run of the same length closes it: literal backticks
        self.add(CodeSpan(p, starts[k] + n))
        return starts[k] + n

    def angle(self, p: int, token: str) -> int:
        if token == "<!--":
            close = self.text.find("-->", p + 2, self.b) if self.comments_close else -1
            if close == -1:
                self.comments_close = False  # no later "<!--" of this run closes either
                return p + 4
            self.vanish(Comment(p, close + 3))
            return close + 3
        m = _AUTOLINK.match(self.text, p, self.b)
        if m is None:
            return p + 1
        end = m.end()
        self.add(Autolink(p, end, m.group(1) or m.group(2)), (p, p + 1, ""), (end - 1, end, ""))
        return end

    def open(self, p: int, token: str) -> int:
        if token.endswith("[[") and (m := _WIKILINK.match(self.text, p, self.b)) is not None:
            target, bar, alias = m.group(1).partition("|")
            target = target[:-1] if bar and target.endswith("\\") else target  # "\|" in tables
            target, hashed, heading = target.partition("#")
            link = WikiLink(p, m.end(), target, heading if hashed else None,
                            alias if bar else None, token[0] == "!")
            if link.visible:
                self.add(link, (p, link.end, link.visible))
            else:
                self.vanish(link)
            return link.end
        image = token[0] == "!"
        self.openers.append((p, image))
        return p + 2 if image else p + 1  # "[[" that is no wikilink: the 2nd "[" is next

    def close(self, p: int, token: str) -> int:
        if not self.openers:
            return p + 1
        start, image = self.openers.pop()
        depth = len(self.openers)
        active = image or depth >= self.floor
        self.floor = min(self.floor, depth)
        link = self.link(start, image, p) if active else None
        if link is None:
            return p + 1
        if link.text_start == link.text_end:
            self.vanish(link)
        else:
            self.add(link, (start, link.text_start, ""), (p, link.end, ""), opaque=(p, link.end))
        if not image:
            self.floor = depth  # the openers around a link cannot make links
        return link.end

    def link(self, start: int, image: bool, close: int) -> Link | None:
        text = self.text
        t0 = start + (2 if image else 1)
        m = _INLINE_TAIL.match(text, close + 1, self.b)
        if m is not None:
            dest = m.group(1) if m.group(1) is not None else m.group(2) or ""
            return Link(start, m.end(), t0, close, text[t0:close], dest,
                        m.group(3) and m.group(3)[1:-1], image)
        if not self.labels:
            return None
        m = _LABEL.match(text, close + 1, self.b)
        if m is not None and m.group(1):
            label = m.group(1)  # [text][label]
        elif close - t0 <= 999:
            label = text[t0:close]  # [label][] or [label]
        else:
            return None
        definition = self.labels.get(_normal_label(label))
        if definition is None:
            return None
        end = m.end() if m is not None else close + 1
        return Link(start, end, t0, close, text[t0:close], definition.destination,
                    definition.title, image, label)

    def bare_urls(self, taken: list[tuple[int, int]]) -> None:
        """URLs in the run's text, outside the elements found in it (a URL inside a link's
        text counts; one in its destination does not). After whitespace or "*_~(" only."""
        text, a, starts, end = self.text, self.a, [s for s, _ in taken], self.a
        for hint in _URL_HINT.finditer(text, a, self.b):
            p = hint.start()
            if text[p] == ":":
                p -= 5 if text[p - 5 : p].lower() == "https" else 4
            k = bisect_right(starts, p) - 1
            if p < end or p < a or (k >= 0 and taken[k][1] > p):
                continue  # inside the last URL, or inside an element
            if p > a and not (text[p - 1].isspace() or text[p - 1] in "*_~("):
                continue  # inside a word: not a URL of its own
            m = _BARE_URL.match(text, p, self.b)
            prefix = 4 if text[p] in "wW" else text.index("://", p) + 3 - p
            if m is not None and (e := _trim_url(text, p + prefix, m.end())) > p + prefix:
                self.add(BareUrl(p, e, text[p:e]))
                end = e


def _definitions(text: str, s: int, e: int, out: list[Definition]) -> int:
    """The definition lines opening the paragraph text[s:e]; where the rest of it starts."""
    while s < e:
        nl = text.find("\n", s, e)
        stop = e if nl == -1 else nl
        m = _DEFINITION.fullmatch(text, s, stop)
        if m is None or not m.group(1).strip():
            return s
        destination = m.group(2) if m.group(2) is not None else m.group(3)
        out.append(Definition(s, stop, m.group(1), destination, m.group(4) and m.group(4)[1:-1]))
        s = e if nl == -1 else nl + 1
    return s


def _outside_fences(text: str, s: int, e: int) -> list[tuple[int, int]]:
    """The parts of a list or quote block outside the code fences opened in its items."""
    spans, pos, start = [], s, s
    fence: tuple[str, int] | None = None
    while pos < e:
        nl = text.find("\n", pos, e)
        stop = e if nl == -1 else nl
        line = text[pos:stop].lstrip(" \t>")
        if fence is None:
            opened = fence_open(line)
            if opened is not None:
                if pos > start:
                    spans.append((start, pos))
                fence = (opened[0], opened[1])
        elif fence_closes(line, *fence):
            fence, start = None, stop
        pos = stop + 1
    if fence is None and start < e:
        spans.append((start, e))
    return spans


def _layout(text: str, blocks: list[Block]) -> tuple[list[Definition], list[tuple]]:
    """Definitions, and (start, end, inline) runs to scan: inline=False scans for comments."""
    definitions: list[Definition] = []
    runs: list[tuple[int, int, bool]] = []
    for block in blocks:
        kind, s, e = block.kind, block.start_char, block.end_char
        if kind in ("code", "front_matter", "hr"):
            continue
        if kind == "html":
            runs.append((s, e, False))
        elif kind in ("list", "quote"):
            runs.extend((a, b, True) for a, b in _outside_fences(text, s, e))
        elif kind == "paragraph":
            rest = _definitions(text, s, e, definitions)
            if rest < e:
                runs.append((rest, e, True))
        else:
            runs.append((s, e, True))
    return definitions, runs


class InlineMarkup:
    """The inline elements of one text, and the visible text of any span of it."""

    def __init__(self, text: str, definitions: list[Definition], runs) -> None:
        labels: dict[str, Definition] = {}
        for d in definitions:
            labels.setdefault(_normal_label(d.label), d)  # the first definition wins
        found = _Scanner(text, labels)
        for d in definitions:
            found.vanish(d)
        for a, b, inline in runs:
            found.scan(a, b, inline)
        self.text = text
        self.elements: list[Element] = sorted(found.elements, key=lambda el: el.start)
        self._starts = [el.start for el in self.elements]
        edits = sorted(found.edits)
        self._edit_starts = [a for a, _, _ in edits]
        self._edit_ends = [b for _, b, _ in edits]
        self._edits = edits
        self.tags: list[Tag] = _tags(text, runs, sorted(found.opaque))
        self._tag_starts = [t.start for t in self.tags]

    @classmethod
    def of_note(cls, parsed: ParsedNote) -> InlineMarkup:
        """A parsed note's markup: code blocks and front matter are never scanned."""
        definitions, runs = _layout(parsed.text, parsed.blocks)
        return cls(parsed.text, definitions, runs)

    @classmethod
    def of_text(cls, text: str) -> InlineMarkup:
        """Markup of one run of inline text with no block structure (a heading's text)."""
        return cls(text, [], [(0, len(text), True)])

    def within(self, start: int = 0, end: int | None = None) -> list[Element]:
        """Elements that begin in text[start:end], in order."""
        end = len(self.text) if end is None else end
        return self.elements[bisect_left(self._starts, start) : bisect_left(self._starts, end)]

    def tags_within(self, start: int = 0, end: int | None = None) -> list[Tag]:
        end = len(self.text) if end is None else end
        return self.tags[bisect_left(self._tag_starts, start) : bisect_left(self._tag_starts, end)]

    def edited(self, start: int, end: int) -> bool:
        """Whether text[start:end] reads differently from its source."""
        k = bisect_right(self._edit_ends, start)
        return k < len(self._edits) and self._edit_starts[k] < end

    def visible(self, start: int = 0, end: int | None = None) -> str:
        """What a reader sees of text[start:end]. An edit cut by the span's ends is cut
        with it when it deletes, and left as written when it replaces (a wikilink)."""
        text = self.text
        end = len(text) if end is None else end
        k = bisect_right(self._edit_ends, start)
        if k == len(self._edits) or self._edit_starts[k] >= end:
            return text[start:end]
        out, pos = [], start
        while k < len(self._edits) and self._edit_starts[k] < end:
            a, b, replacement = self._edits[k]
            k += 1
            if replacement and (a < start or b > end):
                continue
            out += (text[pos : max(a, start)], replacement)
            pos = min(b, end)
        out.append(text[pos:end])
        return "".join(out)

    def blank(self, start: int, end: int) -> bool:
        """Whether a reader sees nothing but whitespace in text[start:end]."""
        return not self.visible(start, end).strip()


def _tags(text: str, runs, opaque: list[tuple[int, int]]) -> list[Tag]:
    """#tags of the inline runs, outside code spans, comments, link targets and URLs."""
    starts = [a for a, _ in opaque]
    found = []
    for a, b, inline in runs:
        if not inline:
            continue
        for m in _TAG.finditer(text, a, b):
            p = m.start()
            k = bisect_right(starts, p) - 1
            if (p and not text[p - 1].isspace()) or (k >= 0 and opaque[k][1] > p):
                continue  # not after whitespace, or inside code, a comment, a link
            name = m.group(1)  # "#123" is an issue (Obsidian), "#fff" a colour (examples/vault)
            if not name.isdigit() and not _COLOUR.fullmatch(name):
                found.append(Tag(m.start(), m.end(), name))
    return sorted(found, key=lambda t: t.start)


def parse_inline(text: str, start: int = 0, end: int | None = None) -> list[Element]:
    """The inline elements that begin in text[start:end]; text is a whole note."""
    return InlineMarkup.of_note(parse(text)).within(start, end)


def visible_text(text: str, start: int = 0, end: int | None = None) -> str:
    """What a reader sees of text[start:end]; text is a whole note."""
    return InlineMarkup.of_note(parse(text)).visible(start, end)


def tags(text: str, start: int = 0, end: int | None = None) -> list[Tag]:
    """The #tags that begin in text[start:end]; text is a whole note."""
    return InlineMarkup.of_note(parse(text)).tags_within(start, end)
