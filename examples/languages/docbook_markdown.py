"""DocBook XSL HTML → plain markdown, for the multilingual example vaults.

Debian's manuals are written in DocBook and shipped as HTML made by the DocBook XSL
stylesheets. This module reads such HTML with the standard library's parser into a small
element tree and writes the markdown a person would keep: ATX headings without section
numbers, paragraphs on one line, lists, fenced code, pipe tables, admonitions as block
quotes. It drops what only a web page needs: navigation bars, tables of contents, index
terms, images. It does not know any one manual's layout (convert_debian_docs.py does) and
does not try to be a general HTML converter.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

VOID = {"br", "hr", "img", "meta", "link", "col", "input", "area", "base", "wbr"}
SKIP_CLASSES = {"navheader", "navfooter", "toc", "list-of-tables", "list-of-figures",
                "list-of-examples", "indexterm", "footnotes", "table-break", "banner"}
ADMONITIONS = {"note", "tip", "warning", "caution", "important"}
CODE_CLASSES = {"filename", "command", "literal", "userinput", "computeroutput", "prompt",
                "classname", "option", "varname", "envar", "systemitem", "function",
                "parameter", "type", "constant", "keycap", "email"}
# CJK ideographs, kana, full-width forms and CJK punctuation: text that wraps with no spaces.
CJK = r"\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
CJK_GAP = re.compile(rf"(?<=[{CJK}])\s+(?=[{CJK}])")
# "3.1. ", "B.2.3. ", "Chapter 4. ", "第2章 ", "Tabelle 2.1. ", "表2.1 ": numbering the
# manuals print before a title, which a note's own heading would not carry.
NUMBER = re.compile(r"^(?:[A-Z]|\d+)(?:\.\d+)*\.\s*"
                    r"|^[^\W\d]+\s(?:[A-Z]|\d+)(?:\.\d+)*\.\s+"
                    r"|^(?:第\s*\d+\s*章|付録\s*[A-Z]|[表図图]\s*\d+(?:\.\d+)*\.?)\s*")


class Element:
    """One HTML element: its tag, attributes and children (elements or text strings)."""

    def __init__(self, tag: str, attrs: dict[str, str]):
        self.tag, self.attrs, self.children = tag, attrs, []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find_all(self, pred) -> list[Element]:
        out = []
        for c in self.children:
            if isinstance(c, Element):
                if pred(c):
                    out.append(c)
                out.extend(c.find_all(pred))
        return out

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def tidy(text: str) -> str:
    """One line of inline text: whitespace collapsed, none left between CJK characters."""
    return CJK_GAP.sub("", re.sub(r"[ \t\r\n]+", " ", text)).strip()


def strip_number(title: str) -> str:
    return NUMBER.sub("", title.strip(), count=1).strip() or title.strip()


def heading_of(section: Element) -> tuple[str, str]:
    """(anchor id, title without its number) of a section's title, ("", "") without one."""
    for h in section.find_all(lambda e: e.tag in ("h1", "h2", "h3", "h4", "h5")):
        anchors = h.find_all(lambda e: e.tag == "a" and (e.attrs.get("id") or e.attrs.get("name")))
        anchor = anchors[0].attrs.get("id") or anchors[0].attrs.get("name") if anchors else ""
        return anchor, strip_number(tidy(Inline().render(h)))
    return "", ""


class Inline:
    """Inline markup → markdown: code in backticks, emphasis, links with their targets."""

    def render(self, el: Element) -> str:
        return "".join(self._node(c) for c in el.children)

    def _node(self, node) -> str:
        if isinstance(node, str):
            return node
        tag, cls = node.tag, node.classes
        if cls & SKIP_CLASSES or tag in ("img", "sup", "script", "style"):
            return ""
        if tag == "br":
            return " "
        inner = self.render(node)
        if not inner.strip():
            return inner
        if tag in ("code", "tt", "kbd") or cls & CODE_CLASSES:
            return self._code(node.text())
        if tag in ("em", "i") or "emphasis" in cls:
            return _wrap(inner, "*")
        if tag in ("strong", "b") or cls & {"strong", "bold"}:
            return _wrap(inner, "**")
        if tag == "a" and node.attrs.get("href", "").startswith(("http://", "https://")):
            label, href = tidy(inner), node.attrs["href"]
            return f"<{href}>" if label in (href, href.rstrip("/")) else f"[{label}]({href})"
        return inner

    @staticmethod
    def _code(text: str) -> str:
        text = re.sub(r"\s+", " ", text).strip()
        fence = "``" if "`" in text else "`"
        return f"{fence}{text}{fence}"


def _wrap(inner: str, mark: str) -> str:
    core = inner.strip()
    if core.startswith(mark) and core.endswith(mark) and len(core) > 2 * len(mark):
        return inner  # <span class="strong"><strong>x</strong></span>: one mark is enough
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()):]
    return f"{lead}{mark}{inner.strip()}{mark}{trail}"


BLOCK_TAGS = {"p", "div", "pre", "ul", "ol", "dl", "table", "blockquote", "h1", "h2", "h3",
              "h4", "h5", "h6", "hr", "dd", "dt", "li"}
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


class Blocks:
    """Block markup → a list of markdown blocks. ``top`` is the HTML heading level that
    becomes the note's H1 (h2 for an Installation Guide page, h3 for a reference section)."""

    def __init__(self, top: int):
        self.top, self.inline = top, Inline()

    def render(self, el: Element) -> list[str]:
        blocks, loose = [], []
        for node in el.children:
            if isinstance(node, Element) and (node.tag in BLOCK_TAGS or node.classes & SKIP_CLASSES):
                self._flush(loose, blocks)
                blocks.extend(self.block(node))
            else:
                loose.append(node)
        self._flush(loose, blocks)
        return [b for b in blocks if b.strip()]

    def _flush(self, loose: list, blocks: list[str]) -> None:
        holder = Element("#span", {})
        holder.children = loose[:]
        text = tidy(self.inline.render(holder))
        if text:
            blocks.append(text)
        loose.clear()

    def block(self, el: Element) -> list[str]:
        tag, cls = el.tag, el.classes
        if cls & SKIP_CLASSES or tag in ("hr", "script", "style", "img"):
            return []
        if cls & ADMONITIONS:
            return [self._admonition(el)]
        if tag in HEADINGS:
            level = max(1, min(6, int(tag[1]) - self.top + 1))
            title = strip_number(tidy(self.inline.render(el)))
            return [f"{'#' * level} {title}"] if title else []
        if tag == "p" and "title" in cls:
            title = strip_number(tidy(el.text()))
            return [f"**{title}**"] if title else []
        if tag == "p":
            text = tidy(self.inline.render(el))
            return [text] if text else []
        if tag == "pre":
            return [fenced(el.text())]
        if tag in ("ul", "ol"):
            return [self._list(el, ordered=tag == "ol")]
        if tag == "dl":
            return [self._terms(el)]
        if tag == "table":
            return [markdown_table(el, self.inline)]
        if tag == "blockquote":
            return [quoted("\n\n".join(self.render(el)))]
        return self.render(el)

    def _admonition(self, el: Element) -> str:
        boxed = el.find_all(lambda e: e.tag == "table")
        if boxed:  # the Debian Reference's: an icon cell, the title in a th, the text in a td
            heads = boxed[0].find_all(lambda e: e.tag == "th")
            title = tidy(heads[0].text()) if heads else ""
            cells = boxed[0].find_all(lambda e: e.tag == "td")
            body = "\n\n".join(b for c in cells for b in self.render(c))
            return quoted(f"**{title}**\n\n{body}" if title else body)
        titles = [c for c in el.children if isinstance(c, Element) and c.tag in HEADINGS + ("p",)
                  and (c.tag != "p" or "title" in c.classes)]
        title = tidy(self.inline.render(titles[0])) if titles else ""
        rest = Element("#body", {})
        rest.children = [c for c in el.children if not (titles and c is titles[0])]
        body = "\n\n".join(self.render(rest))
        return quoted(f"**{title}**\n\n{body}" if title else body)

    def _list(self, el: Element, ordered: bool) -> str:
        items = [c for c in el.children if isinstance(c, Element) and c.tag == "li"]
        rendered = [self.render(li) for li in items]
        loose = any(len(r) > 1 for r in rendered)
        out = []
        for n, blocks in enumerate(rendered, 1):
            mark = f"{n}. " if ordered else "- "
            out.append(item(mark, blocks or [""]))
        return ("\n\n" if loose else "\n").join(out)

    def _terms(self, el: Element) -> str:
        out, term = [], None
        for c in el.children:
            if not isinstance(c, Element):
                continue
            if c.tag == "dt":
                if term is not None:
                    out.append(item("- ", [f"**{term}**"]))
                term = tidy(self.inline.render(c))
            elif c.tag == "dd":
                blocks = self.render(c)
                head = f"**{term}**" if term else ""
                if blocks and not blocks[0].startswith(("```", "~~~", ">", "- ", "|")):
                    blocks[0] = f"{head}: {blocks[0]}" if head else blocks[0]
                elif head:
                    blocks.insert(0, head)
                out.append(item("- ", blocks or [head]))
                term = None
        if term is not None:
            out.append(item("- ", [f"**{term}**"]))
        return "\n\n".join(out)


def item(mark: str, blocks: list[str]) -> str:
    pad = " " * len(mark)
    body = "\n\n".join(blocks).split("\n")
    return "\n".join([mark + body[0]] + [(pad + line) if line else "" for line in body[1:]])


def quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().split("\n"))


def fenced(text: str) -> str:
    lines = text.replace("\r", "").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    fence = "~~~" if any(line.lstrip().startswith("```") for line in lines) else "```"
    return "\n".join([fence] + [line.rstrip() for line in lines] + [fence])


# The Debian Reference's package tables carry popularity-contest votes ("V:919, I:999") and
# an installed size in kB beside each package: noise to a reader of the notes, dropped.
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
POPCON = re.compile(r"^V:\d+, ?I:\d+$")


def markdown_table(el: Element, inline: Inline) -> str:
    rows = []
    for tr in el.find_all(lambda e: e.tag == "tr"):
        cells = [c for c in tr.children if isinstance(c, Element) and c.tag in ("td", "th")]
        rows.append([cell_text(c, inline) for c in cells])
    rows = [r for r in rows if any(r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    rows = drop_popcon(rows)
    head, body = rows[0], rows[1:]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines)


def cell_text(cell: Element, inline: Inline) -> str:
    parts = Blocks(top=9).render(cell)
    text = " ".join(p.replace("\n", " ") for p in parts)
    text = LINK.sub(r"\1", text)  # a table keeps a link's words: its rows stay readable
    return tidy(text).replace("|", "\\|")


def drop_popcon(rows: list[list[str]]) -> list[list[str]]:
    body = rows[1:]
    drop = set()
    for j in range(len(rows[0])):
        if body and all(POPCON.match(r[j]) or r[j] in ("", "-") for r in body) and any(
                POPCON.match(r[j]) for r in body):
            drop.add(j)
            if j + 1 < len(rows[0]) and all(re.match(r"^[\d-]*$", r[j + 1]) for r in body):
                drop.add(j + 1)
    return [[c for j, c in enumerate(r) if j not in drop] for r in rows]


def note(blocks: list[str]) -> str:
    """The markdown of one note from its blocks: one blank line between blocks."""
    text = "\n\n".join(b.rstrip() for b in blocks if b.strip())
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
