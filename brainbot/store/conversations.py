"""Conversations: the turns of a thread of questions, kept beside the index they asked.

Where they live, and why (issue 34):

- A SQLite index keeps them in a second SQLite file beside it, ``<index>.conversations``
  (the index's real path plus that suffix: ``store/sqlite/conversations.py``). The index
  file itself is rebuilt by writing a new file and moving it over, copied by ``brainbot
  copy``, and written by one writer at a time (``index``, the watch): a turn stored inside
  it would wait on that writer's lock and would have to be carried across every rebuild
  and copy path. The file beside it survives a rebuild untouched and is written without
  the index's lock. It is created only when a first turn is saved, so reading (status, a
  read-only medium) never creates it.
- A Postgres index keeps them in two tables of its own schema, ``conversations`` and
  ``conversation_turns`` (``store/pg/conversations.py``); a rebuild drops only the index's
  tables (``pg/schema.TABLES``) and leaves these.

A turn is written whole or not at all: one transaction numbers it, inserts it and moves its
conversation's ``updated`` time; a process killed before that commit leaves the turns as
they were. ``index/copying.py`` carries the conversations along with a copied index.

This module knows nothing of answers or retrieval: a Turn is the JSON-able record the ask
layer (``ask/conversation.py``) hands it, and the SQL below is plain enough for both stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone

from brainbot.errors import InputError, UnknownConversationError

TABLES = ("conversations", "conversation_turns")

# One DDL for both stores: TEXT and INTEGER mean the same in SQLite and Postgres.
DDL = (
    """CREATE TABLE IF NOT EXISTS conversations (
        id TEXT PRIMARY KEY,
        started TEXT NOT NULL,           -- ISO 8601 UTC, milliseconds: its first turn
        updated TEXT NOT NULL            -- its last turn (the latest conversation: --follow-up)
    )""",
    """CREATE TABLE IF NOT EXISTS conversation_turns (
        conversation TEXT NOT NULL REFERENCES conversations(id),
        n INTEGER NOT NULL,              -- 1, 2, ... within its conversation
        asked_at TEXT NOT NULL,
        question TEXT NOT NULL,
        answer TEXT NOT NULL,
        outcome TEXT NOT NULL,           -- answer | passages | not_found
        mode TEXT NOT NULL,              -- claude | extractive
        citations TEXT NOT NULL,         -- JSON: the answer's citation records
        searched TEXT NOT NULL,          -- what retrieval searched for it (ask/followup.py)
        PRIMARY KEY (conversation, n)
    )""",
)


def now() -> str:
    """A turn's time: UTC to the millisecond, so two turns of one second still order."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_id(cid: str | None) -> None:
    """InputError for an empty conversation id (``--conversation "$UNSET"``), as the API
    refuses it; None means no conversation."""
    if cid is not None and not cid.strip():
        raise InputError("--conversation needs the id of a conversation (`brainbot "
                         "conversations` lists them), not an empty one")


def new_id() -> str:
    """A conversation id: 12 hex digits, short enough to type, 48 random bits."""
    import uuid  # here: a cold `brainbot query` opens the store module, never an id

    return uuid.uuid4().hex[:12]


@dataclass
class Turn:
    """One question of a conversation and what was answered."""

    question: str
    answer: str
    outcome: str
    mode: str
    citations: list[dict] = field(default_factory=list)
    searched: str = ""
    asked_at: str = ""
    n: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def cited_paths(self) -> list[tuple[str, str | None]]:
        """(path, root) of each note the answer cited, in citation order, once each."""
        seen: dict[tuple[str, str | None], None] = {}
        for c in self.citations:
            seen.setdefault((c.get("path", ""), c.get("root")), None)
        return list(seen)


@dataclass
class ConversationInfo:
    id: str
    started: str
    updated: str
    turns: int
    first_question: str

    def to_dict(self) -> dict:
        return asdict(self)


class Conversations:
    """One index's conversations. A backend opens the connections (``_reading``: None
    while nothing was ever stored; ``_writing``: inside one transaction) and says how its
    driver writes a parameter (``mark``)."""

    target: str = ""
    mark = "?"

    def _reading(self) -> AbstractContextManager: ...
    def _writing(self) -> AbstractContextManager: ...
    def _hold(self, db, cid: str) -> None:
        """Serialise appends to ``cid`` inside the open transaction (SQLite's BEGIN
        IMMEDIATE already does)."""

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.mark)

    def _rows(self, sql: str, params=()) -> list[tuple]:
        with self._reading() as db:
            return [] if db is None else db.execute(self._q(sql), params).fetchall()

    # -- reading ---------------------------------------------------------------------------
    def count(self) -> int:
        rows = self._rows("SELECT count(*) FROM conversations")
        return int(rows[0][0]) if rows else 0

    def listing(self) -> list[ConversationInfo]:
        """Every conversation, the most recently continued first."""
        rows = self._rows(
            "SELECT c.id, c.started, c.updated, count(t.n), "
            "  (SELECT question FROM conversation_turns f WHERE f.conversation = c.id "
            "   ORDER BY f.n LIMIT 1) "
            "FROM conversations c LEFT JOIN conversation_turns t ON t.conversation = c.id "
            "GROUP BY c.id, c.started, c.updated ORDER BY c.updated DESC, c.id")
        return [ConversationInfo(r[0], r[1], r[2], int(r[3]), r[4] or "") for r in rows]

    def latest(self) -> str | None:
        """The id of the conversation continued last (``ask --follow-up``), or None."""
        newest = self.newest()
        return newest[1] if newest else None

    def newest(self) -> tuple[str, str] | None:
        """(updated, id) of the conversation continued last, or None."""
        rows = self._rows("SELECT updated, id FROM conversations ORDER BY updated DESC, id "
                          "LIMIT 1")
        return (rows[0][0], rows[0][1]) if rows else None

    def turns(self, cid: str) -> list[Turn]:
        """The turns of ``cid`` in order; UnknownConversationError when there is none."""
        rows = self._rows(
            "SELECT n, asked_at, question, answer, outcome, mode, citations, searched "
            "FROM conversation_turns WHERE conversation = ? ORDER BY n", (cid,))
        if not rows:
            raise UnknownConversationError(cid, self.target)
        return [Turn(r[2], r[3], r[4], r[5], json.loads(r[6]), r[7], r[1], int(r[0]))
                for r in rows]

    def export(self) -> Iterator[tuple[ConversationInfo, list[Turn]]]:
        """Every conversation with its turns (``brainbot copy``)."""
        for info in self.listing():
            yield info, self.turns(info.id)

    # -- writing ---------------------------------------------------------------------------
    def append(self, cid: str, turn: Turn) -> int:
        """Save ``turn`` as the next of ``cid`` (created by its first turn): its number.

        Its time is taken inside the write transaction, once this append holds the
        conversation, and never earlier than the conversation's last turn (a clock set
        back): an append that waited for another's lock is stamped after it, so turn
        numbers and times agree and ``updated`` never moves backwards (``latest()`` and
        the listing's order)."""
        with self._writing() as db:
            stamp = turn.asked_at or now()
            db.execute(self._q("INSERT INTO conversations(id, started, updated) "
                               "VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING"),
                       (cid, stamp, stamp))
            self._hold(db, cid)
            last = db.execute(self._q("SELECT updated FROM conversations WHERE id = ?"),
                              (cid,)).fetchone()[0]
            turn.asked_at = max(turn.asked_at or now(), last)  # ISO UTC: sorts as text
            n = int(db.execute(self._q("SELECT coalesce(max(n), 0) + 1 FROM "
                                       "conversation_turns WHERE conversation = ?"),
                               (cid,)).fetchone()[0])
            self._insert(db, cid, n, turn)
            db.execute(self._q("UPDATE conversations SET updated = ? WHERE id = ?"),
                       (turn.asked_at, cid))
        turn.n = n
        return n

    def _insert(self, db, cid: str, n: int, turn: Turn) -> None:
        db.execute(self._q(
            "INSERT INTO conversation_turns(conversation, n, asked_at, question, answer, "
            "outcome, mode, citations, searched) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            (cid, n, turn.asked_at, turn.question, turn.answer, turn.outcome, turn.mode,
             json.dumps(turn.citations, ensure_ascii=False), turn.searched))

    def absorb(self, conversations: Iterable[tuple[ConversationInfo, list[Turn]]]) -> int:
        """Add whole conversations (``brainbot copy``), in one transaction; one whose id
        is already here is left as it is. How many were added."""
        items = list(conversations)
        if not items:
            return 0  # a target that never had conversations gets no file or tables
        added = 0
        with self._writing() as db:
            for info, turns in items:
                if db.execute(self._q("SELECT 1 FROM conversations WHERE id = ?"),
                              (info.id,)).fetchone():
                    continue
                db.execute(self._q("INSERT INTO conversations(id, started, updated) "
                                   "VALUES (?, ?, ?)"), (info.id, info.started, info.updated))
                for turn in turns:
                    self._insert(db, info.id, turn.n, turn)
                added += 1
        return added

    def delete(self, cid: str) -> int:
        """Delete conversation ``cid``: 1 (UnknownConversationError when there is none)."""
        self.turns(cid)  # UnknownConversationError before anything is opened for writing
        with self._writing() as db:
            db.execute(self._q("DELETE FROM conversation_turns WHERE conversation = ?"), (cid,))
            gone = db.execute(self._q("DELETE FROM conversations WHERE id = ?"), (cid,))
            if not gone.rowcount:
                raise UnknownConversationError(cid, self.target)
        return 1

    def clear(self) -> int:
        """Delete every conversation: how many there were."""
        if self.count() == 0:
            return 0  # nothing to write: a read-only medium need not be writable for this
        with self._writing() as db:
            db.execute("DELETE FROM conversation_turns")
            return db.execute("DELETE FROM conversations").rowcount
