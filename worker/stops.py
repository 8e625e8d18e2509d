"""The stop switches of one worker's running executions, and the listener that flips them.

A stop request is broadcast on `executions:stop` (core/executions.py `request_stop`): every
worker hears it, and the one running the execution sets its cancel event, which the engine
checks between nodes and tokens. A stop that arrives before the claim is covered by the
`execution:<id>:stop` marker, which the claim reads.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import redis

log = logging.getLogger("mini_n8n.worker")

RECONNECT_SECONDS = 1.0


class Stops:
    def __init__(self, redis_url: str, channel: str):
        self.redis_url = redis_url
        self.channel = channel
        self.listening = threading.Event()  # set while Redis has confirmed the subscription
        self._running: dict[str, threading.Event] = {}
        # Execution id -> the token of this worker's hold on it: what the heartbeat renews,
        # read from a thread of its own (worker/leases.py) as a copy, without the lock.
        self._tokens: dict[str, str] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pubsub = None
        self._thread: threading.Thread | None = None

    # --- the switches ---------------------------------------------------------------------
    def add(self, execution_id: str, token: str = "") -> threading.Event:
        """The cancel event of an execution this worker took (to run it, or to hold it until
        its session's turn comes); its lease is renewed with `token` until it is removed."""
        cancel = threading.Event()
        with self._lock:
            self._running[execution_id] = cancel
            self._tokens = {**self._tokens, execution_id: token}
        return cancel

    def remove(self, execution_id: str) -> None:
        with self._lock:
            self._running.pop(execution_id, None)
            tokens = dict(self._tokens)
            tokens.pop(execution_id, None)
            self._tokens = tokens

    def held(self) -> dict[str, str]:
        """Execution id -> token of everything this worker holds. Safe from any thread: the
        map is replaced, never changed in place."""
        return self._tokens

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def stop(self, execution_id: str) -> bool:
        """Cancel the execution if it runs here; False if it does not."""
        with self._lock:
            cancel = self._running.get(execution_id)
        if cancel:
            cancel.set()
        return cancel is not None

    def stop_all(self) -> None:
        with self._lock:
            for cancel in self._running.values():
                cancel.set()

    # --- the listener ---------------------------------------------------------------------
    def start(self) -> None:
        """Start listening in the background (once)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self.listen, name="stops", daemon=True)
                self._thread.start()

    def close(self) -> None:
        self._closing.set()
        pubsub = self._pubsub
        if pubsub is not None and pubsub.connection is not None:
            with contextlib.suppress(Exception):
                pubsub.connection.disconnect()

    def listen(self) -> None:
        """Stop requests are broadcast; the worker running the execution acts on it."""
        while not self._closing.is_set():
            # Its own connection without a read timeout: it waits for stops indefinitely.
            client = redis.Redis.from_url(
                self.redis_url, decode_responses=True, socket_timeout=None, socket_keepalive=True
            )
            pubsub = self._pubsub = client.pubsub()
            try:
                pubsub.subscribe(self.channel)
                for message in pubsub.listen():
                    self._handle(message)
            except (redis.RedisError, OSError, AttributeError, ValueError) as err:
                if self._closing.is_set():
                    return
                log.warning("stop listener lost Redis, reconnecting: %s", err)
                self._closing.wait(RECONNECT_SECONDS)
            except Exception:  # listen again rather than stop hearing stops
                log.exception("stop listener failed, restarting")
                self._closing.wait(RECONNECT_SECONDS)
            finally:
                self.listening.clear()
                pubsub.close()
                client.close()

    def _handle(self, message: dict) -> None:
        kind = message.get("type")
        if kind == "subscribe":
            self.listening.set()
        elif kind == "message":
            self.stop(message["data"])
