"""Every Redis key mini-n8n uses is built here, and only here.

| key                              | type    | holds                                                     |
|----------------------------------|---------|-----------------------------------------------------------|
| chat:<sessionKey>                | LIST    | chat memory, newest first (LangChain message JSON)        |
| workflow:<id>                    | STRING  | workflow JSON with "active"                               |
| workflows                        | SET     | ids of all stored workflows                               |
| webhooks                         | HASH    | "<METHOD> <path>" -> workflow id, for active workflows    |
| execution:<id>                   | STRING  | execution record (status, times, error, run data); TTL    |
| execution:<id>:events            | channel | chunks and the final result of one execution              |
| execution:<id>:turn              | LIST    | wake-up token for an execution waiting for its session    |
| execution:<id>:stop              | STRING  | set when a stop was asked for; short TTL                  |
| executions:stop                  | channel | ids of executions to stop, heard by every worker          |
| executions:running               | ZSET    | running execution ids, score = lease deadline (ms)        |
| executions:workflow:<id>         | ZSET    | execution ids of one workflow, score = creation time (ms) |
| session:<workflowId>:<sessionId> | LIST    | executions of one chat session, in arrival order          |
| push:<pushRef>                   | channel | editor events                                             |

An optional global prefix (MINI_N8N_KEY_PREFIX) is put in front of every key, so several
deployments can share one Redis database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Keys:
    prefix: str = ""

    @classmethod
    def from_env(cls) -> Keys:
        return cls(os.environ.get("MINI_N8N_KEY_PREFIX", ""))

    def chat(self, session_key: str) -> str:
        return f"{self.prefix}chat:{session_key}"

    def chat_pattern(self) -> str:
        return f"{self.prefix}chat:*"

    def session_from_chat_key(self, key: str) -> str:
        return key[len(self.prefix) + len("chat:") :]

    def workflow(self, workflow_id: str) -> str:
        return f"{self.prefix}workflow:{workflow_id}"

    def workflows(self) -> str:
        return f"{self.prefix}workflows"

    def webhooks(self) -> str:
        return f"{self.prefix}webhooks"

    def execution(self, execution_id: str) -> str:
        return f"{self.prefix}execution:{execution_id}"

    def execution_events(self, execution_id: str) -> str:
        return f"{self.prefix}execution:{execution_id}:events"

    def execution_turn(self, execution_id: str) -> str:
        return f"{self.prefix}execution:{execution_id}:turn"

    def execution_stop(self, execution_id: str) -> str:
        return f"{self.prefix}execution:{execution_id}:stop"

    def stop_channel(self) -> str:
        return f"{self.prefix}executions:stop"

    def running(self) -> str:
        return f"{self.prefix}executions:running"

    def workflow_executions(self, workflow_id: str) -> str:
        return f"{self.prefix}executions:workflow:{workflow_id}"

    def session_queue(self, workflow_id: str, session_id: str) -> str:
        return f"{self.prefix}session:{workflow_id}:{session_id}"

    def push(self, push_ref: str) -> str:
        return f"{self.prefix}push:{push_ref}"
