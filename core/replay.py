"""What an execution's channel said, kept a little while for a subscriber that missed some.

Pub/sub delivers a message only to whoever is subscribed at that moment: when an api's
subscription connection drops (a killed connection, a Redis restart) the events published until
it subscribed again are gone for it, and so are those Redis had queued for the old connection.
So every numbered event (a batch of streamed lines, a Respond to Webhook answer) is also pushed,
in the same script, onto `execution:<id>:sent`, which lives REPLAY_SECONDS past the last push.
A stream that sees a gap in the numbering, or that subscribed again, reads the events it lacks
from there (api/responses.py): the client gets every line once, in order, and what it is told is
what the record and memory say.
"""

from __future__ import annotations

from core import events
from core.events import Event, EventError
from core.keys import Keys

# Long beside a relay's reconnect (under a second) and the keepalive interval after which a quiet
# stream asks the record; short enough that under full load the lists stay small.
REPLAY_SECONDS = 30

# KEYS: channel, sent list; ARGV: event, the list's time to live (ms), PUBLISH or SPUBLISH.
# Kept before it is published: a subscriber that hears it and looks back finds every event
# before it. Answers how many subscribers heard it, as PUBLISH does.
PUBLISH_KEPT = """
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call(ARGV[3], KEYS[1], ARGV[1])
"""


def kept(client, keys: Keys, execution_id: str) -> list:
    """Every event kept for the execution, in the order it was published."""
    return client.lrange(keys.execution_sent(execution_id), 0, -1)


def missed(kept: list[str | bytes], start: int, stop: int | None = None) -> list[Event]:
    """The events numbered from `start` (up to, not including, `stop`) among those kept, in
    order and each once, as far as they follow each other without a hole. A number kept twice
    is a publish retried after a timeout (the same event), or an execution that waited and
    resumed, whose new run numbers afresh: the later one counts."""
    found: dict[int, Event] = {}
    for raw in kept:
        try:
            event = events.decode(raw)
        except EventError:
            continue
        seq = event.seq
        if seq is not None and seq >= start and (stop is None or seq < stop):
            found[seq] = event
    run = []
    while start in found:
        run.append(found[start])
        start += 1
    return run
