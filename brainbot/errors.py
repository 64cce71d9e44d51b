"""The typed errors of brainbot.

Library code raises these; only the CLI turns them into one-line messages and exit
codes. Errors caused by bad input also subclass ValueError so callers that do not know
brainbot can still catch them idiomatically.

An error about the index carries ``fix``: the one thing to run or do about it. Its
message is built here, once, from what went wrong and that fix, so ``brainbot doctor``
and the CLI say the same thing and nothing decides by searching a message's words.
"""

from __future__ import annotations

import shlex


class BrainbotError(Exception):
    """Base class of every error brainbot raises on purpose."""

    exit_code = 1
    fix = ""


class InputError(BrainbotError, ValueError):
    """The caller passed something brainbot cannot use (a bad path, option or value)."""

    exit_code = 2


class NotUTF8Error(InputError):
    """Text that is not valid UTF-8: a lone surrogate, which is how Python keeps argv bytes
    that are not UTF-8 and what JSON's "\\ud800" decodes to. Neither the tokenizer nor
    SQLite takes one (issue 32, M10), so it is refused where it comes in."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not valid UTF-8")

    @classmethod
    def check(cls, text: str, what: str) -> str:
        """``text`` itself, or this error naming ``what`` ("the query", "--tag")."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise cls(what) from None
        return text


class ServerBusyError(BrainbotError):
    """A server already has as many questions in flight as it takes; try again shortly."""


class ModelFilesError(BrainbotError):
    """A model's files are missing or do not match their checksums."""


class WeightsFileError(ModelFilesError):
    """A weights file is truncated, damaged or not in the layout its reader knows."""


class ExportError(BrainbotError):
    """The ONNX export of the model could not be built or failed verification."""


class StoreError(BrainbotError):
    """The index cannot be opened, read or written."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


def _quote(target) -> str:
    return shlex.quote(str(target))


class NoIndexError(StoreError):
    """Nothing has been indexed into this file (it is missing or empty)."""

    def __init__(self, target) -> None:
        fix = f"brainbot index NOTES --db {_quote(target)}"
        super().__init__(f"no index at {target}; create it with `{fix}`", fix)


class IncompatibleIndexError(StoreError):
    """The database was written by another schema version, model, chunker or application."""


class NotAnIndexError(IncompatibleIndexError):
    """The file belongs to another application, or is damaged past reading."""

    def __init__(self, target, detail: str = "", *, replacing: bool = False) -> None:
        fix = f"pass another --db, or move {_quote(target)} away"
        if replacing:  # --rebuild or --replace refused it: not a damaged index either
            super().__init__(f"{target} is not a brainbot index, and brainbot replaces only "
                             f"its own files; {fix}", fix)
            return
        why = f" (SQLite says: {detail})" if detail else ""
        fix += (f"; if it is a damaged brainbot index, rebuild it: brainbot index NOTES "
                f"--db {_quote(target)} --rebuild")
        super().__init__(f"{target} is not a brainbot index or is damaged{why}; {fix}", fix)


class NewerSchemaError(IncompatibleIndexError):
    """The file was written by a newer brainbot."""

    def __init__(self, target, version: int, ours: int) -> None:
        fix = "upgrade brainbot (pip install -U brainbot) or pass another --db"
        super().__init__(f"{target} was written by a newer brainbot (schema {version}, this "
                         f"one reads {ours}); {fix}", fix)


class OlderSchemaError(IncompatibleIndexError):
    """The file needs a migration that only a writer (``brainbot index``) runs."""

    def __init__(self, target, version: int, ours: int) -> None:
        fix = f"brainbot index NOTES --db {_quote(target)}"
        super().__init__(f"{target} has index schema {version}, this brainbot reads {ours}; "
                         f"run `{fix}` once to upgrade it", fix)


class IdentityMismatchError(IncompatibleIndexError):
    """The index was built by another model, tokenizer, chunker, analyzer or embedder."""

    def __init__(self, target, key: str, theirs: str, ours: str, why: str = "") -> None:
        self.key, self.theirs, self.ours = key, theirs, ours  # the watcher adopts a precision
        fix = f"brainbot index NOTES --db {_quote(target)} --rebuild"
        super().__init__(f"{target} was built with {key} {theirs!r}, this brainbot uses "
                         f"{ours!r}{f' ({why})' if why else ''}; rebuild it with `{fix}` or use "
                         "another --db", fix)


class ReadOnlyStoreError(StoreError):
    """The index can be read but not written (permissions, `chattr +i`, a read-only
    mount)."""


# A busy index's writer when nothing tells which it is (review L17: it was always
# "another `brainbot index`", also while a watch held the lock).
WRITERS = "another brainbot writer (`brainbot index`, `watch` or `serve --watch`)"


class StoreBusyError(StoreError):
    """Another process holds the database's write lock."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "wait for the other writer to finish, then run again")


class PartialIndexError(StoreError):
    """A vector or hybrid evaluation was asked of an index whose semantic phase has not
    finished: its figures would measure the gap, not the retrieval."""


class EmptyRebuildError(InputError):
    """A rebuild (or ``copy --replace``) that would replace an index holding notes with an
    empty one: refused unless asked for (``--allow-empty``); the old index stays as it was.
    ``source``: the empty index a copy would bring; ``skipped``: why the rebuild's files
    were not indexed."""

    def __init__(self, target, notes: int, *, skipped=(), source=None) -> None:
        if source is not None:
            what = f"{source} holds no notes, and copying it"
        elif skipped:
            first = skipped[0]
            what = (f"the rebuild indexed no note ({len(skipped):,} skipped; {first.path}: "
                    f"{first.reason}), and it")
        else:
            what = "the rebuild found no notes to index, and it"
        check = "" if source is not None else "check the folders, or "
        super().__init__(f"{what} would replace the {notes:,} notes of {target} with an "
                         f"empty index; it is left as it was ({check}pass --allow-empty to "
                         "empty it)")


class IndexStopped(BrainbotError):
    """An index run was asked to stop (SIGTERM, Ctrl-C in a watcher); what was committed
    before stays, and the next run resumes."""

    exit_code = 130


class KernelError(BrainbotError, ValueError):
    """A search kernel was called with invalid arguments (shape, dtype, k, NaN)."""


class NotFoundError(BrainbotError):
    """A document, chunk or note that was asked for is not in the index."""


class AnswerError(BrainbotError):
    """The answering agent could not finish (API errors after retries, bad responses)."""


class UnknownConversationError(InputError):
    """A conversation id that this index's conversations do not hold."""

    def __init__(self, cid: str, target) -> None:
        self.fix = f"brainbot conversations --db {_quote(target)}"
        super().__init__(f"no conversation {cid!r} in {target}; list them with `{self.fix}`")
