"""`mini-n8n up` (what `make up` runs) on a machine with no Redis: an embedded one, the api, a
worker and the bundled examples; a chat answers; Ctrl-C stops everything it started. Run again in
the same folder it keeps its Redis port and api key (./.mini-n8n/state.json), and the other
commands find that Redis there."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from mini_n8n.redis_server import free_port
from mini_n8n.supervision import Supervised
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Process
from tests.workflows import REDIS_CHAT, example, node

CHAT = "/webhook/0c8e6a52-3f5b-4d0e-8a9c-7b1d2e3f4a51/chat"
PRIVATE_CHAT = "/webhook/5e1f0c4a-0000-4000-8000-00000000cafe/chat"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def up_env(port: int) -> dict[str, str]:
    env = {**os.environ, "PORT": str(port), "PYTHONUNBUFFERED": "1"}
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "MINI_N8N_WORKFLOWS_DIR", "MINI_N8N_API_KEY"):
        env.pop(name, None)  # as on a fresh machine: up picks its own embedded Redis
    env.pop("MINI_N8N_KEY_PREFIX", None)
    return env


def start_up(tmp_path, port: int) -> Process:
    up = Process("up", [sys.executable, "-m", "mini_n8n.cli", "up"], up_env(port), cwd=tmp_path)
    up.wait_for_line("Ctrl-C stops everything.", timeout=60)  # the banner's last line
    return up


def everything(up: Process) -> str:
    return "".join(up.lines)


def stop_up(up: Process) -> None:
    up.proc.send_signal(signal.SIGINT)
    assert up.proc.wait(40) == 0


def cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """Another `mini-n8n` command in up's folder, REDIS_URL unset, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "mini_n8n.cli", *args],
        cwd=tmp_path,
        env=up_env(free_port()),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_up_runs_everything_and_ctrl_c_stops_it(tmp_path):
    port = free_port()
    up = start_up(tmp_path, port)
    try:
        output = everything(up)
        redis_port = int(re.search(r"embedded valkey-server at redis://127.0.0.1:(\d+)", output)[1])
        assert f"http://localhost:{port}{CHAT}" in output
        assert "Editor:  http://localhost:" in output and "#key=" in output
        assert f"Hub:     http://localhost:{port}/home/chat" in output
        assert (
            f'Chat "Support bot (Chat Hub)": in the Chat Hub, http://localhost:{port}/home/chat'
            in output
        )
        assert "users add EMAIL --role owner|member|chat" in output
        assert f"then sign in at http://localhost:{port}/signin" in output
        added = subprocess.run(
            [sys.executable, "-m", "mini_n8n.cli", "users", "add", "ada@example.com"],
            cwd=tmp_path, env=up_env(free_port()), input="Sunny-Day-42\n",
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert added.returncode == 0 and added.stdout == "added ada@example.com (member)\n"
        signed_in = httpx.post(
            f"http://127.0.0.1:{port}/rest/login",
            json={"emailOrLdapLoginId": "ada@example.com", "password": "Sunny-Day-42"},
            headers={"Origin": f"http://127.0.0.1:{port}"},
        )
        assert signed_in.status_code == 200, signed_in.text
        assert f'Chat "Calculator chat (Redis memory)": http://localhost:{port}{CHAT}' in output
        reply = stream_chat(f"http://127.0.0.1:{port}{CHAT}", "What is 19 * 23?", "up-1")
        assert reply.text() == "Based on the tools: Calculator returned 437."
        assert (tmp_path / ".mini-n8n" / "redis").is_dir()  # AOF data kept by the embedded Redis
        stop_up(up)
        assert not listening(port) and not listening(redis_port)
    finally:
        up.stop(signal.SIGKILL)


def child_running(up: Process, command: str) -> int:
    """The pid of up's child running `mini-n8n <command>`."""
    for task in Path(f"/proc/{up.pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            if argv[-2:] == [b"mini_n8n.cli", command.encode()]:
                return int(pid)
    raise AssertionError(f"up runs no {command}")


def test_up_restarts_a_worker_that_died_says_why_and_the_next_chat_is_answered(tmp_path):
    port = free_port()
    up = start_up(tmp_path, port)
    try:
        worker = child_running(up, "worker")
        os.kill(worker, signal.SIGKILL)
        up.wait_for_line(f"the worker (pid {worker}) was killed by SIGKILL; restarting it")
        up.wait_for_line("the worker was restarted (pid ")
        assert child_running(up, "worker") != worker
        reply = stream_chat(f"http://127.0.0.1:{port}{CHAT}", "What is 19 * 23?", "restarted")
        assert reply.text() == "Based on the tools: Calculator returned 437."
        stop_up(up)
    finally:
        up.stop(signal.SIGKILL)


def test_a_process_that_keeps_dying_soon_after_its_start_is_restarted_after_longer_pauses(capsys):
    now = [0.0]
    watched = Supervised("job", lambda: subprocess.Popen(["false"]), clock=lambda: now[0])
    pauses = []
    for _ in range(4):
        watched.process.wait()
        watched.check()  # noticed: restarted at once, or later
        pauses.append(watched.restart_at - now[0] if watched.restart_at is not None else 0.0)
        if watched.restart_at is not None:
            now[0] = watched.restart_at
            watched.check()
    assert pauses == [1.0, 2.0, 4.0, 8.0]
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("mini-n8n: the job (pid ")
    assert said[0].endswith(") exited with code 1; restarting it in 1 s")
    assert said[1].startswith("mini-n8n: the job was restarted (pid ")


def test_a_process_that_ran_a_while_before_dying_is_restarted_at_once(capsys):
    now = [0.0]
    watched = Supervised("job", lambda: subprocess.Popen(["true"]), clock=lambda: now[0])
    watched.process.wait()
    now[0] = 60.0
    watched.check()
    assert watched.restart_at is None and watched.started == 60.0
    said = capsys.readouterr().err.splitlines()
    assert said[0].endswith(") exited with code 0; restarting it")
    watched.process.wait()


def test_up_twice_keeps_its_redis_and_key_and_the_cli_finds_them(tmp_path):
    """Also: only chats that answer are listed; `sessions` with REDIS_URL unset reads up's Redis
    through the state file, and an unknown session is an error that says where it looked."""
    private = example(REDIS_CHAT)
    private["id"], private["name"] = "privateChat01", "Private chat"
    trigger = node(private, "When chat message received")
    trigger["parameters"]["public"] = False
    trigger["webhookId"] = PRIVATE_CHAT.split("/")[2]
    (tmp_path / "workflows").mkdir()
    (tmp_path / "workflows" / "chat.json").write_text(json.dumps(example(REDIS_CHAT)))
    (tmp_path / "workflows" / "private.json").write_text(json.dumps(private))

    port = free_port()
    up = start_up(tmp_path, port)
    try:
        first = everything(up)
        state = json.loads((tmp_path / ".mini-n8n" / "state.json").read_text())
        redis_url, key = state["redis_url"], state["api_key"]
        assert f"embedded valkey-server at {redis_url}" in first
        assert f"#key={key}" in first
        assert f"http://localhost:{port}{CHAT}  (streaming; open it in a browser" in first
        assert PRIVATE_CHAT not in first  # a non-public chat answers 404: no URL for it
        assert 'Chat "Private chat": not public' in first
        assert httpx.post(f"http://127.0.0.1:{port}{PRIVATE_CHAT}", json={}).status_code == 404
        reply = stream_chat(f"http://127.0.0.1:{port}{CHAT}", "What is 19 * 23?", "kept")
        assert reply.text() == "Based on the tools: Calculator returned 437."
        stop_up(up)

        up = start_up(tmp_path, port)
        second = everything(up)
        assert f"embedded valkey-server at {redis_url}" in second  # the same port
        assert f"#key={key}" in second  # the same key: the editor tab of the last run works
        rest = httpx.get(
            f"http://127.0.0.1:{port}/rest/workflows", headers={"X-N8N-API-KEY": key}, timeout=10
        )
        assert rest.status_code == 200, rest.text

        listed = cli(tmp_path, "sessions")
        assert (listed.returncode, listed.stdout) == (0, "kept\n"), listed.stderr
        assert (
            listed.stderr
            == f"Redis: {redis_url} (the local deployment's, from .mini-n8n/state.json)\n"
        )
        shown = cli(tmp_path, "sessions", "show", "kept")
        assert shown.stdout.startswith("human: What is 19 * 23?\n"), shown.stderr
        missing = cli(tmp_path, "sessions", "show", "nope")
        assert missing.returncode == 1 and missing.stdout == ""
        assert f"mini-n8n: no session nope in {redis_url}" in missing.stderr
        assert "Traceback" not in missing.stderr
        stop_up(up)
    finally:
        up.stop(signal.SIGKILL)


def banner_commands(banner: str) -> list[str]:
    """The lines under "Try, ...:" up to the next blank line, without their indent."""
    lines = banner.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Try, "))
    commands = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        commands.append(line.strip())
    return commands


def run_printed(tmp_path, command: str, stdin: str = "") -> subprocess.CompletedProcess:
    """A printed command as a user pastes it into a shell in up's folder, REDIS_URL unset."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=up_env(free_port()),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_command_the_banner_prints_runs_as_printed_against_the_streaming_calculator_chat(
    tmp_path,
):
    port = free_port()
    up = start_up(tmp_path, port)
    try:
        commands = banner_commands(everything(up))
        url = f"http://localhost:{port}{CHAT}"
        curl, chat, sessions, show, lrange = commands  # exactly these five
        assert curl.startswith("curl ") and curl.endswith(url)
        assert chat.endswith(f"mini-n8n chat {url}")

        streamed = run_printed(tmp_path, curl)
        assert streamed.returncode == 0, streamed.stderr
        chunks = [json.loads(line) for line in streamed.stdout.splitlines()]
        assert [c["type"] for c in chunks][0] == "begin" and chunks[-1]["type"] == "end"
        text = "".join(c["content"] for c in chunks if c["type"] == "item")
        assert text == "Based on the tools: Calculator returned 437."

        chatted = run_printed(tmp_path, chat, stdin="What is 6 * 7?\n")
        assert chatted.returncode == 0, chatted.stderr
        assert chatted.stdout == "bot> Based on the tools: Calculator returned 42.\n"

        listed = run_printed(tmp_path, sessions)
        assert listed.returncode == 0, listed.stderr
        assert "demo" in listed.stdout.splitlines()

        shown = run_printed(tmp_path, show)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith("human: What is 19 * 23?\n")
        assert shown.stdout.endswith("ai: Based on the tools: Calculator returned 437.\n")

        memory = run_printed(tmp_path, lrange)
        assert memory.returncode == 0, memory.stderr
        newest = json.loads(memory.stdout.splitlines()[0])
        assert newest["data"]["content"] == "Based on the tools: Calculator returned 437."
        stop_up(up)
    finally:
        up.stop(signal.SIGKILL)
