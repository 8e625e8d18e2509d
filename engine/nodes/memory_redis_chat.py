"""Redis Chat Memory (`@n8n/n8n-nodes-langchain.memoryRedisChat`): chat memory in Redis, in
n8n's own layout, so any worker sees every turn and `redis-cli` shows the history.

Which list a session is: `Keys.chat(session, memory_scope(workflow))`, so a protected chat's
memory is private to its workflow (see engine/chat_session.py and core/keys.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.credentials import CredentialError
from core.keys import ReservedKeyError
from engine.chat_session import SESSION_PROPERTIES, session_id, window_length
from engine.description import CredentialSlot, NodeDescription, Property
from engine.errors import NodeExecutionError, SessionKeyRefused
from engine.node import NodeType, SupplyDataFunctions
from engine.nodes.chat_trigger import memory_scope
from engine.registry import register
from memory.base import SessionMemory
from memory.redis import RedisMemory

if TYPE_CHECKING:
    from redis import Redis


@register
class MemoryRedisChat(NodeType):
    type = "@n8n/n8n-nodes-langchain.memoryRedisChat"
    description = NodeDescription(
        display_name="Redis Chat Memory",
        group="memory",
        description="Chat history in Redis: every worker sees every turn.",
        version=1.5,
        subtitle="memory redis",
        inputs=(),
        outputs=("ai_memory",),
        # Optional here: without one the deployment's own Redis (REDIS_URL) is used.
        credentials=(CredentialSlot("redis"),),
        properties=(
            *SESSION_PROPERTIES[:2],
            Property(
                "sessionTTL",
                "Session Time To Live",
                "number",
                0,
                description="Seconds before an idle session expires (0: never).",
                type_options={"minValue": 0},
            ),
            SESSION_PROPERTIES[2],
        ),
    )

    def supply_data(self, ctx: SupplyDataFunctions, item_index: int) -> SessionMemory:
        client = _client(ctx)
        ttl = ctx.get_parameter("sessionTTL", 0) or 0
        try:
            ttl = max(int(ttl), 0)
        except (TypeError, ValueError) as err:
            raise NodeExecutionError(
                "Session Time To Live must be a number", node=ctx.node.name
            ) from err
        # Before v1.3 n8n's node read the whole history (no window).
        window = window_length(ctx) if ctx.node.type_version >= 1.3 else None
        session = session_id(ctx)
        backend = RedisMemory(
            client, ctx.services.keys, ttl_seconds=ttl, workflow_id=memory_scope(ctx.workflow)
        )
        try:
            backend.key(session)  # refused here, naming the node, before any read or write
        except ReservedKeyError as err:
            raise SessionKeyRefused(str(err), node=ctx.node.name) from None
        return SessionMemory(backend, session, window, ctx.services.journal)


def _client(ctx: SupplyDataFunctions) -> Redis:
    connect = ctx.services.redis_for_credential
    ref = (ctx.node.credentials or {}).get("redis")
    if ref and connect:
        try:
            return connect(ref)
        except CredentialError as err:  # its message names the credential, never a secret
            raise NodeExecutionError(str(err), node=ctx.node.name) from None
    if ctx.services.redis is None:
        raise NodeExecutionError(
            "no Redis connection is configured (REDIS_URL)", node=ctx.node.name
        )
    return ctx.services.redis
