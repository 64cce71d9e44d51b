"""Shared by the conversation tests that go through the CLI (test_conversations_unsaved,
test_pg_conversations): a conversation on examples/notes, its first question and its
follow-up, and `brainbot ask --json` run offline in a subprocess.

Offline is the CLI's environment (reliability_kit.cli_env) without ANTHROPIC_*: the
extractive answer, so a test never reaches a network model. Nothing here builds an index
or checks what an answer says.
"""

from __future__ import annotations

import json

from reliability_kit import cli_env, run_cli

# A question on examples/notes and a follow-up that only its conversation answers
# ("3 months", in cooking/ramen.md).
STARTER = "How do I make the tare for my shoyu ramen?"
FOLLOW = "how long does it keep?"


def offline() -> dict:
    """The CLI's environment with no Anthropic key or endpoint."""
    return {k: v for k, v in cli_env().items() if not k.startswith("ANTHROPIC")}


def ask(db, *args) -> dict:
    """`brainbot ask *args --db db --json`, offline: its JSON (the exit must be 0)."""
    r = run_cli("ask", *args, "--db", db, "--json", env=offline())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
