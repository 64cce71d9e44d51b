"""The Claude client: construction, the model name, which server it talks to and what that
server takes (``Server``), every call streamed, retries, read timeouts, and API errors as
one-line AnswerErrors. The answering agent, the LLM re-ranker and doctor's probe all call
the model through here, so all retry, time out and fail the same way.

Which server: the SDK's base URL (``ANTHROPIC_BASE_URL``). Anthropic's own API takes
``search_result`` blocks and cites them; Ollama (>= 0.14), llama.cpp's llama-server and
LM Studio speak the same Messages API but drop those blocks without a word and never
return citations (issue 42), so anything but api.anthropic.com gets the passages as
numbered text and is asked to quote them (``ask/citations.py`` checks the quotes), and
answers in one step without tools. Each choice has a setting that overrides it:
BRAINBOT_CITATIONS (search_results | text), BRAINBOT_TOOLS (on | off),
BRAINBOT_READ_TIMEOUT (seconds with no event from the server before it counts as gone),
BRAINBOT_RETRIES (attempts after the first, for failures before any text came),
BRAINBOT_MAX_TOKENS (the cap of one reply: a model that never stops is cut there).

Every call streams, so a slow local model that is still writing never times out: the
read timeout is between two events, not for the whole answer. A failure after text came
is reported as an interrupted answer and never retried from scratch.

The API key is read by the SDK from its own configuration (``ANTHROPIC_API_KEY``, its
profiles); brainbot never reads, logs, prints or stores it, and scrubs it from error
messages. This module knows nothing of notes or answers.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from brainbot.errors import AnswerError, InputError

# The newest Sonnet that the search-results documentation lists as supporting
# search_result blocks with citations (platform.claude.com/docs, "Search results").
DEFAULT_MODEL = "claude-sonnet-4-6"
MODEL_ENV = "BRAINBOT_MODEL"
CITATIONS_ENV = "BRAINBOT_CITATIONS"
TOOLS_ENV = "BRAINBOT_TOOLS"
READ_TIMEOUT_ENV = "BRAINBOT_READ_TIMEOUT"
RETRIES_ENV = "BRAINBOT_RETRIES"
MAX_TOKENS_ENV = "BRAINBOT_MAX_TOKENS"
MAX_TOKENS = 1024  # per reply: answers are a few cited sentences
ANTHROPIC_HOST = "api.anthropic.com"  # the SDK's default base URL
CITATION_MODES = ("search_results", "text")
# Anthropic's API: the SDK retries 408/409/429/5xx/529 and connection errors itself (its
# default is 2; 3 was brainbot's before issue 42); an overload inside a stream is retried
# here the same number of times, while no text has come.
MAX_RETRIES = 3
# A local server is on this machine: a refused connection will not heal in seconds, and a
# retry after a timeout would start a long generation again from scratch (issue 42).
LOCAL_RETRIES = 0
# Seconds with nothing read from the server. The API sends a ping event every few seconds
# while it works (its streaming docs), so a minute of silence is a dead connection.
READ_TIMEOUT_S = 60.0
# A local server sends nothing while it reads the prompt: issue 42 measured 20-150 s for a
# whole non-streamed answer of a small model on a CPU; a 7B model reading a 3k-token
# prompt at 10-30 tokens/s on a CPU takes 100-300 s before its first token.
LOCAL_READ_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0  # a server on this machine or the API's front door: seconds
TIMEOUT_S = READ_TIMEOUT_S  # the name the re-ranker's tests knew


@dataclass(frozen=True)
class Server:
    """The model server a client talks to, and what brainbot does with it."""

    url: str
    anthropic: bool  # Anthropic's own API (search_result blocks, citations, tool_choice)
    citations: str  # "search_results" or "text" (CITATION_MODES)
    tools: bool  # whether the model may call search_notes and read_note
    read_timeout: float
    retries: int
    why: str  # how the citation mode was chosen, in words
    max_tokens: int = MAX_TOKENS  # the cap of one reply

    @property
    def name(self) -> str:
        return "the Anthropic API" if self.anthropic else f"the model server at {self.url}"


def base_url(client=None) -> str:
    """The client's base URL, else the one the SDK would use."""
    if client is not None and getattr(client, "base_url", None) is not None:
        return str(client.base_url).rstrip("/")
    return (os.environ.get("ANTHROPIC_BASE_URL") or f"https://{ANTHROPIC_HOST}").rstrip("/")


def server(client=None) -> Server:
    """What brainbot does with the server of ``client`` (or of the SDK's settings): the
    settings first, then what the server's address says."""
    url = base_url(client)
    anthropic = (urlsplit(url).hostname or "").lower() == ANTHROPIC_HOST
    citations = _choice(CITATIONS_ENV, CITATION_MODES)
    why = f"{CITATIONS_ENV}={citations}" if citations else (
        "the server is Anthropic's API" if anthropic
        else "the server is not Anthropic's API (it may drop search_result blocks)")
    citations = citations or ("search_results" if anthropic else "text")
    tools = _choice(TOOLS_ENV, ("on", "off"))
    read_timeout = _number(READ_TIMEOUT_ENV, float, READ_TIMEOUT_S if anthropic
                           else LOCAL_READ_TIMEOUT_S)
    retries = _number(RETRIES_ENV, int, MAX_RETRIES if anthropic else LOCAL_RETRIES)
    max_tokens = _number(MAX_TOKENS_ENV, int, MAX_TOKENS)
    if max_tokens < 1:
        raise InputError(f"{MAX_TOKENS_ENV}={max_tokens} is not a count of tokens")
    return Server(url, anthropic, citations,
                  tools == "on" if tools else citations == "search_results",
                  read_timeout, retries, why, max_tokens)


def _choice(name: str, allowed: tuple[str, ...]) -> str | None:
    value = os.environ.get(name, "").strip().lower()
    if value and value not in allowed:
        raise InputError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return value or None


def _number(name: str, kind, default):
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(value)
    except ValueError:
        number = -1
    if number < 0 or (kind is float and not 0 < number < 1e6):
        raise InputError(f"{name}={value!r} is not a {'number of seconds' if kind is float else 'count'}")
    return number


def model_name(override: str | None = None) -> str:
    """--model, else $BRAINBOT_MODEL, else DEFAULT_MODEL."""
    return override or os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def make_client():
    """An SDK client that finds its own credentials and base URL (ANTHROPIC_API_KEY, the
    SDK's profiles); brainbot never reads or stores the key itself. Its retries and read
    timeout are the server's (``server``)."""
    import anthropic

    try:
        probe = anthropic.Anthropic(max_retries=0)
    except anthropic.AnthropicError as exc:  # a broken profile the user configured
        raise AnswerError(f"the Anthropic SDK cannot load its credentials: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    spec = server(probe)
    return probe.with_options(max_retries=spec.retries, timeout=anthropic.Timeout(
        spec.read_timeout, connect=min(CONNECT_TIMEOUT_S, spec.read_timeout)))


def may_have_credentials() -> bool:
    """Whether the SDK could find credentials, decided without importing it (its import
    is most of an offline ``ask``'s start-up): it reads them only from ANTHROPIC_*
    environment variables and from its config directory (``~/.config/anthropic``,
    ``%APPDATA%\\Anthropic``). False means none; True means ask the SDK."""
    if any(name.startswith("ANTHROPIC_") for name in os.environ):
        return True
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
        return (base / "Anthropic").exists()
    return (Path.home() / ".config" / "anthropic").exists()


def has_credentials(client) -> bool:
    """Whether the SDK found any way to authenticate (key, token or profile)."""
    return any(getattr(client, name, None) for name in ("api_key", "auth_token", "credentials"))


def create(client, **params):
    """One model call, streamed (``stream``), with nothing shown as it comes."""
    return stream(client, params)


# The error types a stream may end with that mean "busy or failed, try again" (the API's
# errors docs: overloaded_error is its 529, api_error its 500).
RETRYABLE_IN_STREAM = ("overloaded_error", "api_error")


def stream(client, params: dict, on_text=None):
    """The message of one streamed call; ``on_text(piece)`` gets its text as it comes.
    Every SDK failure is a one-line AnswerError. An overload or server error inside the
    stream is retried (up to the client's max_retries) while no text has come, and once
    text has come it is reported as an interrupted answer: a long generation is never
    started again from scratch."""
    import anthropic

    retries = max(0, int(getattr(client, "max_retries", MAX_RETRIES) or 0))
    for attempt in range(retries + 1):
        shown = [False]
        try:
            return _stream_once(client, params, on_text, shown)
        except anthropic.APIStatusError as exc:
            kind = _error_type(exc)
            if kind not in RETRYABLE_IN_STREAM or getattr(exc, "status_code", 0) != 200:
                raise api_error(exc, client) from None
            if shown[0] or attempt == retries:
                raise stream_error(exc, client, shown[0], attempt) from None
            time.sleep(min(8.0, 0.5 * 2 ** attempt))  # the SDK's own backoff for a 529
        except anthropic.APIError as exc:
            if shown[0]:
                raise interrupted(exc, client) from None
            raise api_error(exc, client) from None
        except ValueError as exc:  # a body that is not JSON, or JSON of the wrong shape
            raise malformed(exc) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _stream_once(client, params: dict, on_text, shown: list):
    with client.messages.stream(**params) as events:
        for event in events:
            if event.type == "text" and event.text:
                shown[0] = True
                if on_text is not None:
                    on_text(event.text)
        try:
            msg = events.get_final_message()
        except AssertionError:  # the SDK's check that a message_start came
            raise AnswerError(f"{server(client).name} sent a malformed response (not a "
                              "message stream)") from None
    if isinstance(msg, str) or not hasattr(msg, "content"):
        raise AnswerError(f"{server(client).name} sent a response that is not a message")
    return msg


def _error_type(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("type") or "")
    return ""


def stream_error(exc, client, shown: bool, attempt: int) -> AnswerError:
    """An overload or server error that came inside a stream, worded as its status would
    be (529 or 500), never as a refusal with the stream's 200."""
    where = server(client).name
    said = "overloaded" if _error_type(exc) == "overloaded_error" else "failed"
    if shown:
        return AnswerError(f"the answer was interrupted: {where} {said} mid-answer "
                           f"({_detail(exc)}); ask again")
    if said == "overloaded":
        return AnswerError(f"{where} is overloaded ({_error_type(exc)} in the stream) after "
                           f"{attempt} retries; try again later")
    return AnswerError(f"{where} failed ({_error_type(exc)} in the stream) after {attempt} "
                       f"retries: {_detail(exc)}")


def interrupted(exc, client) -> AnswerError:
    """A stream that broke after its text began: the words so far are not an answer."""
    import anthropic

    spec = server(client)
    if isinstance(exc, anthropic.APITimeoutError):
        why = (f"{spec.name} sent nothing for {_read_timeout(client):g} s "
               f"({READ_TIMEOUT_ENV} sets how long to wait)")
    else:
        why = f"{spec.name} stopped mid-answer ({_detail(exc)})"
    return AnswerError(f"the answer was interrupted: {why}")


def _read_timeout(client) -> float:
    timeout = getattr(client, "timeout", None)
    read = getattr(timeout, "read", timeout)
    return float(read) if isinstance(read, (int, float)) else server(client).read_timeout


def malformed(exc: Exception) -> AnswerError:
    return AnswerError("the Anthropic API sent a malformed response: "
                       f"{' '.join(str(exc).split())[:200]}")


def api_error(exc, client=None) -> AnswerError:
    """One line for an SDK error, after the SDK's own retries; never the key."""
    import anthropic

    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    retries = getattr(client, "max_retries", MAX_RETRIES)
    where = server(client).name
    if isinstance(exc, anthropic.AuthenticationError):
        msg = (f"{where} rejected the API key (401); check ANTHROPIC_API_KEY"
               + ("" if where == "the Anthropic API" else " (any value, if it takes none)"))
    elif isinstance(exc, anthropic.RateLimitError):
        msg = f"{where} is rate-limiting requests (429) after {retries} retries; try again later"
    elif status == 529:
        msg = f"{where} is overloaded (529) after {retries} retries; try again later"
    elif isinstance(exc, anthropic.APITimeoutError):
        msg = (f"{where} sent nothing for {_read_timeout(client):g} s ({retries} retries; "
               f"{READ_TIMEOUT_ENV} sets how long to wait)")
    elif isinstance(exc, anthropic.APIConnectionError):
        msg = f"cannot reach {where} after {retries} retries: {detail}"
    elif isinstance(exc, anthropic.APIResponseValidationError):
        msg = f"{where} sent a malformed response: {detail}"
    elif status is not None and status >= 500:
        msg = f"{where} failed ({status}) after {retries} retries: {detail}"
    elif status == 404 and not where.startswith("the Anthropic"):
        msg = (f"{where} does not know the model or the path (404): {detail}; set "
               f"{MODEL_ENV} to a model it serves")
    elif status is not None:
        msg = f"{where} refused the request ({status}): {detail}"
    else:
        msg = f"the call to {where} failed: {detail}"
    for secret in (getattr(client, "api_key", None), getattr(client, "auth_token", None)):
        if isinstance(secret, str) and secret:
            msg = msg.replace(secret, "***")
    return AnswerError(" ".join(msg.split())[:300])


def _detail(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        text = str(body["error"].get("message") or body["error"].get("type") or "")
    else:
        text = str(getattr(exc, "message", "") or exc.__class__.__name__)
        cause = exc.__cause__
        if cause is not None and "Connection error" in text:
            text = f"{text[:-1] if text.endswith('.') else text} ({cause.__class__.__name__})"
    # One line; not escaped here: an AnswerError reaches a terminal only through the
    # CLI's error line, which escapes it (render.printable), and MCP sends it as JSON.
    return " ".join(text.split())[:200]
