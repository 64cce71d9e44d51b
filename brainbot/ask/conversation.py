"""An ask as a turn of a conversation: its earlier turns loaded, the answer given in their
light (``ask/followup.py`` for the search, ``ask/history.py`` for the model), the new turn
saved, and the conversation's id on the answer.

Every ask is a turn: without an id it starts a new conversation, so ``ask --json`` always
names one. The turn is saved after the answer is complete, in one transaction
(``store/conversations.py``): an ask killed before that leaves the conversation as it
was. When it cannot be saved (a read-only medium, a role that may only read) the answer
is given all the same and says so in ``conversation_note``.

``Thread`` is the same for a loop of asks (``brainbot chat``): it keeps the turns in
memory, so a conversation that cannot be saved still has its earlier turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brainbot.errors import StoreError
from brainbot.store.conversations import Conversations, Turn, new_id
from brainbot.store.target import open_conversations


@dataclass
class Thread:
    """One conversation of one index: its id, its turns so far, where it is saved."""

    store: Conversations
    id: str = field(default_factory=new_id)
    turns: list[Turn] = field(default_factory=list)

    @classmethod
    def open(cls, db, conversation: str | None = None, follow_up: bool = False) -> Thread:
        """Conversation ``conversation`` (UnknownConversationError when there is none), the
        latest of the index with ``follow_up`` (a new one when there is none yet), or a
        new one."""
        store = open_conversations(db)
        cid = conversation or (store.latest() if follow_up else None)
        if cid is None:
            return cls(store)
        return cls(store, cid, store.turns(cid))

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
        """Keep ``answer`` as the next turn and save it; on the answer, the conversation's
        id and the turn's number, or why it was not saved."""
        turn = turn_of(answer)
        answer.conversation = self.id
        try:
            answer.turn = self.store.append(self.id, turn)
        except StoreError as exc:
            answer.conversation_note = f"this turn was not saved: {exc}"
            turn.n = len(self.turns) + 1
        self.turns.append(turn)

    def restart(self) -> None:
        """A new conversation (the chat's /new)."""
        self.id, self.turns = new_id(), []


def turn_of(answer) -> Turn:
    """The turn an Answer makes (not saved)."""
    return Turn(answer.question, answer.answer, answer.outcome, answer.mode,
                [c.to_dict() for c in answer.citations], answer.searched or answer.question)


def converse(question: str, *, db, conversation: str | None = None, follow_up: bool = False,
             **kw):
    """Answer ``question`` as the next turn of ``conversation`` (or of the index's latest
    with ``follow_up``, or of a new one): ``agent.ask``'s Answer, with ``conversation``."""
    return Thread.open(db, conversation, follow_up).ask(question, db=db, **kw)
