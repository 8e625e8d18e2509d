"""What the Code node expects from whoever runs its JavaScript.

The engine runs no JavaScript itself: its runner lends a `CodeRunner` in Services.code_runner,
which runs a CodeTask (core/code_task.py: plain JSON in, plain JSON out) in an isolate of its
own. A worker lends processes that each hold one V8 isolate (sandbox/pool.py); the engine's
tests an isolate on the calling thread (sandbox/isolate.py InProcessRunner) or a stand-in.
"""

from __future__ import annotations

from typing import Protocol

from core.code_task import CodeOutcome, CodeTask
from engine.llm import Cancellation


class CodeRunner(Protocol):
    def run(
        self, task: CodeTask, cancel: Cancellation | None = None, time_cap: float | None = None
    ) -> CodeOutcome:
        """Run `task` within the runner's time and memory limits, `time_cap` seconds at most
        (what the execution's CPU bound leaves). What the code did, or what stopped it, is the
        outcome's status: this raises for nothing the code does. `cpu_seconds` is what the run
        cost, for the execution's CPU bound."""
        ...
