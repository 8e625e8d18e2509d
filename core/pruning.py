"""Pruning the execution history, as n8n prunes its database, with its settings and defaults.

n8n (ExecutionsPruningService, ExecutionRepository.softDeletePrunableExecutions) marks a
finished execution (any status but new, running and waiting) deleted once it stopped more than
`EXECUTIONS_DATA_MAX_AGE` hours ago (336) or lies beyond the newest
`EXECUTIONS_DATA_PRUNE_MAX_COUNT` executions (10,000; every execution counts, unfinished ones
too, newest by id), and removes what it marked `EXECUTIONS_DATA_HARD_DELETE_BUFFER` hours later
(1), 100 at a time, once a second while a backlog lasts. `EXECUTIONS_DATA_PRUNE=false` turns it
off. Here, in Redis:

- **The same rules, one step.** A round deletes what those rules select at once: Redis holds the
  history in memory, and an hour's buffer of a busy deployment's executions would be most of it.
  (The buffer serves manual runs that are not saved, core/retention.py.) The age is also every
  execution key's time to live (`MINI_N8N_EXECUTIONS_TTL`, core/settings.py): a record written
  for the last time when it stopped expires by itself at the age, and a round only tidies up
  after it.
- **Where it looks.** `executions:history` (core/keys.py) holds every execution not yet pruned,
  score = creation time, written where records are created (core/executions.py). Both rules
  select a prefix of it, oldest first: the entries beyond the newest max count, and those created
  before the age (or the time to live, when shorter: their records may have expired). A round
  reads a window of at most BATCH entries of that prefix and deletes the finished ones the rules
  select, with every key of theirs, then their entries here and in `executions:workflow:<id>`.
  An entry whose record is gone (expired) only leaves the indexes.
- **Never early.** An unfinished execution is passed over, however old: the delete is a script
  that checks the record's status and revision in the same step, so an execution that is still
  new, running or waiting keeps every key it needs. The next round starts its window after the
  entries passed over, so a conversation that waits for days never holds the rest back.
- **Bounded, shared.** Every worker's watch calls `prune_if_due` every second (worker/leases.py);
  a round runs PRUNE_EVERY_SECONDS apart, or a second after one that found a full window (a
  backlog), and only in the worker holding the short `executions:pruning` lock. Redis refuses
  that lock when it is full (a write); the round then runs anyway, since deletes are allowed
  and are what frees memory. Two rounds at once only repeat each other's work.
- **Redis Cluster.** An execution's keys share its hash tag, so its delete is one script; the
  indexes are keys of their own, each changed in a step of its own, after the keys (an entry
  whose keys are gone is dropped by the next round).
"""

from __future__ import annotations

import logging
import secrets
import time
import weakref
from collections import defaultdict
from dataclasses import dataclass

import redis

from core.clock import now_ms
from core.execution_record import LUA_HEADER, ExecutionRecord, RecordError, header
from core.executions import ExecutionStore
from core.keys import Keys, history_entry

log = logging.getLogger("mini_n8n.pruning")

BATCH = 500  # history entries a round examines at most: a few ms of Redis, bounded
PRUNE_EVERY_SECONDS = 10.0  # between rounds that found no backlog
BACKLOG_EVERY_SECONDS = 1.0  # between rounds while one finds a full window
LOCK_MS = 5000  # a round holds `executions:pruning` this long at most

# Deletes a finished execution's keys if its record is still the one the round read (status
# and revision), or tells that it is gone. KEYS: the execution's keys, its record first.
# ARGV: the revision read. Returns 1 (deleted, or gone already) or 0 (left alone).
_DELETE = f"""
local raw = redis.call('GET', KEYS[1])
if not raw then return 1 end
local status, rev = string.match(raw, '{LUA_HEADER}')
if not status or status == 'new' or status == 'running' or status == 'waiting' then
  return 0
end
if tonumber(rev) ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', unpack(KEYS))
return 1
"""


def execution_keys(keys: Keys, execution_id: str) -> list[str]:
    """Every key an execution may have (core/keys.py), its record first."""
    return [
        keys.execution(execution_id),
        keys.execution_turn(execution_id),
        keys.execution_lease(execution_id),
        keys.execution_queued(execution_id),
        keys.execution_suspect(execution_id),
        keys.execution_replies(execution_id),
        keys.execution_taken(execution_id),
        keys.execution_next(execution_id),
        keys.execution_items(execution_id),
        keys.execution_stop(execution_id),
        keys.execution_resume(execution_id),
        keys.execution_messages(execution_id),
        keys.execution_delivered(execution_id),
        keys.execution_token(execution_id),
    ]


@dataclass(frozen=True)
class Rules:
    """What a round may delete: n8n's settings (off: only entries of expired records go)."""

    prune: bool = True
    max_age_ms: int = 336 * 3600 * 1000
    max_count: int = 10_000  # 0: no limit
    ttl_ms: int = 336 * 3600 * 1000  # the keys' time to live

    @classmethod
    def from_settings(cls, settings) -> Rules:
        return cls(
            prune=settings.executions_prune,
            max_age_ms=round(settings.executions_max_age_hours * 3600 * 1000),
            max_count=max(settings.executions_prune_max_count, 0),
            ttl_ms=settings.executions_ttl * 1000,
        )


@dataclass
class Round:
    """What one round did."""

    examined: int = 0
    deleted: int = 0  # finished executions deleted with their keys
    gone: int = 0  # entries whose record had expired
    passed: int = 0  # unfinished, or not old enough: left where they are


@dataclass(frozen=True)
class _Window:
    start: int  # rank of its first entry
    excess: int  # entries beyond the newest max count (ranks below it are over the count)
    cutoff_ms: int  # stopped before this: older than the age
    members: list[str]


class Pruner:
    def __init__(self, store: ExecutionStore, rules: Rules, batch: int = BATCH):
        self.store = store
        self.client = store.client
        self.keys = store.keys
        self.rules = rules
        self.batch = batch
        self._cursor = 0  # rank where the next window starts
        self._next_at = 0.0  # monotonic
        self._token = secrets.token_hex(8)

    @classmethod
    def from_settings(cls, store: ExecutionStore, settings) -> Pruner:
        return cls(store, Rules.from_settings(settings))

    def watch(self) -> Pruner:
        """Prune for `store` whenever the watch calls `prune_if_due(store)` (worker/leases.py)."""
        _pruners[self.store] = self
        return self

    def run_if_due(self, clock=time.monotonic) -> Round | None:
        now = clock()
        if now < self._next_at:
            return None
        self._next_at = now + PRUNE_EVERY_SECONDS
        window = self._window()  # read first: an idle deployment's rounds write nothing
        if not window.members:
            self._cursor = 0
            return None
        if not self._locked():
            return None
        done = self.run(window)
        if done.examined >= self.batch:
            self._next_at = now + BACKLOG_EVERY_SECONDS
        if done.deleted or done.gone:
            log.debug("pruned %d execution(s), dropped %d expired one(s) from the indexes",
                     done.deleted, done.gone)  # fmt: skip
        return done

    def _locked(self) -> bool:
        """This worker holds `executions:pruning` (taken now, or kept from its last round)."""
        key = self.keys.pruning()
        try:
            if self.client.set(key, self._token, nx=True, px=LOCK_MS):
                return True
            if _text(self.client.get(key) or "") != self._token:
                return False
            self.client.pexpire(key, LOCK_MS)
            return True
        except redis.OutOfMemoryError:
            return True  # Redis is full: deleting is what frees it, and it is allowed

    def run(self, window: _Window | None = None) -> Round:
        """One round: at most `batch` history entries examined, those the rules select deleted
        (in `window`, when it was read already)."""
        window = window or self._window()
        done = Round(examined=len(window.members))
        if not window.members:
            self._cursor = 0
            return done
        records = self._records(window.members)
        doomed, gone = self._select(window, records, done)
        removed = self._delete_all(doomed, records) + gone
        done.deleted = len(removed) - len(gone)
        done.gone = len(gone)
        done.passed = done.examined - len(removed)
        self._unindex(removed)
        self._cursor += done.passed
        if len(window.members) < self.batch:
            self._cursor = 0  # the prefix was walked to its end: start over next time
        return done

    def _window(self) -> _Window:
        """The next window of the prefix the rules select (empty when there is none left)."""
        now = now_ms()
        horizon = (
            min(self.rules.max_age_ms, self.rules.ttl_ms)
            if self.rules.prune
            else (self.rules.ttl_ms)
        )
        pipe = self.client.pipeline(transaction=False)
        pipe.zcard(self.keys.executions_history())
        pipe.zcount(self.keys.executions_history(), "-inf", now - horizon)
        total, old = pipe.execute()
        capped = self.rules.prune and self.rules.max_count > 0
        excess = max(total - self.rules.max_count, 0) if capped else 0
        eligible = max(excess, old)
        if self._cursor >= eligible:
            self._cursor = 0
        size = min(self.batch, eligible - self._cursor)
        members: list[str] = []
        if size > 0:
            end = self._cursor + size - 1
            members = self.client.zrange(self.keys.executions_history(), self._cursor, end)
        cutoff = now - self.rules.max_age_ms
        return _Window(self._cursor, excess, cutoff, [_text(m) for m in members])

    def _records(self, members: list[str]) -> list[str | None]:
        pipe = self.client.pipeline(transaction=False)
        for member in members:
            pipe.get(self.keys.execution(history_entry(member)[0]))
        return [None if raw is None else _text(raw) for raw in pipe.execute()]

    def _select(
        self, window: _Window, records: list[str | None], done: Round
    ) -> tuple[list[tuple[str, int]], list[str]]:
        """(member, revision) of the executions to delete, and the members whose record is gone."""
        doomed: list[tuple[str, int]] = []
        gone: list[str] = []
        for i, (member, raw) in enumerate(zip(window.members, records, strict=True)):
            if raw is None:
                gone.append(member)
                continue
            rev = self._selected(raw, window.start + i < window.excess, window.cutoff_ms)
            if rev is not None:
                doomed.append((member, rev))
        return doomed, gone

    def _selected(self, raw: str, over_count: bool, cutoff_ms: int) -> int | None:
        """The record's revision if the rules delete it, else None."""
        if not self.rules.prune:
            return None
        try:
            head = header(raw)
            if head.status in ("new", "running", "waiting"):
                return None
            if over_count:
                return head.rev
            record = ExecutionRecord.decode(raw)
        except (RecordError, ValueError, KeyError, TypeError):
            return None  # not a record of ours: its time to live takes it
        stopped = record.stopped_at or record.created_at
        return head.rev if stopped <= cutoff_ms else None

    def _delete_all(self, doomed: list[tuple[str, int]], records: list[str | None]) -> list[str]:
        """Delete each execution's keys (one script each, in one round trip); the members done."""
        if not doomed:
            return []
        pipe = self.client.pipeline(transaction=False)
        for member, rev in doomed:
            keys = execution_keys(self.keys, history_entry(member)[0])
            # EVAL as a command: a cluster's pipeline has none, yet routes it by its keys
            pipe.execute_command("EVAL", _DELETE, len(keys), *keys, rev)
        answers = pipe.execute(raise_on_error=False)
        done = []
        for (member, _), answer in zip(doomed, answers, strict=True):
            if isinstance(answer, Exception):
                log.warning("could not prune execution %s: %s", history_entry(member)[0], answer)
            elif answer == 1:
                done.append(member)
        return done

    def _unindex(self, members: list[str]) -> None:
        """Drop these entries from the history and from their workflows' indexes."""
        if not members:
            return
        by_workflow: dict[str, list[str]] = defaultdict(list)
        for member in members:
            execution_id, workflow_id = history_entry(member)
            by_workflow[workflow_id].append(execution_id)
        pipe = self.client.pipeline(transaction=False)
        pipe.zrem(self.keys.executions_history(), *members)
        for workflow_id, ids in by_workflow.items():
            pipe.zrem(self.keys.workflow_executions(workflow_id), *ids)
        pipe.execute()


_pruners: weakref.WeakKeyDictionary[ExecutionStore, Pruner] = weakref.WeakKeyDictionary()


def prune_if_due(store: ExecutionStore) -> Round | None:
    """A round for the deployment of `store` if one is due and a pruner watches it."""
    pruner = _pruners.get(store)
    return None if pruner is None else pruner.run_if_due()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
