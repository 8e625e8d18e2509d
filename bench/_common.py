"""Shared pieces of the benchmarks: a Redis server, a deployment, percentiles."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mini_n8n.redis_server import scratch_redis  # noqa: E402

redis_server = scratch_redis  # TEST_REDIS_URL, else an embedded server for the run


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<34} p50 {pct(ms, 50):7.2f} ms   p99 {pct(ms, 99):7.2f} ms   "
        f"mean {statistics.mean(ms):7.2f} ms   (n={len(ms)})"
    )
