"""The chat model clients of one process: what a runner lends the engine as
Services.chat_models (engine/llm.py ChatModels).

It holds one HTTP client per endpoint and key, so executions reuse its pooled (TLS) connections,
and the one TLS context they share (loading CAs takes a while). What it is given says how the
process runs: `spawn` starts a stream's reader (a greenlet a stop can interrupt, under gevent),
`poll` looks at idle connections (the C library's poll under gevent: runtime/patching.py).
"""

from __future__ import annotations

import hashlib
import select
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from engine.llm import Cancellation
from engine.model_settings import DEFAULT_BASE_URL, OpenAiSettings
from models.model_client import LIMITS, ModelClient
from models.openai_chat import OpenAiChatModel
from models.pump import Spawn, spawn_thread
from models.sockets import Poll

MAX_CLIENTS = 16  # distinct endpoints/keys per process; beyond that the oldest client is dropped
WARM_TIMEOUT = 2.0  # seconds: a worker start waits no longer for an endpoint (warm_endpoint)


class ModelClients:
    def __init__(self, spawn: Spawn = spawn_thread, poll: Poll | None = None):
        self.spawn = spawn
        self.poll: Poll | None = poll or getattr(select, "poll", None)
        self._clients: dict[tuple, ModelClient] = {}
        self._lock = threading.Lock()
        self._tls: Any = None

    def openai(
        self, settings: OpenAiSettings, api_key: str, cancel: Cancellation | None = None
    ) -> OpenAiChatModel:
        return OpenAiChatModel(settings, api_key, self, cancel)

    def warm(self) -> None:
        """What the first model call would otherwise build or import: the TLS context every
        client shares, and the transport's modules (httpx imports httpcore when a client is
        first built). A worker calls it before it takes its first task."""
        httpx.Client(verify=self.tls_context()).close()

    def warm_endpoint(self, credential: Mapping[str, Any]) -> None:
        """Build the shared client of an `openAiApi` credential's endpoint, as the node would
        with its default options, and open its first connection (TCP, and TLS for a remote
        endpoint: most of a first model call's extra time) with a request that costs no
        tokens: the model list every OpenAI-compatible server answers. Raises what httpx
        raised."""
        base_url = str(credential.get("url") or DEFAULT_BASE_URL).rstrip("/")
        organization = credential.get("organizationId") or None
        settings = OpenAiSettings(base_url=base_url, organization=organization)
        client = self.client(settings, str(credential.get("apiKey") or ""))
        client.fetch(f"{base_url}/models", WARM_TIMEOUT)  # the answer does not matter

    def tls_context(self) -> Any:
        with self._lock:
            if self._tls is None:
                self._tls = httpx.create_ssl_context()  # honours SSL_CERT_FILE / SSL_CERT_DIR
            return self._tls

    def client(self, s: OpenAiSettings, api_key: str) -> ModelClient:
        """The endpoint's and key's client. It never retries: the model's own loop does, since
        a client's retries can neither be stopped nor know whether tokens were already handed
        on."""
        key = (s.base_url, hashlib.sha256(api_key.encode()).hexdigest(), s.organization, s.timeout)
        tls = self.tls_context()
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._new_client(s, api_key, tls)
                if len(self._clients) >= MAX_CLIENTS:
                    # Not closed here: an execution may still be reading from it. Its pooled
                    # connections close once it is no longer referenced.
                    self._clients.pop(next(iter(self._clients)))
                self._clients[key] = client
            return client

    def _new_client(self, s: OpenAiSettings, api_key: str, tls: Any) -> ModelClient:
        headers = {
            # Keyless local servers (Ollama) ignore it; the SDK sent the same.
            "Authorization": f"Bearer {api_key or 'none'}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
        }
        if s.organization:
            headers["OpenAI-Organization"] = s.organization
        return ModelClient(
            self.poll, headers=headers, timeout=s.timeout, limits=LIMITS, verify=tls, trust_env=True
        )
