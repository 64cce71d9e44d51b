"""An answer as a terminal shows it: text with [n] markers and the sources they point at,
closest passages quoted under their label, a refusal with the nearest notes. Printed text
has its control characters escaped: note text may hold terminal escapes.
"""

from __future__ import annotations

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
        if not answer.streamed:
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
