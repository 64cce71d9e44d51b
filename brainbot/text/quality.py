"""A deterministic chunk-quality score, and what to do about a bad one.

`assess(chunks)` takes `Chunk`s or contract records (the JSON of `brainbot chunks`, or
records rebuilt from the database) and scores them 0-100 from four signals:

- **size**: closeness of each chunk's retrieval tokens to ``target_tokens`` (a note that
  is smaller than one chunk is not held against the chunker);
- **redundancy**: the share of indexed characters that are repeats (overlap), scored
  100 inside a healthy band;
- **boundary**: the share of chunks that end at a sentence end or a block end (or at a
  line end inside code, tables and lists, the only places those may be split);
- **junk**: the share of tiny chunks (below ``min_tokens`` in a note that had room for
  more), chunks with no letter or digit a reader sees (only an HTML comment, a link
  definition, an image without alt text: ``notes/inline.py``'s visible text), and chunks whose
  visible text is headings only;

plus hard counts that must be zero: chunks over the token limit, heading-only chunks,
code fences cut (split although the model could have taken them whole, or split
mid-line) and table rows cut. Block and sentence ends are found by re-parsing each note:
from ``texts`` when given, else from the note rebuilt out of its chunks (spans are exact
and cover every non-blank character, so only whitespace is unknown).

This module scores; it never re-chunks. It needs the tokenizer only to ask whether a cut
code fence would have fit the model, and loads it lazily for that.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from brainbot.notes.inline import InlineMarkup
from brainbot.notes.markdown import parse, starts_item
from brainbot.notes.sentences import split_sentences

from .chunking import Chunk, ChunkParams
from .tokens import TokenCounter

# Signal weights in the overall score: boundaries matter most for answer quality (a
# chunk cut mid-sentence embeds badly and cites badly), then size and junk.
WEIGHTS = {"size": 0.25, "redundancy": 0.15, "boundary": 0.35, "junk": 0.25}
# Sizes within this share of the target score full marks: balanced packing of a section
# that is 1.5 targets long gives two chunks of 0.75 target.
SIZE_BAND = (0.75, 1.15)
# Healthy share of repeated characters when overlap is on (one sentence of ~20 tokens in
# a ~180-token chunk is ~10 %); with overlap off, a little repetition from merges is fine.
REDUNDANCY_BAND = (0.02, 0.25)
REDUNDANCY_BAND_NO_OVERLAP = (0.0, 0.05)
# Any hard violation costs at least this much, and 1 % of chunks violating costs 15.
HARD_PENALTY_MIN, HARD_PENALTY_PER_SHARE, HARD_PENALTY_MAX = 5.0, 1000.0, 60.0
WORST_FILES = 5
DEFAULT_PARAMS = ChunkParams()


def _rec(item) -> Chunk:
    return item if isinstance(item, Chunk) else Chunk.from_record(item)


@dataclass
class _Tally:
    """Per-chunk verdicts of one file (or of all files, summed)."""

    chunks: int = 0
    size_points: float = 0.0
    under: int = 0
    good_ends: int = 0
    junk: int = 0
    # Chunks a reader sees nothing of, in a note that shows text elsewhere (so they could
    # have merged into it): counted in junk too.
    invisible: int = 0
    chars: int = 0
    unique_chars: int = 0
    over_limit: int = 0
    heading_only: int = 0
    cut_fences: int = 0
    cut_table_rows: int = 0
    forced_cuts: int = 0  # inside a line too long for any chunk: unavoidable, reported
    tokens: list[int] = field(default_factory=list)
    bad_end_examples: list[str] = field(default_factory=list)

    def add(self, other: _Tally) -> None:
        for name in (
            "chunks size_points under good_ends junk invisible chars unique_chars over_limit "
            "heading_only cut_fences cut_table_rows forced_cuts".split()
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.tokens.extend(other.tokens)

    @property
    def hard(self) -> dict[str, int]:
        return {
            "over_limit": self.over_limit,
            "heading_only": self.heading_only,
            "cut_fences": self.cut_fences,
            "cut_table_rows": self.cut_table_rows,
        }

    def signals(self, params: ChunkParams) -> dict[str, dict]:
        n = max(1, self.chunks)
        redundancy = 1 - self.unique_chars / self.chars if self.chars else 0.0
        boundary = self.good_ends / n
        junk = self.junk / n
        return {
            "size": {
                "score": round(100 * self.size_points / n, 1),
                "mean_tokens": round(statistics.fmean(self.tokens), 1) if self.tokens else 0,
                "median_tokens": statistics.median(self.tokens) if self.tokens else 0,
                "under_band_share": round(self.under / n, 4),
                "target_tokens": params.target_tokens,
            },
            "redundancy": {
                "score": round(_redundancy_score(redundancy, params), 1),
                "overlap_share": round(redundancy, 4),
                "band": list(_band(params)),
            },
            "boundary": {
                "score": round(100 * boundary, 1),
                "clean_end_share": round(boundary, 4),
            },
            "junk": {
                "score": round(max(0.0, 100 * (1 - 4 * junk)), 1),
                "junk_share": round(junk, 4),
                "junk_chunks": self.junk,
                "invisible_chunks": self.invisible,
                "forced_cuts": self.forced_cuts,
            },
        }

    def score(self, params: ChunkParams) -> float:
        if not self.chunks:
            return 100.0
        signals = self.signals(params)
        total = sum(WEIGHTS[name] * signals[name]["score"] for name in WEIGHTS)
        violations = sum(self.hard.values())
        if violations:
            share = violations / self.chunks
            total -= min(HARD_PENALTY_MAX, max(HARD_PENALTY_MIN, HARD_PENALTY_PER_SHARE * share))
        return round(max(0.0, total), 1)


def _band(params: ChunkParams) -> tuple[float, float]:
    return REDUNDANCY_BAND if params.overlap_sentences else REDUNDANCY_BAND_NO_OVERLAP


def _redundancy_score(share: float, params: ChunkParams) -> float:
    lo, hi = _band(params)
    if share < lo:
        return 100 - 20 * (lo - share) / lo
    if share > hi:
        return max(0.0, 100 - 100 * (share - hi) / (0.5 - hi))
    return 100.0


def _size_points(tokens: int, params: ChunkParams, alone: bool) -> float:
    if alone:
        return 1.0  # the whole note is one chunk: nothing to pack it with
    ratio = tokens / params.target_tokens
    lo, hi = SIZE_BAND
    if ratio < lo:
        return ratio / lo
    if ratio <= hi:
        return 1.0
    top = params.max_tokens / params.target_tokens
    return 1.0 - 0.3 * min(1.0, (ratio - hi) / max(1e-9, top - hi))


# --- one file ----------------------------------------------------------------------------


def _rebuild(recs: list[Chunk]) -> str:
    """The note as its chunks show it; unknown whitespace becomes spaces and newlines."""
    parts: list[str] = []
    pos, line = 0, 1
    for r in sorted(recs, key=lambda r: (r.start_char, r.end_char)):
        if r.start_char > pos:
            gap = r.start_char - pos
            newlines = max(0, min(gap, r.start_line - line))
            spaces = " " * (gap - newlines)
            # A chunk that follows a newline begins its line (the chunker keeps leading
            # indentation), so the gap ends with a newline; spare spaces go on a blank line.
            if newlines >= 2:
                parts.append("\n" + spaces + "\n" * (newlines - 1))
            else:
                parts.append(spaces + "\n" * newlines)
            line += newlines
            pos = r.start_char
        if r.end_char > pos:
            piece = r.source_text[pos - r.start_char :]
            parts.append(piece)
            line += piece.count("\n")
            pos = r.end_char
    return "".join(parts)


def _rstrip_at(text: str, lo: int, e: int) -> int:
    while e > lo and text[e - 1].isspace():
        e -= 1
    return e


def _clean_ends(text: str, blocks) -> set[int]:
    """Positions where a chunk may end: block and sentence ends, line ends in code,
    tables, lists and HTML, and line ends before an item-like line ("[x] done") anywhere;
    each with trailing whitespace trimmed."""
    good: set[int] = set()
    for b in blocks:
        good.add(_rstrip_at(text, b.start_char, b.end_char))
        if b.kind in ("paragraph", "quote", "list"):
            good.update(e for _, e in split_sentences(text, b.start_char, b.end_char))
        every_line = b.kind in ("code", "table", "list", "html")
        pos = b.start_char
        while (nl := text.find("\n", pos, b.end_char)) != -1:
            if every_line or starts_item(text, nl + 1):
                good.add(_rstrip_at(text, pos, nl))
            pos = nl + 1
    return good


def _line_around(text: str, pos: int) -> tuple[int, int]:
    return text.rfind("\n", 0, pos) + 1, (text.find("\n", pos) + 1 or len(text) + 1) - 1


def _at_line_start(text: str, s: int) -> bool:
    line_start = text.rfind("\n", 0, s) + 1
    return line_start == s or text[line_start:s].isspace()


def _at_line_end(text: str, e: int) -> bool:
    nl = text.find("\n", e)
    line_end = len(text) if nl == -1 else nl
    return line_end == e or text[e:line_end].isspace()


class _FileCheck:
    def __init__(self, recs: list[Chunk], text: str, params: ChunkParams, counter_of) -> None:
        self.recs = sorted(recs, key=lambda r: r.chunk_index)
        self.text = text
        self.params = params
        self.counter_of = counter_of
        parsed = parse(text)
        self.markup = InlineMarkup.of_note(parsed)
        self.blocks = [b for b in parsed.blocks if b.kind != "front_matter"]
        self.block_ends = [b.end_char for b in self.blocks]
        # A note a reader sees only headings of (a template, a stub) cannot avoid
        # heading-only chunks, nor one that shows nothing avoid invisible ones: junk, yes,
        # but no fault of the chunker.
        self.has_text = any(b.kind != "heading" and not self.markup.blank(b.start_char, b.end_char)
                            for b in self.blocks)
        self.shows = bool(self.markup.visible(parsed.body_start_char).strip())

    def run(self, recount: bool) -> _Tally:
        t = _Tally(chunks=len(self.recs))
        good = _clean_ends(self.text, self.blocks)
        alone = len(self.recs) == 1
        counts = None
        if recount:
            counts = self.counter_of().count_many([r.retrieval_text for r in self.recs])
        for k, r in enumerate(self.recs):
            tokens = counts[k] if counts is not None else r.retrieval_tokens
            t.tokens.append(tokens)
            points = _size_points(tokens, self.params, alone)
            t.size_points += points
            t.under += tokens < SIZE_BAND[0] * self.params.target_tokens and not alone
            end = _rstrip_at(self.text, r.start_char, r.end_char)
            if end in good:
                t.good_ends += 1
            elif len(t.bad_end_examples) < 3:
                t.bad_end_examples.append(r.source_text[-60:])
            t.over_limit += tokens > self.params.max_tokens
            heading_only = self.heading_only(r)
            t.heading_only += heading_only and self.has_text
            tiny = not alone and r.source_tokens < self.params.min_tokens
            seen = self.markup.visible(r.start_char, r.end_char)
            empty = not any(ch.isalnum() for ch in seen)
            t.invisible += self.shows and not seen.strip()
            t.junk += heading_only or tiny or empty
        t.chars = sum(r.end_char - r.start_char for r in self.recs)
        t.unique_chars = _union_length([(r.start_char, r.end_char) for r in self.recs])
        t.cut_fences, t.cut_table_rows, t.forced_cuts = self.cuts()
        return t

    def heading_only(self, r: Chunk) -> bool:
        """Whether all a reader sees of the chunk is headings (an anchor comment under a
        heading is no text)."""
        k = bisect_right(self.block_ends, r.start_char)
        kinds = set()
        while k < len(self.blocks) and self.blocks[k].start_char < r.end_char:
            b = self.blocks[k]
            if not self.markup.blank(max(b.start_char, r.start_char), min(b.end_char, r.end_char)):
                kinds.add(b.kind)
            k += 1
        return kinds == {"heading"}

    def cuts(self) -> tuple[int, int, int]:
        """(code fences cut, table rows cut, forced cuts inside over-long lines)."""
        starts = sorted({r.start_char for r in self.recs})
        ends = sorted({r.end_char for r in self.recs})
        fences = rows = forced = 0
        text = self.text
        for index, b in enumerate(self.blocks):
            if b.kind not in ("code", "table"):
                continue
            b_end = _rstrip_at(text, b.start_char, b.end_char)
            inner = starts[bisect_right(starts, b.start_char) : bisect_left(starts, b_end)]
            inner_ends = ends[bisect_right(ends, b.start_char) : bisect_left(ends, b_end)]
            if not inner and not inner_ends:
                continue
            # A cut inside a line is only wrong when the line could have been kept whole.
            mid = [s for s in inner if not _at_line_start(text, s)]
            mid += [e for e in inner_ends if not _at_line_end(text, e)]
            wrong = sum(self.fits(*_line_around(text, pos)) for pos in mid)
            forced += len(mid) - wrong
            if b.kind == "table":
                rows += wrong
            elif wrong or self.fits(self.lead_start(index), b.end_char):
                fences += 1
        return fences, rows, forced

    def lead_start(self, index: int) -> int:
        """Where the block's text starts together with the headings right above it."""
        k = index
        while k > 0 and self.blocks[k - 1].kind == "heading":
            k -= 1
        if k < index:
            heads = self.text[self.blocks[k].start_char : self.blocks[index - 1].end_char]
            if self.counter_of().count(heads) - 2 <= self.params.max_tokens * 0.25:
                return self.blocks[k].start_char
        return self.blocks[index].start_char

    def fits(self, start: int, end: int) -> bool:
        """Whether the model could have taken text[start:end] whole."""
        if end - start > self.params.max_chars:
            return False
        return self.counter_of().count(self.text[start:end]) <= self.params.max_tokens


def _union_length(spans: list[tuple[int, int]]) -> int:
    total, reach = 0, -1
    for s, e in sorted(spans):
        if e <= reach:
            continue
        total += e - max(s, reach)
        reach = e
    return total


# --- the report --------------------------------------------------------------------------


@dataclass
class QualityReport:
    score: float
    chunks: int
    files: int
    signals: dict[str, dict]
    hard: dict[str, int]
    worst_files: list[dict]
    suggestions: list[str]
    params: dict

    def to_dict(self) -> dict:
        return {
            "score": self.score,
            "chunks": self.chunks,
            "files": self.files,
            "signals": self.signals,
            "hard": self.hard,
            "worst_files": self.worst_files,
            "suggestions": self.suggestions,
            "params": self.params,
        }

    def format_text(self) -> str:
        s = self.signals
        size, red, bnd, junk = s["size"], s["redundancy"], s["boundary"], s["junk"]
        lines = [
            f"chunk quality: {self.score:.0f}/100 ({self.chunks} chunks in {self.files} files)",
            f"  size        {size['score']:5.1f}  mean {size['mean_tokens']} tokens, median "
            f"{size['median_tokens']} (target {size['target_tokens']}); "
            f"{100 * size['under_band_share']:.1f}% under {SIZE_BAND[0]:.0%} of target",
            f"  redundancy  {red['score']:5.1f}  {100 * red['overlap_share']:.1f}% of indexed "
            f"text is overlap (healthy {100 * red['band'][0]:.0f}-{100 * red['band'][1]:.0f}%)",
            f"  boundary    {bnd['score']:5.1f}  {100 * bnd['clean_end_share']:.1f}% of chunks "
            "end at a sentence or block end",
            f"  junk        {junk['score']:5.1f}  {junk['junk_chunks']} tiny, empty, invisible "
            f"or heading-only chunks ({100 * junk['junk_share']:.1f}%)",
            "hard limits (must be 0): "
            + ", ".join(f"{name.replace('_', '-')} {n}" for name, n in self.hard.items()),
        ]
        if self.worst_files:
            lines.append("worst files:")
            for f in self.worst_files:
                issue = f"; {f['issue']}" if f["issue"] else ""
                lines.append(f"  {f['score']:5.1f}  {f['source_file']} ({f['chunks']} chunks{issue})")
        lines.append("suggestions:")
        lines.extend(f"  - {text}" for text in self.suggestions)
        return "\n".join(lines)


def _issue(tally: _Tally, params: ChunkParams) -> str:
    hard = {k: v for k, v in tally.hard.items() if v}
    if hard:
        return ", ".join(f"{k.replace('_', '-')} {v}" for k, v in hard.items())
    signals = tally.signals(params)
    name = min(WEIGHTS, key=lambda k: signals[k]["score"])
    if signals[name]["score"] >= 90:
        return ""
    detail = {
        "size": f"mean {signals['size']['mean_tokens']} tokens",
        "redundancy": f"{100 * signals['redundancy']['overlap_share']:.0f}% overlap",
        "boundary": f"{100 * signals['boundary']['clean_end_share']:.0f}% clean ends",
        "junk": f"{signals['junk']['junk_chunks']} junk chunks",
    }[name]
    return f"{name} {signals[name]['score']:.0f}: {detail}"


def _hard_suggestions(total: _Tally, files: dict[str, _Tally], params: ChunkParams) -> list[str]:
    """What to do about each count that must be zero, naming a file where it happens."""
    out = []

    def first_with(attr: str) -> str:
        return next((name for name, t in files.items() if getattr(t, attr)), "?")

    if total.over_limit:
        out.append(
            f"{total.over_limit} chunks exceed max_tokens={params.max_tokens} (e.g. in "
            f"{first_with('over_limit')}): the embedder would truncate them; re-chunk with "
            "this version, and report it as a bug if it persists"
        )
    if total.heading_only:
        out.append(
            f"{total.heading_only} heading-only chunks (e.g. in {first_with('heading_only')}):"
            " raise min_tokens so a heading merges into the text under it"
        )
    if total.cut_fences:
        out.append(
            f"{total.cut_fences} code fences cut although they fit or mid-line: check the "
            f"chunker on {first_with('cut_fences')}"
        )
    if total.cut_table_rows:
        out.append(
            f"{total.cut_table_rows} table rows cut mid-row: check the chunker on "
            f"{first_with('cut_table_rows')} (a single row longer than the budget?)"
        )
    if total.invisible:
        out.append(
            f"{total.invisible} chunks show a reader nothing (only HTML comments, link "
            f"definitions or images without alt text; e.g. in {first_with('invisible')}): "
            "re-index with this version, which merges such text into its neighbour"
        )
    return out


def _suggestions(total: _Tally, files: dict[str, _Tally], params: ChunkParams) -> list[str]:
    if not total.chunks:
        return ["no chunks to assess"]
    signals = total.signals(params)
    out = _hard_suggestions(total, files, params)
    share = signals["boundary"]["clean_end_share"]
    if share < 0.9:
        worst = min(files, key=lambda n: files[n].good_ends / max(1, files[n].chunks))
        examples = files[worst].bad_end_examples[:1]
        tail = f" (one ends with {examples[0]!r})" if examples else ""
        out.append(
            f"{100 * (1 - share):.0f}% of chunks end mid-sentence: check the splitter on "
            f"{worst}{tail}; very long sentences or unpunctuated lines force word cuts"
        )
    mean = signals["size"]["mean_tokens"]
    if signals["size"]["score"] < 75:
        if mean < SIZE_BAND[0] * params.target_tokens:
            out.append(
                f"chunks are small (mean {mean} tokens, target {params.target_tokens}): raise "
                f"min_tokens (now {params.min_tokens}) to merge fragments, or lower "
                "target_tokens if the notes are short"
            )
        else:
            out.append(
                f"chunks run large (mean {mean}): lower target_tokens (now "
                f"{params.target_tokens})"
            )
    lo, hi = _band(params)
    overlap = signals["redundancy"]["overlap_share"]
    if overlap > hi:
        out.append(
            f"{100 * overlap:.0f}% of the index is repeated text: lower overlap_sentences "
            f"(now {params.overlap_sentences})"
        )
    elif params.overlap_sentences and overlap < lo:
        out.append(
            "almost no overlap between chunks: sections are shorter than one chunk, or "
            "raise overlap_sentences"
        )
    if signals["junk"]["junk_share"] > 0.05:
        out.append(
            f"{signals['junk']['junk_chunks']} tiny or empty chunks: raise min_tokens "
            f"(now {params.min_tokens})"
        )
    return out or ["nothing to change: every signal is in its healthy range"]


def assess(
    chunks: Sequence[Chunk] | Sequence[Mapping],
    params: ChunkParams = DEFAULT_PARAMS,
    *,
    texts: Mapping[str, str] | None = None,
    counter: TokenCounter | None = None,
    recount: bool = False,
    worst: int = WORST_FILES,
) -> QualityReport:
    """Score chunks (Chunk objects or contract records) 0-100, with suggestions.

    texts maps source_file to the note's text (else it is rebuilt from the chunks);
    recount=True recounts every retrieval text instead of trusting the records.
    """
    holder: list[TokenCounter] = [counter] if counter is not None else []

    def counter_of() -> TokenCounter:
        if not holder:
            holder.append(TokenCounter())
        return holder[0]

    by_file: dict[str, list[Chunk]] = {}
    for item in chunks:
        rec = _rec(item)
        by_file.setdefault(rec.source_file, []).append(rec)
    files: dict[str, _Tally] = {}
    total = _Tally()
    for name in sorted(by_file):
        recs = by_file[name]
        text = texts[name] if texts is not None and name in texts else _rebuild(recs)
        tally = _FileCheck(recs, text, params, counter_of).run(recount)
        files[name] = tally
        total.add(tally)
    scored = sorted((t.score(params), name) for name, t in files.items())
    worst_files = [
        {"source_file": name, "score": score, "chunks": files[name].chunks,
         "issue": _issue(files[name], params), "hard": files[name].hard}
        for score, name in scored[:worst]
        if score < 100
    ]
    return QualityReport(
        score=total.score(params),
        chunks=total.chunks,
        files=len(files),
        signals=total.signals(params),
        hard=total.hard,
        worst_files=worst_files,
        suggestions=_suggestions(total, files, params),
        params={
            "max_tokens": params.max_tokens,
            "target_tokens": params.target_tokens,
            "overlap_sentences": params.overlap_sentences,
            "min_tokens": params.min_tokens,
            "fingerprint": params.fingerprint(),
        },
    )
