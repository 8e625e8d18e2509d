"""The compose file's Redis (read as text: no container needed): a maxmemory below the
container's memory limit, and a policy that never evicts chat memory."""

from __future__ import annotations

import re

from tests.compose.harness import ROOT

UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3,
         "gb": 1024**3}  # fmt: skip
LIMIT_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}  # compose's mem_limit: binary


def redis_service() -> str:
    text = (ROOT / "docker-compose.yml").read_text()
    return re.search(r"\n  redis:\n(.*?)\n  \w+:\n", text, re.S)[1]


def flag(service: str, name: str) -> str:
    return re.search(rf"- --{name}\n\s+- \"?([\w-]+)\"?\n", service)[1]


def test_redis_stops_below_its_memory_limit_and_never_evicts():
    service = redis_service()
    number, unit = re.fullmatch(r"(\d+)([a-z]*)", flag(service, "maxmemory")).groups()
    maxmemory = int(number) * UNITS[unit]
    number, unit = re.search(r"\n    mem_limit: (\d+)([kmg])\n", service).groups()
    assert 0 < maxmemory < 0.8 * int(number) * LIMIT_UNITS[unit]
    assert flag(service, "maxmemory-policy") == "noeviction"
