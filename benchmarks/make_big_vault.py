"""Assemble the big benchmark vault: ~10,000 markdown notes, ~70 MB, from ../shared/data/.

    python benchmarks/make_big_vault.py                    # -> ~/.cache/brainbot/bench/big-vault
    python benchmarks/make_big_vault.py /tmp/big --notes 10000

How it is made (deterministic: the same data gives the same bytes, file for file):

- One copy of the material is 1,776 notes, 12.7 MB:
  - the three notes corpora (../shared/data/corpora: dwarves-brain, rust-book,
    rust-lang-team-minutes; 1,170 `.md` files, 6.9 MB), as
    `c{k}/<corpus>/<the corpus' own relative path>`;
  - the 3,633 NFCorpus documents (../shared/data/nfcorpus/corpus.jsonl, in file order), six to a
    note (606 notes, 5.8 MB, ~9.6 kB each), as `c{k}/nfcorpus/abstracts-NNNN.md`: a `# Abstracts
    <first id> to <last id>` heading, then per document `## <title>`, a blank line, its text.
- Copies k = 0, 1, 2, ... are written in that order until `--notes` (10,000) notes are written:
  five whole copies and most of the corpora of a sixth, 70 MB. Copy 0 is the material byte for
  byte.
- Copies 1.. are altered so that no two copies share a chunk text (the indexer reuses a vector
  for an identical retrieval text, so verbatim copies would skip the embedder): in each prose
  line, about one word in 16 (lower-case, 4-12 letters, standing between spaces or punctuation)
  is replaced by another word of the material's own vocabulary. The choice is seeded by
  (copy, path), so it is the same on every run. Front matter, fenced code, and lines holding a
  link (`[[`, `](`), a URL, a tag, HTML or a table are left as they are, so the markdown
  structure, links and tags of every copy are the original's; sizes and token counts stay within
  about a percent. Names are the original's under another folder, so a name-only wikilink finds
  several notes of that name, as in a vault with duplicated folders.
- MANIFEST.json in the folder records the parameters and the counts; a second run with the same
  parameters finds it and leaves the folder as it is (use --force to rebuild). A folder that is
  not empty and has no MANIFEST.json is refused, so nothing of yours is overwritten.

Prints one line: the folder, notes, megabytes.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data"
CORPORA = ("dwarves-brain", "rust-book", "rust-lang-team-minutes")
DEFAULT_OUT = Path.home() / ".cache" / "brainbot" / "bench" / "big-vault"
VERSION = 1  # bump when the recipe changes: the manifest then no longer matches
WORD = re.compile(r"(?<![\w./#@`*_~-])[a-z]{4,12}(?![\w/@`*_~-])")
LEAVE = re.compile(r"\[\[|\]\(|https?:|www\.|(?:^|\s)#\w|^\s*\||<")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
REPLACE_ONE_IN = 16
ABSTRACTS_PER_NOTE = 6


def material() -> list[tuple[str, bytes]]:
    """One copy's notes: (path inside the copy, bytes), in writing order."""
    out = []
    for name in CORPORA:
        root = DATA / "corpora" / name
        out.extend((f"{name}/{p.relative_to(root).as_posix()}", p.read_bytes())
                   for p in sorted(root.rglob("*.md")))
    with open(DATA / "nfcorpus" / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    for n, i in enumerate(range(0, len(docs), ABSTRACTS_PER_NOTE)):
        group = docs[i:i + ABSTRACTS_PER_NOTE]
        parts = [f"# Abstracts {group[0]['_id']} to {group[-1]['_id']}\n"]
        parts.extend(f"\n## {d['title']}\n\n{d['text']}\n" for d in group)
        out.append((f"nfcorpus/abstracts-{n:04d}.md", "".join(parts).encode("utf-8")))
    return out


def vocabulary(items: list[tuple[str, bytes]]) -> list[str]:
    words: set[str] = set()
    for _, data in items:
        words.update(WORD.findall(data.decode("utf-8", "replace")))
    return sorted(words)


def alter(text: str, rng: random.Random, vocab: list[str]) -> str:
    """The note with about one prose word in REPLACE_ONE_IN swapped for a vocabulary word."""
    lines = text.split("\n")
    in_fence = False
    front = bool(lines) and lines[0].strip() == "---"
    for i, line in enumerate(lines):
        if front:
            front = not (i > 0 and line.strip() in ("---", "..."))
            continue
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or LEAVE.search(line):
            continue
        lines[i] = WORD.sub(
            lambda m: vocab[rng.randrange(len(vocab))]
            if rng.randrange(REPLACE_ONE_IN) == 0 else m.group(0), line)
    return "\n".join(lines)


def copy_bytes(k: int, relpath: str, data: bytes, vocab: list[str]) -> bytes:
    if k == 0:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data  # not UTF-8: copied as it is
    rng = random.Random(f"{VERSION}:{k}:{relpath}")
    return alter(text, rng, vocab).encode("utf-8")


def prepare(out: Path, manifest: dict, force: bool) -> bool:
    """True when the folder must be (re)written; refuses a foreign non-empty folder."""
    mf = out / "MANIFEST.json"
    if mf.exists():
        if not force and json.loads(mf.read_text()).get("params") == manifest["params"]:
            return False
        shutil.rmtree(out)
    elif out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty and holds no MANIFEST.json: refusing to write there")
    out.mkdir(parents=True, exist_ok=True)
    return True


def build(out: Path, notes: int, force: bool = False) -> dict:
    manifest = {"params": {"version": VERSION, "notes": notes}}
    if not prepare(out, manifest, force):
        return json.loads((out / "MANIFEST.json").read_text())
    items = material()
    vocab = vocabulary(items)
    written = size = 0
    k = 0
    while written < notes:
        for relpath, data in items[:notes - written]:
            target = out / f"c{k}" / relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            body = copy_bytes(k, relpath, data, vocab)
            target.write_bytes(body)
            written += 1
            size += len(body)
        k += 1
    manifest.update({"notes": written, "bytes": size, "copies": k})
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT,
                        help=f"the folder to write (default {DEFAULT_OUT})")
    parser.add_argument("--notes", type=int, default=10_000, help="notes to write (10000)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    if not (DATA / "corpora").is_dir():
        print(f"{DATA / 'corpora'} is absent: nothing to assemble from", file=sys.stderr)
        return 1
    m = build(args.out.expanduser(), args.notes, args.force)
    print(f"{args.out}: {m['notes']} notes, {m['bytes'] / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
