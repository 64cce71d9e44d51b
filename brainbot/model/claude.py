"""The Claude client: construction, the model name, retries, timeouts, and API errors as
one-line AnswerErrors. The answering agent and the LLM re-ranker both call Claude through
here, so both retry, time out and fail the same way.

The API key is read by the SDK from its own configuration (``ANTHROPIC_API_KEY``, its
profiles); brainbot never reads, logs, prints or stores it, and scrubs it from error
messages. This module knows nothing of notes or answers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from brainbot.errors import AnswerError

# The newest Sonnet that the search-results documentation lists as supporting
# search_result blocks with citations (platform.claude.com/docs, "Search results").
DEFAULT_MODEL = "claude-sonnet-4-6"
MODEL_ENV = "BRAINBOT_MODEL"
MAX_RETRIES = 3  # the SDK retries 408/409/429/5xx/529 and connection errors itself
TIMEOUT_S = 60.0


def model_name(override: str | None = None) -> str:
    """--model, else $BRAINBOT_MODEL, else DEFAULT_MODEL."""
    return override or os.environ.get(MODEL_ENV) or DEFAULT_MODEL


def make_client():
    """An SDK client that finds its own credentials and base URL (ANTHROPIC_API_KEY, the
    SDK's profiles); brainbot never reads or stores the key itself."""
    import anthropic

    try:
        return anthropic.Anthropic(max_retries=MAX_RETRIES, timeout=TIMEOUT_S)
    except anthropic.AnthropicError as exc:  # a broken profile the user configured
        raise AnswerError(f"the Anthropic SDK cannot load its credentials: "
                          f"{' '.join(str(exc).split())[:200]}") from None


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
    """messages.create with every SDK failure as a one-line AnswerError."""
    import anthropic

    try:
        msg = client.messages.create(**params)
    except anthropic.APIError as exc:
        raise api_error(exc, client) from None
    except ValueError as exc:  # a body that is not JSON, or JSON of the wrong shape
        raise malformed(exc) from None
    if isinstance(msg, str) or not hasattr(msg, "content"):
        raise AnswerError("the Anthropic API sent a response that is not a message")
    return msg


def malformed(exc: Exception) -> AnswerError:
    return AnswerError("the Anthropic API sent a malformed response: "
                       f"{' '.join(str(exc).split())[:200]}")


def api_error(exc, client=None) -> AnswerError:
    """One line for an SDK error, after the SDK's own retries; never the key."""
    import anthropic

    status = getattr(exc, "status_code", None)
    detail = _detail(exc)
    retries = getattr(client, "max_retries", MAX_RETRIES)
    if isinstance(exc, anthropic.AuthenticationError):
        msg = "the Anthropic API rejected the API key (401); check ANTHROPIC_API_KEY"
    elif isinstance(exc, anthropic.RateLimitError):
        msg = f"the Anthropic API is rate-limiting requests (429) after {retries} retries; try again later"
    elif status == 529:
        msg = f"the Anthropic API is overloaded (529) after {retries} retries; try again later"
    elif isinstance(exc, anthropic.APITimeoutError):
        msg = f"the Anthropic API did not answer within {TIMEOUT_S:.0f} s ({retries} retries)"
    elif isinstance(exc, anthropic.APIConnectionError):
        msg = f"cannot reach the Anthropic API after {retries} retries: {detail}"
    elif isinstance(exc, anthropic.APIResponseValidationError):
        msg = f"the Anthropic API sent a malformed response: {detail}"
    elif status is not None and status >= 500:
        msg = f"the Anthropic API failed ({status}) after {retries} retries: {detail}"
    elif status is not None:
        msg = f"the Anthropic API refused the request ({status}): {detail}"
    else:
        msg = f"the Anthropic API call failed: {detail}"
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
