"""Errors raised by the engine. Each carries the node (and item) it happened at, so the api
and the CLI can say where a workflow went wrong."""

from __future__ import annotations


class EngineError(Exception):
    """Base class for everything the engine raises on purpose."""

    description: str | None = None  # a hint shown under the message, as n8n's error description

    def __init__(self, message: str, *, node: str | None = None, item_index: int | None = None):
        super().__init__(message)
        self.message = message
        self.node = node
        self.item_index = item_index

    def __str__(self) -> str:
        if self.node:
            return f'Node "{self.node}": {self.message}'
        return self.message


class WorkflowValidationError(EngineError, ValueError):
    """The workflow cannot be loaded: unknown node type, missing sub-node, bad connection..."""


class ExpressionError(EngineError):
    """An expression could not be parsed or evaluated."""

    def __init__(
        self,
        message: str,
        *,
        expression: str | None = None,
        node: str | None = None,
        parameter: str | None = None,
        item_index: int | None = None,
    ):
        super().__init__(message, node=node, item_index=item_index)
        self.expression = expression
        self.parameter = parameter

    def __str__(self) -> str:
        where = []
        if self.node:
            where.append(f'node "{self.node}"')
        if self.parameter:
            where.append(f'parameter "{self.parameter}"')
        prefix = f"Expression error in {', '.join(where)}: " if where else "Expression error: "
        suffix = f" (expression: {self.expression})" if self.expression else ""
        return f"{prefix}{self.message}{suffix}"


class NodeExecutionError(EngineError):
    """A node failed while running."""


class NodeApiError(NodeExecutionError):
    """A node's call to a service failed (n8n's NodeApiError): `http_code` is the answer's status
    as text ("404"), or a network error's code (ECONNREFUSED...), None if neither; `description`
    says more, in the service's words where it gave any."""

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        item_index: int | None = None,
        http_code: str | None = None,
        description: str | None = None,
    ):
        super().__init__(message, node=node, item_index=item_index)
        self.http_code = http_code
        self.description = description


class ExecutionLimitExceeded(NodeExecutionError):
    """The execution used more of a bounded resource (its CPU time) than its runner allows."""


class ExecutionCanceled(EngineError):
    """The execution was stopped from outside (REST stop, client gone)."""

    def __init__(self, message: str = "The execution was stopped", **kw):
        super().__init__(message, **kw)


class SubWorkflowError(NodeExecutionError):
    """A sub-workflow could not be called: not found, refused by its caller policy, too deep."""


class SessionKeyRefused(NodeExecutionError):
    """A chat memory's session key would name a key that is not chat memory (see Keys.chat)."""


class WaitingForReply(Exception):  # noqa: N818 - not an error: the execution pauses
    """Raised by a node that pauses the execution: the Chat node waits for the user's reply,
    the Wait node for its time or a call of its resume URL. The executor records the node's run
    as `waiting`, saves where the execution stands and returns a Run with status "waiting";
    `run_workflow(..., resume=...)` continues it."""

    def __init__(
        self, output: list[list[dict]], wait_till_ms: int | None = None, wait_for: str = "reply"
    ):
        super().__init__("waiting for the user's reply")
        self.output = output  # the node's output while it waits (n8n: {json: {}, sendMessage})
        self.wait_till_ms = wait_till_ms  # None: no time limit
        # What ends the wait besides its time: "reply" (a chat message, the Chat node's),
        # "webhook" (a call of $execution.resumeUrl) or "time" (its time alone).
        self.wait_for = wait_for
