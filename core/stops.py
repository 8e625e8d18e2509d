"""Stopping an execution, in Redis (the worker's side is worker/stops.py).

An execution that does not run (`new`, or `waiting` for a reply) is canceled at once: its
stream gets its final event. A running one is told to stop: `executions:stop` is a broadcast
every worker hears, and `execution:<id>:stop` covers a worker that claims it just after.
"""

from __future__ import annotations

from core.execution_record import ExecutionRecord, Status
from core.executions import ExecutionStore

MARKER_SECONDS = 300
STOPPED_WAITING = "The execution was stopped while it waited for a reply."
STOPPED_NEW = "The execution was stopped before it started."


def request_stop(store: ExecutionStore, execution_id: str) -> ExecutionRecord | None:
    """Stop the execution; its record as it stands (None if there is none)."""
    while True:
        record = store.get(execution_id)
        if record is None or record.finished:
            return record
        if record.status == Status.RUNNING:
            break
        why = STOPPED_WAITING if record.status == Status.WAITING else STOPPED_NEW
        if store.cancel(record, why):
            return store.get(execution_id)
        # It changed meanwhile (claimed, resumed): look again.
    # Two commands, not a pipeline: a cluster's pipeline refuses PUBLISH, which has no key
    # (a broadcast to every node, as the stop is meant for every worker).
    store.client.set(store.keys.execution_stop(execution_id), "1", ex=MARKER_SECONDS)
    store.client.publish(store.keys.stop_channel(), execution_id)
    return record
