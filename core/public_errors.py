"""What a public client may be told of an execution that did not succeed: one rule for every
door that answers one (a webhook's or a chat's stream and JSON answer, the chat socket).

Public clients are nobody signed in: whoever can reach a public Chat Trigger or a webhook. The
execution record keeps the whole story for the editor (`error`, `errorNode`, each node's run
data: GET /rest/executions/<id>), but a failure's text is often not ours to give away: a node's
error repeats what an upstream server answered (its body may hold anything, "db password
hunter2" included), an exception names hosts and ports, a credential's or the workflow's insides.
So a public client is told only what our own code wrote about the execution's life, and
otherwise GENERIC with the execution id, under which the editor finds the full text:

- a stop, a lost worker, a queue timeout (statuses canceled and crashed: only the lifecycle,
  core/stops.py and core/executions.py, writes those, and names no host, node or value);
- the execution's own limits: MINI_N8N_EXECUTION_TIMEOUT, MINI_N8N_EXECUTION_CPU_SECONDS, a
  Chat node's Limit Wait Time;
- what the api itself says of the stream (Redis unreachable, the end lost on its way): results
  it builds carry `public=True` (core/results.py).

n8n sends a failed node's description down a streaming chat as it is, and answers a failed
lastNode chat with {"message": "Error in workflow"} and nothing else; we keep n8n's shapes and
put GENERIC where the text would be.
"""

from __future__ import annotations

import re
from typing import Any

from core.execution_record import Status
from core.waiting import EXPIRED

GENERIC = "The workflow could not answer (execution {execution_id})."
STOPPED = "The execution was stopped."
# The execution's limits, in the words of what enforces them: its time (worker/execution_run.py)
# and its CPU time (engine/cpu.py).
LIMITS = re.compile(
    r"The execution timed out after [0-9.e+]+ s \(MINI_N8N_EXECUTION_TIMEOUT\)\."
    r"|The execution used more than [0-9.e+]+ s of CPU time \(MINI_N8N_EXECUTION_CPU_SECONDS\)\."
)
LIFECYCLE = frozenset({Status.CANCELED, Status.CRASHED})


def public_error(
    status: str | None, error: str | None, execution_id: str, *, ours: bool = False
) -> str:
    """The text a public client gets for an execution that ended with `status` and `error` (the
    record's); `ours`: the caller wrote `error` itself, for whoever waits on the stream."""
    if error and (ours or status in LIFECYCLE or _a_limit(error)):
        return error
    if status == Status.CANCELED:
        return STOPPED
    return generic(execution_id)


def generic(execution_id: str) -> str:
    return GENERIC.format(execution_id=execution_id)


def public_chunk(chunk: dict[str, Any], execution_id: str) -> dict[str, Any]:
    """A chunk for a public stream: a failed node's `error` chunk says what `public_error` lets
    it say (its metadata, which names the node as n8n's does, stays), and so does a failed tool
    call's step line; other chunks as they are."""
    if chunk.get("type") == "tool-call-end":
        return _tool_end(chunk, execution_id)
    if chunk.get("type") != "error":
        return chunk
    content = chunk.get("content")
    said = public_error(Status.ERROR, content if isinstance(content, str) else None, execution_id)
    return chunk if said == content else {**chunk, "content": said}


def _tool_end(chunk: dict[str, Any], execution_id: str) -> dict[str, Any]:
    """A tool's error is a node's error (an upstream's answer, a host, a value): the record keeps
    it, a public stream gets the generic text in its place."""
    metadata = chunk.get("metadata")
    if not isinstance(metadata, dict) or "toolError" not in metadata:
        return chunk
    return {**chunk, "metadata": {**metadata, "toolError": generic(execution_id)}}


def _a_limit(error: str) -> bool:
    return error == EXPIRED or LIMITS.fullmatch(error) is not None
