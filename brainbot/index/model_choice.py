"""Which embedding model an index uses: the one asked for, else the one it records, else,
for a new index, the multilingual model when most of its notes are not English (the
English one otherwise); and whether an index's model suits the notes it holds.

"Not English" is notes/language.py's check, on a sample of the notes read before the
first index is written (its chunks are counted in the chosen model's tokenizer, so the
choice comes first). This module decides; the Indexer (``index/indexer.py``) embeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from brainbot.notes import language
from brainbot.text import documents

# "Mostly not English": more than half of the sampled notes fail notes/language.py's
# English check. The same share makes `doctor` call an English model unsuited.
MOSTLY_NOT_ENGLISH = 0.5
# Notes read to choose a new index's model (evenly spread over the sorted paths), and
# characters read of each: enough for the English check's 20 words many times over.
SAMPLE_NOTES = 200
SAMPLE_BYTES = 16_384

@dataclass(frozen=True)
class ModelChoice:
    """The model an index embeds with, and the line that says why when it was chosen for
    the notes (None when given, recorded or the default)."""

    record: object
    line: str | None = None


def choose_model(target, paths: Iterable, model=None) -> ModelChoice:
    """The model an index of ``paths`` at ``target`` embeds with: ``model`` when given;
    else the one the index records (one this code does not know: the default's, which
    the identity check then refuses); else, for a new index, the multilingual model when
    most of the sampled notes are not English, the default otherwise."""
    from brainbot.model.records import MULTILINGUAL, for_index, record
    from brainbot.store.target import recorded_meta

    if model is not None:
        return ModelChoice(record(model))
    meta = recorded_meta(target)
    if "model" in meta:
        return ModelChoice(for_index(meta) or record())
    other, sampled = sample_languages(paths)
    if sampled and other / sampled > MOSTLY_NOT_ENGLISH:
        return ModelChoice(record(MULTILINGUAL), (
            f"{other} of {sampled} notes read are not English: indexing with "
            f"{MULTILINGUAL} (`--model all-MiniLM-L6-v2` for the English one)"))
    return ModelChoice(record())


def sample_languages(paths: Iterable) -> tuple[int, int]:
    """(notes that are not English, notes read): up to SAMPLE_NOTES notes spread over the
    notes under ``paths``, the first SAMPLE_BYTES of each, by notes/language.py's check."""
    found = [Path(r.path) / f.relpath for r in documents.roots(paths) for f in r.files]
    picked = found[:: max(1, -(-len(found) // SAMPLE_NOTES))]
    other = read = 0
    for path in picked:
        try:
            with open(path, "rb") as handle:
                text = handle.read(SAMPLE_BYTES).decode("utf-8", "ignore")
        except OSError:
            continue
        read += 1
        other += not language.looks_english(text)
    return other, read


def model_fit(meta: dict[str, str], other: int, known: int) -> tuple[bool, str]:
    """Whether an index's model suits its notes, and the line that says so: an English
    model over mostly non-English chunks does not."""
    from brainbot.model.records import for_index

    spec = for_index(meta)
    share = other / known if known else 0.0
    seen = f"{share:.0%} of {known:,} chunks look non-English"
    if spec is None:
        return False, f"{meta.get('model')} is not a model this brainbot knows; {seen}"
    if spec.multilingual:
        return True, f"{spec.name} ({spec.languages}); {seen}"
    if share > MOSTLY_NOT_ENGLISH:
        return False, (f"{spec.name} reads English only, and {seen}: its vector search "
                       "cannot read them")
    note = " (BM25 carries them)" if share >= language.NON_ENGLISH_WARN else ""
    return True, f"{spec.name} (English); {seen}{note}"


def check_fits(params, spec) -> None:
    """InputError when a chunk of ``params`` could not reach the model whole."""
    from brainbot.errors import InputError

    prefix = 8  # generous: "passage: " is 2 of e5's pieces
    if params.max_tokens + (prefix if spec.passage_prefix else 0) > spec.max_tokens:
        raise InputError(f"max_tokens {params.max_tokens} does not fit {spec.name}, which "
                         f"takes {spec.max_tokens} tokens")
