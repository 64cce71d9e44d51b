"""An answer as a terminal shows it: text with [n] markers and the sources they point at,
closest passages quoted under their label, a refusal with the nearest notes; and the
model's draft while it streams (``Draft``). Printed text has its control characters
escaped: note text may hold terminal escapes.

The draft is what the model writes before brainbot has checked a word of it: it is shown
dim under a "draft" label, and once the answer is checked it is erased (where it still
fits on the screen) or closed by a line saying it was not the answer, and the checked
answer is printed whole below. Nothing unverified is left looking like an answer.
"""

from __future__ import annotations

import os
import shutil
import unicodedata

from .answers import EXTRACTIVE_LABEL, PASSAGES_LABEL, REFUSAL, Answer, Citation


def format_answer(answer: Answer) -> str:
    """The answer for a terminal: text with [n] markers, then the sources they point at;
    closest passages quoted under their label; a refusal with the nearest notes."""
    lines = [EXTRACTIVE_LABEL] if answer.mode == "extractive" else []
    if answer.outcome == "not_found":
        lines.append(REFUSAL + ".")
    elif answer.outcome == "passages":
        lines.append(PASSAGES_LABEL + ":")
    if answer.refused and answer.index_note:
        lines.append(f"Your index may be out of date: {answer.index_note}.")
    if answer.outcome == "not_found":
        lines += _nearest_lines(answer.nearest)
    elif answer.outcome == "passages":
        twins = _twins(answer.citations)
        for c in answer.citations:
            lines += ["", _cite_line(c, twins)] + [f"    {x}" for x in c.cited_text.split("\n")]
    else:
        lines.append(answer.answer)
        lines.append("")
        twins = _twins(answer.citations)
        lines += [_cite_line(c, twins) for c in answer.citations]
    for d in answer.dropped:
        lines.append(f"dropped citation {d['source'] or '?'}: {d['reason']}")
    from brainbot.render import printable

    return printable("\n".join(lines).strip("\n"), keep_newlines=True)


def _twins(citations: list[Citation]) -> set[str]:
    """The paths cited in more than one indexed folder (two README.md): those are shown
    as ROOT::PATH, as `brainbot get` takes them."""
    roots: dict[str, set[str]] = {}
    for c in citations:
        roots.setdefault(c.path, set()).add(c.root)
    return {path for path, held in roots.items() if len(held) > 1}


def _cite_line(c: Citation, twins: set[str] | frozenset[str] = frozenset()) -> str:
    head = f" ({' > '.join(c.heading_path)})" if c.heading_path else ""
    note = " [the note changed since it was indexed]" if c.stale else ""
    folder = c.root.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    where = f"{folder}::{c.location}" if c.path in twins else c.location
    return f"[{c.n}] {where}{head}{note}"


def _nearest_lines(nearest: list[dict]) -> list[str]:
    if not nearest:
        return []
    lines = ["", "Nearest notes:"]
    for i, n in enumerate(nearest, 1):
        where = f"{n['path']}:{n['start_line']}-{n['end_line']}"
        head = f" ({' > '.join(n['heading_path'])})" if n["heading_path"] else ""
        lines += [f"  {i}. {where}{head}", f"     {n['snippet']}"]
    return lines


DRAFT_LABEL = "draft, not checked against your notes yet:"
DRAFT_CLOSED = "(the draft above is not the answer; the checked answer follows)"
DRAFT_BROKEN = "(the draft above was cut off; it is not an answer)"


class Draft:
    """The model's text in a terminal as it streams: dim, under DRAFT_LABEL. ``settle``
    erases it once the answer is checked, when all of it is still on the screen and the
    terminal can move its cursor; otherwise it closes it with DRAFT_CLOSED."""

    def __init__(self, out) -> None:
        from brainbot.render import use_colour

        self.out, self.shown, self.started = out, "", False
        self.styled = use_colour(out)  # dim, unless NO_COLOR
        # a terminal that moves its cursor (NO_COLOR is about colour, not this)
        self.movable = _isatty(out) and os.environ.get("TERM", "") not in ("", "dumb")

    def write(self, piece: str) -> None:
        from brainbot.render import printable

        if not self.started:
            self.started = True
            self.shown = DRAFT_LABEL + "\n"
            self.out.write(self._dim(DRAFT_LABEL) + "\n")
        text = printable(piece, keep_newlines=True)
        self.shown += text
        self.out.write(self._dim(text))
        self.out.flush()

    def settle(self, finished: bool = True) -> None:
        """Take the draft away (``finished``: an answer follows; else it was cut off)."""
        if not self.started:
            return
        self.started = False
        size = shutil.get_terminal_size(fallback=(0, 0))
        rows = screen_rows(self.shown, size.columns) if size.columns else 0
        if finished and self.movable and 0 < rows < size.lines:
            up = f"\x1b[{rows - 1}A" if rows > 1 else ""
            self.out.write(f"\r{up}\x1b[J")  # to the label's row, then clear below
        else:
            self.out.write("\n" + (DRAFT_CLOSED if finished else DRAFT_BROKEN) + "\n")
        self.out.flush()

    def _dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.styled else text


def _isatty(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # not a file, or a closed one
        return False


def screen_rows(text: str, columns: int) -> int:
    """The rows ``text`` takes on a terminal ``columns`` wide, the cursor on the last."""
    rows = 0
    for line in text.split("\n"):
        width = sum(_cells(ch) for ch in line.expandtabs(8))
        rows += max(1, -(-width // columns))
    return rows


def _cells(ch: str) -> int:
    if unicodedata.combining(ch) or ch in "\u200b\u200d":
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1
