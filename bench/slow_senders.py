"""Slow senders against one api (DESIGN invariant 9): is every other chat answered?

One api (gunicorn + gevent, the default settings) and one worker. For each kind of slow sender,
SENDERS connections are held open by a process of their own, each sending one byte every
0.2 s: bodies (a chat POST announcing 1,000 bytes), request heads (a header line that never
ends) or chat socket frames (a binary frame announcing 2,000 bytes, on a waiting conversation).
One that the api cuts off is opened again at once, so SENDERS stay held. Meanwhile, for SECONDS
(past the default grace, idle and keep-alive times), a streaming chat is sent every 0.25 s;
prints the time each took to be answered whole (p50, p95, worst), their statuses, /healthz's
worst time, and how often the api cut a sender off.

    .venv/bin/python bench/slow_senders.py [SENDERS [SECONDS]]      (default: 256 15)
"""

from __future__ import annotations

import multiprocessing
import select
import socket
import sys
import time
import uuid
from typing import Any

import httpx
from _common import pct, redis_server

from tests.chat.conversation import ASK_NAME, chat_query
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.slow_clients import chat_body, connect, masked_frame, request_head
from tests.workflows import REDIS_CHAT, example

TRICKLE_SECONDS = 0.2


def open_body(url: str) -> socket.socket:
    sock = connect(url)
    sock.sendall(request_head(url, 1000).replace(b"Expect: 100-continue\r\n", b""))
    sock.sendall(chat_body(f"slow-{uuid.uuid4().hex[:8]}", 1000)[:10])
    return sock


def open_head(url: str) -> socket.socket:
    sock = connect(url)
    sock.sendall(b"POST /webhook/slow HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return sock


def open_frame(base: str, conversation: tuple[str, str, str]) -> socket.socket:
    """A chat socket of a waiting conversation, and the first bytes of a 2,000-byte frame."""
    session, execution_id, token = conversation
    sock = connect(base)
    host = base.split("//", 1)[1]
    sock.sendall(
        f"GET /chat?{chat_query(session, execution_id, token)} HTTP/1.1\r\nHost: {host}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]
    sock.sendall(masked_frame(b"x" * 2000, opcode=0x2)[:20])  # binary: any byte may follow
    return sock


def hold(kind: str, target: Any, senders: int, cut: Any) -> None:
    """Keep `senders` slow senders of one kind open, one byte each every TRICKLE_SECONDS."""
    opened = [_open(kind, target, i) for i in range(senders)]
    while True:
        time.sleep(TRICKLE_SECONDS)
        for i, sock in enumerate(opened):
            try:
                if select.select([sock], [], [], 0)[0] and _cut_off(kind, sock.recv(65536)):
                    raise ConnectionError("answered or closed by the api")
                sock.sendall(b"x")
            except OSError:
                sock.close()
                with cut.get_lock():
                    cut.value += 1
                opened[i] = _open(kind, target, i)


def _cut_off(kind: str, data: bytes) -> bool:
    """What came is an answer (408) or the end; on a chat socket, a close frame."""
    return not data or kind != "frames" or data[0] == 0x88


def _open(kind: str, target, i: int) -> socket.socket:
    if kind == "bodies":
        return open_body(target)
    if kind == "heads":
        return open_head(target)
    return open_frame(target[0], target[1][i])


def start_conversations(url: str, n: int) -> list[tuple[str, str, str]]:
    found = []
    with httpx.Client(timeout=60) as client:
        for _ in range(n):
            session = f"slowws-{uuid.uuid4().hex[:10]}"
            body = {"action": "sendMessage", "sessionId": session, "chatInput": "hello"}
            answer = client.post(url, json=body).json()
            found.append((session, answer["executionId"], answer["resumeToken"]))
    return found


def chats(deploy: Deployment, url: str, duration: float) -> str:
    seconds, statuses, healthz = [], [], []
    until = time.monotonic() + duration
    with httpx.Client(base_url=deploy.base, timeout=120) as client:
        while time.monotonic() < until:
            time.sleep(0.25)
            started = time.perf_counter()
            client.get("/healthz")
            healthz.append(time.perf_counter() - started)
            started = time.perf_counter()
            reply = stream_chat(url, "my name is Ada", f"bench-{uuid.uuid4().hex[:8]}", 120)
            seconds.append(time.perf_counter() - started)
            statuses.append(reply.status)
            if reply.status == 200:
                assert reply.text() == "Nice to meet you, Ada!", reply.chunks
    ms = [s * 1000 for s in seconds]
    return (
        f"chat answered p50 {pct(ms, 50):7.1f} ms  p95 {pct(ms, 95):7.1f} ms  "
        f"worst {max(ms):7.1f} ms  statuses {sorted(set(statuses))}  "
        f"healthz worst {max(healthz) * 1000:6.1f} ms"
    )


def main() -> None:
    senders = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 15.0
    with redis_server() as redis_url, Deployment.running(redis_url) as deploy:
        url = chat_url(deploy.base, deploy.activate(fresh_ids(example(REDIS_CHAT))))
        ask = chat_url(deploy.base, deploy.activate(fresh_ids(example(ASK_NAME))))
        print(f"{senders} slow senders of each kind, one byte each every {TRICKLE_SECONDS} s")
        print(f"{'nobody slow':<22} {chats(deploy, url, duration)}")
        targets = {
            "bodies": url,
            "heads": url,
            "frames": (deploy.base, start_conversations(ask, senders)),
        }
        for kind, target in targets.items():
            cut = multiprocessing.Value("i", 0)
            holder = multiprocessing.Process(target=hold, args=(kind, target, senders, cut))
            holder.start()
            time.sleep(2.0)  # all of them opened and sending
            started = time.monotonic()
            line = chats(deploy, url, duration)
            held_for = time.monotonic() - started
            holder.terminate()
            holder.join()
            print(f"{kind + ' trickling':<22} {line}  cut off {cut.value} in {held_for:.0f} s")


if __name__ == "__main__":
    main()
