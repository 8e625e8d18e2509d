"""One V8 isolate (the `mini-racer` package) with the Code node's globals loaded: it runs one
Code node's JavaScript once and is then closed, so nothing of one run (a global it set, a
prototype it changed) is seen by the next.

The isolate's own limits stop the code: its heap limit (a run that allocates past it raises
JSOOMException, and the isolate is not used again) and its time limit (V8 terminates the
script). What they cannot catch (memory outside V8's heap, such as a large ArrayBuffer, or a
V8 fatal error that ends the process) is caught by the process around it: sandbox/processes.py.

mini-racer answers through an asyncio loop on a thread of its own, which gevent's monkey-patching
breaks (its threads become greenlets of the caller): isolates live in a process that gevent never
patched (sandbox/server.py), or in a plain threaded one (the engine's tests, InProcessRunner).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from functools import cache
from pathlib import Path

import orjson

from core.code_task import CodeOutcome, CodeTask

HERE = Path(__file__).resolve().parent
LOG_WAIT = 0.5  # seconds to read back console lines after a run was stopped


@cache
def _scripts() -> tuple[str, str]:
    return (HERE / "luxon.min.js").read_text(), (HERE / "harness.js").read_text()


def memory_message(memory_mb: int) -> str:
    # n8n's words (its task runner's TaskRunnerOomError), and the setting that raises the bound.
    return f"Node ran out of memory (the Code node may use {memory_mb} MB: MINI_N8N_CODE_MEMORY_MB)"


def timeout_message(seconds: float) -> str:
    unit = "second" if seconds == 1 else "seconds"
    return f"Task execution timed out after {seconds:g} {unit} (MINI_N8N_CODE_TIMEOUT)"


class Isolate:
    """A fresh isolate, its heap bounded to `memory_mb`, with Luxon and the harness loaded."""

    def __init__(self, memory_mb: int):
        from py_mini_racer import MiniRacer

        self.memory_mb = memory_mb
        self._mr = MiniRacer()
        self._mr.set_hard_memory_limit(memory_mb * 1024 * 1024)
        luxon, harness = _scripts()
        self._mr.eval(luxon)
        self._mr.eval(harness)
        self.spent = False  # ran its one task, or was stopped: close it

    def run(self, task: CodeTask, timeout: float) -> CodeOutcome:
        """Run `task` within `timeout` seconds; the isolate is spent after."""
        from py_mini_racer import JSEvalException, JSOOMException, JSTimeoutException

        self.spent = True
        started = time.monotonic()
        data = orjson.dumps(task.to_js()).decode()  # NaN and Infinity as null, as JSON has them
        call = f"__miniN8n.run(JSON.parse({json.dumps(data)}))"
        try:
            promise = self._mr.eval(call, timeout_sec=timeout)
            left = max(0.001, timeout - (time.monotonic() - started))
            text = promise.get(timeout=left)  # type: ignore[union-attr]
        except JSOOMException:
            return CodeOutcome.stopped("memory", memory_message(self.memory_mb))
        except JSTimeoutException:
            if self._mr.was_hard_memory_limit_reached():
                return CodeOutcome.stopped("memory", memory_message(self.memory_mb))
            return CodeOutcome.stopped("timeout", timeout_message(timeout), self._logs())
        except JSEvalException as err:  # the harness itself failed: not the user's code
            return CodeOutcome.stopped("crashed", f"The Code node's sandbox failed: {err}")
        return CodeOutcome.from_harness(str(text))

    def _logs(self) -> list[str]:
        """The console lines of a run that was stopped, if the isolate still answers."""
        with contextlib.suppress(Exception):
            return list(self._mr.execute("__miniN8n.takeLogs()", timeout_sec=LOG_WAIT))
        return []

    def close(self) -> None:
        self._mr.close()


class InProcessRunner:
    """A CodeRunner (engine/code_runner.py) that runs each task on a fresh isolate in this
    process, on the calling thread: for the engine's tests and for processes without gevent
    that accept that a V8 fatal error ends them. A worker uses sandbox/processes.py."""

    def __init__(self, timeout_seconds: float = 5.0, memory_mb: int = 128):
        self.timeout_seconds = timeout_seconds
        self.memory_mb = memory_mb
        self.runs = 0
        self._lock = threading.Lock()

    def run(self, task: CodeTask, cancel=None, time_cap: float | None = None) -> CodeOutcome:
        timeout = self.timeout_seconds if time_cap is None else min(self.timeout_seconds, time_cap)
        isolate = Isolate(self.memory_mb)
        started = time.monotonic()
        try:
            outcome = isolate.run(task, timeout)
        finally:
            with contextlib.suppress(Exception):
                isolate.close()
        # The isolate computes on a thread of its own, which this thread's CPU clock does not
        # see: the run's wall time is charged, the most it can have cost.
        outcome.cpu_seconds = time.monotonic() - started
        with self._lock:
            self.runs += 1
        return outcome
