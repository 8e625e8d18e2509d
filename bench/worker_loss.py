"""How long after a worker's death its streams end, and whether a worker stopped by the OS keeps
its executions (docs/architecture.md "Gone, or only slow").

    python bench/worker_loss.py [ROUNDS] [STREAMS] [STOP_SECONDS]

Each round starts a worker, opens STREAMS slow streaming chats on it and, once all stream,
SIGKILLs it: the time from the kill to each stream's error line. Then one round SIGSTOPs a
worker for STOP_SECONDS under STREAMS chats and counts how they ended. Prints p50/p95/max.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from _common import pct, redis_server

from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.workflows import REDIS_CHAT, example, with_model_delay


def round_of(deploy: Deployment, url: str, streams: int, fault) -> tuple[float, list]:
    """Opens `streams` chats, applies `fault` once all stream; (when, the replies)."""
    replies: dict[int, object] = {}
    streaming = threading.Barrier(streams + 1)
    prefix = os.urandom(4).hex()

    def chat(i: int) -> None:
        first = []

        def on_chunk(chunk):
            if chunk["type"] == "item" and not first:
                first.append(1)
                streaming.wait()

        replies[i] = stream_chat(url, "tell me about cats " * 8, f"{prefix}{i}", 120, on_chunk)

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    streaming.wait()
    at = time.monotonic()
    fault()
    for thread in threads:
        thread.join()
    return at, list(replies.values())


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    streams = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    stop_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    with redis_server() as url, Deployment.running(url) as deploy:
        workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 100)))
        chat = chat_url(deploy.base, workflow)
        ends: list[float] = []
        for _ in range(rounds):
            worker = deploy.worker
            at, replies = round_of(deploy, chat, streams, lambda w=worker: w.stop(signal.SIGKILL))
            ends += [r.ended_at - at for r in replies]
            assert all(r.types()[-1] == "error" for r in replies)
            deploy.worker = deploy.start_worker()
        print(f"killed worker, {rounds} rounds x {streams} streams: stream ended after the kill")
        print(f"  p50 {pct(ends, 50):.2f} s   p95 {pct(ends, 95):.2f} s   max {max(ends):.2f} s")

        pid = deploy.worker.pid

        def pause() -> None:
            os.kill(pid, signal.SIGSTOP)
            time.sleep(stop_seconds)
            os.kill(pid, signal.SIGCONT)

        _, replies = round_of(deploy, chat, streams, pause)
        ended = [r.types()[-1] for r in replies]
        print(f"worker stopped {stop_seconds:g} s under {streams} streams: "
              f"{ended.count('end')} ended whole, {ended.count('error')} with an error")  # fmt: skip


if __name__ == "__main__":
    main()
