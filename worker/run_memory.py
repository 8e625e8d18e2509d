"""How one execution's memory turns reach memory: with the step that records its end or its
wait, never before (memory/journal.py says why).

A turn for a Redis memory on the store's own server (not a cluster) goes into that step's
script: the outcome, the final event and the turn are one write, so a reaper that declared the
execution lost first leaves memory as its client was told. Any other turn (Simple Memory, a
Redis memory on another server, a cluster, where the list is in another slot) cannot join that
write; it is written just before the step, since the step hands the session's turn to its next
message, which must find it. Such a turn is kept should the step be refused.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import partial

from core.memory_turns import TurnWrite
from core.retry import retrying
from engine.services import Services
from memory.journal import Journal, Write
from memory.redis import RedisMemory, server_of

log = logging.getLogger("mini_n8n.worker")


class RunMemory:
    """The journal of one execution's run and its way out."""

    __slots__ = ("journal", "_server", "_cluster", "_turns")

    def __init__(self, store_client, cluster: bool):
        self.journal = Journal()
        self._server = server_of(store_client)
        self._cluster = cluster
        self._turns: list[TurnWrite] = []  # for the next step's script

    def services(self, services: Services) -> Services:
        """The process's services, with this run's journal."""
        return dataclasses.replace(services, journal=self.journal)

    def take(self, execution_id: str) -> list[TurnWrite]:
        """The turns for the next step's script; the others are written now. They stay pending
        until that step was written or refused: a step that did not happen (a wait a stop
        overtook) leaves them to the next."""
        for write in self.journal.take():
            backend = write.backend
            if isinstance(backend, RedisMemory) and self._joins(backend):
                self._turns.append(backend.turn(write.session_key, write.messages))
            else:
                _write(execution_id, write)
        return list(self._turns)

    def _joins(self, backend: RedisMemory) -> bool:
        return not self._cluster and server_of(backend.client) == self._server

    def step_done(self) -> None:
        """The step that took `take`'s turns was written or refused: they are settled."""
        self._turns = []


def _write(execution_id: str, write: Write) -> None:
    try:
        retrying(partial(write.backend.add_turn, write.session_key, write.messages),
                 "a memory turn", log)  # fmt: skip
    except Exception:
        log.exception("execution %s: a memory turn could not be written", execution_id)
