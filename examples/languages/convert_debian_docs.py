#!/usr/bin/env python3
"""Make the multilingual example vaults from two of Debian's translated manuals.

Reads the HTML that Debian's documentation packages install (unpacked with
``dpkg-deb -x PACKAGE.deb ROOT`` into one ROOT) and writes one folder of markdown notes a
language, with the same relative paths in every language:

  debian-install    the Debian Installation Guide (package installation-guide-amd64):
                    one note a page, a long page split into its sections;
  debian-reference  the Debian Reference (packages debian-reference-{en,de,es,fr,ja,zh-cn}):
                    the preface and the chapters translated in all six languages, one note
                    a section, a long section split into its subsections.

Which notes exist, and their file names, are decided on the English manual and applied to
every translation through the manuals' section ids, which do not change with the language.
Standard library only; it does not download anything (see SOURCE.md for the packages).

    python examples/languages/convert_debian_docs.py debian-install --from ROOT
    python examples/languages/convert_debian_docs.py debian-reference --from ROOT
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docbook_markdown import Blocks, Element, heading_of, note, parse  # noqa: E402

HERE = Path(__file__).resolve().parent
LANGS = ("en", "de", "es", "fr", "ja", "zh")
SECTION_CLASSES = {"section", "sect1", "sect2", "sect3", "sect4", "chapter", "preface",
                   "appendix"}
# A note longer than this (characters of English markdown) is split into its subsections.
# Chosen by eye so that a note reads as one topic: the Installation Guide's longest page
# (6.3, all the installer's components, ~90 kB) splits, a typical page (~5-15 kB) does not.
SPLIT_ABOVE = 12_000
INSTALL_DIRS = {"en": "en", "de": "de", "es": "es", "fr": "fr", "ja": "ja", "zh": "zh_CN"}
INSTALL_SKIP = {"index.html", "apf.html"}  # the table of contents; the GPL's text (LICENSE)
GENERATED = re.compile(r"^id[a-z]?\d+")  # ids DocBook made up, different in each language
REFERENCE_CODES = {"en": "en", "de": "de", "es": "es", "fr": "fr", "ja": "ja", "zh": "zh-cn"}
# The preface and the chapters whose every language is a full translation (fewer than one
# paragraph in six left in English in each: ch01 tutorials, ch02 package management, ch04
# authentication, ch11 data conversion). The other chapters are partly untranslated.
REFERENCE_PAGES = ("pr01", "ch01", "ch02", "ch04", "ch11")


@dataclass(frozen=True)
class Planned:
    """One note: its path, the section it comes from, and whether subsections stay in it."""

    relpath: str
    page: str
    key: tuple[int, ...]  # the section's place among the page's sections, e.g. (0, 2, 1)
    anchor: str  # its id, checked where the manual gave one (not a generated "idm123")
    whole: bool


def slug(title: str, limit: int = 60) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", title.lower().replace("'", "")).strip("-")
    if len(s) > limit:
        s = s[: limit + 1].rsplit("-", 1)[0]  # whole words only
    return s or "section"


def sections(root: Element, prefix: tuple[int, ...] = ()) -> dict[tuple[int, ...], Element]:
    """Every section element of a page by its place: translations keep the structure."""
    found = {}
    for i, kid in enumerate(children(root)):
        found[prefix + (i,)] = kid
        found.update(sections(kid, prefix + (i,)))
    return found


def children(section: Element) -> list[Element]:
    return [c for c in section.children if isinstance(c, Element) and c.tag == "div"
            and c.classes & SECTION_CLASSES]


def without_children(section: Element) -> Element:
    copy = Element(section.tag, section.attrs)
    copy.children = [c for c in section.children if not (
        isinstance(c, Element) and c.tag == "div" and c.classes & SECTION_CLASSES)]
    return copy


def level_of(section: Element) -> int:
    heads = section.find_all(lambda e: e.tag in ("h1", "h2", "h3", "h4", "h5"))
    return int(heads[0].tag[1]) if heads else 1


def markdown(section: Element, whole: bool) -> str:
    el = section if whole else without_children(section)
    return note(Blocks(level_of(section)).render(el))


def has_text(md: str) -> bool:
    return any(line.strip() and not line.startswith("#") for line in md.split("\n"))


def plan_section(page: str, key: tuple[int, ...], section: Element, folder: str) -> list[Planned]:
    """The notes of one English section: itself whole, or its intro and its subsections."""
    anchor, title = heading_of(section)
    name = f"{folder}/{slug(title)}" if folder else slug(title)
    kids = children(section)
    if not kids or len(markdown(section, True)) <= SPLIT_ABOVE:
        return [Planned(name + ".md", page, key, anchor, True)]
    out = []
    if has_text(markdown(section, False)):
        out.append(Planned(name + ".md", page, key, anchor, False))
    for i, kid in enumerate(kids):
        out.extend(plan_section(page, key + (i,), kid, name))
    return out


def install_plan(root: Path) -> list[Planned]:
    base = root / "usr/share/doc/installation-guide-amd64" / INSTALL_DIRS["en"]
    plan = []
    for path in sorted(base.glob("*.html")):
        if path.name in INSTALL_SKIP:
            continue
        tree = parse(path.read_text(encoding="utf-8"))
        top = children(_body(tree))
        if not top or not has_text(markdown(top[0], False)):
            continue  # a chapter's page: its title and a table of contents
        plan.extend(plan_section(path.name, (0,), top[0], install_folder(path)))
    return plan


def install_folder(page: Path) -> str:
    """A page's chapter folder, "03-before-installing-debian-gnu-linux" or "b-automating-…";
    a chapter's own page goes into its folder too, the preface stays at the top."""
    text = page.read_text(encoding="utf-8")
    own = re.search(r"<title>(?:Chapter|Appendix)\s(\w+)\.\s([^<]*)</title>", text)
    up = re.search(r'<link rel="up" href="[^"]+" title="(?:Chapter|Appendix)\s(\w+)\.\s([^"]*)"',
                   text)
    found = own or up
    if not found:
        return ""
    number, name = found.groups()
    return f"{number.lower().zfill(2) if number.isdigit() else number.lower()}-{slug(name, 40)}"


def _body(tree: Element) -> Element:
    bodies = tree.find_all(lambda e: e.tag == "body")
    return bodies[0] if bodies else tree


def reference_plan(root: Path) -> list[Planned]:
    base = root / "usr/share/debian-reference"
    plan = []
    for page in REFERENCE_PAGES:
        tree = parse((base / f"{page}.en.html").read_text(encoding="utf-8"))
        top = children(_body(tree))[0]
        _, title = heading_of(top)
        folder = f"{page[2:]}-{slug(title, 40)}" if page.startswith("ch") else "00-preface"
        notes = [n for i, sec in enumerate(children(top))
                 for n in plan_section(page, (0, i), sec, folder)]
        if has_text(markdown(top, False)):
            notes.insert(0, Planned(f"{folder}/{slug(title)}.md", page, (0,), heading_of(top)[0],
                                    False))
        plan.extend(notes)
    return plan


def page_path(source: str, root: Path, lang: str, page: str) -> Path:
    if source == "debian-install":
        return root / "usr/share/doc/installation-guide-amd64" / INSTALL_DIRS[lang] / page
    return root / "usr/share/debian-reference" / f"{page}.{REFERENCE_CODES[lang]}.html"


def write_language(source: str, root: Path, lang: str, plan: list[Planned], out: Path) -> int:
    trees: dict[str, dict[str, Element]] = {}
    size = 0
    for p in plan:
        if p.page not in trees:
            html = page_path(source, root, lang, p.page).read_text(encoding="utf-8")
            trees[p.page] = sections(_body(parse(html)))
        section = trees[p.page].get(p.key)
        anchor = heading_of(section)[0] if section is not None else None
        if anchor is None or (anchor != p.anchor and not GENERATED.match(p.anchor)):
            raise SystemExit(f"{lang}: {p.page}'s section {p.key} is {anchor!r}, not {p.anchor!r}")
        target = out / lang / p.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        text = markdown(section, p.whole)
        target.write_text(text, encoding="utf-8")
        size += len(text.encode("utf-8"))
    return size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", choices=["debian-install", "debian-reference"])
    ap.add_argument("--from", dest="root", type=Path, required=True,
                    help="the folder the packages were unpacked into (dpkg-deb -x PKG ROOT)")
    ap.add_argument("--out", type=Path, default=None,
                    help="where the language folders go (default examples/languages/SOURCE)")
    args = ap.parse_args(argv)
    out = args.out or HERE / args.source
    plan = install_plan(args.root) if args.source == "debian-install" else reference_plan(args.root)
    paths = [p.relpath for p in plan]
    if len(set(paths)) != len(paths):
        raise SystemExit("two notes would share a path: " + ", ".join(
            sorted({p for p in paths if paths.count(p) > 1})))
    for lang in LANGS:
        shutil.rmtree(out / lang, ignore_errors=True)
        size = write_language(args.source, args.root, lang, plan, out)
        print(f"{args.source}/{lang}: {len(plan)} notes, {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
