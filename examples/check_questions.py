#!/usr/bin/env python3
"""Sanity checker for examples/questions.jsonl against the examples/notes vault.

Checks, for every question:
  * required keys and value types; difficulty in {easy, medium, hard};
  * answerable questions have 1+ expected locations and 1-3 answer_contains strings,
    unanswerable ones have neither;
  * every expected path exists under examples/notes (exact, incl. unicode, NFC);
  * every "path#Heading" names a real heading of that file (ATX, with closing #s
    stripped, or setext), ignoring fenced code blocks and YAML front matter;
  * every "path:START-END" range lies inside the file;
  * every answer_contains string occurs (case-insensitively) inside at least one
    expected location: the heading's section (up to the next heading of any level),
    the line range, or the whole file for a bare path;
  * conversely, every expected location contains at least one answer_contains string
    (so no listed location is a wrong guess).

  * unanswerable questions carry "kind": "near_miss" or "off_topic"; answerable
    ones carry no "kind".

Standard library only. Run:  python examples/check_questions.py
By default it checks examples/questions.jsonl against examples/notes. Another
question file and notes root can be given, e.g. for the rust-book set:

  python examples/check_questions.py --root /path/to/rust-book \
      --questions examples/questions-rust.jsonl

With --languages it checks the multilingual sets instead: every notes folder
examples/languages/SOURCE/LANG against each question set of that source, as above:
examples/questions-SOURCE-LANG.jsonl (the "terms" set, required) and
examples/questions-SOURCE-plain-LANG.jsonl (the "plain" set, written blind in
everyday words; checked when any language has one, then every language must). Then
the six languages (en de es fr ja zh) of each set against each other: the same note
paths, the same question ids in the same order with the same answerability,
difficulty, kind and expected notes, each question's "lang", and a question text
that is not the English one (Japanese with kana, Chinese with Han). Last, the sets of
a source against each other: no question id in two sets, no question asked twice.

  python examples/check_questions.py --languages

Exit status 0 when everything passes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTES = HERE / "notes"
QUESTIONS = HERE / "questions.jsonl"

FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
RANGE_RE = re.compile(r"^(.*):(\d+)-(\d+)$")


def parse_headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """Return (line_index, level, text) for each heading, 0-based line index."""
    heads: list[tuple[int, int, str]] = []
    i = 0
    # YAML front matter
    if lines and lines[0].strip() == "---":
        for j in range(1, len(lines)):
            if lines[j].strip() in ("---", "..."):
                i = j + 1
                break
    fence: tuple[str, int] | None = None
    prev_para = False  # previous line is a paragraph line that could take a setext underline
    while i < len(lines):
        line = lines[i]
        m = FENCE_RE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
                fence = None
            i += 1
            prev_para = False
            continue
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1)[0], len(m.group(1)))
            i += 1
            prev_para = False
            continue
        if not line.strip():
            prev_para = False
            i += 1
            continue
        a = ATX_RE.match(line)
        if a:
            text = a.group(2) or ""
            text = re.sub(r"(?:^|[ \t]+)#+$", "", text).strip()
            heads.append((i, len(a.group(1)), text))
            prev_para = False
            i += 1
            continue
        s = SETEXT_RE.match(line)
        if s and prev_para:
            heads.append((i - 1, 1 if s.group(1)[0] == "=" else 2, lines[i - 1].strip()))
            prev_para = False
            i += 1
            continue
        stripped = line.lstrip()
        # lines that cannot be a setext heading's content
        prev_para = not (
            stripped.startswith((">", "|", "- ", "* ", "+ "))
            or re.match(r"^\d+[.)] ", stripped)
            or re.match(r"^ {0,3}([-*_])( *\1){2,} *$", line)
            or line.startswith("    ")
        )
        i += 1
    return heads


def section_text(lines: list[str], heads, heading: str) -> str | None:
    for k, (idx, _lvl, text) in enumerate(heads):
        if text == heading:
            end = heads[k + 1][0] if k + 1 < len(heads) else len(lines)
            return "\n".join(lines[idx:end])
    return None


KINDS = ("near_miss", "off_topic")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Validate a question file against a notes folder.")
    ap.add_argument("--root", type=Path, default=NOTES,
                    help="folder that expected paths are relative to (default: examples/notes)")
    ap.add_argument("--questions", type=Path, default=QUESTIONS,
                    help="question file, JSON lines (default: examples/questions.jsonl)")
    ap.add_argument("--languages", type=Path, nargs="?", const=HERE / "languages", default=None,
                    metavar="FOLDER",
                    help="check every multilingual set instead: each SOURCE/LANG notes folder under "
                         "FOLDER (default examples/languages) against "
                         "examples/questions-SOURCE-LANG.jsonl, and the languages against each other")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.languages:
        return report(check_languages(args.languages.resolve()))
    notes_root: Path = args.root.resolve()
    questions_file: Path = args.questions
    if not notes_root.is_dir():
        print(f"no such folder: {notes_root}")
        return 2
    if not questions_file.is_file():
        print(f"no such file: {questions_file}")
        return 2
    return report(check_file(notes_root, questions_file))


def report(errors: list[str]) -> int:
    if errors:
        print(f"\n{len(errors)} problem(s):")
        for e in errors:
            print("  -", e)
        return 1
    print("OK: all checks passed")
    return 0


def check_file(notes_root: Path, questions_file: Path, out=print) -> list[str]:
    """The problems of one question file against its notes folder; prints a summary."""
    errors: list[str] = []
    qs = []
    for n, raw in enumerate(questions_file.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            qs.append((n, json.loads(raw)))
        except json.JSONDecodeError as e:
            errors.append(f"line {n}: invalid JSON: {e}")

    cache: dict[str, list[str]] = {}

    def load(rel: str) -> list[str] | None:
        if rel not in cache:
            p = notes_root / rel
            if unicodedata.normalize("NFC", rel) != rel or not p.is_file():
                return None
            cache[rel] = p.read_text(encoding="utf-8").split("\n")
        return cache[rel]

    seen = Counter()
    diff = Counter()
    kinds = Counter()
    for n, q in qs:
        where = f"line {n} ({q.get('question', '?')[:50]!r})"
        for key, typ in (("question", str), ("expected", list), ("answerable", bool), ("difficulty", str)):
            if not isinstance(q.get(key), typ):
                errors.append(f"{where}: missing/invalid {key!r}")
        if q.get("difficulty") not in ("easy", "medium", "hard"):
            errors.append(f"{where}: bad difficulty {q.get('difficulty')!r}")
        seen[q.get("question")] += 1
        ans = q.get("answerable")
        diff[(ans, q.get("difficulty"))] += 1
        contains = q.get("answer_contains", [])
        kind = q.get("kind")
        if not ans:
            if q.get("expected") or contains:
                errors.append(f"{where}: unanswerable question must have empty expected and no answer_contains")
            if kind not in KINDS:
                errors.append(f"{where}: unanswerable question needs kind in {KINDS}, got {kind!r}")
            kinds[kind] += 1
            continue
        if "kind" in q:
            errors.append(f"{where}: answerable question must not have a kind")
        if not q.get("expected"):
            errors.append(f"{where}: answerable question without expected")
        if not (1 <= len(contains) <= 3) or not all(isinstance(c, str) and c for c in contains):
            errors.append(f"{where}: answer_contains must hold 1-3 non-empty strings")
        texts: list[str] = []
        located: list[tuple[str, str]] = []
        for exp in q.get("expected", []):
            m = RANGE_RE.match(exp)
            if m:
                rel, a, b = m.group(1), int(m.group(2)), int(m.group(3))
                lines = load(rel)
                if lines is None:
                    errors.append(f"{where}: no such note {rel!r}")
                    continue
                nlines = len(lines) - (1 if lines and lines[-1] == "" else 0)
                if not (1 <= a <= b <= nlines):
                    errors.append(f"{where}: range {a}-{b} outside {rel!r} (1-{nlines})")
                    continue
                texts.append("\n".join(lines[a - 1 : b]))
                located.append((exp, texts[-1]))
            elif "#" in exp:
                rel, heading = exp.split("#", 1)
                lines = load(rel)
                if lines is None:
                    errors.append(f"{where}: no such note {rel!r}")
                    continue
                sec = section_text(lines, parse_headings(lines), heading)
                if sec is None:
                    errors.append(f"{where}: no heading {heading!r} in {rel!r}")
                    continue
                texts.append(sec)
                located.append((exp, sec))
            else:
                lines = load(exp)
                if lines is None:
                    errors.append(f"{where}: no such note {exp!r}")
                    continue
                texts.append("\n".join(lines))
                located.append((exp, texts[-1]))
        for c in contains:
            if texts and not any(c.lower() in t.lower() for t in texts):
                errors.append(f"{where}: {c!r} not found in any expected location")
        for exp, t in located:
            if contains and not any(c.lower() in t.lower() for c in contains):
                errors.append(f"{where}: expected location {exp!r} contains none of answer_contains")

    for question, k in seen.items():
        if k > 1:
            errors.append(f"duplicate question: {question!r}")

    notes = sorted(p for p in notes_root.rglob("*.md"))
    size = sum(p.stat().st_size for p in notes)
    n_ans = sum(1 for _, q in qs if q.get("answerable"))
    out(f"root: {notes_root}")
    out(f"questions file: {questions_file}")
    out(f"notes: {len(notes)} files, {size / 1024:.1f} KiB")
    out(f"questions: {len(qs)} total, {n_ans} answerable, {len(qs) - n_ans} unanswerable")
    for d in ("easy", "medium", "hard"):
        out(f"  answerable {d}: {diff[(True, d)]}   unanswerable {d}: {diff[(False, d)]}")
    out("  unanswerable by kind: " + ", ".join(f"{k}: {kinds[k]}" for k in KINDS))
    return errors


# --- the multilingual sets (examples/languages/SOURCE/LANG, questions-SOURCE-LANG.jsonl) ------

LANGS = ("en", "de", "es", "fr", "ja", "zh")
# The question sets of a source, one file a language: "terms" names what the pages name
# (commands, paths), "plain" asks in everyday words, written blind (examples/README.md).
# Only "terms" is required; benchmarks/bench_languages.py reads the same table.
QUESTION_SETS = {"terms": "questions-{source}-{lang}.jsonl",
                 "plain": "questions-{source}-plain-{lang}.jsonl"}
KANA = re.compile(r"[\u3040-\u30ff]")
HAN = re.compile(r"[\u4e00-\u9fff]")


def check_languages(folder: Path, out=print) -> list[str]:
    """Every source under ``folder``: each language's question file against that language's
    notes, then the six languages against each other (same notes, same questions)."""
    sources = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if not sources:
        return [f"no source folders in {folder}"]
    errors: list[str] = []
    for source in sources:
        errors += [f"{source.name}: {e}" for e in check_source(source, out)]
    return errors


def check_source(source: Path, out=print) -> list[str]:
    errors = [f"no {name}" for name in ("SOURCE.md",) if not (source / name).is_file()]
    missing = [lang for lang in LANGS if not (source / lang).is_dir()]
    if missing:
        return errors + [f"no notes folder for {', '.join(missing)}"]
    paths = {lang: sorted(p.relative_to(source / lang).as_posix()
                          for p in (source / lang).rglob("*.md")) for lang in LANGS}
    errors += [f"{lang}: its notes differ from en's" for lang in LANGS if paths[lang] != paths["en"]]
    english: dict[str, list[dict]] = {}
    for name in QUESTION_SETS:
        files = question_files(source, name)
        if name != "terms" and not any(f.is_file() for f in files.values()):
            continue  # a source need not have every set
        errs, english[name] = check_set(source, files, "" if name == "terms" else f"{name}: ", out)
        errors += errs
    return errors + across_sets(english)


def question_files(source: Path, name: str) -> dict[str, Path]:
    """One question set's files of a source, by language (examples/questions-...-LANG.jsonl)."""
    pattern = QUESTION_SETS[name]
    return {lang: source.parent.parent / pattern.format(source=source.name, lang=lang)
            for lang in LANGS}


def check_set(source: Path, files: dict[str, Path], prefix: str, out=print) -> tuple[list[str], list]:
    """One question set: each language's file against its notes, then the languages against
    each other. Its problems, and its English questions ([] when there are none)."""
    errors, sets = [], {}
    for lang, qfile in files.items():
        if not qfile.is_file():
            errors.append(f"no {qfile.name}")
            continue
        errors += [f"{qfile.name}: {e}" for e in check_file(source / lang, qfile, out)]
        sets[lang] = [json.loads(line) for line in qfile.read_text(encoding="utf-8").splitlines()
                      if line.strip()]
    if "en" in sets:
        for lang, qs in sets.items():
            errors += [f"{prefix}{lang}: {e}" for e in aligned(sets["en"], qs, lang)]
    return errors, sets.get("en", [])


def across_sets(english: dict[str, list[dict]]) -> list[str]:
    """The sets of one source together: a question id names one question of one set (the
    benchmark's union of the sets is keyed by id), and no question is asked in two sets."""
    errors, ids, texts = [], {}, {}
    for name, qs in english.items():
        for q in qs:
            for seen, key in ((ids, q.get("id")), (texts, q.get("question"))):
                if key in seen and seen[key] != name:
                    errors.append(f"{key!r} is in both the {seen[key]} and the {name} set")
                seen.setdefault(key, name)
    return errors


def aligned(english: list[dict], qs: list[dict], lang: str) -> list[str]:
    """One language's questions are the English ones asked in that language: the same ids in
    the same order, the same answerability, difficulty, kind and expected notes."""
    if [q.get("id") for q in qs] != [q.get("id") for q in english]:
        return ["its question ids differ from en's (the same ids, in the same order)"]
    if len({q.get("id") for q in english}) != len(english):
        return ["question ids repeat"]
    errors = []
    for en, q in zip(english, qs):
        qid = q.get("id")
        for key in ("answerable", "difficulty", "kind"):
            if q.get(key) != en.get(key):
                errors.append(f"{qid}: {key} {q.get(key)!r}, en has {en.get(key)!r}")
        if [note_of(e) for e in q.get("expected", [])] != [note_of(e) for e in en.get("expected", [])]:
            errors.append(f"{qid}: expected notes differ from en's")
        if q.get("lang") != lang:
            errors.append(f"{qid}: lang is {q.get('lang')!r}, not {lang!r}")
        errors += [f"{qid}: {e}" for e in written_in(q.get("question", ""), en["question"], lang)]
    return errors


def note_of(expected: str) -> str:
    m = RANGE_RE.match(expected)
    return m.group(1) if m else expected.split("#", 1)[0]


def written_in(text: str, english: str, lang: str) -> list[str]:
    """A cheap guard against an untranslated question: not the English text, and Japanese
    with kana, Chinese with Han characters and no kana."""
    if lang == "en":
        return []
    if text == english:
        return ["the question is the English one"]
    if lang == "ja" and not KANA.search(text):
        return ["a Japanese question without kana"]
    if lang == "zh" and (not HAN.search(text) or KANA.search(text)):
        return ["a Chinese question needs Han characters and no kana"]
    return []


if __name__ == "__main__":
    sys.exit(main())
