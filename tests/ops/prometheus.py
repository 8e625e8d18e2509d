"""A real Prometheus server for tests: Debian's `prometheus` binary (scripts/ensure-prometheus),
started on a free port with its own data directory, scraping the given targets every second, and
asked through its HTTP API as a dashboard would."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx

from mini_n8n.redis_server import free_port
from tests.waiting import wait_until

START_TIMEOUT = 30.0


def binary() -> str:
    """The prometheus binary; fails, naming how to get it, when it is missing (never skipped)."""
    found = shutil.which("prometheus")
    assert found, (
        "the prometheus binary is not installed: run scripts/ensure-prometheus "
        "(as root it installs Debian's prometheus package with apt-get)"
    )
    return found


class Prometheus:
    def __init__(self, base: str, log: Path):
        self.base = base
        self.log = log

    def query(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query's vector: each series' labels (without job/instance) -> value."""
        response = httpx.get(f"{self.base}/api/v1/query", params={"query": expr}, timeout=5.0)
        body = response.json()
        assert body["status"] == "success", body
        return {
            tuple(
                sorted((k, v) for k, v in row["metric"].items() if k not in ("job", "instance"))
            ): float(row["value"][1])
            for row in body["data"]["result"]
        }

    def value(self, expr: str) -> float | None:
        """The one value an instant query gives, or None while it gives none."""
        rows = self.query(expr)
        assert len(rows) <= 1, rows
        return next(iter(rows.values()), None)

    def output(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@contextlib.contextmanager
def running(workdir: Path, targets: dict[str, str]) -> Iterator[Prometheus]:
    """Prometheus scraping each job's `host:port` at /metrics every second."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [target]}]}
            for job, target in targets.items()
        ],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "prometheus.yml"
    config_file.write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    log = workdir / "prometheus.log"
    argv = [
        binary(),
        f"--config.file={config_file}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:
        wait_until(lambda: _ready(server, proc), START_TIMEOUT, "prometheus to be ready")
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready(server: Prometheus, proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"prometheus exited:\n{server.output()}")
    try:
        return httpx.get(f"{server.base}/-/ready", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
