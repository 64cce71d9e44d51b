"""`brainbot chat`: one question after another, each a follow-up of the ones before.

A loop over ``ask/conversation.Thread``: every line is the conversation's next turn,
searched in the light of the earlier ones and saved like any ``brainbot ask`` (so ``ask
--follow-up`` continues it); a turn that cannot be saved is kept in memory until the chat
ends (``ask/conversation.Unsaved``), so the next line still follows up on it. The line is read with readline (editing, and this session's
history with the arrow keys). Claude's answers stream as they come when the output is a
terminal; offline answers print whole. Lines starting with "/" are commands (COMMANDS);
Ctrl-D or Ctrl-C, at the prompt or while an answer comes, end the chat without a trace:
a question not yet answered is not saved.

Also how the stored conversations print (``brainbot conversations``). This module reads and
prints; answering is ``ask/``'s.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

COMMANDS = {
    "/new": "start a new conversation",
    "/sources": "show the sources the last answer cited, in full",
    "/help": "list these commands",
    "/quit": "end the chat (so do Ctrl-D and Ctrl-C)",
}
PROMPT = "> "


def chat(db, *, k: int = 8, model: str | None = None, conversation: str | None = None,
         follow_up: bool = False, stdin=None, stdout=None) -> int:
    """Run the loop until /quit, Ctrl-D or Ctrl-C; the exit code."""
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    _readline(stdin)
    # Everything that may start a thread, imports included: importing numpy (which
    # conversation.py does) starts OpenBLAS's, and one thread left open to SIGINT made
    # Ctrl-C at the prompt do nothing now and then (make test under a CPU hog).
    with _main_thread_takes_ctrl_c():
        from brainbot.ask.conversation import Thread, Unsaved
        from brainbot.search.searcher import Searcher

        thread = Thread.open(db, conversation, follow_up, Unsaved("until this chat ends"))
        searcher = Searcher(db)
        _warm(searcher)
    with searcher:
        _say(stdout, "brainbot chat: ask about your notes; each question follows up on the "
                     "ones before. /help lists the commands.")
        if thread.turns:
            _say(stdout, f"continuing conversation {thread.id} ({len(thread.turns)} turns)")
        elif thread.unread:  # the first answer says it again, with whether it was saved
            _say(stdout, f"note: the conversations could not be read, so this is a new "
                         f"conversation: {thread.unread}")
        session = _Session(thread, searcher, stdout, dict(db=db, k=k, model=model))
        try:
            session.loop(stdin)
        except KeyboardInterrupt:
            _say(stdout, "\n(interrupted: that question is not answered, nor saved)"
                 if session.asking else "")
    return 0


def _warm(searcher) -> None:
    """One search, which starts numpy's, the kernel's and onnxruntime's threads."""
    from brainbot.errors import BrainbotError

    try:
        searcher.search("warm up", 1)
    except BrainbotError:  # an empty index, say: the first question will say so
        pass


class _Session:
    def __init__(self, thread, searcher, out, ask_kw: dict) -> None:
        self.thread, self.searcher, self.out, self.ask_kw = thread, searcher, out, ask_kw
        self.last = None  # the last Answer
        self.asking = False  # an answer is on its way

    def loop(self, stdin) -> None:
        while True:
            line = _read(stdin, self.out)
            if line is None or line.strip().lower() in ("/quit", "/exit"):
                return
            if line.strip().startswith("/"):
                self.command(line.strip().split()[0].lower())
            elif line.strip():
                self.ask(line.strip())

    def command(self, name: str) -> None:
        if name == "/new":
            self.thread.restart()
            self.last = None
            _say(self.out, f"new conversation {self.thread.id}")
        elif name == "/sources":
            _say(self.out, sources(self.last) if self.last else "no answer yet")
        elif name == "/help":
            _say(self.out, "\n".join(f"{c:<9} {what}" for c, what in COMMANDS.items()))
        else:
            _say(self.out, f"unknown command {name}; /help lists the commands")

    def ask(self, question: str) -> None:
        from brainbot.ask.terminal import format_answer
        from brainbot.errors import BrainbotError

        self.asking = True
        try:
            answer = self.thread.ask(question, searcher=self.searcher, out=self.out,
                                     stream=_is_tty(self.out), **self.ask_kw)
        except BrainbotError as exc:  # an API error: say it, the chat goes on
            self.asking = False
            _say(self.out, f"error: {exc}")
            return
        self.asking = False  # (Ctrl-C while asking leaves it set: chat() says so)
        self.last = answer
        _say(self.out, format_answer(answer))
        if answer.conversation_note:
            _say(self.out, f"note: {answer.conversation_note}")


def sources(answer) -> str:
    """The last answer's citations with the whole text each quotes."""
    from brainbot.render import printable

    if not answer.citations:
        return "the last answer cited nothing"
    lines = [f"searched: {answer.searched}"] if answer.searched != answer.question else []
    for c in answer.citations:
        head = f" ({' > '.join(c.heading_path)})" if c.heading_path else ""
        lines += [f"[{c.n}] {c.location}{head}"] + [f"    {x}" for x in c.cited_text.split("\n")]
    return printable("\n".join(lines), keep_newlines=True)


def listing_line(c) -> str:
    """One conversation as `brainbot conversations` lists it."""
    return (f"{c.id}  {c.started[:16].replace('T', ' ')}  {c.turns:>3} "
            f"turn{'s' if c.turns != 1 else ' '}  {c.first_question}")


def turn_lines(turn) -> str:
    """A saved turn as `brainbot conversations show` prints it."""
    lines = [f"[{turn.n}] {turn.asked_at[:19].replace('T', ' ')}  {turn.question}",
             f"    {turn.answer}"]
    for c in turn.citations:
        lines.append(f"    [{c.get('n')}] {c.get('path')}:{c.get('start_line')}-"
                     f"{c.get('end_line')}")
    return "\n".join(lines)


@contextmanager
def _main_thread_takes_ctrl_c():
    """Start the helper threads (numpy's BLAS, onnxruntime's pool) with SIGINT blocked, so
    that Ctrl-C reaches the main thread: a SIGINT delivered to a helper thread leaves the
    main thread asleep in readline, and the chat would not notice it."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):  # Windows: Ctrl-C reaches the main thread
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _read(stdin, out) -> str | None:
    """One line, or None at the end of input (Ctrl-D)."""
    if stdin is sys.stdin and out is sys.stdout:
        try:
            return input(PROMPT)  # readline's editing when stdin is a terminal
        except EOFError:
            out.write("\n")
            return None
    out.write(PROMPT)
    out.flush()
    line = stdin.readline()
    return line if line else None


def _readline(stdin) -> None:
    """Line editing and history for input(), where the platform has readline."""
    if stdin is sys.stdin and stdin.isatty():
        try:
            import readline  # noqa: F401 - importing it is what turns editing on
        except ImportError:  # Windows without pyreadline: plain input still works
            pass


def _say(out, text: str) -> None:
    from brainbot.render import printable

    out.write(printable(text, keep_newlines=True) + "\n")
    out.flush()


def _is_tty(out) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
