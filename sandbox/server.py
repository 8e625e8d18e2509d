"""The process that runs Code nodes' JavaScript: `python -m sandbox.server --memory-mb N`,
started by sandbox/processes.py, one task at a time.

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
import os
import sys
from typing import BinaryIO

import orjson

from core.code_task import CodeTask


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
    args = parser.parse_args(argv)
    out = _protocol_pipe()
    with contextlib.suppress(BrokenPipeError):
        serve(args.memory_mb, sys.stdin.buffer, out)
    out.flush()
    # Skip the interpreter's teardown: closing V8 from finalizers at exit can hang.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
