"""A streaming client for OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, LM Studio...):
the model the OpenAI Chat Model node (engine/nodes/lm_chat_openai.py) hands the Agent, built by
the runner's ModelClients (models/clients.py).

The model always streams: the request (models/openai_request.py) is one POST of a plain JSON
body, the answer is read by a pump beside the caller (models/pump.py) and parsed as server-sent
events (models/openai_stream.py), text pieces going to the Agent's `on_token` as they arrive. No
SDK: the `openai` SDK's typed request and response layers cost a large share of a worker's CPU
per chat message and bought nothing this path reads (docs/performance.md).

Failures become NodeExecutionError messages a user can act on (models/openai_errors.py). Retries
happen only where they cannot duplicate output: before any token reached the Agent, never for
401/404/timeouts.
"""

from __future__ import annotations

import logging
import queue
import time
from typing import TYPE_CHECKING, Any

from core import jsontext
from engine.errors import ExecutionCanceled, NodeExecutionError
from engine.llm import Cancellation, TokenCallback, Tool
from engine.model_settings import OpenAiSettings
from memory.messages import ChatMessage
from models.openai_errors import Describer, Failure
from models.openai_request import request_body, safe_url
from models.openai_stream import Answer
from models.pump import Pump

if TYPE_CHECKING:
    from models.clients import ModelClients

log = logging.getLogger(__name__)

MAX_RETRY_AFTER = 60.0  # a server asking for a longer pause gets an error, not a frozen chat
POLL = 0.1  # seconds between checks of the stop flag while waiting for the server


class OpenAiChatModel:
    retry_base_delay = 0.5  # seconds; doubles per retry when the server names no delay

    def __init__(
        self,
        settings: OpenAiSettings,
        api_key: str,
        clients: ModelClients,
        cancel: Cancellation | None = None,
    ):
        self.settings = settings
        self.model_name: str | None = settings.model  # what its tokenizer is chosen by
        self._api_key = api_key
        self._clients = clients
        self._cancel = cancel
        self._spawn = clients.spawn
        self._describer = Describer(settings, api_key)

    def __repr__(self) -> str:
        s = self.settings
        return f"OpenAiChatModel(model={s.model!r}, base_url={safe_url(s.base_url)!r}, api_key=***)"

    def invoke(
        self,
        messages: list[ChatMessage],
        tools: list[Tool],
        on_token: TokenCallback | None = None,
        cancel: Cancellation | None = None,
    ) -> ChatMessage:
        cancel = cancel if cancel is not None else self._cancel
        body = self.request_body(messages, tools)
        for attempt in range(self.settings.max_retries + 1):
            answer = Answer(on_token, safe_url(self.settings.base_url))
            try:
                self._stream_once(body, answer, cancel)
                return answer.message()
            except Failure as failure:
                delay = self._retry_delay(failure, answer, attempt)
                if delay is None:
                    raise NodeExecutionError(f"{self.settings.label}: {failure.message}") from None
                log.info(
                    "%s: %s; retry %d of %d in %.1f s",
                    self.settings.label,
                    failure.message,
                    attempt + 1,
                    self.settings.max_retries,
                    delay,
                )
                _wait(delay, cancel)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def request_body(self, messages: list[ChatMessage], tools: list[Tool]) -> dict[str, Any]:
        return request_body(self.settings, messages, tools)

    def _retry_delay(self, failure: Failure, answer: Answer, attempt: int) -> float | None:
        if not failure.retryable or answer.emitted or attempt >= self.settings.max_retries:
            return None
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= MAX_RETRY_AFTER else None
        return self.retry_base_delay * 2**attempt

    def _stream_once(self, body: dict[str, Any], answer: Answer, cancel) -> None:
        client = self._clients.client(self.settings, self._api_key)
        payload = jsontext.dumps_bytes({**body, "stream": True})
        url = f"{self.settings.base_url}/chat/completions"
        pump = Pump(client, url, payload, self._spawn)
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    raise ExecutionCanceled() from None
                try:
                    kind, value = pump.events.get(timeout=POLL)
                except queue.Empty:
                    continue
                if kind == "done":
                    return
                if kind == "chunks":
                    for chunk in value:
                        answer.add(chunk)
                else:
                    raise self._describer.failure(value, kind, answer.emitted)
        finally:
            pump.stop()


def _wait(seconds: float, cancel: Cancellation | None) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if cancel is not None and cancel.is_set():
            raise ExecutionCanceled()
        time.sleep(min(POLL, left))
    if cancel is not None and cancel.is_set():
        raise ExecutionCanceled()
