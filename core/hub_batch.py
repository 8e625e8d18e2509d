"""Writes that go out together in one round trip (a pipeline without a transaction): what the
hub writes around a reply's start and each AI message's beginning, where every round trip is on
the way to the user's first chunk.

Scripts go by EVALSHA; one Redis does not know (it was restarted or flushed) runs again the
usual way, which loads it. Any other error is raised once every reply was read.
"""

from __future__ import annotations

from typing import Any

import redis


class Batch:
    def __init__(self, client: Any):
        self.pipe = client.pipeline(transaction=False)
        self._scripts: dict[int, tuple[Any, list[Any], list[Any]]] = {}

    def __len__(self) -> int:
        return len(self.pipe)

    def script(self, script: Any, keys: list[Any], args: list[Any]) -> int:
        """Queue a script (a redis-py Script, or core/redis_clients.py's quick one); the index
        of its reply."""
        index = len(self.pipe)
        self.pipe.evalsha(script.sha, len(keys), *keys, *args)
        self._scripts[index] = (script, keys, args)
        return index

    def execute(self) -> list[Any]:
        replies = self.pipe.execute(raise_on_error=False)
        for index, (script, keys, args) in self._scripts.items():
            if isinstance(replies[index], redis.exceptions.NoScriptError):
                replies[index] = script(keys=keys, args=args)
        failed = next((r for r in replies if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed
        return replies
