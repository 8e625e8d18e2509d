"""What the steps of an execution's lifecycle answer (core/execution_transitions.py), and the
request an end step carries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from core.execution_record import ExecutionRecord, Status
from core.memory_turns import TurnWrite
from core.results import FinalResult


class RouteChanged(Exception):
    """The route the api remembered no longer holds: the webhook was moved, or its workflow
    changed. Nothing was created; the request is routed again."""


class NotSubscribed(Exception):
    """The create found nobody subscribed to the execution's channel yet (the api's SUBSCRIBE
    is still on its way): nothing was created; the api waits for the confirmation and runs it
    again."""


class Claimed(IntEnum):
    """What a claim found; falsy when the execution was not claimed."""

    NOT = 0
    CLAIMED = 1
    STOP_ASKED = 2  # claimed, and a stop was asked for before: it is to end canceled at once


class Reply(StrEnum):
    QUEUED = "queued"  # the execution is not waiting yet: the message is its next reply
    NOT_WAITING = "not waiting"  # ...refused, when only a waiting execution may take it
    RESUMED = "resumed"  # it waited: now `new` again, to be enqueued with this reply
    ENDED = "ended"  # it finished (or is gone) meanwhile


@dataclass(slots=True)
class Ended:
    """What an end step did: `ok` (written now), `already` (a retry of one written before)."""

    outcome: str
    leftovers: list[str] = field(default_factory=list)  # replies it never took
    # The session's next execution, when the step itself started it with the leftovers (its
    # first message is leftovers[0], the rest are its replies already): its task is to send.
    successor: ExecutionRecord | None = None

    @property
    def written(self) -> bool:
        return self.outcome in ("ok", "already")


@dataclass(frozen=True, slots=True)
class EndRequest:
    """How an end step is to write `final` over `current`: from a status in `allowed`, with
    the final event (`event`, or the control event of `result`), as the holder of `claim`, or
    as a reaper (`reap`, its evidence `gone`)."""

    current: ExecutionRecord
    final: ExecutionRecord
    allowed: frozenset[Status]
    result: FinalResult | None = None
    event: str = ""
    claim: str = ""
    reap: bool = False
    gone: str = ""
    successor: ExecutionRecord | None = None
    turns: Sequence[TurnWrite] = ()
