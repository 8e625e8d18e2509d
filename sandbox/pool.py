"""The Code node's JavaScript in processes of their own (sandbox/server.py), as n8n runs it in its
task runner: what a worker lends the engine as Services.code_runner (engine/code_runner.py).

Why processes, not threads of the worker: a V8 fatal error (an allocation V8 cannot make, which
no heap limit turns into an exception) ends the process it happens in, and a worker's process
holds every other chat it serves; and mini-racer's own asyncio thread does not survive gevent's
monkey-patching. A process per slot also makes a run's costs its own: its CPU time and memory.

`processes` slots, each a process with one fresh isolate at a time, started on first use and kept
warm; a task waits for a free slot. While a task runs its caller waits in short slices (under
gevent the rest of the worker runs meanwhile), and each slice looks at the execution's stop, the
deadline and the process's memory. Past the deadline or the memory, or on a stop, the process is
killed and a new one takes the slot next time. The isolate's own limits come first; these are the
backstop for what they cannot see (memory outside V8's heap, a timer spinning after the script,
a process that died).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from dataclasses import asdict

import orjson

from core.code_task import CodeOutcome, CodeTask
from sandbox.isolate import memory_message, timeout_message
from sandbox.process import SandboxProcess, Spawn, spawn_thread

POLL_SECONDS = 0.01  # how often a waiting caller looks at the stop, the deadline and the memory
GRACE_SECONDS = 1.0  # past the isolate's own time limit, before its process is killed
START_SECONDS = 30.0  # a new process must say ready within this
HEADROOM_BYTES = 64 * 1024 * 1024  # over heap limit + idle size: the process is killed
# What V8 writes when it dies of memory: such a death is reported as running out of memory.
FATAL_MEMORY = ("out of memory", "OOM", "invalid size error", "heap limit", "Allocation failed")


class _Stopped(Exception):
    def __init__(self, outcome: CodeOutcome):
        self.outcome = outcome


def _check(cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise _Stopped(CodeOutcome.stopped("canceled", "The execution was stopped"))


class ProcessPool:
    def __init__(
        self,
        timeout_seconds: float = 5.0,
        memory_mb: int = 128,
        processes: int = 2,
        spawn: Spawn = spawn_thread,
    ):
        self.timeout_seconds = timeout_seconds
        self.memory_mb = memory_mb
        self.size = max(1, processes)
        self.spawn = spawn
        self._idle: queue.Queue[SandboxProcess | None] = queue.Queue()
        self._lock = threading.Lock()
        self._started = 0  # slots holding a process, idle or busy
        self._all: set[SandboxProcess] = set()
        self.runs = 0
        self.restarts = 0
        self.most_at_once = 0  # the most processes alive at one time

    def run(self, task: CodeTask, cancel=None, time_cap: float | None = None) -> CodeOutcome:
        """Run `task` on a free slot; `time_cap` lowers the time limit (the CPU the execution
        has left). Never raises for what the code did: the outcome says it."""
        timeout = self.timeout_seconds if time_cap is None else min(self.timeout_seconds, time_cap)
        timeout = max(timeout, 0.001)
        try:
            process = self._take(cancel)
        except _Stopped as stopped:
            return stopped.outcome
        keep = False
        try:
            outcome, keep = self._run_on(process, task, timeout, cancel)
            return outcome
        finally:
            self._give_back(process if keep else None, process)

    def _run_on(self, process: SandboxProcess, task, timeout: float, cancel):
        started_cpu = process.cpu_seconds()
        request = orjson.dumps({"task": asdict(task), "timeout": timeout}) + b"\n"
        try:
            process.proc.stdin.write(request)  # type: ignore[union-attr]
            process.proc.stdin.flush()  # type: ignore[union-attr]
        except OSError:
            return self._died(process), False
        deadline = time.monotonic() + timeout + GRACE_SECONDS
        rss_limit = process.idle_rss + self.memory_mb * 1024 * 1024 + HEADROOM_BYTES
        while True:
            try:
                line = process.answers.get(timeout=POLL_SECONDS)
            except queue.Empty:
                stopped = self._look(process, deadline, rss_limit, timeout, cancel)
                if stopped is not None:
                    stopped.cpu_seconds = process.cpu - started_cpu
                    return stopped, False
                continue
            if line is None:
                outcome = self._died(process)
                outcome.cpu_seconds = process.cpu - started_cpu
                return outcome, False
            outcome = CodeOutcome.decode(line)
            outcome.cpu_seconds = process.cpu_seconds() - started_cpu
            with self._lock:
                self.runs += 1
            return outcome, outcome.status in ("ok", "error")

    def _look(self, process, deadline, rss_limit, timeout, cancel) -> CodeOutcome | None:
        """One slice's look: the stop, the deadline, the memory. A stopped run's process is
        killed here; None: let it go on."""
        process.cpu_seconds()
        if cancel is not None and cancel.is_set():
            outcome = CodeOutcome.stopped("canceled", "The execution was stopped")
        elif time.monotonic() > deadline:
            outcome = CodeOutcome.stopped("timeout", timeout_message(timeout))
        elif process.rss() > rss_limit:
            outcome = CodeOutcome.stopped("memory", memory_message(self.memory_mb))
        else:
            return None
        process.kill()
        return outcome

    def _died(self, process: SandboxProcess) -> CodeOutcome:
        process.kill()
        tail = process.stderr_tail()
        if any(word in tail for word in FATAL_MEMORY):
            return CodeOutcome.stopped("memory", memory_message(self.memory_mb))
        code = process.proc.returncode
        detail = tail.splitlines()[-1] if tail else f"exit status {code}"
        return CodeOutcome.stopped(
            "crashed", f"The process running the Code node's JavaScript ended ({detail})"
        )

    # -- slots -------------------------------------------------------------------------------

    def _take(self, cancel) -> SandboxProcess:
        """A ready process: an idle one, a new one if a slot is free, else the next to be
        given back. One that died meanwhile frees its slot, and the next is tried."""
        failure = None
        for _ in range(3):
            process = self._idle_now() or self._new_if_room() or self._wait_for_idle(cancel)
            failure = self._ready(process, cancel)
            if failure is None:
                return process
        raise _Stopped(failure or CodeOutcome.stopped("crashed", "no process could start"))

    def _idle_now(self) -> SandboxProcess | None:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return None

    def _new_if_room(self) -> SandboxProcess | None:
        with self._lock:
            if self._started >= self.size:
                return None
            self._started += 1
            self.most_at_once = max(self.most_at_once, self._started)
        try:
            process = SandboxProcess(self.memory_mb, self.spawn)
        except Exception:
            with self._lock:
                self._started -= 1
            raise
        with self._lock:
            self._all.add(process)
        return process

    def _wait_for_idle(self, cancel) -> SandboxProcess:
        """The next process given back, or a new one once a killed one freed its slot."""
        while True:
            _check(cancel)
            with contextlib.suppress(queue.Empty):
                process = self._idle.get(timeout=POLL_SECONDS * 5)
                if process is not None:
                    return process
            process = self._new_if_room()
            if process is not None:
                return process

    def _ready(self, process: SandboxProcess, cancel) -> CodeOutcome | None:
        """Wait for the process to say ready (a new one starts, a used one prepares its next
        isolate): None once it did; what happened if it died (its slot is freed)."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                self._give_back(process, process)  # it goes on preparing for the next task
                _check(cancel)
            try:
                line = process.answers.get(timeout=POLL_SECONDS * 5)
            except queue.Empty:
                continue
            if line is None:
                break
            process.idle_rss = int(orjson.loads(line).get("ready") or 0)
            return None
        outcome = self._died(process)
        self._give_back(None, process)
        return outcome

    def _give_back(self, keep: SandboxProcess | None, process: SandboxProcess) -> None:
        if keep is not None:
            self._idle.put(keep)
            return
        process.kill()
        with self._lock:
            if process in self._all:
                self._all.discard(process)
                self._started -= 1
                self.restarts += 1

    def close(self) -> None:
        """Kill every process (a worker's shutdown)."""
        with self._lock:
            processes = list(self._all)
            self._all.clear()
            self._started = 0
        for process in processes:
            process.kill()
