"""Wall-clock time as every record and chunk carries it: milliseconds since the epoch, as
JavaScript's Date.now() gives n8n."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
