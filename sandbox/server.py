"""The process that runs Code nodes' JavaScript: `python -m sandbox.server --memory-mb N
--parent-pid P`, started by sandbox/process.py, one task at a time.

It dies with its parent (the worker), whatever killed the parent: its first act is to ask the
kernel for SIGKILL when its parent goes (PR_SET_PDEATHSIG), then to check that its parent is
still the process that started it (a parent that died before that ask sent no signal, and the
child was already handed to another). Without this, a worker killed by SIGKILL left a child
spinning in JavaScript until its own time limit, and an idle one until it read its input's end.

It speaks JSON lines: it writes {"ready": <its RSS in bytes>} once a fresh isolate is prepared,
reads one {"task": <CodeTask>, "timeout": <seconds>}, writes the CodeOutcome, prepares the next
isolate (off the caller's path) and says ready again. It exits when its input ends (its parent
is gone) or after a run whose isolate may still be busy (a timer that never ends).

Nothing but the protocol reaches the parent's pipe: the process's own stdout is pointed at its
stderr before anything runs, so a stray print (or V8's) cannot break a line.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import sys
from typing import BinaryIO

import orjson

from core.code_task import CodeTask

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
ORPHANED_EXIT = 3  # the exit status of a child whose parent was gone before it could ask


def die_with_parent(parent_pid: int | None) -> None:
    """SIGKILL for this process when its parent dies; exit at once if it already has.

    The signal comes when the *thread* that forked this process ends: sandbox/process.py forks
    from the process's main thread, or from a thread that lives as long as the process."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(ORPHANED_EXIT)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _protocol_pipe() -> BinaryIO:
    """The parent's pipe, as a file of our own; fd 1 then goes to stderr."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def serve(memory_mb: int, tasks: BinaryIO, out: BinaryIO) -> None:
    from sandbox.isolate import Isolate

    isolate = Isolate(memory_mb)
    while True:
        out.write(orjson.dumps({"ready": rss_bytes()}) + b"\n")
        line = tasks.readline()
        if not line:
            return
        request = orjson.loads(line)
        outcome = isolate.run(CodeTask(**request["task"]), float(request["timeout"]))
        out.write(outcome.encode() + b"\n")
        if outcome.status in ("timeout", "memory", "crashed"):
            # A stopped isolate may still be busy (a timer's callback spinning) or broken: a
            # new process is cheaper to trust than this one.
            return
        with contextlib.suppress(Exception):
            isolate.close()
        isolate = Isolate(memory_mb)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox.server")
    parser.add_argument("--memory-mb", type=int, default=128)
    parser.add_argument("--parent-pid", type=int, default=None, help="whose death ends this one")
    args = parser.parse_args(argv)
    die_with_parent(args.parent_pid)
    out = _protocol_pipe()
    with contextlib.suppress(BrokenPipeError):
        serve(args.memory_mb, sys.stdin.buffer, out)
    out.flush()
    # Skip the interpreter's teardown: closing V8 from finalizers at exit can hang.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
