"""Flower, as it is, on a running deployment: `celery -A worker.celery_cli flower` finds the
workers and the executions they ran, each task named by its execution id."""

from __future__ import annotations

import sys

import httpx
import pytest

from mini_n8n.redis_server import free_port
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, Process, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example
from worker.celery_app import TASK_NAME

pytest.importorskip("flower")

FLOWER_TIMEOUT = 60.0  # a loaded machine starts Flower slowly
# Flower turns task events on in the workers itself, every 5 s from its start.
EVENTS_TIMEOUT = 20.0


def start_flower(deploy: Deployment) -> str:
    port = free_port()
    argv = [
        *(sys.executable, "-m", "celery", "-A", "worker.celery_cli"),
        f"--broker={deploy.redis_url}",
        *("flower", f"--port={port}", "--address=127.0.0.1"),
    ]
    # Flower 2 answers its API without authentication only when told to.
    env = {**deploy.env, "FLOWER_UNAUTHENTICATED_API": "true"}
    deploy.processes.append(Process("flower", argv, env))  # stopped with the deployment
    return f"http://127.0.0.1:{port}"


def get_json(url: str) -> dict | None:
    try:
        response = httpx.get(url, timeout=5.0)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def test_flower_lists_the_worker_and_the_executions_it_ran(redis_url):
    with Deployment.running(redis_url) as deploy:
        flower = start_flower(deploy)
        hostname = f"worker-{deploy.worker.pid}@"

        def our_worker() -> dict | None:
            workers = get_json(f"{flower}/api/workers?refresh=1") or {}
            return next((v for k, v in workers.items() if k.startswith(hostname)), None)

        worker = wait_until(our_worker, FLOWER_TIMEOUT, f"Flower to list {hostname}")
        assert worker["active_queues"][0]["name"] == deploy.env["MINI_N8N_TASK_QUEUE"]
        assert TASK_NAME in worker["registered"]
        # Its event receiver hears the worker's heartbeats: the worker shows online...
        wait_until(
            lambda: any(
                name.startswith(hostname) and alive
                for name, alive in (get_json(f"{flower}/api/workers?status=1") or {}).items()
            ),
            FLOWER_TIMEOUT,
            f"Flower to show {hostname} online",
        )
        # ...and the worker sends task events once Flower has asked for them.
        wait_until(
            lambda: any("Events of group {task} enabled" in line for line in deploy.worker.lines),
            EVENTS_TIMEOUT,
            "Flower to turn task events on in the worker",
        )

        workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
        ids = []
        for n in range(3):
            reply = stream_chat(chat_url(deploy.base, workflow), "What is 19 * 23?", f"s-fl{n}")
            assert reply.status == 200
            ids.append(reply.headers["x-execution-id"])

        def succeeded() -> dict | None:
            tasks = get_json(f"{flower}/api/tasks") or {}
            done = {i: tasks[i] for i in ids if tasks.get(i, {}).get("state") == "SUCCESS"}
            return done if len(done) == len(ids) else None

        tasks = wait_until(succeeded, FLOWER_TIMEOUT, f"Flower to show {ids} succeeded")
        for execution_id, task in tasks.items():
            assert task["name"] == TASK_NAME
            assert task["worker"].startswith(hostname)
            assert deploy.execution(execution_id)["status"] == "success"
