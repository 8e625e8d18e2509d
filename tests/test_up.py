"""`mini-n8n up` (what `make up` runs) on a machine with no Redis: an embedded one, the api, a
worker and the bundled examples; a chat answers; Ctrl-C stops everything it started."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys

from mini_n8n.redis_server import free_port
from tests.e2e.client import stream_chat
from tests.e2e.deployment import Process

CHAT = "/webhook/0c8e6a52-3f5b-4d0e-8a9c-7b1d2e3f4a51/chat"


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_up_runs_everything_and_ctrl_c_stops_it(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing there: embedded Redis
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("MINI_N8N_WORKFLOWS_DIR", None)
    up = Process("up", [sys.executable, "-m", "mini_n8n.cli", "up"], env, cwd=tmp_path)
    try:
        up.wait_for_line("mini-n8n is up.", timeout=60)
        output = up.output()
        redis_port = int(re.search(r"embedded valkey-server at redis://127.0.0.1:(\d+)", output)[1])
        assert f"http://localhost:{port}{CHAT}" in output
        assert "Editor:  http://localhost:" in output and "#key=" in output
        reply = stream_chat(f"http://127.0.0.1:{port}{CHAT}", "What is 19 * 23?", "up-1")
        assert reply.text() == "Based on the tools: Calculator returned 437."
        assert (tmp_path / ".mini-n8n" / "redis").is_dir()  # AOF data kept by the embedded Redis
        up.proc.send_signal(signal.SIGINT)
        assert up.proc.wait(40) == 0
        assert not listening(port) and not listening(redis_port)
    finally:
        up.stop(signal.SIGKILL)
