"""Personal agents (n8n's "custom agents") in Redis: one HASH per user,
`hub:user:<uid>:agents`, agent id -> the agent's JSON (core/hub_records.py `HubAgent`).

An agent is its owner's only: every read takes the user, so another's agent reads as none.
"""

from __future__ import annotations

from typing import Any

from core.hub_records import HubAgent
from core.hub_store import HubLimit
from core.keys import Keys


class AgentStore:
    def __init__(self, client: Any, keys: Keys, max_agents: int):
        self.client = client
        self.keys = keys
        self.max_agents = max_agents

    def get(self, user_id: str, agent_id: str) -> HubAgent | None:
        raw = self.client.hget(self.keys.hub_agents(user_id), agent_id)
        return HubAgent.from_json(raw) if raw is not None else None

    def list(self, user_id: str) -> list[HubAgent]:
        raws = self.client.hvals(self.keys.hub_agents(user_id))
        agents = [HubAgent.from_json(raw) for raw in raws]
        return sorted(agents, key=lambda a: (-a.updated_at, a.id))

    def add(self, agent: HubAgent) -> None:
        key = self.keys.hub_agents(agent.owner_id)
        if self.client.hlen(key) >= self.max_agents:
            raise HubLimit(
                f"You have {self.max_agents} personal agents, the most one user may keep: "
                "delete one to make another."
            )
        self.client.hset(key, agent.id, agent.to_json())

    def save(self, agent: HubAgent) -> None:
        self.client.hset(self.keys.hub_agents(agent.owner_id), agent.id, agent.to_json())

    def delete(self, user_id: str, agent_id: str) -> bool:
        return bool(self.client.hdel(self.keys.hub_agents(user_id), agent_id))
