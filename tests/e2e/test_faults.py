"""The fault matrix: at each step of an execution's life (its turn in a session's line, its
streaming, a Chat node's wait, the resume after a reply), Redis paused (CLIENT PAUSE), Redis
restarted (it keeps its append-only file, as compose runs it), the execution's worker killed
(SIGKILL), or the api killed (SIGKILL). Each case asserts that every execution it started is
finished (or waits on purpose) within its bound, and that the session's next message is answered
whole, by whatever processes remain.

Real processes (gunicorn + gevent api, Celery workers) on a Redis of the module's own."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from core.liveness import lost_within
from mini_n8n.redis_server import EmbeddedRedis
from tests.chat.conversation import FIRST, ask_name_workflow, next_frame, open_chat, reply, start
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.waiting import wait_until
from tests.workflows import GREETING, REDIS_CHAT, example, with_model_delay

LEASE_SECONDS = 2
KEEPALIVE_SECONDS = 1
PAUSE_MS = 4000
# Every execution a case started ends within this long after the fault: a lost worker's (the
# lease, its confirmation, a reaper's round), after Redis came back, with time for the machine.
BOUND = PAUSE_MS / 1000 + lost_within(LEASE_SECONDS) + 8
FAULTS = ("redis paused", "redis restarted", "worker killed", "api killed")
FINISHED = {"success", "error", "canceled", "crashed"}


class Faults:
    """A deployment (one api, two workers) on a Redis it may pause, restart, and processes it
    may kill; `heal` brings it back to one api and two workers."""

    def __init__(self, data_dir: Path):
        self.server = EmbeddedRedis(data_dir=str(data_dir)).start()
        self.deploy = Deployment(
            self.server.url,
            MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
            MINI_N8N_KEEPALIVE_SECONDS=str(KEEPALIVE_SECONDS),
        )
        self.base = self.deploy.start_api()
        self.workers = [self.deploy.start_worker(), self.deploy.start_worker()]
        self.chat = self.deploy.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 250)))
        self.ask = self.deploy.activate(ask_name_workflow())

    def close(self) -> None:
        self.deploy.stop()
        self.server.stop()

    # --- faults -------------------------------------------------------------------------------
    def inject(self, fault: str, execution_id: str) -> None:
        if fault == "redis paused":
            client = redis.Redis.from_url(self.server.url)
            client.execute_command("CLIENT", "PAUSE", PAUSE_MS, "ALL")
            client.close()
        elif fault == "redis restarted":
            port, data_dir = self.server.port, self.server.data_dir
            self.server.stop()
            self.server = EmbeddedRedis(port=port, data_dir=data_dir).start()
        elif fault == "worker killed":
            # Dead before the test goes on, as an orchestrator sees it: until its socket is
            # closed, Redis may still hand the dying worker's pending BRPOP the next task (a
            # reply's), which dies with it (at most once) and would be reaped only at the
            # queue timeout. A fresh-clone run on a busy machine lost a reply so.
            worker = self._worker_of(execution_id).proc
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
        elif fault == "api killed":
            api, _ = self.deploy.apis[-1]
            api.proc.send_signal(signal.SIGKILL)
            api.proc.wait(10)

    def _worker_of(self, execution_id: str):
        record = wait_until(
            lambda: (r := self.deploy.execution(execution_id)) and r.get("worker") and r,
            10,
            "a worker to take the execution",
        )
        return next(w for w in self.workers if w.pid == record["worker"]["pid"])

    def heal(self) -> None:
        """One api and two workers alive again, as an orchestrator would see to."""
        self.workers = [w for w in self.workers if w.proc.poll() is None]
        while len(self.workers) < 2:
            self.workers.append(self.deploy.start_worker())
        api, _ = self.deploy.apis[-1]
        if api.proc.poll() is not None:
            self.base = self.deploy.start_api()

    # --- what must hold -----------------------------------------------------------------------
    def all_ended(self, execution_ids: list[str], *, waiting_ok: bool = False) -> dict[str, dict]:
        def ended() -> dict[str, dict] | None:
            with contextlib.suppress(redis.RedisError):
                records = {i: self.deploy.execution(i) for i in execution_ids}
                ok = FINISHED | ({"waiting"} if waiting_ok else set())
                if all(r is not None and r["status"] in ok for r in records.values()):
                    return records  # type: ignore[return-value]
            return None

        return wait_until(ended, BOUND, f"every execution of {execution_ids} to end")


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    setup = Faults(tmp_path_factory.mktemp("faults-redis"))
    yield setup
    setup.close()


def _stream_in_background(url: str, message: str, session: str, started: threading.Event):
    result: dict = {}

    def run() -> None:
        try:
            result["reply"] = stream_chat(
                url, message, session, timeout=60,
                on_chunk=lambda c: c["type"] == "item" and started.set(),
            )  # fmt: skip
        except httpx.HTTPError as err:  # the api it talked to was killed
            result["error"] = err
        started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _execution_ids(faults: Faults, session: str) -> list[str]:
    """The executions of a streaming session, newest last (from the workflow's index)."""
    keys = faults.deploy.keys
    ids = faults.deploy.redis.zrange(keys.workflow_executions(faults.chat["id"]), 0, -1)
    records = [faults.deploy.execution(i) for i in ids]
    return [r["id"] for r in records if r and r.get("sessionId") == session]


def _next_message_is_answered(faults: Faults, session: str) -> None:
    """The session's next message, answered whole: with the name if a turn that said it got
    into memory."""
    told = any(m["data"]["content"] == "my name is Ada" for m in faults.deploy.chat_list(session))
    answer = stream_chat(
        chat_url(faults.base, faults.chat), "What is my name?", session, timeout=60
    )
    assert answer.status == 200
    assert answer.types()[-1] == "end", answer.chunks
    assert answer.text() == ("Your name is Ada." if told else "I don't know your name yet.")


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_an_answer_streams(faults, fault):
    session = f"stream-{uuid.uuid4().hex[:8]}"
    started = threading.Event()
    thread, result = _stream_in_background(
        chat_url(faults.base, faults.chat), "my name is Ada", session, started
    )
    assert started.wait(30), "the answer never started"
    (execution_id,) = _execution_ids(faults, session)
    faults.inject(fault, execution_id)
    thread.join(BOUND)
    assert not thread.is_alive(), "the stream did not end"
    record = faults.all_ended([execution_id])[execution_id]
    answer = result.get("reply")
    if fault in ("redis paused", "api killed"):
        assert record["status"] == "success"  # nothing of the execution's was lost
    if fault == "redis paused":  # and its stream waited it out, then got all of it
        assert answer.types()[-1] == "end" and answer.text() == "Nice to meet you, Ada!"
    if fault == "worker killed":
        assert record["status"] == "crashed"
        assert answer.chunks[-1]["type"] == "error" and "worker" in answer.chunks[-1]["content"]
    if fault == "redis restarted":  # the stream ends with an error line, or whole
        last = answer.chunks[-1]
        assert last["type"] == "error" or answer.text() == "Nice to meet you, Ada!", last
    faults.heal()
    _next_message_is_answered(faults, session)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_a_message_waits_for_its_turn(faults, fault):
    session = f"turn-{uuid.uuid4().hex[:8]}"
    first, second = threading.Event(), threading.Event()
    url = chat_url(faults.base, faults.chat)
    thread_a, _ = _stream_in_background(url, "my name is Ada", session, first)
    assert first.wait(30), "the first answer never started"
    thread_b, _ = _stream_in_background(url, "my name is Ada", session, second)
    ids = wait_until(lambda: len(ids := _execution_ids(faults, session)) == 2 and ids, 10,
                     "the second message to be recorded")  # fmt: skip
    faults.inject(fault, ids[0])
    for thread in (thread_a, thread_b):
        thread.join(BOUND)
        assert not thread.is_alive(), "a stream did not end"
    faults.all_ended(ids)
    faults.heal()
    _next_message_is_answered(faults, session)


@contextlib.contextmanager
def _asked(faults: Faults, session: str):
    """The ask-my-name conversation, at its question: the execution id and the open socket."""
    execution_id = start(faults.base, faults.ask, session)
    with open_chat(faults.base, session, execution_id) as ws:
        assert next_frame(ws) == FIRST
        yield execution_id, ws


def _starts_over(faults: Faults, session: str, ended: str) -> None:
    """The session's next message starts a new conversation."""
    with _asked(faults, session) as (again, _):
        assert again != ended


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_while_a_chat_node_waits(faults, fault):
    session = f"wait-{uuid.uuid4().hex[:8]}"
    with _asked(faults, session) as (execution_id, _):
        pass
    wait_until(lambda: faults.deploy.execution(execution_id)["status"] == "waiting", 10, "the wait")
    faults.inject(fault, execution_id)  # a waiting execution holds no worker: nothing to kill
    faults.heal()
    with open_chat(faults.base, session, execution_id) as ws:
        reply(ws, session, "Ada")
        assert next_frame(ws, timeout=BOUND) == "Nice to meet you, Ada!"
    record = faults.all_ended([execution_id])[execution_id]
    assert record["status"] == "success"
    _starts_over(faults, session, execution_id)


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "worker killed"])
def test_a_fault_as_a_reply_resumes_a_wait(faults, fault):
    session = f"resume-{uuid.uuid4().hex[:8]}"
    frames: list[str] = []
    with _asked(faults, session) as (execution_id, ws):
        reply(ws, session, "Ada")
        faults.inject(fault, execution_id)
        with contextlib.suppress(Exception):  # the socket may be cut with its api
            frames.append(next_frame(ws, timeout=BOUND))
    record = faults.all_ended([execution_id], waiting_ok=True)[execution_id]
    faults.heal()
    if record["status"] == "waiting":  # the reply was lost with the api before it was taken
        with open_chat(faults.base, session, execution_id) as again:
            reply(again, session, "Ada")
            frames.append(next_frame(again, timeout=BOUND))
        record = faults.all_ended([execution_id])[execution_id]
    if record["status"] == "success":
        assert "Nice to meet you, Ada!" in frames or _messages(faults, execution_id)[-1] == (
            "Nice to meet you, Ada!"
        )
    _starts_over(faults, session, execution_id)


def test_a_worker_killed_as_a_reply_resumes_a_wait(faults):
    """The reply's task is taken by a worker that dies at once: the execution ends `crashed`
    within the lost-worker bound, and the session starts over."""
    session = f"resume-kill-{uuid.uuid4().hex[:8]}"
    with _asked(faults, session) as (execution_id, ws):
        for worker in faults.workers[1:]:
            worker.proc.send_signal(signal.SIGSTOP)  # only the first can take the reply
        try:
            reply(ws, session, "Ada")
            wait_until(lambda: faults.deploy.execution(execution_id)["status"] != "waiting",
                       10, "the reply to resume it")  # fmt: skip
            faults.workers[0].proc.send_signal(signal.SIGKILL)
        finally:
            for worker in faults.workers[1:]:
                worker.proc.send_signal(signal.SIGCONT)
    record = faults.all_ended([execution_id])[execution_id]
    assert record["status"] in ("success", "crashed")
    faults.heal()
    _starts_over(faults, session, execution_id)


def _messages(faults: Faults, execution_id: str) -> list[str]:
    key = faults.deploy.keys.execution_messages(execution_id)
    return [json.loads(m)["text"] for m in faults.deploy.redis.lrange(key, 0, -1)]


def test_an_execution_no_worker_takes_is_ended_by_the_workers_reapers_though_nobody_streams_it(
    redis_url,
):
    """onReceived: the answer is given at once, so no stream checks on the execution. The
    workers' reapers end it once its queue time is over."""
    with Deployment.running(redis_url, MINI_N8N_QUEUE_TIMEOUT="2") as deploy:
        workflow = fresh_ids(example(GREETING))
        workflow["nodes"][0]["parameters"]["responseMode"] = "onReceived"
        deploy.activate(workflow)
        nowhere = deploy.start_api(MINI_N8N_TASK_QUEUE=f"{deploy.keys.prefix}nobody")
        path = workflow["nodes"][0]["parameters"]["path"]
        answer = httpx.post(f"{nowhere}/webhook/{path}", json={"name": "Ada"}, timeout=10)
        assert answer.json()["message"] == "Workflow was started"
        execution_id = answer.json()["executionId"]
        record = wait_until(
            lambda: (r := deploy.execution(execution_id))["status"] == "crashed" and r,
            2 + lost_within(LEASE_SECONDS) + 5,
            "a reaper to end it",
        )
        assert record["error"] == "No worker started this execution within 2 s."
