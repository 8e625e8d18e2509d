"""The laboratory: Redis, api processes and workers on hosts of their own (tests/faultlab/hosts.py),
with the partitions and the latency between them that a case asks for.

`Lab` holds the network and the Redis host; `Lab.deployment` gives a `SpreadDeployment`, the e2e
suite's Deployment (its key prefix, environment, Process, data helpers) whose processes start on
lab hosts. A host may reach Redis through a delay proxy of its own (`slow=True`), which a case
turns on and off."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from mini_n8n.redis_server import reachable, valkey_server_path
from tests.e2e.deployment import ROOT, Deployment, Process, _wait_http
from tests.faultlab.hosts import Host, Network
from tests.waiting import wait_until

REDIS_PORT = 6379
API_PORT = 5678
# Each way 25-75 ms: a round trip 50-150 ms longer, as netem's `delay 100ms 50ms` on one side.
LATENCY_MS, JITTER_MS = 50, 25


@dataclass
class Machine:
    """A host and what runs on it."""

    host: Host
    proxy: Process | None = None  # its delay proxy to Redis, if it has one
    processes: list[Process] = field(default_factory=list)

    def slow(self, on: bool) -> None:
        """Turn its latency to Redis on or off."""
        assert self.proxy is not None, f"{self.host.name} reaches Redis directly"
        self.proxy.proc.send_signal(signal.SIGUSR1 if on else signal.SIGUSR2)


class SpreadDeployment(Deployment):
    """A Deployment whose api and worker processes run on lab hosts."""

    def __init__(self, lab: Lab, **env: str):
        super().__init__(lab.redis_url, **env)
        self.lab = lab
        self.machines: dict[int, Machine] = {}  # pid -> where it runs

    def api_on(self, machine: Machine) -> str:
        env = {**self.env, "PORT": str(API_PORT), "HOST": machine.host.ip, **self.lab.via(machine)}
        proc = Process(f"api@{machine.host.name}", machine.host.argv([*_cli(), "api"]), env)
        self._started(proc, machine)
        base = f"http://{machine.host.ip}:{API_PORT}"
        _wait_http(f"{base}/healthz", proc)
        self.apis.append((proc, base))
        return base

    def worker_on(self, machine: Machine) -> Process:
        argv = machine.host.argv([*_cli(), "worker", "--concurrency", "100"])
        proc = Process(f"worker@{machine.host.name}", argv, {**self.env, **self.lab.via(machine)})
        self._started(proc, machine)
        proc.wait_for_line(" ready.")
        return proc

    def _started(self, proc: Process, machine: Machine) -> None:
        self.processes.append(proc)
        machine.processes.append(proc)
        self.machines[proc.pid] = machine

    def machine_of(self, execution_id: str) -> Machine:
        """The machine whose worker runs (or ran) the execution."""
        record = wait_until(
            lambda: (r := self.execution(execution_id)) and r.get("worker") and r,
            10,
            "a worker to take the execution",
        )
        return self.machines[record["worker"]["pid"]]


class Lab:
    def __init__(self) -> None:
        self.network = Network()
        self.machines: list[Machine] = []
        self.redis: Process | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="faultlab-redis-")
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        self.network.open()
        self.redis_host = self.network.host("redis")
        self.redis_url = f"redis://{self.redis_host.ip}:{REDIS_PORT}/0"
        argv = self.redis_host.argv(_valkey(self.redis_host, self._dir.name))
        self.redis = Process("redis", argv, dict(os.environ), ROOT)
        wait_until(lambda: reachable(self.redis_url), 10, "the lab's Redis")

    def machine(self, name: str, slow: bool = False) -> Machine:
        host = self.network.host(name)
        machine = Machine(host)
        if slow:
            target = f"{self.redis_host.ip}:{REDIS_PORT}"
            argv = [sys.executable, "-m", "tests.faultlab.delay", f"127.0.0.1:{REDIS_PORT}",
                    target, "--delay-ms", str(LATENCY_MS), "--jitter-ms", str(JITTER_MS)]  # fmt: skip
            machine.proxy = Process(f"delay@{name}", host.argv(argv), dict(os.environ), ROOT)
            machine.proxy.wait_for_line("listening")
        self.machines.append(machine)
        return machine

    def via(self, machine: Machine) -> dict[str, str]:
        """The environment that points a process on `machine` at Redis."""
        if machine.proxy is None:
            return {}
        return {"REDIS_URL": f"redis://127.0.0.1:{REDIS_PORT}/0"}

    @contextmanager
    def partition(self, machine: Machine) -> Iterator[None]:
        """`machine` and Redis cannot reach each other, until the block ends."""
        machine.host.cut_off(self.redis_host)
        try:
            yield
        finally:
            machine.host.mend()

    def close(self) -> None:
        for machine in self.machines:
            machine.host.mend()
            for proc in [*machine.processes, *([machine.proxy] if machine.proxy else [])]:
                proc.stop()
        if self.redis is not None:
            self.redis.stop()
        self.network.close()
        self._dir.cleanup()


def _cli() -> list[str]:
    return [sys.executable, "-m", "mini_n8n.cli"]


def _valkey(host: Host, data_dir: str) -> list[str]:
    # Not protected mode: its clients come from other hosts, on a network of the run's own.
    return [valkey_server_path(), "--bind", host.ip, "--port", str(REDIS_PORT), "--save", "",
            "--protected-mode", "no",
            "--appendonly", "no", "--dir", data_dir, "--maxclients", "20000"]  # fmt: skip
