"""Open /chat sockets: what one waiting chat's WebSocket costs the api process.

One api (gunicorn + gevent, one worker process) and one worker. For each N, N chats of the
ask-my-name workflow (responseNodes) are started by POST and wait for their user's reply; then N
sockets are opened at once (asyncio, the `websockets` library, as the widget would: `&token=`
and heartbeat acks) and each reads its first message. The api worker process's RSS is read from
/proc before the sockets open, once all N are open, again after they stayed open and idle for
IDLE_SECONDS (their heartbeats acknowledged, as the widget does: the api beats every 5 s and
looks at each execution), and after they closed (once the api's 10-second heap trim has run).
Prints the figures and KiB per socket, just opened and idle.

    .venv/bin/python bench/chat_sockets.py [N ...]      (default: 2000 10000)
"""

from __future__ import annotations

import asyncio
import collections
import resource
import sys
import time
import uuid

import httpx
import websockets
from _common import redis_server

from tests.chat.conversation import ASK_NAME, FIRST
from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree
from tests.workflows import example

TRIM_WAIT = 12.0  # the api trims its heap every 10 s (core/heap.py)
IDLE_SECONDS = 60.0  # a dozen heartbeats (MINI_N8N_KEEPALIVE_SECONDS, 5) and heap trims


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def start_chats(url: str, n: int) -> list[tuple[str, str, str]]:
    """(session, execution id, resumeToken) of n chats started by POST, 50 at a time."""
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        gate = asyncio.Semaphore(50)

        async def one(i: int) -> tuple[str, str, str]:
            session = f"sock-{uuid.uuid4().hex[:10]}"
            body = {"action": "sendMessage", "sessionId": session, "chatInput": "hello"}
            async with gate:
                for attempt in range(3):  # a kept-alive connection the api closed meanwhile
                    try:
                        answer = (await client.post(url, json=body)).json()
                        break
                    except httpx.TransportError:
                        if attempt == 2:
                            raise
            return session, answer["executionId"], answer["resumeToken"]

        return await asyncio.gather(*(one(i) for i in range(n)))


async def hold_sockets(
    base: str, chats, worker_pid: int
) -> tuple[collections.Counter, int, int, int]:
    """Open a socket per chat, wait until each has its first message, read the RSS, keep them
    idle (heartbeats acknowledged), read it again, close all: (what each socket got first, RSS
    once open, RSS once idle, seconds to open them all)."""
    ws_base = base.replace("http://", "ws://")
    opened: list = []
    firsts: collections.Counter = collections.Counter()
    started = time.monotonic()

    async def one(session: str, execution: str, token: str) -> str:
        query = f"sessionId={session}&executionId={execution}&isPublic=true&token={token}"
        ws = await websockets.connect(f"{ws_base}/chat?{query}", open_timeout=300, max_size=None)
        opened.append(ws)
        while True:
            frame = await ws.recv()
            if frame == "n8n|heartbeat":
                await ws.send("n8n|heartbeat-ack")
                continue
            return "its first message" if frame == FIRST else frame[:80]

    gate = asyncio.Semaphore(200)  # connections being opened at once

    async def gated(chat) -> None:
        async with gate:
            try:
                firsts[await one(*chat)] += 1
            except Exception as err:
                firsts[f"{type(err).__name__}: {str(err)[:60]}"] += 1

    await asyncio.gather(*(gated(chat) for chat in chats))
    seconds = time.monotonic() - started
    await asyncio.sleep(2)  # let the api settle after the burst
    during = rss_kib(worker_pid)
    acks = [asyncio.ensure_future(acknowledge(ws)) for ws in opened]
    await asyncio.sleep(IDLE_SECONDS)
    idle = rss_kib(worker_pid)
    await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    await asyncio.gather(*acks, return_exceptions=True)
    return firsts, during, idle, int(seconds)


async def acknowledge(ws) -> None:
    """Answer the socket's heartbeats until it closes, as the widget does."""
    async for frame in ws:
        if frame == "n8n|heartbeat":
            await ws.send("n8n|heartbeat-ack")


def measure(url: str, n: int) -> None:
    """A fresh api and worker for n sockets, so each figure starts from the same heap."""
    env = {"MINI_N8N_CHAT_SOCKET_MAX": str(n + 100), "MINI_N8N_CHAT_SOCKET_IDLE_SECONDS": "3600"}
    with Deployment.running(url, **env) as deploy:
        workflow = deploy.activate(fresh_ids(example(ASK_NAME)))
        api_pid = deploy.apis[0][0].pid
        worker_pid = next(p for p in process_tree(api_pid) if p != api_pid)
        chats = asyncio.run(start_chats(chat_url(deploy.base, workflow), n))
        time.sleep(TRIM_WAIT)  # the executions wait; the burst's leftovers are trimmed
        before = rss_kib(worker_pid)
        firsts, during, idle, seconds = asyncio.run(hold_sockets(deploy.base, chats, worker_pid))
        time.sleep(TRIM_WAIT)
        after = rss_kib(worker_pid)
    print(
        f"{n:>6} sockets (opened in {seconds} s): api RSS {before / 1024:6.1f} MiB before, "
        f"{during / 1024:6.1f} MiB with them open, {idle / 1024:6.1f} MiB after "
        f"{IDLE_SECONDS:g} s idle, {after / 1024:6.1f} MiB after they closed; "
        f"{(during - before) / n:5.1f} KiB per socket open, {(idle - before) / n:5.1f} KiB "
        f"idle, {(after - before) / n:5.1f} KiB kept"
    )
    print(f"        first frames: {dict(firsts)}")


def main(counts: list[int]) -> None:
    need = 2 * max(counts) + 1024  # this process and the api each hold a socket per chat
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(need, hard)), hard))
    print("one api worker process; sockets opened 200 at a time; heartbeats acknowledged")
    with redis_server() as url:
        for n in counts:
            measure(url, n)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2000, 10000])
