"""Waiting for something another process does: poll a probe until it answers, within a bound.
The one poll-until helper of the suite (a test that waits says what for, and fails saying so)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(probe: Callable[[], T], timeout: float, what: str, every: float = 0.05) -> T:
    """The first truthy value `probe()` returns; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
