"""The compose deployment, run for real: build from an empty image store; `up` without a key or
a Redis password refused; every container without capabilities (but the proxy's three), new
privileges or a writable root; no workflow until the user's folder has one, the examples only
with MINI_N8N_DEMO; chat through the proxy on the published port; scale workers and the api;
inspect Redis with redis-cli; lose a worker; restart; Redis' password; credentials from a docker
secret; /metrics kept off the proxy unless asked; TLS at the proxy (docker-compose.tls.yml, a
self-signed certificate); RabbitMQ as the broker (docker-compose.rabbitmq.yml), with no default
password; go down.

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
import secrets
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from datetime import datetime

import httpx
import pytest

from mini_n8n.cli import MISSING_API_KEY
from tests.compose.containers import (
    all_healthy,
    containers_of,
    healthy_apis,
    logs_of,
    ready,
    ready_workers,
    up_and_ready,
    wait_until,
)
from tests.compose.harness import (
    COMPOSE_FILES,
    HERE,
    RABBITMQ_FILES,
    ROOT,
    TLS_FILES,
    compose_command,
)

pytestmark = pytest.mark.compose

CHAT = "/webhook/0c8e6a52-3f5b-4d0e-8a9c-7b1d2e3f4a51/chat"  # bundled example, Redis memory
# tests/compose/workflows/chat-slow.json: the same workflow with a model that waits 200 ms/token,
# the user's own workflow (their folder, MINI_N8N_WORKFLOWS, gets it).
SLOW_CHAT = "/webhook/5e6f7a8b-1c2d-4e3f-9a0b-c1d2e3f4a5b6/chat"
SLOW_WORKFLOW = HERE / "workflows" / "chat-slow.json"
EXAMPLES = ROOT / "examples" / "workflows"
CALCULATOR_ANSWER = "Based on the tools: Calculator returned 437."
TASK_QUEUE = "mini-n8n"  # the Celery queue (MINI_N8N_TASK_QUEUE's default)
# `down` stops the services in stages (the proxy and the workers, then the api, then redis). Idle,
# each stage ends within seconds of the one before; a stop timeout (25 s, then SIGKILL) would show.
STOP_STAGES = (("proxy", "worker"), ("api",), ("redis",))


# --- helpers ------------------------------------------------------------------------------
def chat(d, text: str, session: str, path: str = CHAT) -> dict:
    """One streamed chat turn: lines as they arrived (with times, keepalives included), the
    chunks (keepalives left out), the answer, the execution."""
    lines, started = [], time.monotonic()
    body = {"action": "sendMessage", "sessionId": session, "chatInput": text}
    with httpx.stream("POST", d.url + path, json=body, timeout=60, verify=d.verify) as response:
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
    """redis-cli in the redis container, as the README runs it (`redis-cli-auth`: logged in with
    the redis_password secret)."""
    return d.compose("exec", "-T", "redis", "redis-cli-auth", *args, timeout=60).stdout


def rest(d, path: str) -> httpx.Response:
    headers = {"X-N8N-API-KEY": d.api_key}
    return httpx.get(f"{d.url}/rest{path}", headers=headers, timeout=10, verify=d.verify)


def post_chat(d, path: str) -> httpx.Response:
    body = {"action": "sendMessage", "sessionId": "nobody", "chatInput": "hi"}
    return httpx.post(d.url + path, json=body, timeout=30, verify=d.verify)


def active_workflows(d) -> list[str]:
    response = rest(d, "/workflows")
    assert response.status_code == 200, response.text
    return sorted(w["id"] for w in response.json()["data"] if w.get("active"))


def workflow_id(path) -> str:
    return json.loads(path.read_text())["id"]


def broker_keys(d) -> list[str]:
    """What a Redis broker (kombu's Redis transport) keeps in Redis: its `_kombu.*` bindings,
    the `unacked*` bookkeeping of delivered tasks and the queue's lists (named after it)."""
    keys = redis_cli(d, "--scan").splitlines()
    return [k for k in keys if k.startswith(("_kombu.", "unacked", TASK_QUEUE))]


def executions(d, ids: list[str]) -> list[dict]:
    # Not a terminal: redis-cli prints each value raw, one per line.
    out = redis_cli(d, "MGET", *[f"execution:{i}" for i in ids])
    return [json.loads(line) for line in out.splitlines()]


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


def all_containers(d) -> list[str]:
    label = f"label=com.docker.compose.project={d.project}"
    return d.podman("ps", "-a", "-q", "--filter", label).stdout.split()


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
CONFIG_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "MINI_N8N_API_KEY_SECRET": "./secrets/api_key",
    "REDIS_PASSWORD_SECRET": "./secrets/redis_password",
    "RABBITMQ_PASSWORD": "another-password",
    "TLS_CERTIFICATE": "/etc/ssl/cert.pem",
    "TLS_KEY": "/etc/ssl/key.pem",
    "MINI_N8N_TEST_CONTEXT": str(ROOT),
    "MINI_N8N_TEST_BASE_IMAGE": "localhost/base",
    "MINI_N8N_TEST_REDIS_IMAGE": "localhost/redis",
    "MINI_N8N_TEST_PROXY_IMAGE": "localhost/nginx",
    "MINI_N8N_TEST_RABBITMQ_IMAGE": "localhost/rabbitmq",
}
PRODUCT = ["docker-compose", "-f", str(ROOT / "docker-compose.yml")]
RABBITMQ = [*PRODUCT, "-f", str(ROOT / "docker-compose.rabbitmq.yml")]  # the README's variants
TLS = [*PRODUCT, "-f", str(ROOT / "docker-compose.tls.yml")]


def compose_config(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=30)


def test_docker_compose_config_accepts_the_compose_file_and_the_test_override(compose_cli):
    for cmd in (
        [*PRODUCT, "config", "-q"],
        [*RABBITMQ, "config", "-q"],
        [*TLS, "config", "-q"],
        [*RABBITMQ, "-f", str(ROOT / "docker-compose.tls.yml"), "config", "-q"],
        compose_command("config", "-q"),
        compose_command("config", "-q", files=(*COMPOSE_FILES, *RABBITMQ_FILES)),
        compose_command("config", "-q", files=(*COMPOSE_FILES, *TLS_FILES, *RABBITMQ_FILES)),
    ):
        result = compose_config(cmd, CONFIG_ENV)
        assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("variable", "files", "words"),
    [
        ("MINI_N8N_API_KEY_SECRET", PRODUCT, "set MINI_N8N_API_KEY_SECRET to the path of a file"),
        ("REDIS_PASSWORD_SECRET", PRODUCT, "set REDIS_PASSWORD_SECRET to the path of a file"),
        ("RABBITMQ_PASSWORD", RABBITMQ, "set RABBITMQ_PASSWORD (the password the api"),
        ("TLS_CERTIFICATE", TLS, "set TLS_CERTIFICATE to the path of the proxy's certificate"),
        ("TLS_KEY", TLS, "set TLS_KEY to the path of the certificate's key"),
    ],
)
def test_no_secret_has_a_default_compose_refuses_to_start_without_it_saying_why(
    compose_cli, variable, files, words
):
    env = {k: v for k, v in CONFIG_ENV.items() if k != variable}
    result = compose_config([*files, "config", "-q"], env)
    assert result.returncode != 0
    assert words in result.stderr, result.stderr


@pytest.mark.parametrize(
    "variable, file",
    [("MINI_N8N_API_KEY_SECRET", "api_key"), ("REDIS_PASSWORD_SECRET", "redis_password")],
)
def test_up_without_a_secret_file_fails_saying_how_to_make_it_and_starts_nothing(
    deployment, variable, file
):
    d = deployment
    # The compose file's own words, after `:?` in ${VARIABLE:?...}.
    compose_file = (ROOT / "docker-compose.yml").read_text()
    message = re.search(rf"\$\{{{variable}:\?([^}}]*)\}}", compose_file)[1]
    assert f"set {variable} to the path of a file" in message
    assert "docs/deploy.md has the commands that make it" in message
    command = f"python3 -c 'import secrets; print(secrets.token_hex(24))' > secrets/{file}"
    for guide in ("docs/deploy.md", "README.md"):
        assert command in (ROOT / guide).read_text(), guide
    without = {k: v for k, v in d.env.items() if k != variable}
    refused = d.compose("up", "-d", env=without, check=False, timeout=60)
    assert refused.returncode != 0
    assert refused.stderr.strip().endswith(message), refused.stderr
    assert all_containers(d) == []


def test_builds_from_an_empty_image_store_starts_and_answers_health(deployment):
    d = deployment
    # The build step (conftest.py) imported the base images and ran `docker-compose build`.
    assert d.images_before_build == []
    assert {d.base_image, d.redis_image, d.proxy_image, d.app_image} <= set(d.images())
    d.compose("up", "-d", timeout=90)
    wait_until(d, lambda: ready(d), 90, "/readyz of the api through the proxy")
    assert httpx.get(d.url + "/healthz", timeout=5).json() == {"status": "ok"}
    wait_until(d, lambda: ready_workers(d), 90, "the worker to be ready")
    wait_until(d, lambda: all_healthy(d), 90, "every service to be healthy")


def test_the_image_refuses_to_start_the_api_without_a_key_saying_how_to_set_it(deployment):
    d = deployment
    # The built image on its own, as `docker run` starts it (compose's own check is above).
    # (--no-healthcheck: podman would say on stderr that it has no systemd to run it with.)
    done = d.podman(
        "run", "--rm", "--no-healthcheck", "-e", "MINI_N8N_API_KEY=", d.app_image, "api",
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == f"mini-n8n: {MISSING_API_KEY}\n"


# What each service may still do as root, its process's effective capabilities (/proc/1/status):
# nginx's master starts its workers as www-data and hands them its temporary folders.
CAPABILITIES = {
    "redis": "0000000000000000",
    "api": "0000000000000000",
    "worker": "0000000000000000",
    "proxy": "00000000000000c1",  # CAP_CHOWN (0), CAP_SETGID (6), CAP_SETUID (7)
}


# Processes and threads in a container (what pids_limit counts), from its /proc.
TASKS = "ls -d /proc/[0-9]*/task/[0-9]* | wc -l"
# Who each service's main process runs as (the proxy's nginx master starts as root).
USERS = {"redis": "redis", "api": "mini", "worker": "mini", "proxy": "root"}
# In each container: its main process's status, the uid of the user it should run as, and a
# write to the root filesystem (which must fail).
PROBE = "grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs):' /proc/1/status; id -u {user}; touch /probe"


def test_every_container_runs_without_capabilities_new_privileges_or_a_writable_root(deployment):
    d = deployment
    seen = {}
    for c in json.loads(d.podman("inspect", *running_containers(d)).stdout):
        service = c["Config"]["Labels"]["com.docker.compose.service"]
        probe = d.podman(
            "exec", c["Id"], "sh", "-c", PROBE.format(user=USERS[service]), check=False
        )
        *status, uid = probe.stdout.splitlines()
        fields = dict(line.split(":\t", 1) for line in status)
        seen[service] = (
            fields["Uid"].split()[0] == uid,
            fields["CapEff"].strip(),
            fields["CapBnd"].strip(),
            fields["NoNewPrivs"].strip(),
            c["HostConfig"]["ReadonlyRootfs"],
            probe.returncode != 0 and "Read-only file system" in probe.stderr,
        )
    assert seen == {
        service: (True, caps, caps, "1", True, True) for service, caps in CAPABILITIES.items()
    }


def test_containers_rotate_their_logs_and_run_within_the_documented_limits(deployment):
    d = deployment
    limits = {  # service: (memory, CPUs, processes and threads), as docker-compose.yml sets them
        "redis": (1 << 30, 1.0, 64),
        "api": (512 << 20, 1.0, 256),
        "worker": (1 << 30, 1.0, 256),
        "proxy": (128 << 20, 0.5, 256),
    }
    found, tasks = {}, {}
    for c in json.loads(d.podman("inspect", *running_containers(d)).stdout):
        host = c["HostConfig"]
        service = c["Config"]["Labels"]["com.docker.compose.service"]
        found[service] = (
            host["Memory"],
            host["NanoCpus"] / 1e9,
            host["PidsLimit"],
            host["LogConfig"]["Size"],
        )
        tasks[service] = int(d.podman("exec", c["Id"], "sh", "-c", TASKS).stdout)
    assert found == {service: (*limit, "10MB") for service, limit in limits.items()}
    # Running, each uses well under its limit: the limits bound a runaway, not the work.
    for service, count in tasks.items():
        assert 0 < count <= limits[service][2] // 2, (service, count)


def test_without_the_demo_no_workflow_is_active_until_the_users_folder_provides_one(deployment):
    d = deployment
    assert active_workflows(d) == []
    assert post_chat(d, CHAT).status_code == 404
    assert post_chat(d, SLOW_CHAT).status_code == 404

    shutil.copy(SLOW_WORKFLOW, d.workflows / SLOW_WORKFLOW.name)
    d.compose("restart", "api", timeout=90)  # the api imports the folder at its start
    wait_until(d, lambda: ready(d), 90, "/readyz after the api restarted")
    assert active_workflows(d) == [workflow_id(SLOW_WORKFLOW)]
    turn = chat(d, "What is 19 * 23?", session=f"mine-{uuid.uuid4().hex[:8]}", path=SLOW_CHAT)
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]
    assert post_chat(d, CHAT).status_code == 404


def test_the_demo_setting_activates_the_bundled_examples_beside_the_users_workflows(deployment):
    d = deployment
    d.env["MINI_N8N_DEMO"] = "true"
    up_and_ready(d)
    bundled = [workflow_id(path) for path in EXAMPLES.glob("*.json")]
    assert active_workflows(d) == sorted([*bundled, workflow_id(SLOW_WORKFLOW)])
    turn = chat(d, "What is 19 * 23?", session=f"demo-{uuid.uuid4().hex[:8]}")
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]


def test_mini_n8n_in_the_api_container_lists_and_deactivates_workflows_as_the_readme_says(
    deployment,
):
    d = deployment
    greeting = workflow_id(EXAMPLES / "webhook-greeting-last-node.json")
    listed = d.compose("exec", "-T", "api", "mini-n8n", "workflows", timeout=60)
    rows = [line.split("\t")[:2] for line in listed.stdout.splitlines()]
    assert [greeting, "active"] in rows, listed.stdout
    assert listed.stderr == "Redis: redis://:***@redis:6379/0 (REDIS_URL)\n"
    done = d.compose("exec", "-T", "api", "mini-n8n", "deactivate", greeting, timeout=60)
    assert done.stdout == f"deactivated {greeting}\n"
    assert greeting not in active_workflows(d)


def test_streams_the_calculator_answer_line_by_line_through_the_proxy(deployment):
    d = deployment
    turn = chat(d, "What is 19 * 23?", session=f"calc-{uuid.uuid4().hex[:8]}")
    assert turn["headers"]["content-type"].startswith("application/x-ndjson")
    assert turn["execution"]
    assert turn["chunks"][0]["type"] == "begin"
    assert turn["chunks"][-1]["type"] == "end"
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]
    assert_streamed_line_by_line(d)


def assert_streamed_line_by_line(d) -> None:
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
        with httpx.stream(
            "POST", d.url + SLOW_CHAT, json=body, timeout=60, verify=d.verify
        ) as response:
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
    done = d.podman("exec", container, "python", "-c", kill, check=False)
    # The worker is the container's main process, so the container stops with it, and podman may
    # then fail to fetch the exec's own exit status (255, "exec died event ... not found"): what
    # counts is that the kill ran, which the time it printed shows.
    assert done.stdout.strip(), f"exit {done.returncode}: {done.stderr}"
    killed = float(done.stdout)

    client.join(30)
    assert not client.is_alive(), "the stream did not end"
    took = result["ended"] - killed
    print(f"\nworker killed: the stream ended {took:.1f} s later")
    chunks = without_keepalives(result["chunks"])
    assert chunks[-1]["type"] == "error" and chunks[-1]["content"], chunks[-3:]
    # Ended by the lease running out (the join above waits far less than the execution's own
    # timeout, so an end by that would fail it): how soon is the figure printed above.
    record = executions(d, [result["execution"]])[0]
    assert record["status"] in ("crashed", "error"), record["status"]

    again = chat(d, "What is 19 * 23?", session=f"after-{uuid.uuid4().hex[:8]}")
    assert again["answer"] == CALCULATOR_ANSWER, again["chunks"]


def test_two_api_containers_behind_the_proxy_serve_chats_on_one_port_and_stream_line_by_line(
    deployment,
):
    d = deployment
    d.compose("up", "-d", "--scale", "api=2", "--scale", "worker=3", timeout=120)
    apis = wait_until(d, lambda: healthy_apis(d, 2), 90, "two healthy api containers")
    ids: list[str] = []

    def served_by_both():
        """Four more chats through the published port, then which api container logged each."""
        for _ in range(4):
            turn = chat(d, "What is 19 * 23?", session=f"apis-{uuid.uuid4().hex[:8]}")
            assert turn["answer"] == CALCULATOR_ANSWER, (turn["execution"], turn["chunks"])
            ids.append(turn["execution"])
        logs = {api: logs_of(d, api) for api in apis}
        served = {api: {i for i in ids if i in text} for api, text in logs.items()}
        return served if all(served.values()) else None

    # The proxy looks `api` up again every 5 s and then spreads requests over both.
    served = wait_until(d, served_by_both, 60, "chats served by both api containers", every=0.1)
    print(f"\n{len(ids)} chats: {[len(found) for found in served.values()]} by each api")
    first, second = served.values()
    assert not first & second, "one execution logged by both api containers"
    assert_streamed_line_by_line(d)


def test_sessions_survive_down_and_up_and_down_is_prompt(deployment):
    d = deployment
    # `stop` then `down` is what `down` does; split, so a slow stop leaves logs to look at.
    running = running_containers(d)
    started = time.time()
    d.compose("stop", timeout=120)
    stopped = time.time() - started
    containers = stopped_containers(d, running)
    # How long each stage took to stop, from when the one before it was down (or from the
    # start): podman's own work on a busy machine counts against it, never in its favour.
    stages, previous = {}, started
    for services in STOP_STAGES:
        finished = max(c["finished"] for c in containers if c["service"] in services)
        stages["+".join(services)], previous = finished - previous, finished
    killed = [c for c in containers if c["exit"] != 0]  # 137: SIGKILL after the stop timeout
    logs = killed and d.compose("logs", "--no-color", "-t", "--tail", "30").stdout
    d.compose("down", timeout=120)
    took = time.time() - started
    each = ", ".join(f"{service} {t:.1f} s" for service, t in stages.items())
    print(f"\ncompose down: {took:.1f} s (stop {stopped:.1f} s: {each})")
    # A service that waited out the stop timeout was killed (137): each stage's time is printed.
    assert not killed, f"containers did not exit by themselves on SIGTERM: {killed}\n{logs}"

    d.compose("up", "-d", timeout=90)
    wait_until(d, lambda: ready(d), 90, "/readyz after up")
    assert f"chat:{ada_session(d)}" in redis_cli(d, "--scan", "--pattern", "chat:*").split()
    assert chat(d, "What is my name?", ada_session(d))["answer"] == "Your name is Ada."


def test_redis_refuses_clients_without_its_password_which_no_log_shows(deployment):
    d = deployment
    anonymous = d.compose("exec", "-T", "redis", "redis-cli", "ping", timeout=60).stdout
    assert anonymous.strip() == "NOAUTH Authentication required."
    wrong = d.compose(
        "exec", "-T", "redis", "env", "REDISCLI_AUTH=not-it", "redis-cli", "--user", "default",
        "ping", timeout=60,
    )  # fmt: skip
    assert "AUTH failed: WRONGPASS" in wrong.stderr  # redis-cli says so, then runs unlogged
    assert wrong.stdout.strip() == "NOAUTH Authentication required."
    assert redis_cli(d, "ping").strip() == "PONG"  # as the services log in
    logs = d.compose("logs", "--no-color", timeout=60).stdout
    assert d.redis_password not in logs


# Every process's command line in a container, and its main process's environment.
SEEN_INSIDE = "cat /proc/[0-9]*/cmdline /proc/1/environ 2>/dev/null | tr '\\0' ' '"


def test_the_secrets_are_in_no_environment_command_line_or_inspect_output(deployment):
    d = deployment
    ids = running_containers(d)
    inspected = d.podman("inspect", *ids).stdout
    config = d.compose("config", timeout=60).stdout
    inside = "".join(d.podman("exec", c, "sh", "-c", SEEN_INSIDE, check=False).stdout for c in ids)
    assert "redis-server" in inside and "gunicorn" in inside  # it saw the processes
    for secret in (d.api_key, d.redis_password):
        assert secret not in inspected and secret not in config and secret not in inside


def outward_address() -> str:
    """This machine's address on its default route (a UDP socket's; no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.254", 9))
        return probe.getsockname()[0]


def test_plain_http_is_published_on_this_machines_loopback_only(deployment):
    d = deployment
    proxy = json.loads(d.podman("inspect", *containers_of(d, "proxy")).stdout)[0]
    bindings = proxy["HostConfig"]["PortBindings"]["5678/tcp"]
    assert bindings == [{"HostIp": "127.0.0.1", "HostPort": str(d.port)}]
    assert httpx.get(f"http://127.0.0.1:{d.port}/healthz", timeout=10).status_code == 200
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://{outward_address()}:{d.port}/healthz", timeout=10)


def test_a_backup_taken_as_the_readme_says_holds_the_sessions(deployment):
    d = deployment
    assert redis_cli(d, "BGSAVE").strip() == "Background saving started"
    wait_until(
        d, lambda: "rdb_bgsave_in_progress:0" in redis_cli(d, "INFO", "persistence"), 60,
        "the snapshot to be written",
    )  # fmt: skip
    assert "rdb_last_bgsave_status:ok" in redis_cli(d, "INFO", "persistence")
    # `docker compose exec -T redis cat /data/dump.rdb > mini-n8n-redis.rdb`, bytes as they are.
    copy = subprocess.run(
        compose_command("exec", "-T", "redis", "cat", "/data/dump.rdb", env_file=d.env_file),
        env=d.env, cwd=ROOT, capture_output=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert copy.startswith(b"REDIS")
    assert f"chat:{ada_session(d)}".encode() in copy


def test_credentials_come_from_the_docker_secret_and_openai_api_key_reaches_the_workers(
    deployment,
):
    d = deployment
    password = d.redis_password
    openai_key, env_key = f"sk-file-{secrets.token_hex(8)}", f"sk-env-{secrets.token_hex(8)}"
    # Chat memory in database 2 through the secret's `redis` credential, so a turn shows that
    # the worker read it.
    credentials = [
        {"id": "memory", "name": "Chat memory", "type": "redis",
         "data": {"host": "redis", "port": 6379, "database": 2, "password": password}},
        {"id": "openai", "name": "OpenAI", "type": "openAiApi", "data": {"apiKey": openai_key}},
    ]  # fmt: skip
    secret = d.run_dir / "credentials.json"
    secret.write_text(json.dumps(credentials))
    secret.chmod(0o644)  # the image's user reads it
    # The user's chat whose Redis Chat Memory names that credential, as an n8n export does.
    workflow = json.loads((EXAMPLES / "chat-calculator-redis.json").read_text())
    workflow["id"] = "composeCredentialChat"
    for n in workflow["nodes"]:
        if n["name"] == "When chat message received":
            n["parameters"]["path"] = "credential-chat"
        if n["name"] == "Redis Chat Memory":
            n["credentials"] = {"redis": {"id": "memory", "name": "Chat memory"}}
    (d.workflows / "chat-credential.json").write_text(json.dumps(workflow))
    d.env.update(MINI_N8N_CREDENTIALS_SECRET=str(secret), OPENAI_API_KEY=env_key)
    up_and_ready(d)  # the api and the workers are created again, with the secret

    session = f"secret-{uuid.uuid4().hex[:8]}"
    turn = chat(d, "My name is Grace", session, path="/webhook/credential-chat")
    assert turn["answer"] == "Nice to meet you, Grace!", turn["chunks"]
    stored = redis_cli(d, "-n", "2", "LRANGE", f"chat:{session}", "0", "-1").splitlines()
    assert [json.loads(m)["data"]["content"] for m in stored] == [
        "Nice to meet you, Grace!", "My name is Grace",
    ]  # fmt: skip
    assert redis_cli(d, "EXISTS", f"chat:{session}").strip() == "0"

    listing = "import json; from core.credentials import CredentialStore as S; " + (
        "print(json.dumps([(c['id'], c['type'], c['data']) for c in S.from_env().redacted()]))"
    )
    seen = d.compose("exec", "-T", "worker", "python", "-c", listing, timeout=60).stdout
    assert json.loads(seen) == [
        ["memory", "redis", {"host": "redis", "port": 6379, "database": 2, "password": "***"}],
        ["openai", "openAiApi", {"apiKey": "***"}],
        ["", "openAiApi", {"apiKey": "***"}],  # OPENAI_API_KEY, the fallback
    ]
    same = f"import os, sys; sys.exit(os.environ['OPENAI_API_KEY'] != {env_key!r})"
    d.compose("exec", "-T", "worker", "python", "-c", same, timeout=60)
    logs = d.compose("logs", "--no-color", timeout=60).stdout
    for value in (openai_key, env_key, d.api_key, password):
        assert value not in logs


def test_the_api_metrics_are_not_published_through_the_proxy_unless_asked(deployment):
    d = deployment
    hidden = httpx.get(d.url + "/metrics", timeout=10, verify=d.verify)
    assert hidden.status_code == 404
    assert hidden.json() == {"message": "Not found"}
    # Inside the network, where Prometheus scrapes, each api and worker answers.
    for target in ("http://api:5678/metrics", "http://worker:9464/metrics"):
        scraped = d.compose("exec", "-T", "proxy", "curl", "-fsS", target, timeout=60).stdout
        assert "# TYPE mini_n8n_" in scraped, target

    d.env["MINI_N8N_PROXY_METRICS"] = "true"
    proxy_recreated(d)
    shown = httpx.get(d.url + "/metrics", timeout=10, verify=d.verify)
    assert shown.status_code == 200
    assert "mini_n8n_open_streams" in shown.text


def proxy_recreated(d) -> None:
    """`up -d` after a change of the proxy's settings: it alone is created again; then the api
    answers through it and it is healthy."""
    d.compose("up", "-d", timeout=120)
    wait_until(d, lambda: ready(d), 90, "/readyz through the new proxy")
    wait_until(d, lambda: containers_of(d, "proxy", healthy=True), 90, "the proxy healthy")


def self_signed(folder) -> tuple[str, str]:
    """A certificate for localhost and 127.0.0.1 and its key, as docs/tls.md makes one."""
    cert, key = folder / "tls-cert.pem", folder / "tls-key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    key.chmod(0o600)  # the proxy's master reads it as the container's root, which owns it
    return str(cert), str(key)


def test_with_tls_at_the_proxy_chats_stream_over_https_and_plain_http_is_refused(deployment):
    d = deployment
    cert, key = self_signed(d.run_dir)
    d.compose_files = (*d.compose_files, *TLS_FILES)
    d.env.update(TLS_CERTIFICATE=cert, TLS_KEY=key)
    d.scheme, d.verify = "https", ssl.create_default_context(cafile=cert)
    proxy_recreated(d)  # its healthcheck passes over HTTPS

    turn = chat(d, "What is 19 * 23?", session=f"tls-{uuid.uuid4().hex[:8]}")
    assert turn["headers"]["content-type"].startswith("application/x-ndjson")
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]
    assert_streamed_line_by_line(d)
    assert rest(d, "/workflows").status_code == 200
    plain = httpx.get(f"http://127.0.0.1:{d.port}/healthz", timeout=10)
    assert plain.status_code == 400
    assert "The plain HTTP request was sent to HTTPS port" in plain.text
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(d.url + "/healthz", timeout=10)  # not a certificate anyone else trusts


def test_with_rabbitmq_as_the_broker_chats_stream_and_remember_and_redis_holds_no_queue(
    deployment,
):
    """The README's variant: `-f docker-compose.yml -f docker-compose.rabbitmq.yml`, on the data
    the tests above left in Redis (and behind the proxy's TLS, which the test above set)."""
    d = deployment
    # Up to here the broker was Redis, and its keys are there to see: the check below finds them.
    left = broker_keys(d)
    assert f"_kombu.binding.{TASK_QUEUE}" in left, left
    redis_cli(d, "DEL", *left)
    d.compose("down", timeout=120)  # the volumes stay
    d.compose_files = (*d.compose_files, *RABBITMQ_FILES)
    d.env["RABBITMQ_PASSWORD"] = password = secrets.token_hex(16)
    up_and_ready(d)  # rabbitmq healthy, then the api and the workers on it

    turn = chat(d, "What is 19 * 23?", session=f"rabbit-{uuid.uuid4().hex[:8]}")
    assert turn["headers"]["content-type"].startswith("application/x-ndjson")
    assert turn["chunks"][0]["type"] == "begin" and turn["chunks"][-1]["type"] == "end"
    assert turn["answer"] == CALCULATOR_ANSWER, turn["chunks"]
    assert_streamed_line_by_line(d)
    session = f"rabbit-ada-{uuid.uuid4().hex[:8]}"
    assert chat(d, "My name is Ada", session)["answer"] == "Nice to meet you, Ada!"
    assert chat(d, "What is my name?", session)["answer"] == "Your name is Ada."

    # The queue is RabbitMQ's, with a worker consuming it; Redis holds no broker key.
    listed = d.compose(
        "exec", "-T", "rabbitmq", "rabbitmqctl", "-q", "list_queues", "name", "consumers",
        timeout=60,
    ).stdout  # fmt: skip
    consumers = dict(line.split("\t") for line in listed.splitlines()[1:])
    assert int(consumers.get(TASK_QUEUE, 0)) >= 1, listed
    assert broker_keys(d) == []
    assert password not in d.compose("logs", "--no-color", timeout=60).stdout
