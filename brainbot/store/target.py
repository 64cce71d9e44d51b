"""The index named by ``--db``: a path opens the SQLite store, a ``postgresql://`` URL
the Postgres one. Everything above the store opens its index here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .identity import IndexIdentity
from .interface import Store

if TYPE_CHECKING:  # a query never loads the conversations module
    from .conversations import Conversations


def is_url(target: str | os.PathLike) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def public_target(target: str | os.PathLike) -> str:
    """``target`` as messages may show it: a URL loses its password."""
    if is_url(target):
        from brainbot.store.pg.schema import public_url

        return public_url(str(target))
    return str(target)


def whereabouts(target: str | os.PathLike) -> tuple[tuple | None, tuple | None]:
    """Where the index at ``target`` lives (a file's device and inode; a Postgres server,
    database and schema) and its (index_id, generation) (``identity.stamp``), found
    without writing anything: two spellings of one index give the same. None for what
    does not exist (yet)."""
    if is_url(target):
        from brainbot.store.pg.schema import whereabouts as in_postgres

        return in_postgres(str(target))
    from brainbot.store.sqlite.file import whereabouts as in_file

    return in_file(Path(target))


def recorded_meta(target: str | os.PathLike) -> dict[str, str]:
    """The meta the index at ``target`` records, read without writing anything; {} when
    there is no index (yet) or it cannot be read (opening it will say why)."""
    if is_url(target):
        from brainbot.store.pg.schema import peek_meta as in_postgres

        return in_postgres(str(target))
    from brainbot.store.sqlite.file import peek_meta as in_file

    return in_file(Path(target))


def recorded_precision(target: str | os.PathLike) -> str | None:
    """The embedding precision the index at ``target`` was built with (fp32, int8), read
    without writing anything; None when it records none yet."""
    from .identity import precision_of

    return precision_of(recorded_meta(target))


def open_store(target: str | os.PathLike, *, write: bool = False,
               identity: IndexIdentity | None = None, rebuild: bool = False) -> Store:
    """Open the index at ``target`` (a path, or a ``postgresql://`` URL).

    Readers need an index at this schema whose model, dimension and analyzer match this
    code. A writer (``write=True``) holds the index's one writer lock until ``close()``,
    creates or migrates it, and needs ``identity`` to match every recorded field;
    ``rebuild`` empties it first."""
    if is_url(target):
        from brainbot.store.pg.store import PostgresStore

        return PostgresStore.open(str(target), write=write, identity=identity,
                                  rebuild=rebuild)
    from brainbot.store.sqlite.store import SQLiteStore

    return SQLiteStore.open(target, write=write, identity=identity, rebuild=rebuild)


def open_conversations(target: str | os.PathLike) -> Conversations:
    """The conversations of the index at ``target``: a file beside a SQLite index, tables
    in a Postgres index's schema (``store/conversations.py`` says why). Nothing is opened
    or created until they are read or a turn is saved."""
    if is_url(target):
        from brainbot.store.pg.conversations import PgConversations

        return PgConversations(str(target))
    from brainbot.store.sqlite.conversations import SidecarConversations

    return SidecarConversations(target)
