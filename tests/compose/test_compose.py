"""The compose deployment, run for real: build from an empty image store, up, chat over the
published port, scale workers, inspect Redis with redis-cli, restart, lose a worker, go down.

The tests share one deployment and run in file order (each builds on the state the previous one
left). Its images are built before the first test, in a step with a deadline of its own
(conftest.py). The harness (harness.py) says what is specific to this machine.

Timing: streams may carry `{"type":"keepalive"}` lines anywhere (a slow start, a busy machine),
so order is asserted on the other lines; waits poll for a state with a generous bound, never
sleep a fixed time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
import uuid
from datetime import datetime

import httpx
import pytest

from tests.compose.harness import ROOT, compose_command

pytestmark = pytest.mark.compose

CHAT = "/webhook/0c8e6a52-3f5b-4d0e-8a9c-7b1d2e3f4a51/chat"  # bundled example, Redis memory
# tests/compose/workflows/chat-slow.json: the same workflow with a model that waits 200 ms/token.
SLOW_CHAT = "/webhook/5e6f7a8b-1c2d-4e3f-9a0b-c1d2e3f4a5b6/chat"
CALCULATOR_ANSWER = "Based on the tools: Calculator returned 437."
LEASE_SECONDS, KEEPALIVE_SECONDS = 2.0, 1.0  # as docker-compose.test.yml sets them
WHOLE_TEST_SECONDS = 300
# `down` stops the services one after another (workers, then the api, then redis). Idle, each
# stops within about 4 s of the one before; a stop timeout (25 s, then SIGKILL) would show.
STOP_ORDER, STOP_SECONDS = ("worker", "api", "redis"), 10


# --- helpers ------------------------------------------------------------------------------
def chat(d, text: str, session: str, path: str = CHAT) -> dict:
    """One streamed chat turn: lines as they arrived (with times, keepalives included), the
    chunks (keepalives left out), the answer, the execution."""
    lines, started = [], time.monotonic()
    body = {"action": "sendMessage", "sessionId": session, "chatInput": text}
    with httpx.stream("POST", d.url + path, json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.strip():
                lines.append((time.monotonic() - started, json.loads(line)))
    chunks = without_keepalives(chunk for _, chunk in lines)
    return {
        "headers": response.headers,
        "execution": response.headers.get("x-execution-id"),
        "lines": lines,
        "chunks": chunks,
        "answer": "".join(c.get("content", "") for c in chunks if c["type"] == "item"),
    }


def without_keepalives(chunks) -> list[dict]:
    """Keepalive lines may come anywhere in a stream (before `begin` too): the contract's order
    is that of the other lines."""
    return [chunk for chunk in chunks if chunk["type"] != "keepalive"]


def redis_cli(d, *args: str) -> str:
    return d.compose("exec", "-T", "redis", "redis-cli", *args, timeout=60).stdout


def executions(d, ids: list[str]) -> list[dict]:
    # Not a terminal: redis-cli prints each value raw, one per line.
    out = redis_cli(d, "MGET", *[f"execution:{i}" for i in ids])
    return [json.loads(line) for line in out.splitlines()]


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
        return httpx.get(d.url + "/readyz", timeout=2).status_code == 200
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


def worker_of(record: dict) -> tuple[str, int]:
    return record["worker"]["host"], record["worker"]["pid"]


def ada_session(d) -> str:
    """The session the scaled-workers test made (the tests run in file order)."""
    if not hasattr(d, "ada_session"):
        pytest.fail("no Ada session: test_three_scaled_workers_... failed before making it")
    return d.ada_session


def running_containers(d) -> list[str]:
    label = f"label=com.docker.compose.project={d.project}"
    return d.podman("ps", "-q", "--filter", label).stdout.split()


def stopped_containers(d, ids: list[str]) -> list[dict]:
    """Containers that were stopped: service, exit code, and when the process exited (wall
    clock, from the container's own record, so not counting podman's work after it)."""
    return [
        {
            "service": c["Config"]["Labels"]["com.docker.compose.service"],
            "exit": c["State"]["ExitCode"],
            "finished": timestamp(c["State"]["FinishedAt"]),
        }
        for c in json.loads(d.podman("inspect", *ids).stdout)
    ]


def timestamp(iso: str) -> float:
    """Podman's RFC 3339 times have nanoseconds; Python reads microseconds."""
    iso = re.sub(r"(\.\d{6})\d+", r"\1", iso).replace("Z", "+00:00")
    return datetime.fromisoformat(iso).timestamp()


# --- tests --------------------------------------------------------------------------------
def test_docker_compose_config_accepts_the_compose_file_and_the_test_override(compose_cli):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MINI_N8N_TEST_CONTEXT": str(ROOT),
        "MINI_N8N_TEST_BASE_IMAGE": "localhost/base",
        "MINI_N8N_TEST_REDIS_IMAGE": "localhost/redis",
    }
    product_only = ["docker-compose", "-f", str(ROOT / "docker-compose.yml"), "config", "-q"]
    for cmd in (product_only, compose_command("config", "-q")):
        result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr


def test_builds_from_an_empty_image_store_starts_and_answers_health(deployment):
    d = deployment
    # The build step (conftest.py) imported the base images and ran `docker-compose build`.
    assert d.images_before_build == []
    assert {d.base_image, d.redis_image, d.app_image} <= set(d.images())
    d.compose("up", "-d", timeout=90)
    wait_until(d, lambda: ready(d), 90, "/readyz of the api")
    assert httpx.get(d.url + "/healthz", timeout=5).json() == {"status": "ok"}
    wait_until(d, lambda: ready_workers(d), 90, "the worker to be ready")
    wait_until(d, lambda: all_healthy(d), 90, "every service to be healthy")


def test_streams_the_calculator_answer_line_by_line_over_the_published_port(deployment):
    d = deployment
    turn = chat(d, "What is 19 * 23?", session=f"calc-{uuid.uuid4().hex[:8]}")
    assert turn["headers"]["content-type"].startswith("application/x-ndjson")
    assert turn["execution"]
    assert turn["chunks"][0]["type"] == "begin"
    assert turn["chunks"][-1]["type"] == "end"
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]

    slow = chat(d, "What is 19 * 23?", session=f"slow-{uuid.uuid4().hex[:8]}", path=SLOW_CHAT)
    assert slow["answer"] == CALCULATOR_ANSWER, slow["chunks"]
    items = [t for t, chunk in slow["lines"] if chunk["type"] == "item"]
    # Seven tokens 200 ms apart: nothing between the worker and this client buffers the stream.
    assert len(items) == 7
    assert items[-1] - items[0] > 0.8, f"items arrived together: {items}"


def test_three_scaled_workers_serve_twenty_sessions_and_share_one_memory(deployment):
    d = deployment
    d.compose("up", "-d", "--scale", "worker=3", timeout=90)
    workers = wait_until(d, lambda: ready_workers(d), 90, "three ready workers")
    assert len(workers) == 3

    ids = []
    for n in range(20):
        turn = chat(d, "What is 19 * 23?", session=f"many-{n}-{uuid.uuid4().hex[:6]}")
        assert turn["answer"] == CALCULATOR_ANSWER, (n, turn["execution"], turn["chunks"])
        ids.append(turn["execution"])
    served_by = {worker_of(r) for r in executions(d, ids)}
    assert len(served_by) == 3, served_by

    session = f"ada-{uuid.uuid4().hex[:8]}"
    d.ada_session = session
    turns = [
        chat(d, "My name is Ada", session),
        chat(d, "What is 19 * 23?", session),
        chat(d, "What is my name?", session),
    ]
    assert turns[0]["answer"] == "Nice to meet you, Ada!"
    assert turns[1]["answer"] == CALCULATOR_ANSWER
    assert turns[2]["answer"] == "Your name is Ada."
    records = executions(d, [t["execution"] for t in turns])
    assert len({worker_of(r) for r in records}) >= 2, "all three turns ran on one worker"


def test_redis_cli_in_the_redis_container_lists_sessions_and_shows_messages(deployment):
    d = deployment
    sessions = redis_cli(d, "--scan", "--pattern", "chat:*").split()
    assert f"chat:{ada_session(d)}" in sessions
    assert len(sessions) >= 22
    stored = [
        json.loads(m)
        for m in redis_cli(d, "LRANGE", f"chat:{ada_session(d)}", "0", "-1").splitlines()
    ]
    newest_first = [(m["type"], m["data"]["content"]) for m in stored]
    assert newest_first[0] == ("ai", "Your name is Ada.")
    assert newest_first[1] == ("human", "What is my name?")
    assert newest_first[-1] == ("human", "My name is Ada")


def test_a_worker_killed_mid_stream_ends_the_stream_with_an_error_and_others_keep_serving(
    deployment,
):
    d = deployment
    words = " ".join(f"word{n}" for n in range(40))  # "You said: ..." = 42 tokens, about 8 s
    result: dict = {}
    first_item = threading.Event()

    def stream():
        body = {"sessionId": f"kill-{uuid.uuid4().hex[:8]}", "chatInput": words}
        with httpx.stream("POST", d.url + SLOW_CHAT, json=body, timeout=60) as response:
            result["execution"] = response.headers.get("x-execution-id")
            result["chunks"] = []
            for line in response.iter_lines():
                if line.strip():
                    result["chunks"].append(json.loads(line))
                    if result["chunks"][-1]["type"] == "item":
                        first_item.set()
        # Wall clock: compared with the kill's, which is taken in the container.
        result["ended"] = time.time()

    client = threading.Thread(target=stream, daemon=True)
    client.start()
    assert first_item.wait(30), "the slow stream never started"
    host, pid = worker_of(executions(d, [result["execution"]])[0])
    container = d.podman("ps", "-q", "--filter", f"id={host}").stdout.strip()
    assert container, f"no container with hostname {host}"
    # The kill's own time, from inside the container (one kernel, one clock): on a busy machine
    # `podman exec` itself takes a while, which is no part of how soon the stream ends.
    kill = f"import os, time; t = time.time(); os.kill({pid}, 9); print(t)"
    killed = float(d.podman("exec", container, "python", "-c", kill).stdout)

    client.join(30)
    assert not client.is_alive(), "the stream did not end"
    took = result["ended"] - killed
    print(f"\nworker killed: the stream ended {took:.1f} s later")
    chunks = without_keepalives(result["chunks"])
    assert chunks[-1]["type"] == "error" and chunks[-1]["content"], chunks[-3:]
    # The lease runs out, then the next keepalive tick sees it; 1.5 s for the machine.
    assert took < LEASE_SECONDS + KEEPALIVE_SECONDS + 1.5, (
        f"stream ended {took:.1f} s after the kill"
    )
    record = executions(d, [result["execution"]])[0]
    assert record["status"] in ("crashed", "error"), record["status"]

    again = chat(d, "What is 19 * 23?", session=f"after-{uuid.uuid4().hex[:8]}")
    assert again["answer"] == CALCULATOR_ANSWER, again["chunks"]


def test_sessions_survive_down_and_up_and_down_is_prompt(deployment):
    d = deployment
    # `stop` then `down` is what `down` does; split, so a slow stop leaves logs to look at.
    running = running_containers(d)
    started = time.time()
    d.compose("stop", timeout=120)
    stopped = time.time() - started
    containers = stopped_containers(d, running)
    # How long each service took to stop, from when the one before it was down (or from the
    # start): podman's own work on a busy machine counts against it, never in its favour.
    stages, previous = {}, started
    for service in STOP_ORDER:
        finished = max(c["finished"] for c in containers if c["service"] == service)
        stages[service], previous = finished - previous, finished
    killed = [c for c in containers if c["exit"] != 0]  # 137: SIGKILL after the stop timeout
    slow = max(stages.values()) >= STOP_SECONDS
    logs = (killed or slow) and d.compose("logs", "--no-color", "-t", "--tail", "30").stdout
    d.compose("down", timeout=120)
    took = time.time() - started
    each = ", ".join(f"{service} {t:.1f} s" for service, t in stages.items())
    print(f"\ncompose down: {took:.1f} s (stop {stopped:.1f} s: {each})")
    assert not killed, f"containers did not exit by themselves on SIGTERM: {killed}\n{logs}"
    assert not slow, f"a service waited to stop: {each}\n{logs}"

    d.compose("up", "-d", timeout=90)
    wait_until(d, lambda: ready(d), 90, "/readyz after up")
    assert f"chat:{ada_session(d)}" in redis_cli(d, "--scan", "--pattern", "chat:*").split()
    assert chat(d, "What is my name?", ada_session(d))["answer"] == "Your name is Ada."


def test_the_whole_compose_test_stays_under_five_minutes(deployment):
    took = time.monotonic() - deployment.started
    print(f"\nwhole compose test: {took:.0f} s")
    assert took < WHOLE_TEST_SECONDS, f"{took:.0f} s"
