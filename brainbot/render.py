"""Turning results into text for a terminal: snippets, highlighting, colour, and the
progress bars `brainbot index` draws from the indexer's callbacks.

Colour only when the stream is a TTY and ``NO_COLOR`` is unset (https://no-color.org).
This module formats; it never decides what to show.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

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


# What a terminal may act on instead of showing, so never printed raw: C0 and C1 controls
# and DEL (ESC and the 8-bit CSI U+009B and OSC U+009D start escape sequences: OSC 52 sets
# the clipboard on some terminals, OSC 0 the window title), lone surrogates (what Python
# makes of a file name that is not UTF-8), the line and paragraph separators, and the bidi
# controls that reorder what is shown. Other format characters stay: the zero-width joiner
# of emoji sequences, no-break and ideographic spaces are text, and harmless.
_OTHER_UNSAFE = r"\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(rf"[\x00-\x1f{_OTHER_UNSAFE}]")
_UNSAFE_BUT_NEWLINES = re.compile(rf"[\x00-\x08\x0b-\x1f{_OTHER_UNSAFE}]")  # \t and \n kept
_UNSAFE_IN_JSON = re.compile(rf"[{_OTHER_UNSAFE}]")  # json.dumps escapes C0 itself


def printable(text: str, keep_newlines: bool = False) -> str:
    """``text`` safe to print: every character a terminal could act on is written as its
    escape (``\\x1b``, ``\\x9b``, ``\\udce9``). One line unless ``keep_newlines`` (note
    text, answers): then newlines and tabs stay. Every output that shows note text, tags
    or file names goes through here."""
    unsafe = _UNSAFE_BUT_NEWLINES if keep_newlines else _UNSAFE
    return unsafe.sub(_escape, text)


def _escape(m: re.Match) -> str:
    return repr(m.group())[1:-1]


def printable_json(text: str) -> str:
    """Serialised JSON safe to print: the characters ``printable`` escapes are written
    as ``\\uXXXX`` (json.dumps escapes C0 controls already, but not C1 ones, the
    separators or lone surrogates). They occur only inside strings, so the JSON means
    the same."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_WORD = re.compile(r"\w+", re.UNICODE)


def snippet(text: str, query: str, style: Style, width: int = SNIPPET_CHARS) -> str:
    """The window of ``text`` with the most query terms, terms highlighted, one line."""
    flat = " ".join(text.split())
    from brainbot.text import lexical  # numpy: not on the JSON path to a daemon

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
    from brainbot.text import lexical

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


def progress_printer(stream=None, unit: str = "file") -> Callable[[int, int], None] | None:
    """A tqdm progress bar with ETA when ``stream`` (stderr) is a terminal, else None.
    It is called with (done, total): ``unit="chunk"`` for the semantic phase."""
    stream = stream or sys.stderr  # looked up now: tests and tools swap sys.stderr
    if not stream.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = {"bar": None}

    def update(done: int, total: int) -> None:
        if bar["bar"] is None:
            bar["bar"] = tqdm(total=total, unit=unit, file=stream, leave=False,
                              mininterval=0.5, desc="embedding" if unit == "chunk" else None)
        bar["bar"].update(max(0, done - bar["bar"].n))
        if done >= total:
            bar["bar"].close()

    return update
