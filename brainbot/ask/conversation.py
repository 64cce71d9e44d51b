"""An ask as a turn of a conversation: its earlier turns loaded, the answer given in their
light (``ask/followup.py`` for the search, ``ask/history.py`` for the model), the new turn
saved, and the conversation's id on the answer.

Every ask is a turn: without an id it starts a new conversation. The turn is saved after
the answer is complete, in one transaction (``store/conversations.py``): an ask killed
before that leaves the conversation as it was.

The answer is always given, and its ``conversation`` is an id that a follow-up can
continue, or None (issue 40, M2):

- Saved: the conversation's id, and ``turn`` its number.
- Not saved (a read-only medium, a role that may only read, a damaged file, a folder in
  its place): ``turn`` is None and ``conversation_note`` says why. A process that lives on
  keeps the conversation in its memory (``Unsaved``): a daemon (``serve``, ``mcp``: the
  page, the API, MCP clients) until it stops, ``brainbot chat`` until it ends; the answer
  names the conversation and a follow-up continues it there. A one-shot ``brainbot ask``
  keeps nothing: it names the conversation when earlier turns of it are saved (a
  follow-up continues from those), and None for a first turn, so no id is handed out
  that a follow-up would not find.
- The conversations cannot even be read (``--follow-up``, or a given id, on a damaged
  file, a folder in its place, a server that went away): the question is answered as the
  first turn of a new conversation, and the note says why.

An id that the conversations do not hold (nor this process's memory) is the caller's
mistake: UnknownConversationError; an empty one is refused (``check_id``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from brainbot.errors import StoreError
from brainbot.store.conversations import Conversations, Turn, check_id, new_id, now
from brainbot.store.target import open_conversations

# Unsaved conversations a process keeps: a daemon has one user, a page and a few agents,
# so a handful at once; past this many the one continued longest ago is forgotten.
KEPT_CONVERSATIONS = 64
# Turns kept of each, the newest: history.fit sends back what fits HISTORY_TOKENS (the
# last six to ten turns of a usual conversation) and followup reads the last four
# questions, so a hundred is well past what any follow-up uses.
KEPT_TURNS = 100


class Unsaved:
    """The conversations this process could not save, kept in memory so that their
    follow-ups continue them (a daemon's, a chat's). Thread-safe: a daemon answers
    several asks at once."""

    def __init__(self, until: str) -> None:
        self.until = until  # how long it keeps them, for the note: "until this server stops"
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, list[Turn]] = OrderedDict()  # continued last, last

    def __contains__(self, cid: str) -> bool:
        with self._lock:
            return cid in self._kept

    def turns(self, cid: str) -> list[Turn] | None:
        """A copy of the turns kept of ``cid``, or None."""
        with self._lock:
            kept = self._kept.get(cid)
            return None if kept is None else list(kept)

    def latest(self) -> tuple[str, str] | None:
        """(updated, id) of the conversation kept here that was continued last."""
        with self._lock:
            if not self._kept:
                return None
            cid, turns = next(reversed(self._kept.items()))
            return turns[-1].asked_at, cid

    def add(self, cid: str, earlier: list[Turn], turn: Turn) -> int:
        """Keep ``turn`` as the next of ``cid`` (after ``earlier`` when ``cid`` is new
        here); an unsaved one is numbered after the turn before it. Its number."""
        turn.asked_at = turn.asked_at or now()
        with self._lock:
            kept = self._kept.pop(cid, None)
            kept = list(earlier) if kept is None else kept
            turn.n = turn.n or (kept[-1].n if kept else 0) + 1
            kept.append(turn)
            del kept[:-KEPT_TURNS]
            self._kept[cid] = kept
            while len(self._kept) > KEPT_CONVERSATIONS:
                self._kept.popitem(last=False)
            return turn.n


@dataclass
class Thread:
    """One conversation of one index: its id, its turns so far, where it is saved."""

    store: Conversations
    id: str = field(default_factory=new_id)
    turns: list[Turn] = field(default_factory=list)
    kept: Unsaved | None = None  # where this process keeps what it could not save
    saved: bool = False  # the store holds turns of it
    unread: str | None = None  # why it could not be read: said with the next answer

    @classmethod
    def open(cls, db, conversation: str | None = None, follow_up: bool = False,
             kept: Unsaved | None = None) -> Thread:
        """Conversation ``conversation`` (UnknownConversationError when neither the store
        nor ``kept`` holds it), the latest of the index with ``follow_up`` (a new one when
        there is none yet), or a new one; a new one too, saying why, when the
        conversations cannot be read."""
        check_id(conversation)
        store = open_conversations(db)
        try:
            cid = conversation if conversation is not None else (
                _latest(store, kept) if follow_up else None)
            if cid is None:
                return cls(store, kept=kept)
            remembered = kept.turns(cid) if kept is not None else None
            if remembered is not None:
                return cls(store, cid, remembered, kept)
            return cls(store, cid, store.turns(cid), kept, saved=True)
        except StoreError as exc:  # not UnknownConversationError: an InputError
            return cls(store, kept=kept, unread=str(exc))

    def ask(self, question: str, **kw):
        """The answer to ``question`` as this conversation's next turn (``agent.ask``'s
        keywords), saved; with ``show_context`` the request, and nothing saved."""
        from .agent import ask

        answer = ask(question, history=self.turns, **kw)
        if kw.get("show_context"):
            return answer
        self.record(answer)
        return answer

    def record(self, answer) -> None:
        """Keep ``answer`` as the next turn and save it; on the answer, the id a follow-up
        continues (or None), the turn's number when saved, and what went wrong."""
        turn = turn_of(answer)
        notes = [] if self.unread is None else [
            f"the conversations could not be read, so this answer starts a new "
            f"conversation: {self.unread}"]
        try:
            answer.turn = self.store.append(self.id, turn)
            self.saved, error = True, None
        except StoreError as exc:
            error = str(exc)
            notes.append("this turn was not saved either" if error == self.unread
                         else f"this turn was not saved: {error}")
        answer.conversation = self.id
        if self.kept is not None and (error is not None or self.id in self.kept):
            self.kept.add(self.id, self.turns, turn)
            if error is not None:
                notes.append(f"the conversation is kept in memory {self.kept.until}")
        elif error is not None:
            turn.n = len(self.turns) + 1
            if self.saved:
                notes.append("a follow-up continues from its saved turns")
            else:
                answer.conversation = None  # nothing a follow-up could find
                notes.append("there is no conversation to follow up")
        answer.conversation_note = "; ".join(notes) or None
        self.unread = None
        self.turns.append(turn)

    def restart(self) -> None:
        """A new conversation (the chat's /new)."""
        self.id, self.turns, self.saved, self.unread = new_id(), [], False, None


def _latest(store: Conversations, kept: Unsaved | None) -> str | None:
    """The conversation continued last: the store's, or one ``kept`` in memory when that
    is newer (or the store cannot be read)."""
    mine = kept.latest() if kept is not None else None
    try:
        theirs = store.newest()
    except StoreError:
        if mine is None:
            raise
        return mine[1]
    newest = max((x for x in (mine, theirs) if x is not None), default=None)
    return None if newest is None else newest[1]


def turn_of(answer) -> Turn:
    """The turn an Answer makes (not saved)."""
    return Turn(answer.question, answer.answer, answer.outcome, answer.mode,
                [c.to_dict() for c in answer.citations], answer.searched or answer.question)


def converse(question: str, *, db, conversation: str | None = None, follow_up: bool = False,
             kept: Unsaved | None = None, **kw):
    """Answer ``question`` as the next turn of ``conversation`` (or of the index's latest
    with ``follow_up``, or of a new one): ``agent.ask``'s Answer, with ``conversation``;
    ``kept``: where this process keeps the conversations it could not save."""
    return Thread.open(db, conversation, follow_up, kept).ask(question, db=db, **kw)
