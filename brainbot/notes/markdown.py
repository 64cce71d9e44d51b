"""Markdown into blocks with exact spans.

`parse(text)` splits a note into blocks (front matter, headings, paragraphs, fenced and
indented code, tables, lists, block quotes, HTML blocks, thematic breaks) and records for
each one its 1-based inclusive line span and its character span, so that
``text[block.start_char:block.end_char]`` is exactly the block's text (from the start of
its first line, indentation included, to the end of its last line, newline excluded).

The rules follow CommonMark and GFM at the block level, simplified where notes never go:
list items are not parsed into a tree (a list is one block; `list_item_starts` finds its
items), block quotes are not parsed inside, inline markup is left alone. Every line is
looked at a bounded number of times and every regex is anchored and free of nested
ambiguity, so a 20 MB note, a 1 MB line or a note of nothing but ``#`` parses in linear
time. Nothing here raises on bad input: bad YAML front matter is reported, not thrown.

This module does not chunk, tokenize or render anything.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from itertools import accumulate

BLOCK_KINDS = frozenset(
    {"heading", "paragraph", "code", "table", "list", "quote", "html", "hr", "front_matter"}
)


@dataclass(frozen=True, slots=True)
class Block:
    kind: str
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    start_char: int
    end_char: int  # exclusive; the block's last newline is not part of it
    level: int = 0  # heading level 1-6, else 0
    heading: str | None = None  # heading text, closing #s stripped
    info: str | None = None  # fenced code info string ("" when absent)


@dataclass
class ParsedNote:
    text: str
    front_matter: dict
    body_start_char: int
    blocks: list[Block]
    title: str | None
    front_matter_error: str | None = None
    line_starts: list[int] = field(default_factory=list, repr=False)


# --- line classifiers: each looks at one line, anchored, linear ---------------------------

_ATX = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LIST = re.compile(r"( {0,3})([-*+]|[0-9]{1,9}[.)])(?=[ \t]|$)")
_HTML_1 = re.compile(r" {0,3}<(?:script|pre|style|textarea)(?:[ \t>]|$)", re.I)
_HTML_1_END = ("</script>", "</pre>", "</style>", "</textarea>")
_HTML_6_TAGS = frozenset(
    """address article aside base basefont blockquote body caption center col colgroup dd
    details dialog dir div dl dt fieldset figcaption figure footer form frame frameset h1
    h2 h3 h4 h5 h6 head header hr html iframe legend li link main menu menuitem nav noframes
    ol optgroup option p param search section summary table tbody td tfoot th thead title
    tr track ul""".split()
)
_HTML_6 = re.compile(r" {0,3}</?([A-Za-z][A-Za-z0-9]*)(?:[ \t>]|/>|$)")
_HTML_7 = re.compile(
    r" {0,3}(?:<[A-Za-z][A-Za-z0-9-]*"
    r"(?:[ \t]+[A-Za-z_:][A-Za-z0-9_.:-]*(?:[ \t]*=[ \t]*(?:[^ \t\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*"
    r"[ \t]*/?>|</[A-Za-z][A-Za-z0-9-]*[ \t]*>)[ \t]*$"
)
# Type 7 HTML lines longer than this are treated as text: no real tag line is this long,
# and it bounds the work of the attribute regex on a hostile 1 MB line.
_HTML_7_MAX_LINE = 2000


def _blank(line: str) -> bool:
    return not line or line.isspace()


def _indent(line: str) -> int:
    """Width of the leading whitespace, tabs to the next multiple of 4."""
    width = 0
    for ch in line:
        if ch == " ":
            width += 1
        elif ch == "\t":
            width += 4 - width % 4
        else:
            break
        if width >= 8:  # nothing downstream cares beyond this; keeps 1 MB indents O(1)
            break
    return width


def _is_hr(line: str) -> bool:
    s = line.lstrip(" ")
    if len(line) - len(s) > 3 or not s or s[0] not in "-*_":
        return False
    t = s.replace(" ", "").replace("\t", "").rstrip("\r")
    return len(t) >= 3 and t.count(t[0]) == len(t)


def _setext_level(line: str) -> int:
    s = line.lstrip(" ")
    if len(line) - len(s) > 3 or not s or s[0] not in "=-":
        return 0
    t = s.rstrip()
    if t.count(t[0]) != len(t):
        return 0
    return 1 if t[0] == "=" else 2


def _atx(line: str) -> tuple[int, str] | None:
    m = _ATX.match(line)
    if m is None:
        return None
    level = len(m.group(1))
    rest = line[m.end() :].strip()
    if rest.endswith("#"):
        bare = rest.rstrip("#")
        if not bare:
            rest = ""
        elif bare[-1] in " \t":
            rest = bare.rstrip()
    return level, rest


def fence_open(line: str) -> tuple[str, int, str] | None:
    """(fence char, fence length, info string) when line opens a code fence."""
    m = _FENCE.match(line)
    if m is None:
        return None
    marker = m.group(1)
    info = line[m.end() :].strip()
    if marker[0] == "`" and "`" in info:
        return None
    return marker[0], len(marker), info


def fence_closes(line: str, char: str, length: int) -> bool:
    """Whether line closes a fence opened with length times char."""
    s = line.lstrip(" ")
    if len(line) - len(s) > 3 or not s.startswith(char * length):
        return False
    t = s.rstrip()
    return t.count(char) == len(t)


def _list_marker(line: str) -> re.Match | None:
    return _LIST.match(line)


def _html_start(line: str, in_paragraph: bool) -> int:
    """The CommonMark HTML block type (1-7) that starts on this line, or 0."""
    s = line.lstrip(" ")
    if len(line) - len(s) > 3 or not s.startswith("<"):
        return 0
    if _HTML_1.match(line):
        return 1
    if s.startswith("<!--"):
        return 2
    if s.startswith("<?"):
        return 3
    if s.startswith("<![CDATA["):
        return 5
    if len(s) > 2 and s[1] == "!" and s[2].isascii() and s[2].isalpha():
        return 4
    m = _HTML_6.match(line)
    if m and m.group(1).lower() in _HTML_6_TAGS:
        return 6
    if not in_paragraph and len(line) <= _HTML_7_MAX_LINE and _HTML_7.match(line):
        return 7
    return 0


def _html_ends(kind: int, line: str) -> bool:
    if kind == 1:
        low = line.lower()
        return any(end in low for end in _HTML_1_END)
    if kind == 2:
        return "-->" in line
    if kind == 3:
        return "?>" in line
    if kind == 4:
        return ">" in line
    if kind == 5:
        return "]]>" in line
    return False


def _split_cells(line: str) -> int:
    """Number of cells of a table row (escaped pipes do not split)."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    return s.count("|") - s.count("\\|") + 1


def _is_delimiter_row(line: str) -> bool:
    s = line.strip()
    if "|" not in s:  # a bare "---" is a setext underline or a break, never a table
        return False
    core = s.strip("|")
    if not core:
        return False
    for cell in core.split("|"):
        c = cell.strip()
        if not c:
            return False
        c = c[1:] if c.startswith(":") else c
        c = c[:-1] if c.endswith(":") else c
        if not c or c.count("-") != len(c):
            return False
    return True


def _interrupts_paragraph(line: str) -> bool:
    """Whether a line starts a block that may interrupt a paragraph."""
    s = line.lstrip(" ")
    if not s or len(line) - len(s) > 3:
        return False
    c = s[0]
    if c == "#":
        return _atx(line) is not None
    if c in "`~":
        return fence_open(line) is not None
    if c == ">":
        return True
    if c == "<":
        return _html_start(line, in_paragraph=True) != 0
    if c in "-*_" and _is_hr(line):
        return True
    if c in "-*+" or c.isdigit():
        m = _list_marker(line)
        if m is None:
            return False
        if _blank(line[m.end() :]):
            return False  # an empty item cannot interrupt a paragraph
        marker = m.group(2)
        return marker in "-*+" or marker[:-1] == "1"
    return False


# --- the parser --------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0, *accumulate(len(line) + 1 for line in self.lines[:-1])]
        self.n = len(self.lines)
        self.i = first_line
        self.blocks: list[Block] = []

    def add(self, kind: str, first: int, last: int, **extra) -> None:
        self.blocks.append(
            Block(
                kind,
                first + 1,
                last + 1,
                self.starts[first],
                self.starts[last] + len(self.lines[last]),
                **extra,
            )
        )

    def last_nonblank(self, first: int, last: int) -> int:
        while last > first and _blank(self.lines[last]):
            last -= 1
        return last

    def table_starts(self, j: int) -> bool:
        if j + 1 >= self.n:
            return False
        head, delim = self.lines[j], self.lines[j + 1]
        return (
            "|" in head
            and _is_delimiter_row(delim)
            and _split_cells(head) == _split_cells(delim)
        )

    def run(self) -> list[Block]:
        lines = self.lines
        while self.i < self.n:
            line = lines[self.i]
            if _blank(line):
                self.i += 1
                continue
            if _indent(line) >= 4:
                self.indented_code()
                continue
            s = line.lstrip(" ")
            c = s[0]
            if c == "#" and (atx := _atx(line)) is not None:
                self.add("heading", self.i, self.i, level=atx[0], heading=atx[1])
                self.i += 1
            elif c in "`~" and (fence := fence_open(line)) is not None:
                self.fenced_code(*fence)
            elif c in "-*_" and _is_hr(line):
                self.add("hr", self.i, self.i)
                self.i += 1
            elif c == ">":
                self.quote()
            elif c == "<" and (kind := _html_start(line, in_paragraph=False)):
                self.html(kind)
            elif (c in "-*+" or c.isdigit()) and (m := _list_marker(line)) is not None:
                self.list_block(len(m.group(1)))
            elif self.table_starts(self.i):
                self.table()
            else:
                self.paragraph()
        return self.blocks

    def indented_code(self) -> None:
        first = j = self.i
        while j < self.n and (_blank(self.lines[j]) or _indent(self.lines[j]) >= 4):
            j += 1
        self.add("code", first, self.last_nonblank(first, j - 1), info="")
        self.i = j

    def fenced_code(self, char: str, length: int, info: str) -> None:
        first = self.i
        j = first + 1
        while j < self.n:
            if fence_closes(self.lines[j], char, length):
                self.add("code", first, j, info=info)
                self.i = j + 1
                return
            j += 1
        # Unterminated: the fence runs to the end of the note (CommonMark).
        self.add("code", first, self.last_nonblank(first, self.n - 1), info=info)
        self.i = self.n

    def quote(self) -> None:
        first = j = self.i
        j += 1
        while j < self.n:
            line = self.lines[j]
            if _blank(line):
                break
            if not line.lstrip(" ").startswith(">") and _interrupts_paragraph(line):
                break
            j += 1
        self.add("quote", first, j - 1)
        self.i = j

    def html(self, kind: int) -> None:
        first = j = self.i
        if kind <= 5:
            while j < self.n and not _html_ends(kind, self.lines[j]):
                j += 1
            last = min(j, self.n - 1)
            self.add("html", first, self.last_nonblank(first, last))
            self.i = last + 1
            return
        while j < self.n and not _blank(self.lines[j]):
            j += 1
        self.add("html", first, j - 1)
        self.i = j

    def table(self) -> None:
        first = self.i
        j = first + 2
        while j < self.n:
            line = self.lines[j]
            if _blank(line) or _interrupts_paragraph(line):
                break
            j += 1
        self.add("table", first, j - 1)
        self.i = j

    def list_block(self, base_indent: int) -> None:
        lines, n = self.lines, self.n
        first = last = self.i
        j = first + 1
        fence: tuple[str, int] | None = None
        prev_blank = False
        while j < n:
            line = lines[j]
            if fence is not None:  # inside a fence opened within an item
                if fence_closes(line.lstrip(" \t"), *fence):
                    fence = None
                last, prev_blank = j, False
                j += 1
                continue
            if _blank(line):
                prev_blank = True
                j += 1
                continue
            indent = _indent(line)
            if indent > base_indent:
                pass  # continuation or nested content
            elif _is_hr(line):
                break
            elif _list_marker(line) is not None:
                pass  # the next item
            elif prev_blank or _interrupts_paragraph(line) or self.table_starts(j):
                break
            # lazy continuation of the item's paragraph, or item content
            opened = fence_open(line.lstrip(" \t"))
            if opened is not None:
                fence = (opened[0], opened[1])
            last, prev_blank = j, False
            j += 1
        self.add("list", first, last)
        self.i = last + 1

    def paragraph(self) -> None:
        first = self.i
        j = first + 1
        while j < self.n:
            line = self.lines[j]
            if _blank(line):
                break
            level = _setext_level(line)
            if level:
                text = " ".join(ln.strip() for ln in self.lines[first:j])
                self.add("heading", first, j, level=level, heading=text)
                self.i = j + 1
                return
            if _indent(line) < 4 and (_interrupts_paragraph(line) or self.table_starts(j)):
                break
            j += 1
        self.add("paragraph", first, j - 1)
        self.i = j


# --- front matter ----------------------------------------------------------------------

# The JSON-safe copy of front matter visits at most this many nodes: YAML aliases can make
# a 1 KB document expand into billions of nodes ("billion laughs").
_MAX_FRONT_MATTER_NODES = 100_000


def _json_safe(value, budget: list[int]):
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("front matter too large or too deeply aliased")
    if isinstance(value, dict):
        return {str(k): _json_safe(v, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v, budget) for v in value]
    if isinstance(value, (_dt.date, _dt.datetime, _dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _front_matter(lines: list[str]) -> int | None:
    """Index of the closing line of front matter that opens the note, or None."""
    if not lines or lines[0].lstrip("\ufeff").rstrip() != "---":
        return None
    for k in range(1, len(lines)):
        if lines[k].rstrip() in ("---", "..."):
            return k
    return None


def _load_front_matter(source: str) -> tuple[dict, str | None]:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        return {}, "pyyaml is not installed; front matter not parsed"
    try:
        data = yaml.safe_load(source)
    except Exception as exc:  # yaml.YAMLError, and ValueError for dates like 2024-13-45
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {}, f"invalid YAML front matter: {first}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"front matter is a {type(data).__name__}, not a mapping"
    try:
        return _json_safe(data, [_MAX_FRONT_MATTER_NODES]), None
    except (ValueError, RecursionError) as exc:
        return {}, f"front matter not used: {exc}"


def parse(text: str) -> ParsedNote:
    """Parse a note (already decoded, newlines normalised to "\\n") into blocks."""
    parser = _Parser(text, 0)
    front: dict = {}
    error: str | None = None
    body_start = 0
    close = _front_matter(parser.lines)
    if close is not None:
        parser.add("front_matter", 0, close)
        yaml_start = parser.starts[1]
        yaml_end = parser.starts[close]
        front, error = _load_front_matter(text[yaml_start:yaml_end])
        body_start = min(len(text), parser.starts[close] + len(parser.lines[close]) + 1)
        parser.i = close + 1
    blocks = parser.run()
    return ParsedNote(
        text=text,
        front_matter=front,
        body_start_char=body_start,
        blocks=blocks,
        title=_title(front, blocks),
        front_matter_error=error,
        line_starts=parser.starts,
    )


def _title(front: dict, blocks: list[Block]) -> str | None:
    value = front.get("title")
    if value is not None and not isinstance(value, (dict, list)) and str(value).strip():
        return str(value).strip()
    for block in blocks:
        if block.kind == "heading" and block.level == 1 and block.heading:
            return block.heading
    return None


# A line that reads like the start of an item even where markdown does not make it one:
# "[x] done" lines, or "- point" lines indented under a paragraph (meeting minutes).
_ITEM_LIKE = re.compile(r"[ \t]*(?:[-*+][ \t]|[0-9]{1,9}[.)][ \t]|\[[ xX]\][ \t]|>|\|)")


def starts_item(text: str, pos: int) -> bool:
    """Whether the line starting at text[pos] looks like an item, a quote or a table row."""
    return _ITEM_LIKE.match(text, pos) is not None


def list_item_starts(text: str, block: Block) -> list[int]:
    """Line indexes (0-based, relative to the block) where the list's items begin.

    Top-level items are the marker lines at the smallest marker indentation; lines inside a
    fence opened within an item never start an item.
    """
    return _marker_lines(text, block, top_level=True)


def marker_lines(text: str, block: Block) -> list[int]:
    """Line indexes (relative to the block) that start an item at any depth."""
    return _marker_lines(text, block, top_level=False)


def _marker_lines(text: str, block: Block, *, top_level: bool) -> list[int]:
    lines = text[block.start_char : block.end_char].split("\n")
    base = _indent(lines[0])
    starts = [0]
    fence: tuple[str, int] | None = None
    for k, line in enumerate(lines[1:], start=1):
        stripped = line.lstrip(" \t")
        if fence is not None:
            if fence_closes(stripped, *fence):
                fence = None
            continue
        opened = fence_open(stripped)
        if opened is not None:
            fence = (opened[0], opened[1])
            continue
        if top_level:
            if _indent(line) <= base and _list_marker(line) is not None:
                starts.append(k)
        elif _list_marker(stripped) is not None:
            starts.append(k)
    return starts
