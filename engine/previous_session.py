"""The Chat Trigger's `loadPreviousSession`: the conversation so far, read from the memory
connected to the trigger, without running the workflow.

The memory is found and asked exactly as an execution asks it: the memory node's own
`supply_data`, evaluated on an item that is the request body (so `$json.sessionId`, a v1/v1.1
`sessionKey` expression and a `customKey` resolve as they do for the message itself), in a context
whose trigger output is that body too. So the session key, the protected chat's namespace and the
memory key prefix cannot differ from what the conversation wrote. Messages come back as LangChain's
`toJSON()` (n8n answers with `memory.chatHistory.getMessages()`, the whole history, no window).
Only what the chat showed comes back: the user's messages and the AI's text. n8n also returns a
turn's tool calls and tool results (an n8n 3.x Agent stores them), which `@n8n/chat` then shows
as bot bubbles of JSON.

Who calls it lends the services: the api lends its Redis and keys, and an empty in-process memory
for Simple Memory, whose real one lives inside the workers.
"""

from __future__ import annotations

from typing import Any

from engine.context import ExecuteContext, Execution
from engine.errors import NodeExecutionError
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import Node, Workflow
from memory.base import SessionMemory
from memory.messages import ChatMessage


def previous_session(
    workflow: Workflow, trigger: Node, body: dict[str, Any], services: Services
) -> list[dict[str, Any]]:
    """The session's messages, oldest first, serialized as LangChain does.

    Raises NodeExecutionError (SessionKeyRefused for a session key that may not be used) or
    ExpressionError, naming the node, as the execution would.
    """
    item = {"json": body}
    execution = Execution(
        id="", workflow=workflow, hooks=Hooks(), services=services, mode="webhook"
    )
    execution.run_data[trigger.name] = [{"data": {"main": [[item]]}}]
    trigger_ctx = ExecuteContext(execution, trigger, [item], run_index=0)
    memories = trigger_ctx.sub_nodes("ai_memory")
    if not memories:
        raise NodeExecutionError(
            "loadPreviousSession is set to memory but no memory is connected", node=trigger.name
        )
    supplied: SessionMemory = trigger_ctx.supply(memories[0], 0)
    return [m.to_serialized() for m in supplied.messages() if _shown(m)]


def _shown(message: ChatMessage) -> bool:
    """A message the chat showed: the user's, or an AI message with text (not a bare tool
    call, not a tool result)."""
    return message.role == "human" or (message.role == "ai" and bool(message.content))
