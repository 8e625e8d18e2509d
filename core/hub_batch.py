"""Writes that go out together in one round trip: what the hub writes around a reply's start
and each AI message's beginning, where every round trip is on the way to the user's first chunk.

On one Redis the commands go out in one write on a connection of the pool, without redis-py's
layers around each (core/redis_clients.py `Quick`); elsewhere (a cluster) as a pipeline without
a transaction. Scripts go by EVALSHA; one Redis does not know (it was restarted or flushed) runs
again the usual way, which loads it. Any other error is raised once every reply was read.
"""

from __future__ import annotations

from typing import Any

import redis

from core.redis_clients import Quick


class Batch:
    def __init__(self, client: Any):
        self.client = client
        self._quick = Quick.of(client)
        self._commands: list[tuple[Any, ...]] = []
        self._scripts: dict[int, tuple[Any, list[Any], list[Any]]] = {}

    def __len__(self) -> int:
        return len(self._commands)

    def call(self, *args: Any) -> int:
        """Queue one command (its words, as Redis takes them); the index of its reply."""
        self._commands.append(args)
        return len(self._commands) - 1

    def script(self, script: Any, keys: list[Any], args: list[Any]) -> int:
        """Queue a script (a redis-py Script, or core/redis_clients.py's quick one); the index
        of its reply."""
        index = self.call("EVALSHA", script.sha, len(keys), *keys, *args)
        self._scripts[index] = (script, keys, args)
        return index

    def execute(self) -> list[Any]:
        if not self._commands:
            return []
        if self._quick is not None:
            replies = self._quick.exchange(self._commands)
        else:
            pipe = self.client.pipeline(transaction=False)
            for command in self._commands:
                pipe.execute_command(*command)
            replies = pipe.execute(raise_on_error=False)
        for index, (script, keys, args) in self._scripts.items():
            if _no_script(replies[index]):
                replies[index] = script(keys=keys, args=args)
        failed = next((r for r in replies if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
        return replies


def _no_script(reply: Any) -> bool:
    return isinstance(reply, redis.exceptions.NoScriptError) or (
        isinstance(reply, redis.exceptions.ResponseError) and str(reply).startswith("NOSCRIPT")
    )
