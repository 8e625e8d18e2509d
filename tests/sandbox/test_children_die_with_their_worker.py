"""A worker's Code node processes die with it (sandbox/server.py: PR_SET_PDEATHSIG), with real
processes: a Celery worker whose one Code node spins in `while (true) {}` and whose other
process waits warm is SIGKILLed; both of its children are gone soon after, long before the
Code node's time limit, the spinning chat is told its worker died, and a new worker answers the
next chat."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from tests.e2e.client import ChatReply, stream_chat
from tests.e2e.deployment import WORKER_LOSS, Deployment, chat_url
from tests.sub_workflows import CHAT, chat_trigger, node, workflow
from tests.waiting import wait_until

# Far beyond the test: a child still alive after the kill would spin on for this long (its own
# time limit), and the execution ends on its worker's closed connection, not its lease.
CODE_TIMEOUT = 900
LEASE_SECONDS = 900
# CPU seconds a child has spent once it is surely in the loop: a new process's start (Python,
# V8, Luxon) costs about a tenth of this.
SPUN_SECONDS = 2.0
LOOP_OR_ECHO = """
if ($json.chatInput === 'loop') { while (true) {} }
return [{json: {output: `echo: ${$json.chatInput}`}}];
"""


@pytest.fixture
def deployment(redis_url):
    with Deployment.running(
        redis_url,
        MINI_N8N_CODE_TIMEOUT=str(CODE_TIMEOUT),
        MINI_N8N_EXECUTION_CPU_SECONDS=str(CODE_TIMEOUT),
        MINI_N8N_EXECUTION_TIMEOUT=str(CODE_TIMEOUT),
        MINI_N8N_LEASE_SECONDS=str(LEASE_SECONDS),
        MINI_N8N_CODE_PROCESSES="2",
        MINI_N8N_KEEPALIVE_SECONDS="1",
    ) as deploy:
        yield deploy


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (state first); None: no such pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def sandbox_children(parent: int) -> set[int]:
    """The Code node processes whose parent is `parent` (their /proc entries, read now)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if fields and int(fields[1]) == parent and b"sandbox.server" in cmdline:
            found.add(int(entry.name))
    return found


def cpu_seconds(pid: int) -> float:
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields else 0.0


def dead(pid: int) -> bool:
    """Gone, or a zombie: it runs no more, whether or not its new parent reaped it yet."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def code_chat(deploy: Deployment) -> str:
    code = node("Code", "n8n-nodes-base.code", 2, {"jsCode": LOOP_OR_ECHO})
    flow = deploy.activate(workflow("Code chat", [chat_trigger("streaming"), code], [CHAT, "Code"]))
    return chat_url(deploy.base, flow)


def test_a_killed_workers_spinning_and_idle_code_processes_die_with_it_and_a_new_worker_answers(
    deployment,
):
    url = code_chat(deployment)
    worker = deployment.worker
    looping: dict[str, ChatReply] = {}
    thread = threading.Thread(
        target=lambda: looping.update(r=stream_chat(url, "loop", "s-loop", CODE_TIMEOUT))
    )
    thread.start()
    (spinning,) = wait_until(
        lambda: {p for p in sandbox_children(worker.pid) if cpu_seconds(p) > SPUN_SECONDS},
        120,
        "the loop's process to spin",
    )
    # The spinning process holds one slot: this chat starts the other, which then waits warm.
    answered = stream_chat(url, "hello", "s-other")
    assert (answered.types(), answered.text()) == (["begin", "item", "end"], "echo: hello")
    children = sandbox_children(worker.pid)
    (idle,) = children - {spinning}
    assert dead(idle) is False and dead(spinning) is False

    worker.proc.send_signal(signal.SIGKILL)
    worker.proc.wait(30)
    try:
        wait_until(lambda: all(dead(p) for p in children), 30, "the worker's children to die")
    finally:  # a failed run leaves no process spinning on the machine
        for pid in children:
            if not dead(pid):
                os.kill(pid, signal.SIGKILL)

    thread.join(120)
    reply = looping["r"]
    assert reply.types() == ["error"]
    assert reply.chunks[-1]["content"] == WORKER_LOSS[0]  # told by its closed connection
    record = deployment.execution(reply.headers["x-execution-id"])
    assert (record["status"], record["worker"]["pid"]) == ("crashed", worker.pid)

    deployment.worker = deployment.start_worker()
    after = stream_chat(url, "again", "s-loop")
    assert (after.types(), after.text()) == (["begin", "item", "end"], "echo: again")
    record = deployment.execution(after.headers["x-execution-id"])
    assert (record["status"], record["worker"]["pid"]) == ("success", deployment.worker.pid)
