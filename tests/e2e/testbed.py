"""The fault matrix's deployment on one host: one api and two workers (real processes) on a
Redis of its own that a case may pause, stop, restart (with its append-only file, or empty),
whose connections it may kill, and whose processes it may kill or stop. `heal` brings it back to
one api, two workers and a Redis that answers, as an orchestrator would."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import redis

from core.liveness import lost_within
from mini_n8n.redis_server import EmbeddedRedis
from tests.e2e import connections
from tests.e2e.checker import Checker
from tests.e2e.deployment import Deployment, Process, restart_redis
from tests.e2e.scene import ask_then_answer, streaming_chat
from tests.waiting import wait_until

# Longer than a process stopped by the OS here (STOPPED_SECONDS): a worker that is silent but
# alive keeps its executions; one whose process died is told by its closed connection.
LEASE_SECONDS = 15
KEEPALIVE_SECONDS = 1
# A task a killed worker had received but not started ends at the queue timeout
# (docs/architecture.md, "Delivery semantics"): short here, so that its bound fits in a case.
QUEUE_TIMEOUT_SECONDS = 5
PAUSE_MS = 4000
# Every execution a case started ends within this long after its fault is over (the bounds of
# "Every state has a way out"): a lost worker's (the lease, its confirmation, a reaper's
# round) or a lost task's (the queue timeout, the same confirmation), and a stream's keepalive
# check, after Redis came back, with time for a busy machine.
SETTLED = max(lost_within(LEASE_SECONDS), QUEUE_TIMEOUT_SECONDS + lost_within(0))
BOUND = PAUSE_MS / 1000 + SETTLED + KEEPALIVE_SECONDS + 8
SETTINGS = {
    "MINI_N8N_LEASE_SECONDS": str(LEASE_SECONDS),
    "MINI_N8N_KEEPALIVE_SECONDS": str(KEEPALIVE_SECONDS),
    "MINI_N8N_QUEUE_TIMEOUT": str(QUEUE_TIMEOUT_SECONDS),
}


class Testbed:
    __test__ = False  # not a test class, for pytest

    def __init__(self, data_dir: Path, deployment: type[Deployment] = Deployment):
        """`deployment`: what starts its processes (tests/hub's starts an api that knows the
        hub's test users)."""
        self.server = EmbeddedRedis(data_dir=str(data_dir)).start()
        self.deploy = deployment(self.server.url, **SETTINGS)
        self.base = self.deploy.start_api()
        self.workers = [self.deploy.start_worker(), self.deploy.start_worker()]
        self.chat = self.deploy.activate(streaming_chat())
        self.ask = self.deploy.activate(ask_then_answer())
        self.stopped: list[int] = []  # pids a case stopped (SIGSTOP), continued by `heal`

    def checker(self, bound: float = BOUND) -> Checker:
        return Checker(self.deploy, lambda: self.base, bound)

    def close(self) -> None:
        self.heal()
        self.deploy.stop()
        self.server.stop()

    # --- faults -------------------------------------------------------------------------------
    def pause_redis(self) -> None:
        client = redis.Redis.from_url(self.server.url)
        client.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")
        client.close()

    def restart_redis(self, *, empty: bool = False) -> None:
        """Stop Redis and start it again on its port: with its append-only file, or empty."""
        self.server = restart_redis(self.server, empty=empty)

    def reimport(self) -> None:
        """The workflows saved and activated again (after Redis lost them)."""
        self.deploy.activate(self.chat)
        self.deploy.activate(self.ask)

    def kill_connections(self, kind: str) -> int:
        client = redis.Redis.from_url(self.server.url, decode_responses=True)
        try:
            return connections.kill(client, kind, self.roles())
        finally:
            client.close()

    def roles(self) -> dict[int, str]:
        roles = {w.pid: "worker" for w in self.workers}
        roles.update({api.pid: "api" for api, _ in self.deploy.apis})
        return roles

    def worker_of(self, execution_id: str) -> Process:
        record = wait_until(
            lambda: (r := self.deploy.execution(execution_id)) and r.get("worker") and r,
            10,
            "a worker to take the execution",
        )
        return next(w for w in self.workers if w.pid == record["worker"]["pid"])

    def api(self) -> Process:
        return self.deploy.apis[-1][0]

    def kill(self, process: Process) -> None:
        """SIGKILL, and dead before the case goes on, as an orchestrator sees it: until its
        sockets are closed, Redis may still hand a dying worker's pending BRPOP the next task."""
        process.proc.send_signal(signal.SIGKILL)
        process.proc.wait(10)

    def stop(self, pid: int) -> None:
        self.stopped.append(pid)
        os.kill(pid, signal.SIGSTOP)

    def cont(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)
        self.stopped.remove(pid)

    def heal(self) -> None:
        """One api, two workers and Redis alive and running again."""
        for pid in list(self.stopped):
            with contextlib.suppress(ProcessLookupError):
                self.cont(pid)
        if self.server.process is None or self.server.process.poll() is not None:
            self.restart_redis()
        self.workers = [w for w in self.workers if w.proc.poll() is None]
        while len(self.workers) < 2:
            self.workers.append(self.deploy.start_worker())
        if self.api().proc.poll() is not None:
            self.base = self.deploy.start_api()
