"""`brainbot doctor` probes the configured model server (issue 42): does a search result
reach the model (count_tokens with and without one), does it stream, stop and call
tools, and what will an ask do with it. Played by the fake Messages API as Anthropic's
API and as a local server that drops search_result blocks; the real llama-server's
answers are in tests/test_llama_server.py."""

from __future__ import annotations

import json

import pytest
from fake_anthropic import FakeAnthropic, message, no_credentials, text, tool_use

from brainbot.cli import main


def doctor(capsys, db) -> tuple[int, dict[str, dict]]:
    code = main(["doctor", "--db", str(db), "--json"])
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    return code, checks


def point_at(monkeypatch, fake: FakeAnthropic, citations: str | None = None) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anything")
    monkeypatch.setenv("BRAINBOT_MODEL", "gemma3")
    if citations:
        monkeypatch.setenv("BRAINBOT_CITATIONS", citations)
    else:
        monkeypatch.delenv("BRAINBOT_CITATIONS", raising=False)
    monkeypatch.delenv("BRAINBOT_TOOLS", raising=False)


def base_model(fake: FakeAnthropic) -> None:
    """A model that rambles to its cap and calls tools when asked."""
    fake.push(message(text("ready ready ready ready"), stop_reason="max_tokens"),
              message(tool_use("search_notes", {"query": "sourdough feeding"}),
                      stop_reason="tool_use"))


def test_a_local_server_that_drops_search_results_gets_text_citations(
        capsys, examples_db, monkeypatch):
    with FakeAnthropic(local=True) as fake:
        point_at(monkeypatch, fake)
        base_model(fake)
        code, checks = doctor(capsys, examples_db)
    assert code == 0
    assert checks["model server"]["detail"] == f"the model server at {fake.url}, model gemma3"
    said = checks["citations"]["detail"]
    assert said.startswith("search results are dropped by this server (")
    assert "asks send the passages as numbered text" in said
    assert checks["streams"]["ok"] and "did not stop within 32 tokens" in checks["stops"]["detail"]
    assert checks["tools"]["detail"] == (
        "the model called search_notes when asked; asks answer in one grounded step without "
        "tools; BRAINBOT_TOOLS=on would let it search again")
    probes = fake.bodies
    assert all(b["stream"] is True for b in probes) and probes[0]["max_tokens"] == 32


def test_search_results_forced_on_a_server_that_drops_them_fails_with_the_fix(
        capsys, examples_db, monkeypatch):
    with FakeAnthropic(local=True) as fake:
        point_at(monkeypatch, fake, citations="search_results")
        fake.push(message(text("ready")), message(text("I will not search.")))
        code, checks = doctor(capsys, examples_db)
    assert code == 1
    assert not checks["citations"]["ok"] and checks["citations"]["fix"] == "BRAINBOT_CITATIONS=text"
    assert not checks["tools"]["ok"] and checks["tools"]["fix"].startswith("BRAINBOT_TOOLS=off")
    assert checks["stops"]["detail"] == "the model ends its reply on its own"


def test_a_server_that_takes_search_results_is_told_apart(capsys, examples_db, monkeypatch):
    with FakeAnthropic() as fake:
        point_at(monkeypatch, fake, citations="search_results")
        fake.push(message(text("ready")), message(tool_use("search_notes", {"query": "x"}),
                                                  stop_reason="tool_use"))
        code, checks = doctor(capsys, examples_db)
    assert code == 0
    assert checks["citations"]["detail"].startswith("a search result reaches the model (")
    assert "keep the citations the API returns" in checks["citations"]["detail"]


def test_a_server_that_is_not_there_is_one_failed_check(capsys, examples_db, monkeypatch):
    with FakeAnthropic(local=True) as fake:
        point_at(monkeypatch, fake)
    code, checks = doctor(capsys, examples_db)  # the fake has stopped: nothing listens
    assert code == 1 and not checks["model server"]["ok"]
    assert checks["model server"]["detail"].startswith(f"{fake.url}: cannot reach the model server")
    assert "citations" not in checks


def test_without_credentials_doctor_says_asks_answer_offline(capsys, examples_db, monkeypatch,
                                                             tmp_path):
    no_credentials(monkeypatch, tmp_path)
    code, checks = doctor(capsys, examples_db)
    assert code == 0 and checks["model server"]["detail"].startswith("none configured")


def test_no_server_skips_the_probe(capsys, examples_db, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anything")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert main(["doctor", "--db", str(examples_db), "--json", "--no-server"]) == 0
    names = [c["name"] for c in json.loads(capsys.readouterr().out)["checks"]]
    assert "model server" not in names


@pytest.mark.parametrize("value", ["json", "maybe"])
def test_a_bad_setting_is_a_failed_check_with_its_name(capsys, examples_db, monkeypatch, value):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anything")
    monkeypatch.setenv("BRAINBOT_CITATIONS", value)
    code, checks = doctor(capsys, examples_db)
    assert code == 1 and f"BRAINBOT_CITATIONS={value!r}" in checks["model server"]["detail"]
