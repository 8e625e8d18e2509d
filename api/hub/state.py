"""What one api process holds for the Chat Hub: its settings and stores, built once per app on
first use (beside api/runtime.py's `ApiRuntime`, whose Redis client and relay they share)."""

from __future__ import annotations

import threading

from flask import current_app

from api.hub.fanout import Fanout
from api.runtime import ApiRuntime, runtime
from core.hub_agents import AgentStore
from core.hub_runs import RunStore
from core.hub_settings import HubSettings
from core.hub_store import ConversationStore
from core.hub_stream import HubEvents

_KEY = "mini_n8n_hub"
# The relay's lease on a reply (core/hub_runs.py): renewed at least every keepalive interval,
# so three intervals without a renewal mean its process is gone.
LEASE_INTERVALS = 3


class HubRuntime:
    def __init__(self, rt: ApiRuntime, settings: HubSettings):
        self.rt = rt
        self.settings = settings
        client, keys = rt.redis, rt.keys
        self.conversations = ConversationStore(client, keys, settings)
        self.agents = AgentStore(client, keys, settings.max_agents)
        lease_ms = int(rt.settings.keepalive_seconds * LEASE_INTERVALS * 1000)
        self.runs = RunStore(client, keys, rt.settings.executions_ttl, lease_ms)
        self.fanout = Fanout(rt.relay)
        self.events = HubEvents(client, keys, settings, rt.settings.executions_ttl,
                                local=self.fanout.deliver)  # fmt: skip


_lock = threading.Lock()


def hub() -> HubRuntime:
    found = current_app.extensions.get(_KEY)
    if found is None:
        with _lock:
            found = current_app.extensions.get(_KEY)
            if found is None:
                found = HubRuntime(runtime(), HubSettings.from_env())
                current_app.extensions[_KEY] = found
    return found
