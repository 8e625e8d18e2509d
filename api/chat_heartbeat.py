"""The chat WebSocket's heartbeat, as n8n keeps it: `n8n|heartbeat` when nothing was relayed for
`keepalive_seconds`, answered `n8n|heartbeat-ack`. A client that leaves one unanswered for
MINI_N8N_CHAT_HEARTBEAT_TIMEOUT (60 s, n8n's) is closed (n8n also cancels the execution; here it
waits on, for a new socket or a POST), and so is one that sends no message for
MINI_N8N_CHAT_SOCKET_IDLE_SECONDS. The clock is monotonic; the socket's loop asks when to beat."""

from __future__ import annotations

import time

from api.chat_frames import CLOSE_IDLE, CLOSE_SILENT, HEARTBEAT, IDLE
from core.settings import Settings


class Heartbeat:
    def __init__(self, settings: Settings):
        self.settings = settings
        # When the oldest heartbeat still unanswered went out; None: all answered.
        self.unacked_since: float | None = None
        self.last_message = time.monotonic()
        self.beat_at = float("inf")  # set when the socket's loop starts

    def restart(self) -> None:
        """Something went out (or the loop starts): the next beat is a quiet interval away."""
        self.beat_at = time.monotonic() + self.settings.keepalive_seconds

    def due(self) -> bool:
        return time.monotonic() >= self.beat_at

    def acked(self) -> None:
        self.unacked_since = None

    def heard(self) -> None:
        """A message from the client (not an ack): it is not idle."""
        self.last_message = time.monotonic()

    def beat(self) -> str:
        """The frame to send; its answer is awaited from now, unless an older one is."""
        if self.unacked_since is None:
            self.unacked_since = time.monotonic()
        return HEARTBEAT

    def why_close(self) -> tuple[str, int] | None:
        """The close frame's reason and code for a silent or idle client; None: go on."""
        if self._silent():
            timeout = self.settings.chat_heartbeat_timeout_seconds
            return f"no heartbeat acknowledgement for {timeout:g} s", CLOSE_SILENT
        if time.monotonic() - self.last_message > self.settings.chat_socket_idle_seconds:
            return IDLE, CLOSE_IDLE  # the wait goes on; a reconnect picks it up
        return None

    def _silent(self) -> bool:
        """The client has left a heartbeat unanswered for longer than the limit."""
        since = self.unacked_since
        limit = self.settings.chat_heartbeat_timeout_seconds
        return since is not None and time.monotonic() - since >= limit
