"""Turning results into text for a terminal: snippets, highlighting, colour.

Colour only when the stream is a TTY and ``NO_COLOR`` is unset (https://no-color.org).
This module formats; it never decides what to show.
"""

from __future__ import annotations

import os
import re
import sys

from brainbot.text import lexical

SNIPPET_CHARS = 240


def use_colour(stream=sys.stdout) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


class Style:
    def __init__(self, colour: bool):
        self.colour = colour

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def path(self, text: str) -> str:
        return self._wrap("1;36", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def mark(self, text: str) -> str:
        return self._wrap("1;33", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)


def printable(text: str) -> str:
    """Escape control characters (a file name may hold a newline or an escape code)."""
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


_WORD = re.compile(r"\w+", re.UNICODE)


def snippet(text: str, query: str, style: Style, width: int = SNIPPET_CHARS) -> str:
    """The window of ``text`` with the most query terms, terms highlighted, one line."""
    flat = " ".join(text.split())
    wanted = set(lexical.analyze(query))
    words = list(_WORD.finditer(flat))
    hits = [m for m in words if _is_wanted(m.group(), wanted)]
    start = 0
    if hits and len(flat) > width:
        best, best_n = hits[0].start(), 0
        for h in hits:
            n = sum(1 for o in hits if h.start() <= o.start() < h.start() + width)
            if n > best_n:
                best, best_n = h.start(), n
        start = max(0, best - width // 4)
    window = flat[start:start + width]
    prefix = "…" if start > 0 else ""
    suffix = "…" if start + width < len(flat) else ""

    def light(m: re.Match) -> str:
        return style.mark(m.group()) if _is_wanted(m.group(), wanted) else m.group()

    return prefix + _WORD.sub(light, printable(window)) + suffix


def _is_wanted(word: str, wanted: set[str]) -> bool:
    terms = lexical.analyze(word)
    return bool(terms) and terms[0] in wanted


def heading(path: list[str]) -> str:
    return " > ".join(path)


def hit_block(n: int, hit, query: str, style: Style, explain: bool = False) -> str:
    lines = [f"{style.bold(str(n) + '.')} {style.path(printable(hit.location))}  "
             f"{style.dim(printable(heading(hit.heading_path)))}  "
             f"{style.dim(f'score {hit.score:.4f}')}",
             "   " + snippet(hit.text, query, style)]
    if explain and hit.explain:
        parts = [f"{k}={_fmt(v)}" for k, v in hit.explain.items()]
        lines.append("   " + style.dim(" ".join(parts)))
    return "\n".join(lines)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)
