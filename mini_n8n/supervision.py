"""What `mini-n8n up` does when one of its processes dies: says which, and why (its exit code or
the signal that killed it), and starts it again. A process that keeps dying soon after its start
(a port still held, a broken setting) is started again after a pause that doubles each time, up
to MAX_PAUSE_SECONDS, instead of in a tight loop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

# Dying sooner than this after its start counts against a process: the next start waits longer.
SOON_AFTER_START_SECONDS = 10.0
MAX_PAUSE_SECONDS = 30.0


def exit_reason(code: int) -> str:
    """How a process ended, from its return code (negative: the signal that killed it)."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"was killed by {name}"


def say(line: str) -> None:
    print(f"mini-n8n: {line}", file=sys.stderr, flush=True)


class Supervised:
    """One process `up` keeps running. `start` starts it (again) and returns it."""

    def __init__(
        self,
        name: str,
        start: Callable[[], subprocess.Popen],
        clock: Callable[[], float] = time.monotonic,
    ):
        self.name = name
        self._start = start
        self._clock = clock
        self.process = start()
        self.started = clock()
        self.soon_deaths = 0  # deaths in a row, each soon after its start
        self.restart_at: float | None = None  # it died: when to start it again

    def check(self) -> None:
        """Start it again if it died (at once, or after its pause)."""
        code = self.process.poll()
        if code is None:
            return
        now = self._clock()
        if self.restart_at is None:
            soon = now - self.started < SOON_AFTER_START_SECONDS
            self.soon_deaths = self.soon_deaths + 1 if soon else 0
            pause = self._pause()
            self.restart_at = now + pause
            later = f" in {pause:g} s" if pause else ""
            say(
                f"the {self.name} (pid {self.process.pid}) {exit_reason(code)}; restarting it{later}"
            )
        if now >= self.restart_at:
            self._restart(now)

    def _pause(self) -> float:
        if self.soon_deaths == 0:
            return 0.0
        return min(2.0 ** (self.soon_deaths - 1), MAX_PAUSE_SECONDS)

    def _restart(self, now: float) -> None:
        try:
            process = self._start()
        except (OSError, RuntimeError) as err:
            self.soon_deaths += 1
            self.restart_at = now + self._pause()
            say(f"the {self.name} could not be started: {err}; trying again in {self._pause():g} s")
            return
        self.process, self.started, self.restart_at = process, now, None
        say(f"the {self.name} was restarted (pid {process.pid})")
