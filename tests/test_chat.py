"""`brainbot chat`: driven through its stdin (a pipe) and through a terminal (a pty), offline
and with the local Messages server streaming Claude's answer. Every line follows up on the
ones before; /new, /sources, /help and /quit; Ctrl-D and Ctrl-C end it cleanly."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, index_copy
from fake_anthropic import FakeAnthropic, cite_text, message, search_results, text
from reliability_kit import cli_env

from brainbot.ask.terminal import DRAFT_CLOSED, DRAFT_LABEL
from brainbot.store.target import open_conversations

STARTER = "How do I make the tare for my shoyu ramen?"
FOLLOW = "how long does it keep?"
PROMPT = "> "


def offline() -> dict:
    return {k: v for k, v in cli_env().items() if not k.startswith("ANTHROPIC")}


@pytest.fixture
def db(examples_db, tmp_path) -> Path:
    return index_copy(examples_db, tmp_path / "idx")


def piped(db: Path, lines: list[str], *extra: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainbot", "chat", "--db", str(db), *extra],
                          input="".join(f"{x}\n" for x in lines), cwd=REPO, env=env or offline(),
                          capture_output=True, text=True, timeout=600)


def test_every_line_follows_up_and_the_commands_work(db):
    r = piped(db, [STARTER, FOLLOW, "/sources", "/help", "/bogus", "/new", FOLLOW])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = r.stdout
    answers = out.split("\n" + PROMPT)  # the prompt opens a line; a heading path holds " > "
    assert "3 months" in answers[2]  # "it" is the tare
    assert f"searched: {STARTER} / {FOLLOW}" in answers[3]  # /sources
    assert "cooking/ramen.md:14-14" in answers[3] and "Keeps 3 months in the fridge" in answers[3]
    assert all(c in answers[4] for c in ("/new", "/sources", "/help", "/quit"))
    assert "unknown command /bogus" in answers[5]
    assert "new conversation" in answers[6]
    assert "3 months" not in answers[7]  # a new conversation: "it" is nothing again
    listed = open_conversations(db).listing()
    assert sorted(c.turns for c in listed) == [1, 2]
    assert [c.first_question for c in listed if c.turns == 2] == [STARTER]


def test_chat_continues_a_conversation_and_ends_at_quit(db):
    first = piped(db, [STARTER])
    assert first.returncode == 0
    (cid,) = [c.id for c in open_conversations(db).listing()]
    r = piped(db, [FOLLOW, "/quit", "never asked"], "--follow-up")
    assert f"continuing conversation {cid} (1 turns)" in r.stdout and "3 months" in r.stdout
    assert [t.question for t in open_conversations(db).turns(cid)] == [STARTER, FOLLOW]
    r = piped(db, ["/quit"], "--conversation", "nope")
    assert r.returncode == 2 and "no conversation 'nope'" in r.stderr


class Terminal:
    """`brainbot chat` with a pseudo-terminal for its stdin, stdout and controlling tty."""

    def __init__(self, db: Path, env: dict) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the chat, its terminal the pty
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "brainbot", "chat", "--db",
                                       str(db)], env)
        self.seen = ""

    def read_until(self, needle: str, timeout: float = 300) -> str:
        """Everything the terminal shows up to ``needle`` (waits for it to appear)."""
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            assert time.monotonic() < deadline, f"no {needle!r} in {self.seen[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    assert needle in self.seen, f"ended without {needle!r}: {self.seen!r}"
                self.seen += chunk.decode("utf-8", "replace")
        head, _, self.seen = self.seen.partition(needle)
        return head

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def wait_reading(self, timeout: float = 60) -> None:
        """Wait until the chat's main thread sleeps waiting for the terminal. A Ctrl-C
        typed the moment the prompt shows can land between readline printing it and its
        select() (CPython's call_readline): the handler only sets a flag, and select() then
        sleeps on until the next key. Seen under a CPU hog; a person is never that fast."""
        path = Path(f"/proc/{self.pid}/syscall")
        if not path.exists():  # not Linux: nothing to read the wait from
            return
        deadline = time.monotonic() + timeout
        # select, poll, pselect6, ppoll: where readline waits for a key
        while path.read_text().split()[0] not in ("23", "7", "270", "271"):
            assert time.monotonic() < deadline, "the chat never waited for a key"
            time.sleep(0.02)

    def threads_open_to_sigint(self) -> list[int]:
        """The chat's threads that do not block SIGINT (Linux: /proc/PID/task)."""
        open_ = []
        for status in Path(f"/proc/{self.pid}/task").glob("*/status"):
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
            if not int(fields["SigBlk"], 16) & (1 << (signal.SIGINT - 1)):
                open_.append(int(status.parent.name))
        return open_

    def exit_code(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:  # keep the terminal drained so the child never blocks writing
                if select.select([self.fd], [], [], 0.2)[0]:
                    self.seen += os.read(self.fd, 65536).decode("utf-8", "replace")
            except OSError:
                time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError(f"chat did not end: {self.seen!r}")


def test_in_a_terminal_claude_streams_and_ctrl_d_ends_it(db):
    def reply(body):
        i = next(i for i, b in enumerate(search_results(body))
                 if "Keeps 3 months" in "".join(c["text"] for c in b["content"]))
        return message(text("The tare keeps three months in the fridge.",
                            [cite_text(body, i, "Keeps 3 months")]))

    with FakeAnthropic() as fake:
        fake.push(reply)
        env = {**offline(), "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key",
               "TERM": "dumb"}
        chat = Terminal(db, env)
        chat.read_until("\n" + PROMPT)
        chat.type(STARTER + "\n")
        shown = chat.read_until("\n" + PROMPT)  # the prompt again: answered
        chat.type("\x04")  # Ctrl-D on an empty line
        assert chat.exit_code() == 0
    assert json.loads(json.dumps(fake.bodies[0]))["stream"] is True
    # the streamed text is a draft, closed by a line on a terminal that cannot erase it
    # (TERM=dumb), then the checked answer is printed whole with the sources it cited
    said = "The tare keeps three months in the fridge."
    draft, closed = shown.index(DRAFT_LABEL), shown.index(DRAFT_CLOSED)
    assert draft < shown.index(said) < closed
    assert shown.index(said + " [1]", closed) < shown.index("[1] cooking/ramen.md:14-14")
    assert shown.count(said) == 2
    assert "Traceback" not in chat.seen
    (conv,) = open_conversations(db).listing()
    assert conv.turns == 1


HOLD = """
import threading
from brainbot.ask import extractive
def wait(*args, **kwargs):
    print("answering", flush=True)
    threading.Event().wait()
extractive.extractive_answer = wait
"""


def test_in_a_terminal_ctrl_c_ends_it_cleanly_at_the_prompt_and_mid_answer(db, tmp_path):
    chat = Terminal(db, {**offline(), "TERM": "dumb"})
    chat.read_until("\n" + PROMPT)
    chat.wait_reading()
    if Path("/proc/self/task").exists():  # a SIGINT may go to any thread that takes it:
        assert chat.threads_open_to_sigint() == [chat.pid]  # only the one in readline
    chat.type("\x03")  # Ctrl-C at the prompt
    assert chat.exit_code() == 0 and "Traceback" not in chat.seen

    (tmp_path / "sitecustomize.py").write_text(HOLD, encoding="utf-8")  # an answer held
    env = {**offline(), "TERM": "dumb",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    chat = Terminal(db, env)
    chat.read_until("\n" + PROMPT)
    chat.type(STARTER + "\n")
    chat.read_until("answering")
    chat.type("\x03")  # Ctrl-C while the answer is coming
    assert chat.exit_code() == 0
    assert "interrupted" in chat.seen and "Traceback" not in chat.seen
    assert open_conversations(db).count() == 0  # the unanswered question is not saved
