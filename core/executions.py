"""Execution records in Redis and every transition between their statuses.

    new ──claim──▶ running ──finish──▶ success | error | canceled
     │   ▲            │  ▲
     │   └──resume────┤  └─ a reply already queued: stays running
     │    (a reply,   ▼
     │   or its time) waiting ──cancel──▶ canceled
     ├──cancel──▶ canceled
     └──reap (no worker started it in time) ──▶ crashed;  running ──reap (worker lost)──▶ crashed

Delivery is at most once: the api writes the record `new` before it enqueues the task, and a
worker runs an execution only after its claim moved it `new -> running`; a redelivered or
duplicated task finds it claimed and is dropped. Every transition is one script that
compares-and-sets on the record's revision (core/execution_record.py) and does the rest of the
step with it: the lease, the queue marker, the session's line, the final event. So:

- **One write for the end.** The record's final status and the channel's final event are one
  step: a stream that sees the record finished has been sent its final event, or will never be.
- **Retried steps are idempotent.** A claim or an end retried after a timeout finds its own claim
  token in the record and does nothing twice.
- **Nothing is left unfinished.** What keeps an unfinished execution alive is a key with a time
  to live (core/liveness.py); whoever looks (an api stream, a chat socket, a worker's reaper, an
  execution waiting for its turn) can `reap` one that is lost, which ends it `crashed`, publishes
  its final event and hands its session's turn on.

The store is split by concern: reads (core/execution_queries.py), the transitions
(core/execution_transitions.py, their scripts in core/execution_scripts.py and
core/end_script.py) and reaping (core/execution_reaping.py); `ExecutionStore` is all three.

On one Redis each step is one script. In a Redis Cluster a script touches one slot: the
execution's own keys (record, lease, queue marker, channel...) share its hash tag, and the rest
(the indexes reapers look at, the session's line) follows in separate steps, each safe on its
own: the indexes are only where reapers look (the keys are the truth), and a line's head that
ended is dropped by whoever walks the line (core/session_line.py).
"""

from __future__ import annotations

from core.execution_reaping import ExecutionReaping


class ExecutionStore(ExecutionReaping):
    """Every step of an execution's lifecycle, and its reads, in Redis."""
