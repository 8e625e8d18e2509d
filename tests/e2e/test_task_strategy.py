"""The worker's short path for its task (worker/library_internals.py) keeps what Celery's own
gives the people who run it: `celery inspect` sees a running execution and counts it once done,
its lines come in order, a revoked task is not run, and a message with Celery options the api
never sets (a countdown) is handled by Celery's strategy as before. Each with the shortcuts on
and off (Celery's own strategy and send_task): the same behaviour. Real api, worker and Redis."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time

import pytest

from core.execution_record import ExecutionRecord
from core.settings import Settings
from core.task import TaskPayload
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, with_model_delay
from worker.celery_app import TASK_NAME, create_celery, redis_message

TIMEOUT = 20.0


@pytest.fixture(scope="module", params=["on", "off"], ids=["shortcuts on", "shortcuts off"])
def deploy(redis_url, request):
    with Deployment.running(redis_url, MINI_N8N_LIBRARY_SHORTCUTS=request.param) as deploy:
        yield deploy


@pytest.fixture(scope="module")
def control(deploy):
    app = create_celery(Settings(redis_url=deploy.redis_url, broker_url=deploy.redis_url))
    yield app
    app.close()


def node(deploy: Deployment) -> str:
    return f"worker-{deploy.worker.pid}@{socket.gethostname()}"


def ours(deploy: Deployment, replies: dict | None) -> object:
    """This deployment's worker's part of an inspect reply."""
    return (replies or {}).get(node(deploy))


def lines_with(deploy: Deployment, text: str) -> list[int]:
    return [i for i, line in enumerate(list(deploy.worker.lines)) if text in line]


def payload(execution_id: str) -> TaskPayload:
    """A task for an execution that was never recorded: a worker that runs it drops it at its
    claim and says so ("succeeded ... 'dropped'")."""
    return TaskPayload(
        record=ExecutionRecord(execution_id, "wf-none"),
        start_node="When chat message received",
        items=[{"json": {"chatInput": "hi"}}],
        streaming=True,
        response_mode="streaming",
        workflow_ref="v-none",
    )


def test_a_running_execution_is_listed_as_active_and_counted_once_done(deploy, control):
    workflow = deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 300)))
    replies = []
    chat = threading.Thread(
        target=lambda: replies.append(
            stream_chat(chat_url(deploy.base, workflow), "tell me a story", "s-active")
        )
    )
    # Asked of this worker only, and answered as soon as it replies.
    inspect = control.control.inspect(destination=[node(deploy)], timeout=5, limit=1)
    total_before = (ours(deploy, inspect.stats()) or {}).get("total", {}).get(TASK_NAME, 0)
    chat.start()

    def active() -> list[dict]:
        return ours(deploy, inspect.active()) or []

    running = wait_until(active, TIMEOUT, "the execution among the worker's active tasks")
    chat.join(TIMEOUT)
    (reply,) = replies
    execution_id = reply.headers["x-execution-id"]
    assert [(t["id"], t["name"], t["acknowledged"]) for t in running] == [
        (execution_id, TASK_NAME, True)
    ]
    assert running[0]["time_start"] > 0
    assert running[0]["args"][0]["record"]["id"] == execution_id
    wait_until(lambda: active() == [], TIMEOUT, "the worker's active tasks to empty")
    total = ours(deploy, inspect.stats())["total"][TASK_NAME]
    assert total == total_before + 1
    received = lines_with(deploy, f"[{execution_id}] received")
    succeeded = wait_until(
        lambda: lines_with(deploy, f"[{execution_id}] succeeded in"), TIMEOUT, "succeeded"
    )
    assert len(received) == 1 and len(succeeded) == 1 and received[0] < succeeded[0]


def test_a_revoked_task_is_discarded_and_the_next_one_runs(deploy, control):
    revoked_id = "revoked0000000001"
    answers = control.control.revoke(
        revoked_id, destination=[node(deploy)], reply=True, timeout=5, limit=1
    )
    assert ours(deploy, {k: v for answer in answers for k, v in answer.items()})
    queue = deploy.env["MINI_N8N_TASK_QUEUE"]
    deploy.redis.lpush(queue, redis_message(payload(revoked_id), queue))
    wait_until(
        lambda: lines_with(deploy, f"Discarding revoked task: {TASK_NAME}[{revoked_id}]"),
        TIMEOUT,
        "the worker to discard the revoked task",
    )
    assert lines_with(deploy, f"[{revoked_id}] succeeded") == []

    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    reply = stream_chat(chat_url(deploy.base, workflow), "What is 6 * 7?", "s-after-revoke")
    assert reply.status == 200 and "42" in reply.text()


def test_a_task_sent_with_a_countdown_runs_after_it(deploy, control):
    execution_id = "countdown00000001"
    sent = time.monotonic()
    control.send_task(
        TASK_NAME,
        args=[payload(execution_id).encode()],
        task_id=execution_id,
        queue=deploy.env["MINI_N8N_TASK_QUEUE"],
        countdown=1.0,
    )
    wait_until(
        lambda: lines_with(deploy, f"[{execution_id}] succeeded in"),
        TIMEOUT,
        "the counted-down task to run",
    )
    assert time.monotonic() - sent >= 1.0
    (line,) = [deploy.worker.lines[i] for i in lines_with(deploy, f"[{execution_id}] succeeded")]
    assert line.rstrip().endswith("'dropped'")  # never recorded: nothing to run


def test_a_task_whose_payload_is_refused_is_logged_as_failed_and_the_worker_goes_on(deploy):
    execution_id = "badpayload0000001"
    queue = deploy.env["MINI_N8N_TASK_QUEUE"]
    message = json.loads(redis_message(payload(execution_id), queue))
    body = json.loads(base64.b64decode(message["body"]))
    del body[0][0]["workflowRef"]  # no workflow named: the runtime refuses it before any claim
    message["body"] = base64.b64encode(json.dumps(body).encode()).decode()
    deploy.redis.lpush(queue, json.dumps(message))
    failed = wait_until(
        lambda: lines_with(deploy, f"{TASK_NAME}[{execution_id}] raised unexpected: PayloadError"),
        TIMEOUT,
        "the worker's line that the task failed",
    )
    assert len(failed) == 1
    assert lines_with(deploy, f"[{execution_id}] succeeded") == []
    # It failed before its first wait, where the consumer logs it received: still once, before.
    received = lines_with(deploy, f"[{execution_id}] received")
    assert len(received) == 1 and received[0] < failed[0]

    workflow = deploy.activate(fresh_ids(example(REDIS_CHAT)))
    reply = stream_chat(chat_url(deploy.base, workflow), "What is 6 * 7?", "s-after-bad")
    assert reply.status == 200 and "42" in reply.text()
