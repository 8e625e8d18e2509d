"""What the compose tests ask of a running deployment (tests/compose/harness.py `Deployment`):
its containers by service, their logs and health, and waiting for a state, never for a time."""

from __future__ import annotations

import time

import httpx


def wait_until(d, predicate, timeout: float, what: str, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    state = d.compose("ps", check=False).stdout
    logs = d.compose("logs", "--no-color", "--tail", "40", check=False).stdout
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{state}\n{logs}")


def ready(d) -> bool:
    try:
        return httpx.get(d.url + "/readyz", timeout=2, verify=d.verify).status_code == 200
    except httpx.HTTPError:
        return False


def ready_workers(d) -> set[str]:
    """Celery node names (`worker-<pid>@<container>`) that logged `ready.` since they started."""
    ids = d.podman(
        "ps", "-q", "--filter", f"label=com.docker.compose.project={d.project}",
        "--filter", "label=com.docker.compose.service=worker",
    ).stdout.split()  # fmt: skip
    names = set()
    for container in ids:
        logs = d.podman("logs", container, check=False)
        for line in (logs.stdout + logs.stderr).splitlines():
            if line.rstrip().endswith(" ready."):
                names.add(line.rsplit(" ", 2)[-2])
    return names if len(ids) == len(names) else set()


def all_healthy(d) -> bool:
    label = f"label=com.docker.compose.project={d.project}"
    statuses = d.podman("ps", "--filter", label, "--format", "{{.Status}}").stdout.splitlines()
    return bool(statuses) and all("(healthy)" in status for status in statuses)


def containers_of(d, service: str, *, healthy: bool = False) -> list[str]:
    """The running containers of one service (only the healthy ones, if asked)."""
    out = d.podman(
        "ps", "--filter", f"label=com.docker.compose.project={d.project}",
        "--filter", f"label=com.docker.compose.service={service}",
        "--format", "{{.ID}} {{.Status}}",
    ).stdout  # fmt: skip
    rows = [line.partition(" ") for line in out.splitlines() if line.strip()]
    return [c for c, _, status in rows if not healthy or "(healthy)" in status]


def healthy_apis(d, count: int) -> list[str] | None:
    found = containers_of(d, "api", healthy=True)
    return found if len(found) == count else None


def logs_of(d, container: str) -> str:
    logs = d.podman("logs", container, check=False)
    return logs.stdout + logs.stderr


def up_and_ready(d, *args: str) -> None:
    """`up -d` (recreating what changed), then the api answers through the proxy, every worker
    is ready and every service healthy."""
    started = time.monotonic()
    d.compose("up", "-d", *args, timeout=120)
    times = [f"up -d {time.monotonic() - started:.1f} s"]
    for probe, what in (
        (lambda: ready(d), "/readyz through the proxy"),
        (lambda: ready_workers(d), "the workers ready"),
        (lambda: all_healthy(d), "every service healthy"),
    ):
        wait_until(d, probe, 90, what)
        times.append(f"{what} {time.monotonic() - started:.1f} s")
    print(f"\nup: {', '.join(times)}")
