"""What a chat WebSocket relays of its execution: the Chat nodes' messages, in order, and the
execution's end.

Messages come the way streamed tokens do: the relay's shared subscription, confirmed by Redis
before anything else happens. Then the messages not yet delivered are read from the execution's
list (core/waiting.py) and written, then live events follow; a message's index in the list says
whether it was written already. So none is missed or written twice, even when the client
reconnects to another api process (after a restart, say) in the middle of a conversation. The
socket closes when the execution ends (an error first gets an error frame), unless the
conversation goes on in the session's next execution (messages it never waited for started it,
core/events.py `next`): the socket follows it there.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import redis

from api.chat_frames import CONTINUE, error_frame
from api.relay import RelayError, Stream
from api.waiting_webhook import absolute_links
from core.chat_node_message import ChatNodeMessage
from core.events import Event, Kind
from core.execution_record import ExecutionRecord, Status
from core.public_errors import public_error
from core.results import FinalResult
from core.waiting import WaitingStore

# How long a socket waits to hear where its conversation goes on (core/events.py `next`).
FOLLOW_SECONDS = 10.0
# Once the record says the execution ended, how long its final event may take to arrive.
DELIVERY_SECONDS = 1.0


class ChatFeed:
    """One socket's feed: the execution it relays (it changes when the conversation moves on),
    its subscription, and how far the client has been written."""

    def __init__(
        self,
        rt,
        execution_id: str,
        send: Callable[[str], None],
        subscribe: Callable[[str], Stream],
        base_url: str = "",
    ):
        self.rt = rt
        self.execution_id = execution_id
        self.send = send
        self.subscribe = subscribe  # the execution's events, confirmed (api/chat_socket.py)
        self.base_url = base_url
        self.waits = WaitingStore(rt.executions)
        self.stream: Stream | None = None
        self.next_n = 0  # index of the next message this client has not been written
        # The last message written waits for a reply that has not come over this socket.
        self.awaiting = False
        # The execution ended: (its record, by when its final event must have come).
        self._ending: tuple[ExecutionRecord | None, float] | None = None
        # Its end said the conversation goes on: until when to wait to hear where.
        self._following_until: float | None = None

    def record(self) -> ExecutionRecord | None:
        if not self.execution_id or len(self.execution_id) > 64:
            return None
        return self.rt.executions.get(self.execution_id)

    def current(self) -> Stream:
        assert self.stream is not None, "the socket relays once subscribed"
        return self.stream

    def start(self) -> int:
        """Write what the client has not been written yet (subscribed first, so nothing that
        comes meanwhile is missed); how many messages that was."""
        self.next_n = self.waits.delivered(self.execution_id)
        return self.write_pending()

    def deadline(self) -> float:
        """When the loop must look again without an event: an end or a follow-up awaited."""
        pending = [self._ending[1]] if self._ending else []
        pending += [self._following_until] if self._following_until is not None else []
        return min(pending, default=float("inf"))

    def in_time(self) -> bool:
        """False (and the socket done) once what it awaited did not come in time: the final
        event of an execution whose record says it ended, or where its conversation goes on."""
        now = time.monotonic()
        if self._following_until is not None and now >= self._following_until:
            self.end(self.record())
            return False
        if self._ending is not None and now >= self._ending[1]:
            self.write_pending()
            self.end(self._ending[0])
            return False
        return True

    def look(self) -> None:
        """As the relay does for streams: a lost worker or a reply no worker took in time ends
        the execution (crashed) and, so, this socket."""
        self._expect_end(self.rt.liveness.check(self.execution_id))

    def _expect_end(self, record: ExecutionRecord | None) -> None:
        if (record is None or record.finished) and self._ending is None:
            # Its final event went out with its record (core/execution_transitions.py) and is
            # on its way here, unless the relay lost it.
            self._ending = (record, time.monotonic() + DELIVERY_SECONDS)

    def relayed(self, event: Event) -> bool:
        """One event of the execution; False once the socket is done."""
        if event.kind == Kind.MESSAGE:
            self._message(ChatNodeMessage.from_json(event.body))
        elif event.kind == Kind.DONE:
            return self._done(event)
        elif event.kind == Kind.NEXT and self._following_until is not None:
            return self._follow(str(event.body.get("executionId", "")))
        elif event.kind == Kind.MISSED:
            return self._caught_up(event.body)
        elif event.kind == Kind.BROKEN:
            self.send(error_frame(f"The chat was interrupted: {event.reason}"))
            return False
        return True

    def _done(self, event: Event) -> bool:
        self.write_pending()
        result = FinalResult.from_json(event.body)
        if result.continues:  # its `next` event says where: wait for it
            self._following_until = time.monotonic() + FOLLOW_SECONDS
            self._ending = None
            return True
        self.end(self.record(), result)
        return False

    def _caught_up(self, early: Event | None) -> bool:
        """Events may have been missed (a gap, or subscribed again after the relay's connection
        dropped): the messages from the execution's list, then the event after the gap, or a
        look at the record, as after a quiet interval."""
        self.write_pending()
        if early is not None:
            return self.relayed(early)
        self._expect_end(self.record())
        return True

    def _follow(self, execution_id: str) -> bool:
        """The conversation goes on in the session's next execution (messages that came
        while it ran and no Chat node waited for): relay that one now."""
        old, self.execution_id = self.current(), execution_id
        try:
            self.stream = self.subscribe(execution_id)
        except RelayError:
            self.stream = old
            self.end(self.record())
            return False
        self.rt.relay().unsubscribe(old)
        self._following_until = self._ending = None
        self.start()
        return True

    def _message(self, message: ChatNodeMessage) -> None:
        n = message.n
        if n is None or n < self.next_n:
            return  # written already (replayed from the list)
        if n > self.next_n:
            self.write_pending()  # fill a gap from the list, which holds every message
            return
        self._write(message)

    def write_pending(self) -> int:
        pending = self.waits.messages(self.execution_id, self.next_n)
        for message in pending:
            self._write(message)
        return len(pending)

    def _write(self, message: ChatNodeMessage) -> None:
        if self.awaiting:
            # The wait ended without a reply on this socket (a button, another door, its time
            # limit): n8n says so, and the widget stops treating its input as that reply.
            self.send(CONTINUE)
        self.send(absolute_links(message.text, self.base_url))
        self.awaiting = message.wait
        if not self.awaiting:
            self.send(CONTINUE)
        self.next_n = (message.n or 0) + 1
        # Redis full: the count goes with the next message's (a reconnect may show this again).
        with contextlib.suppress(redis.OutOfMemoryError):
            self.waits.mark_delivered(self.execution_id, self.next_n)

    def end(self, record: ExecutionRecord | None, result: FinalResult | None = None) -> None:
        """The execution ended: say why if it did not succeed; the socket then closes."""
        status, error = (record.status, record.error) if record else (None, None)
        if result is not None and (record is None or not record.finished):
            status, error = result.status, result.error
        if status is None:
            self.send(error_frame("The execution is gone."))
        elif status != Status.SUCCESS:
            self.send(error_frame(public_error(status, error, self.execution_id)))
