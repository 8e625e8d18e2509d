"""The Chat Hub's push events: numbered per conversation, kept for a reconnect, published on the
user's channel, and, for a chunk, the AI message's text appended in the same step.

One script does it all (`emit`), so what a browser was shown is what Redis holds: a chunk's text
is appended to `hub:conversation:<sid>:text:<mid>` before its event is published, and the event
is numbered (`hub:conversation:<sid>:seq`) and kept (`hub:conversation:<sid>:events`, the last
`events_kept`, for `events_ttl_seconds` after the last one) in the same step. A reconnect reads
what it missed from there, begin and end included, on whichever api process it lands.

Every event is n8n's push message `{"type": "chatHub…", "data": {...}}`, its data led by its
`sequenceNumber`; on the channel it travels as a push event (core/events.py), so the relay's
shared subscription carries it. The relay's own progress (the execution's last event applied)
is written with a chunk, in the same step on one server, so another process can take over the
relaying without repeating or losing text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import events
from core.clock import now_ms
from core.hub_batch import Batch
from core.hub_settings import HubSettings
from core.jsontext import dumps
from core.keys import Keys
from core.redis_clients import is_cluster, publish, script

# KEYS: seq, events, text, run, the conversation. ARGV: event head, event tail, kept, ttl,
# publish command, channel ('' = the caller publishes), text to append ('' = none), most bytes,
# text ttl, consumed ('' = none), the channel's message head and tail (core/events.py's push
# event around the same number). Returns the event's number; -1 when the text would pass its
# bound, 0 when the conversation is gone (deleted meanwhile): nothing is written then.
_EMIT = """
if redis.call('EXISTS', KEYS[5]) == 0 then return 0 end
if ARGV[7] ~= '' then
  if redis.call('STRLEN', KEYS[3]) + string.len(ARGV[7]) > tonumber(ARGV[8]) then return -1 end
  redis.call('APPEND', KEYS[3], ARGV[7])
  redis.call('EXPIRE', KEYS[3], ARGV[9])
end
if ARGV[10] ~= '' then redis.call('HSET', KEYS[4], 'consumed', ARGV[10]) end
local n = redis.call('INCR', KEYS[1])
local event = ARGV[1] .. n .. ARGV[2]
redis.call('RPUSH', KEYS[2], event)
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('EXPIRE', KEYS[2], ARGV[4])
if ARGV[6] ~= '' then redis.call(ARGV[5], ARGV[6], ARGV[11] .. n .. ARGV[12]) end
return n
"""
_HEAD = '{"sequenceNumber":'


class TooLong(Exception):
    """An AI message's text would pass MINI_N8N_CHAT_HUB_MAX_REPLY_BYTES."""


class HubEvents:
    def __init__(self, client: Any, keys: Keys, settings: HubSettings, text_ttl: int,
                 local: Callable[[str, str, int, str], None] | None = None):  # fmt: skip
        """`local`: told of each event as soon as it is written (the channel, the conversation,
        the event's number and its JSON), for this process's own listeners, which need not
        wait for its trip through Redis."""
        self.local = local
        self.client = client
        self.keys = keys
        self.settings = settings
        self.text_ttl = text_ttl  # an abandoned text key goes with the execution's keys
        self._cluster = is_cluster(client)
        self._emit = script(client, _EMIT)

    def queue(self, batch: Batch, user_id: str, session_id: str, event_type: str,
              data: dict[str, Any], append: tuple[str, str] | None = None,
              ) -> Callable[[list[Any]], None]:  # fmt: skip
        """`emit` in `batch` (`append`: a chunk's text first, as `emit`'s); call what it
        returns with the batch's replies (this process's listeners are told then, and in a
        cluster it publishes then). TooLong, then, if the text would pass its bound."""
        event = framed(event_type, session_id, data)
        seq = self.keys.hub_seq(session_id)
        channel = self.keys.hub_push(user_id)
        text_key = self.keys.hub_text(session_id, append[0]) if append else seq
        args = [event.head, event.tail, self.settings.events_kept,
                self.settings.events_ttl_seconds, "PUBLISH", "" if self._cluster else channel,
                append[1] if append else "", self.settings.max_reply_bytes, self.text_ttl, "",
                event.push_head, event.push_tail]  # fmt: skip
        keys = [seq, self.keys.hub_events(session_id), text_key, seq,
                self.keys.hub_conversation(session_id)]  # fmt: skip
        index = batch.script(self._emit, keys, args)

        def after(replies: list[Any]) -> None:
            n = int(replies[index] or 0)
            if n > 0:
                self._out(channel, event, n)
            elif n < 0:
                raise TooLong(f"a reply may hold at most {self.settings.max_reply_bytes} bytes")

        return after

    def emit(
        self,
        user_id: str,
        session_id: str,
        event_type: str,
        data: dict[str, Any],
        *,
        append: tuple[str, str] | None = None,
        consumed: tuple[str, int] | None = None,
    ) -> int:
        """Number, keep and publish one event; `append` = (message id, text) adds a chunk's
        text first, `consumed` = (execution id, its event number) records the relay's
        progress. Returns the event's number (0: the conversation is gone; TooLong: the text
        would pass its bound; nothing written either way)."""
        event = framed(event_type, session_id, data)
        text_key = self.keys.hub_text(session_id, append[0]) if append else ""
        run_key = self.keys.hub_run(consumed[0]) if consumed else ""
        channel = self.keys.hub_push(user_id)
        in_script = consumed is not None and not self._cluster
        keys = [self.keys.hub_seq(session_id), self.keys.hub_events(session_id),
                text_key or self.keys.hub_seq(session_id),
                run_key if in_script else self.keys.hub_seq(session_id),
                self.keys.hub_conversation(session_id)]  # fmt: skip
        args = [
            event.head, event.tail, self.settings.events_kept, self.settings.events_ttl_seconds,
            "PUBLISH", "" if self._cluster else channel,
            append[1] if append else "", self.settings.max_reply_bytes, self.text_ttl,
            consumed[1] if in_script and consumed else "", event.push_head, event.push_tail,
        ]  # fmt: skip
        n = int(self._emit(keys=keys, args=args))
        if n < 0:
            raise TooLong(f"a reply may hold at most {self.settings.max_reply_bytes} bytes")
        if n == 0:
            return 0  # the conversation is gone: nothing was written
        self._out(channel, event, n)
        if self._cluster and consumed is not None:  # the run is in another slot
            self.client.hset(self.keys.hub_run(consumed[0]), "consumed", consumed[1])
        return n

    def _out(self, channel: str, event: Framed, n: int) -> None:
        """A written event: to this process's listeners now; in a cluster, published here (the
        user's channel is in another slot than the conversation's keys)."""
        if self.local is not None:
            self.local(channel, event.session_id, n, event.kept(n))
        if self._cluster:
            publish(self.client, channel, event.published(n))

    def since(self, session_id: str, last_sequence: int) -> list[dict[str, Any]]:
        """The kept events numbered after `last_sequence`, oldest first."""
        raws = self.client.lrange(self.keys.hub_events(session_id), 0, -1)
        found = [json.loads(raw) for raw in raws]
        return [e for e in found if e["data"]["sequenceNumber"] > last_sequence]

    def last(self, session_id: str) -> int:
        return int(self.client.get(self.keys.hub_seq(session_id)) or 0)


@dataclass(frozen=True, slots=True)
class Framed:
    """One event as the texts around its number: as kept (n8n's push message) and as published
    on the user's channel (core/events.py's push event); the script puts the number in."""

    session_id: str
    head: str
    tail: str
    push_head: str
    push_tail: str

    def kept(self, n: int) -> str:
        return self.head + str(n) + self.tail

    def published(self, n: int) -> str:
        return self.push_head + str(n) + self.push_tail


def framed(event_type: str, session_id: str, data: dict[str, Any]) -> Framed:
    """The event `{"type", "data": {"sequenceNumber": n, "sessionId", **data, "timestamp"}}`."""
    body = {"sequenceNumber": 0, "sessionId": session_id, **data}
    body["timestamp"] = body.get("timestamp") or now_ms()
    kept = dumps({"type": event_type, "data": body})
    pushed = events.encode(events.push(event_type, body))
    head, tail = _around(kept)
    push_head, push_tail = _around(pushed)
    return Framed(session_id, head, tail, push_head, push_tail)


def _around(text: str) -> tuple[str, str]:
    at = text.index(_HEAD + "0") + len(_HEAD)
    return text[:at], text[at + 1 :]
