"""What the configured model server does with what brainbot sends: `brainbot doctor`'s
probe of it (issue 42).

Four small questions, each a tiny request (under 300 tokens in all):
- does a search result reach the model? ``count_tokens`` of one request with and without
  a ``search_result`` block: a server that drops the block counts the same for both;
- does it stream? a one-word reply, streamed: did text events come;
- does it stop? did that reply end on its own before its 32-token cap (a base model
  without a chat template never does);
- does it call tools? asked to search with a search_notes tool, did a tool_use with a
  query come back.

Then, in plain words, what an ask will do with this server (model/claude.py's ``Server``)
and what to set if that is wrong. A question the server cannot answer (no count_tokens on
Ollama, a refused request) is reported as unknown, never as a failure of brainbot. This
module knows nothing of notes or indexes and prints nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brainbot.errors import AnswerError

from . import claude

# A reply this long is the probe's "does it stop" bound: "ready" is one or two tokens, so
# a model that is still writing at 32 does not stop where a chat model would.
STOP_TOKENS = 32
TOOL_TOKENS = 128  # a tool call's JSON for one short query, with room to spare
# A probe question waits this long between events at most, whatever the ask's own read
# timeout: a one-word reply to a 20-token prompt needs no long prompt reading.
PROBE_READ_S = 60.0
PASSAGE = ("The sourdough starter lives on the counter in summer and is fed twice a day, "
           "at nine in the morning and nine at night, with equal weights of flour and water.")
SEARCH_TOOL = {"name": "search_notes", "description": "Search the user's notes.",
               "input_schema": {"type": "object", "properties": {
                   "query": {"type": "string", "description": "what to look for"}},
                   "required": ["query"]}}


@dataclass
class Probe:
    """What the server did; None: it could not be told (with the reason in ``notes``)."""

    server: claude.Server
    model: str
    tokens: tuple[int, int] | None = None  # count_tokens without, with the search result
    streams: bool | None = None
    stops: bool | None = None
    tools: bool | None = None
    error: str | None = None  # the server could not be used at all
    notes: dict = field(default_factory=dict)

    @property
    def reached(self) -> bool | None:
        """Whether a search result reached the model (its tokens were counted)."""
        if self.tokens is None:
            return None
        return self.tokens[1] > self.tokens[0] + 10


def run(client, model: str) -> Probe:
    """Ask the server the four questions; a failure to reach it at all ends the probe."""
    import anthropic

    spec = claude.server(client)
    client = client.with_options(max_retries=0, timeout=anthropic.Timeout(
        min(PROBE_READ_S, spec.read_timeout), connect=claude.CONNECT_TIMEOUT_S))
    found = Probe(spec, model)
    try:
        _stream_and_stop(client, found)
    except AnswerError as exc:
        found.error = str(exc)
        return found
    _count(client, found)
    _tools(client, found)
    return found


def _question(extra: list[dict] = ()) -> list[dict]:
    return [{"role": "user", "content": [*extra, {"type": "text", "text": "Reply with the "
                                                  "single word: ready"}]}]


def _count(client, found: Probe) -> None:
    block = {"type": "search_result", "source": "notes/sourdough.md:1-2", "title": "Sourdough",
             "content": [{"type": "text", "text": PASSAGE}], "citations": {"enabled": True}}
    try:
        bare = client.messages.count_tokens(model=found.model, messages=_question())
        full = client.messages.count_tokens(model=found.model, messages=_question([block]))
        found.tokens = (int(bare.input_tokens), int(full.input_tokens))
    except Exception as exc:  # noqa: BLE001 - any failure only means "cannot tell"
        found.notes["count_tokens"] = _short(exc)


def _stream_and_stop(client, found: Probe) -> None:
    pieces: list[str] = []
    msg = claude.stream(client, {"model": found.model, "max_tokens": STOP_TOKENS,
                                 "messages": _question()}, pieces.append)
    found.streams = bool(pieces)
    found.stops = msg.stop_reason in ("end_turn", "stop_sequence")
    found.notes["reply"] = "".join(pieces)[:80]


def _tools(client, found: Probe) -> None:
    ask = [{"role": "user", "content": "Use the search_notes tool to look up how often I "
                                       "feed my sourdough starter."}]
    try:
        msg = claude.stream(client, {"model": found.model, "max_tokens": TOOL_TOKENS,
                                     "tools": [SEARCH_TOOL], "messages": ask})
    except AnswerError as exc:
        found.notes["tools"] = str(exc)
        return
    uses = [b for b in msg.content if getattr(b, "type", None) == "tool_use"]
    found.tools = any(isinstance(u.input, dict) and isinstance(u.input.get("query"), str)
                      and u.input["query"].strip() for u in uses)


def _short(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    text = " ".join(str(exc).split())[:120]
    return f"{status}: {text}" if status else text


def verdicts(found: Probe) -> list[tuple[str, bool, str, str]]:
    """(name, ok, detail, fix) of each finding, in plain words."""
    spec = found.server
    if found.error:
        return [("model server", False, f"{spec.url}: {found.error}",
                 "start the server, or set ANTHROPIC_BASE_URL and BRAINBOT_MODEL to one "
                 "that runs (a key-less local server takes any ANTHROPIC_API_KEY)")]
    out = [("model server", True, f"{spec.name}, model {found.model}", "")]
    out.append(_reach_verdict(found))
    out.append(("streams", bool(found.streams),
                "text streams as the model writes it" if found.streams else
                "no text came as it was written", "check the server's /v1/messages support"))
    out.append(("stops", True, "the model ends its reply on its own" if found.stops else
                f"the model did not stop within {STOP_TOKENS} tokens (a base model without "
                "a chat template?): each answer runs to its max_tokens cap before it is "
                "checked", ""))
    out.append(_tools_verdict(found))
    return out


def _reach_verdict(found: Probe) -> tuple[str, bool, str, str]:
    spec, reached = found.server, found.reached
    counted = (f" ({found.tokens[0]} tokens without one, {found.tokens[1]} with)"
               if found.tokens else f" (count_tokens: {found.notes.get('count_tokens')})")
    if spec.citations == "text":
        said = {True: "a search result reaches the model", False: "search results are "
                "dropped by this server", None: "cannot tell whether search results reach "
                "the model"}[reached]
        return ("citations", True, f"{said}{counted}; asks send the passages as numbered "
                f"text and keep only quotes found in them ({spec.why})", "")
    if reached is False:
        return ("citations", False, f"search results are dropped by this server{counted}, "
                "so no answer could ever be cited", "BRAINBOT_CITATIONS=text")
    said = "a search result reaches the model" if reached else "cannot tell whether search " \
        "results reach the model"
    return ("citations", True, f"{said}{counted}; asks send search results and keep the "
            f"citations the API returns ({spec.why})", "")


def _tools_verdict(found: Probe) -> tuple[str, bool, str, str]:
    spec, works = found.server, found.tools
    how = {True: "the model called search_notes when asked", False: "the model did not call "
           "search_notes when asked", None: f"cannot tell ({found.notes.get('tools')})"}[works]
    if spec.tools and works is False:
        return ("tools", False, f"{how}; asks offer it the tools all the same",
                "BRAINBOT_TOOLS=off (one grounded step, no tools)")
    if spec.tools:
        return ("tools", True, f"{how}; asks let it search again and read notes", "")
    hint = "; BRAINBOT_TOOLS=on would let it search again" if works else ""
    return ("tools", True, f"{how}; asks answer in one grounded step without tools{hint}", "")
