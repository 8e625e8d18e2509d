"""Which finished executions are kept: n8n's save settings, per workflow and global.

A workflow's `settings.saveDataSuccessExecution` and `saveDataErrorExecution` ("all", "none",
or "DEFAULT"/absent for the global `EXECUTIONS_DATA_SAVE_ON_SUCCESS` / `_ON_ERROR`, both "all"),
and `saveManualExecutions` (`EXECUTIONS_DATA_SAVE_MANUAL_EXECUTIONS`, true), read as n8n's
toSaveSettings reads them: anything but "all" is not saved. What n8n then does with a finished
execution (its execution lifecycle hooks), and what that means here:

- A production execution that is not to be saved (a success with success "none", any other end
  with error "none") is deleted by n8n as it finishes. Here its stream and its session still
  need it for a moment: a stream that missed the final event reads the final record, and may
  first wait out a Redis outage of MINI_N8N_REDIS_OUTAGE (45 s); a chat socket opened after its
  POST was answered reads the record, its messages and its resumeToken. So the record keeps what
  those readers use (status, error, the last node's output) and nothing else, and it and those
  keys expire UNSAVED_GRACE_SECONDS after the end; it leaves the execution lists at once (it
  counts for no pruning limit and REST lists it no more). Its session's memory is kept, as the
  memory node's own settings say.
- A manual run (REST, the editor) that is not to be saved is soft-deleted by n8n and removed
  EXECUTIONS_DATA_HARD_DELETE_BUFFER hours later (1): the user may still look at it while building
  the workflow. Here it leaves the lists and its keys expire after that buffer.
- A waiting execution is never touched: it has not finished.

Only the ends a worker writes are decided here (a success or an error): a stop of an execution
that was not running and a reaper's `crashed` are kept until pruned (core/pruning.py).

Redis full: with `maxmemory` and `noeviction` (docker-compose.yml), Redis refuses every write
that needs memory and answers OutOfMemoryError; REDIS_FULL is what the api and the workers tell
the people concerned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import redis

from core.execution_record import LUA_HEADER, ExecutionRecord, Status
from core.executions import ExecutionStore
from core.keys import history_member

log = logging.getLogger("mini_n8n.retention")

# Longer than any reader of an unsaved execution needs it after its end (see above).
UNSAVED_GRACE_SECONDS = 120
REDIS_FULL = (
    "Redis is full (maxmemory): it refuses new writes until older executions are pruned or it "
    "is given more memory. Try again shortly."
)


class RedisFull(Exception):
    """A write Redis refused for want of memory, said plainly (Redis' own words name keys)."""

    def __init__(self) -> None:
        super().__init__(REDIS_FULL)


# How soon a client may try again when Redis is full: a pruning round is seconds away.
REDIS_FULL_RETRY_AFTER_SECONDS = 30

# An unsaved execution's end: the record replaced by what its readers need (or kept as it is:
# '') if it is still the finished one the worker wrote, then it and the keys its readers use
# expire after the grace. KEYS: record, messages, delivered, token, next (one slot).
# ARGV: the final record's revision, the record to keep ('' = as it is), grace s.
_RETIRE = f"""
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local status, rev = string.match(raw, '{LUA_HEADER}')
if not status or status == 'new' or status == 'running' or status == 'waiting'
    or tonumber(rev) ~= tonumber(ARGV[1]) then
  return 0
end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2]) end
for i = 1, #KEYS do redis.call('EXPIRE', KEYS[i], ARGV[3]) end
return 1
"""


@dataclass(frozen=True)
class SaveSettings:
    """n8n's ExecutionSaveSettings (packages/cli/src/execution-lifecycle/to-save-settings.ts)."""

    success: bool = True
    error: bool = True
    manual: bool = True

    @classmethod
    def defaults(cls, settings) -> SaveSettings:
        """The global defaults (EXECUTIONS_DATA_SAVE_ON_SUCCESS, ...)."""
        return cls(
            success=settings.executions_save_on_success == "all",
            error=settings.executions_save_on_error == "all",
            manual=settings.executions_save_manual,
        )

    def of_workflow(self, workflow_settings: dict[str, Any] | None) -> SaveSettings:
        """A workflow's own settings over these defaults."""
        given = workflow_settings if isinstance(workflow_settings, dict) else {}

        def mode(name: str, default: bool) -> bool:
            value = given.get(name, "DEFAULT")
            return default if value in ("DEFAULT", None) else value == "all"

        manual = given.get("saveManualExecutions", "DEFAULT")
        return SaveSettings(
            success=mode("saveDataSuccessExecution", self.success),
            error=mode("saveDataErrorExecution", self.error),
            manual=self.manual if manual in ("DEFAULT", None) else manual is True,
        )

    def keeps(self, record: ExecutionRecord) -> bool:
        """Whether this finished execution is saved."""
        if record.mode == "manual":
            return self.manual
        return self.success if record.status == Status.SUCCESS else self.error


class Retention:
    def __init__(self, store: ExecutionStore, settings):
        self.store = store
        self.keys = store.keys
        self.defaults = SaveSettings.defaults(settings)
        self.manual_grace = max(1, round(settings.executions_hard_delete_buffer_hours * 3600))
        self._retire = store.client.register_script(_RETIRE)

    def ended(self, final: ExecutionRecord, workflow_settings: Callable[[], Any]) -> bool:
        """A worker wrote this end: an execution its workflow does not save keeps only what its
        readers need, for a while (see above). True if it was one. Never raises: the end is
        written whatever happens here (the execution is then kept until pruned)."""
        try:
            if self.defaults.of_workflow(workflow_settings()).keeps(final):
                return False
            self.retire(final)
            return True
        except Exception:
            log.exception("execution %s: could not apply its save settings", final.id)
            return False

    def retire(self, final: ExecutionRecord) -> None:
        manual = final.mode == "manual"
        grace = self.manual_grace if manual else UNSAVED_GRACE_SECONDS
        kept = "" if manual else _readers_part(final).encode()
        execution_id = final.id
        keys = [
            self.keys.execution(execution_id),
            self.keys.execution_messages(execution_id),
            self.keys.execution_delivered(execution_id),
            self.keys.execution_token(execution_id),
            self.keys.execution_next(execution_id),
        ]
        try:
            self._retire(keys=keys, args=[final.rev, kept, grace])
        except redis.OutOfMemoryError:  # no room for the smaller record: expire it as it is
            self._retire(keys=keys, args=[final.rev, "", grace])
        pipe = self.store.client.pipeline(transaction=False)
        pipe.zrem(self.keys.executions_history(), history_member(execution_id, final.workflow_id))
        pipe.zrem(self.keys.workflow_executions(final.workflow_id), execution_id)
        pipe.execute()


def _readers_part(final: ExecutionRecord) -> ExecutionRecord:
    """The record as its readers use it after the end (core/results.py `from_record`): the
    last node's last run, which holds the output, and no other run data."""
    last = final.last_node_executed or ""
    runs = final.run_data.get(last) or []
    run_data = {last: runs[-1:]} if runs else {}
    return replace(final, run_data=run_data, run_data_truncated=bool(final.run_data))
