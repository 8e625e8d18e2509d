"""Several api processes behind a real nginx (round robin, no sticky sessions): streams stay
incremental through the proxy, every stream completes exactly, one session's messages keep their
order whichever process takes them, and the editor's push and a Chat node's WebSocket reach a
client held by another process. And compose's own proxy configuration (deploy/nginx.conf) in a
real nginx: slow bodies stay in the proxy."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.chat.conversation import (
    CONTINUE,
    FIRST,
    ask_name_workflow,
    next_frame,
    open_chat,
)
from tests.chat.conversation import (
    reply as send_reply,
)
from tests.e2e.client import stream_chat
from tests.e2e.deployment import ROOT, Deployment, chat_url, fresh_ids
from tests.e2e.slow_clients import (
    chat_body,
    closed_by_peer,
    connect,
    read_answer,
    request_head,
    start_slow_post,
)
from tests.scale.servers import (
    START_TIMEOUT,
    Server,
    _accepting,
    free_port,
    nginx,
    nginx_binary,
    two_hundred_exact_streams,
)
from tests.waiting import wait_until
from tests.workflows import REDIS_CHAT, example, with_model_delay

API_KEY = "proxy-test-key"
ANSWER_437 = "Based on the tools: Calculator returned 437."


@pytest.fixture(scope="module")
def proxied(redis_url, tmp_path_factory):
    """Two api processes (the first with two gunicorn workers) and one Celery worker, with nginx
    in front: `.base` is the proxy, `.api_a` / `.api_b` the processes behind it."""
    deploy = Deployment(
        redis_url,
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_KEEPALIVE_SECONDS="1",
        MINI_N8N_GRACEFUL_TIMEOUT="1",
    )
    try:
        deploy.worker = deploy.start_worker()
        deploy.api_a = deploy.start_api(WEB_CONCURRENCY="2")
        deploy.api_b = deploy.start_api()
        with nginx(tmp_path_factory.mktemp("nginx"), [deploy.api_a, deploy.api_b]) as base:
            deploy.base = base
            yield deploy
    finally:
        deploy.stop()


def served_by(headers) -> str:
    """The api process that gave an answer, as the proxy names it."""
    return f"http://{headers['x-upstream']}"


def test_two_hundred_concurrent_streams_through_nginx_complete_exactly(proxied):
    workflow = proxied.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(proxied.base, workflow)

    replies = two_hundred_exact_streams(lambda i: url, "px-many-")
    servers = {served_by(r.headers) for r in replies}
    assert servers == {proxied.api_a, proxied.api_b}


def test_a_slow_stream_arrives_token_by_token_through_nginx(proxied):
    workflow = proxied.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 100)))
    reply = stream_chat(chat_url(proxied.base, workflow), "What is 19 * 23?", "px-slow")
    assert reply.text() == ANSWER_437
    items = [t for c, t in zip(reply.chunks, reply.arrivals, strict=True) if c["type"] == "item"]
    # 7 tokens 100 ms apart: spread over ~0.6 s unless the proxy buffers the response.
    assert len(items) == 7 and items[-1] - items[0] > 0.45
    gaps = [b - a for a, b in zip(items, items[1:], strict=False)]
    assert sum(1 for g in gaps if g > 0.05) >= 5


def test_one_sessions_messages_alternate_between_api_processes_and_keep_their_order(proxied):
    """Each message is sent once the previous one was accepted (so the arrival order is known)
    while the previous still runs; round robin hands consecutive ones to different processes."""
    workflow = proxied.activate(fresh_ids(with_model_delay(example(REDIS_CHAT), 50)))
    url, session, count = chat_url(proxied.base, workflow), "px-ordered", 6
    replies: list = [None] * count
    threads = []
    for i in range(count):
        accepted = threading.Event()

        def send(i=i, accepted=accepted):
            replies[i] = stream_chat(
                url, f"message {i}", session, on_chunk=lambda _: accepted.set()
            )
            accepted.set()

        threads.append(threading.Thread(target=send))
        threads[-1].start()
        assert accepted.wait(30)
    for thread in threads:
        thread.join(60)
    servers = [served_by(r.headers) for r in replies]
    assert all(a != b for a, b in zip(servers, servers[1:], strict=False)), servers
    records = [proxied.execution(r.headers["x-execution-id"]) for r in replies]
    assert all(r["status"] == "success" for r in records)
    for before, after in zip(records, records[1:], strict=False):
        assert after["startedAt"] >= before["stoppedAt"]
    stored = proxied.chat_list(session)[::-1]
    assert [m["data"]["content"] for m in stored if m["type"] == "human"] == [
        f"message {i}" for i in range(count)
    ]


class PushTab:
    """An editor tab's push stream (SSE), read in a thread."""

    def __init__(self, base: str, push_ref: str):
        self.events: list[dict] = []
        self._changed = threading.Condition()
        self._client = httpx.Client(timeout=httpx.Timeout(30, read=None))
        request = self._client.build_request(
            "GET", f"{base}/rest/push", params={"pushRef": push_ref, "key": API_KEY}
        )
        self.response = self._client.send(request, stream=True)
        assert self.response.status_code == 200
        self.api = served_by(self.response.headers)
        self._lines = self.response.iter_lines()
        assert next(self._lines).startswith("retry:")  # subscribed before anything is sent
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._lines:
                if line.startswith("data: "):
                    with self._changed:
                        self.events.append(json.loads(line[6:]))
                        self._changed.notify_all()
        except httpx.HTTPError:
            pass  # closed by the test

    def finished(self, execution_id: str, timeout: float = 20) -> list[dict]:
        def done() -> bool:
            return any(
                e["type"] == "executionFinished" and e["data"]["executionId"] == execution_id
                for e in self.events
            )

        with self._changed:
            assert self._changed.wait_for(done, timeout), self.events
            return [e for e in self.events if e["data"].get("executionId") == execution_id]

    def close(self) -> None:
        self.response.close()
        self._client.close()


def test_the_editor_push_reaches_a_tab_held_by_another_api_process(proxied):
    rest = httpx.Client(
        base_url=f"{proxied.base}/rest", headers={"X-N8N-API-KEY": API_KEY}, timeout=30
    )
    workflow = rest.post("/workflows", json=fresh_ids(example(REDIS_CHAT))).json()
    tab = PushTab(proxied.base, "px-tab")
    try:
        body = {"sessionId": "px-run", "chatInput": "What is 29 * 3?", "pushRef": "px-tab"}
        response = rest.post(f"/workflows/{workflow['id']}/chat", json=body)
        assert response.status_code == 200
        run_api = served_by(response.headers)
        execution_id = response.json()["executionId"]
        events = tab.finished(execution_id)
    finally:
        tab.close()
        rest.close()
    chunks = [e["data"]["chunk"] for e in events if e["type"] == "chatChunk"]
    text = "".join(c.get("content", "") for c in chunks if c["type"] == "item")
    assert text == "Based on the tools: Calculator returned 87."
    assert events[-1]["data"]["status"] == "success"
    # The tab's stream and the run were taken by different processes.
    assert tab.api != run_api


def test_a_chat_node_conversation_whose_socket_lands_on_another_process(proxied):
    """The POST that starts the execution and the WebSocket that carries its messages are taken
    by different api processes; the messages come through the pub/sub path all the same."""
    workflow = proxied.activate(ask_name_workflow())
    body = {"action": "sendMessage", "sessionId": "px-ask", "chatInput": "hello"}
    started = httpx.post(chat_url(proxied.base, workflow), json=body, timeout=10)
    execution_id, token = started.json()["executionId"], started.json()["resumeToken"]
    with open_chat(proxied.base, "px-ask", execution_id, token=token) as ws:
        assert served_by(ws.response.headers) != served_by(started.headers)
        assert next_frame(ws) == FIRST
        send_reply(ws, "px-ask", "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
        assert next_frame(ws) == CONTINUE
        with pytest.raises(ConnectionClosed):  # the execution ended
            next_frame(ws)
    assert proxied.execution(execution_id)["status"] == "success"


@pytest.fixture(scope="module")
def compose_proxy(proxied, tmp_path_factory):
    """deploy/nginx.conf as compose runs it, in front of one api process: its paths under a
    folder of the test's, its upstream that api, and the files deploy/proxy-start.sh writes
    written here, with a body timeout of 1 s (MINI_N8N_BODY_IDLE_SECONDS=1)."""
    workdir = tmp_path_factory.mktemp("compose-nginx")
    port = free_port()
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    conf = conf.replace("/tmp/nginx", str(workdir)).replace("http://api:5678", proxied.api_b)
    conf = conf.replace("user www-data;", "user root;")  # the test's folders are root's
    (workdir / "nginx.conf").write_text(conf)
    includes = {
        "resolver.conf": "resolver 127.0.0.1 valid=5s ipv6=off;",
        "listen.conf": f"listen 127.0.0.1:{port};",
        "metrics.conf": "",
        "bodies.conf": "client_max_body_size 16777216;\nclient_body_timeout 1s;",
    }
    for name, text in includes.items():
        (workdir / name).write_text(text + "\n")
    argv = [nginx_binary(), "-c", str(workdir / "nginx.conf"), "-p", str(workdir), "-e",
            str(workdir / "error.log"), "-g", "daemon off;"]  # fmt: skip
    server = Server("compose nginx", argv, {}, workdir / "nginx.out", cwd=Path(workdir))
    try:
        wait_until(lambda: server.alive() and _accepting(port), START_TIMEOUT, "nginx to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def test_a_stalled_body_through_the_compose_proxy_is_cut_off_there_and_another_chat_answered(
    proxied, compose_proxy
):
    workflow = proxied.activate(fresh_ids(example(REDIS_CHAT)))
    url = chat_url(compose_proxy, workflow)
    session = f"px-stalled-{uuid.uuid4().hex[:8]}"
    with start_slow_post(url, chat_body(session, 1000), 10) as stalled:
        assert closed_by_peer(stalled)  # nginx logs 408 and closes
    answered = stream_chat(url, "What is 19 * 23?", f"px-next-{uuid.uuid4().hex[:8]}")
    assert answered.text() == ANSWER_437
    # The api never saw the stalled request: the proxy holds a body until it is whole.
    executions = proxied.redis.zcard(proxied.keys.workflow_executions(workflow["id"]))
    assert executions == 1
    assert proxied.chat_list(session) == []


def test_a_body_past_the_limit_is_refused_by_the_compose_proxy_in_json_before_it_is_read(
    proxied, compose_proxy
):
    workflow = proxied.activate(fresh_ids(example(REDIS_CHAT)))
    with connect(chat_url(compose_proxy, workflow)) as sock:
        sock.sendall(request_head(chat_url(compose_proxy, workflow), 16 * 1024 * 1024 + 1))
        status, answer = read_answer(sock)  # and not one byte of the body was sent
    assert status == 413
    assert json.loads(answer) == {
        "message": "The request body is larger than MINI_N8N_MAX_BODY_BYTES"
    }
