"""Simple Memory (`@n8n/n8n-nodes-langchain.memoryBufferWindow`): chat memory kept in this
process. Sessions idle for an hour are dropped. On several workers it forgets whenever a session's
messages land on different processes; that is what the Redis memory is for."""

from __future__ import annotations

from engine.chat_session import SESSION_PROPERTIES, session_id, window_length
from engine.description import NodeDescription
from engine.node import NodeType, SupplyDataFunctions
from engine.registry import register
from engine.workflow import Node
from memory.base import SessionMemory
from memory.window import InProcessMemory

QUEUE_MODE_WARNING = (
    "Simple Memory keeps chat history inside one worker process: in queue mode, messages of one "
    "session that land on different workers do not see each other. Use Redis Chat Memory."
)

_fallback = InProcessMemory()


@register
class MemoryBufferWindow(NodeType):
    type = "@n8n/n8n-nodes-langchain.memoryBufferWindow"
    description = NodeDescription(
        display_name="Simple Memory",
        group="memory",
        description="Chat history kept in the worker process (forgets across workers).",
        version=1.3,
        subtitle="memory buffer window",
        inputs=(),
        outputs=("ai_memory",),
        properties=SESSION_PROPERTIES,
    )

    def activation_warning(self, node: Node, queue_mode: bool) -> str | None:
        return QUEUE_MODE_WARNING if queue_mode else None

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> SessionMemory:
        backend = ctx.services.simple_memory or _fallback
        session = buffer_key(ctx.workflow.id, session_id(ctx))
        return SessionMemory(backend, session, window_length(ctx), ctx.services.journal)


def buffer_key(workflow_id: str, session: str) -> str:
    """n8n keys the process-wide buffer by workflow and session (`<workflow>__<session>`), where
    workflow `a` with session `b__c` and workflow `a__b` with session `c` share one buffer. The
    workflow id's length in front makes every pair its own key."""
    return f"{len(workflow_id)}:{workflow_id}:{session}"
