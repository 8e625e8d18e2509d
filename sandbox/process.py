"""One process that runs Code nodes' JavaScript (sandbox/server.py), and the reader of its
answers: what sandbox/pool.py keeps warm in each of its slots. Its CPU time and its memory are
read from /proc: they belong to the one task it runs.

A child dies with the thread that forked it (sandbox/server.py asks for PR_SET_PDEATHSIG), so
it is forked only from a thread that lives as long as this process: the main thread (every
greenlet of a gevent worker or api runs on it, so there each child is forked by its caller),
else one spawner thread kept for the purpose (Celery's threads pool, a test's thread): a warm
child must outlive the caller's thread that first needed it."""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

Spawn = Callable[[Callable[[], None]], object]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STDERR_TAIL = 4000  # characters of a dead process's stderr kept in its error


def spawn_thread(fn: Callable[[], None]) -> object:
    thread = threading.Thread(target=fn, name="code-sandbox-reader", daemon=True)
    thread.start()
    return thread


class SandboxProcess:
    """One child process and the reader of its answers."""

    def __init__(self, memory_mb: int, spawn: Spawn):
        self.memory_mb = memory_mb
        # Read only once the process died (V8's last words): a file, so nothing must drain it.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by kill()
        argv = [sys.executable, "-m", "sandbox.server", "--memory-mb", str(memory_mb),
                "--parent-pid", str(os.getpid())]  # fmt: skip
        self.proc = fork_from_a_lasting_thread(
            functools.partial(
                subprocess.Popen,
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.stderr,
                env=_child_environment(),
                close_fds=True,
            )
        )
        self.answers: queue.Queue[bytes | None] = queue.Queue()
        self.idle_rss = 0
        self.cpu = 0.0  # the process's CPU seconds when last read
        spawn(self._read)

    def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        with contextlib.suppress(Exception):
            for line in stdout:
                self.answers.put(line)
        self.answers.put(None)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        with (
            contextlib.suppress(OSError, ValueError, IndexError),
            open(f"/proc/{self.proc.pid}/stat") as f,
        ):
            fields = f.read().rsplit(")", 1)[1].split()
            self.cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime
        return self.cpu

    def rss(self) -> int:
        with (
            contextlib.suppress(OSError, ValueError, IndexError),
            open(f"/proc/{self.proc.pid}/statm") as f,
        ):
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        return 0

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                pipe.close()  # type: ignore[union-attr]
        self.stderr.close()

    def stderr_tail(self) -> str:
        with contextlib.suppress(Exception):
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - STDERR_TAIL))
            return self.stderr.read().decode("utf-8", "replace").strip()
        return ""


def fork_from_a_lasting_thread(start: Callable[[], subprocess.Popen]) -> subprocess.Popen:
    """`start()` on the main thread, or on the spawner thread when called from another one."""
    if threading.get_native_id() == os.getpid():  # the main thread (a greenlet's, under gevent)
        return start()
    return _SPAWNER.submit(start).result()


# One thread, started on first use and kept until the interpreter exits, that forks for the
# threads that are not main. Not for gevent's greenlets (they all run on the main thread).
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="code-sandbox-spawner")


def _child_environment() -> dict[str, str]:
    """What the child needs to start Python, and nothing else of the worker's: no key, no URL,
    no credentials file (the JavaScript cannot read them anyway; this keeps it so)."""
    keep = ("PATH", "PYTHONPATH", "LANG", "LC_ALL", "TZ", "HOME", "SYSTEMROOT")
    return {name: os.environ[name] for name in keep if name in os.environ}
