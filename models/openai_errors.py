"""What went wrong in a model call, told so a user can act on it.

Messages are built here from status codes and never from the server's raw text or an exception's
(which may echo headers or the key); the server's own explanation is quoted cut short and with
the key masked out. Each failure says whether another attempt could help (models/openai_chat.py
decides whether to make it)."""

from __future__ import annotations

import json
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from engine.model_settings import OpenAiSettings
from models.openai_request import safe_url


class Failure(Exception):
    """One failed attempt, described for the user; the model decides whether to retry."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


class StatusError(Exception):
    """The server answered with an error status; `body` is its JSON error object (or text)."""

    def __init__(self, status_code: int, body: Any, headers: Any):
        super().__init__(f"status {status_code}")  # never the body: it may echo the key
        self.status_code = status_code
        self.body = body
        self.headers = headers


class StreamedError(Exception):
    """An `{"error": ...}` event inside the stream."""

    def __init__(self, body: Any):
        super().__init__("an error event in the stream")
        self.body = body


def error_body(response: Any) -> Any:
    """As the SDK read it: the JSON's `error` object if there is one, else the JSON, else the
    text."""
    text = response.text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    return data.get("error", data) if isinstance(data, dict) else data


class Describer:
    """Turns what one attempt raised into a Failure, for one model's settings and key."""

    def __init__(self, settings: OpenAiSettings, api_key: str):
        self.settings = settings
        self._api_key = api_key

    def failure(self, err: BaseException, phase: str, emitted: bool) -> Failure:
        """`phase`: "request" (no answer yet) or "stream" (reading it); `emitted`: whether a
        token already reached the Agent."""
        s = self.settings
        url = safe_url(s.base_url)
        if isinstance(err, httpx.InvalidURL | httpx.UnsupportedProtocol):
            return Failure(f"invalid base URL {url}")  # never the exception's text: it may hold it
        if isinstance(err, httpx.TimeoutException):
            return Failure(f"timed out after {s.timeout:g} s waiting for {url}")
        if isinstance(err, httpx.TransportError):
            if phase == "stream":
                return Failure(
                    f"the connection to {url} was lost mid-stream", retryable=not emitted
                )
            return Failure(f"could not connect to {url}", retryable=True)
        if isinstance(err, StatusError):
            return self._status(err, url)
        if isinstance(err, StreamedError):
            text = self.server_text(err.body)
            return Failure(f"the model reported an error mid-stream: {text}")
        if phase == "stream":  # undecodable SSE data, or chunks of the wrong shape
            return Failure(f"malformed response stream from {url}")
        return Failure(f"unexpected {type(err).__name__} calling {url}")

    def _status(self, err: StatusError, url: str) -> Failure:
        s, status = self.settings, err.status_code
        code = err.body.get("code") if isinstance(err.body, dict) else None
        if status == 401:
            return Failure(
                f'authentication failed (401): check the API key of credential "{s.credential_name}"'
            )
        if status == 403:
            return Failure(
                f'access denied (403) for credential "{s.credential_name}": '
                f"{self.server_text(err.body)}"
            )
        if status == 404:
            text = self.server_text(err.body)
            if code == "model_not_found" or "model" in text.lower():
                return Failure(f'model "{s.model}" not found (404)')
            return Failure(f"{url}/chat/completions not found (404): check the base URL")
        if status == 429 and code == "insufficient_quota":
            return Failure("quota exceeded (429): check the plan and billing of the account")
        if status == 429:
            after = retry_after(err.headers)
            hint = f"; retry after {after:g} s" if after is not None else "; try again later"
            return Failure(f"rate limited (429){hint}", retryable=True, retry_after=after)
        if status >= 500:
            return Failure(f"server error ({status}) from {url}", retryable=True)
        return Failure(f"request rejected ({status}): {self.server_text(err.body)}")

    def server_text(self, body: Any) -> str:
        """The server's own explanation, cut short and with our key masked out of it."""
        text = body.get("message") if isinstance(body, dict) else None
        text = " ".join(str(text or "no details").split())[:300]
        return text.replace(self._api_key, "***") if len(self._api_key) >= 4 else text


def retry_after(headers: Any) -> float | None:
    """The pause a 429 asks for, in seconds: Retry-After-Ms, or Retry-After in seconds or as an
    HTTP date; None if it names none."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(float(value) * scale, 0.0)
        except ValueError:
            pass
    try:  # an HTTP date
        when = parsedate_to_datetime(headers.get("retry-after") or "")
        return max(when.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
