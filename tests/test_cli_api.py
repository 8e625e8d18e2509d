"""`mini-n8n api` where a key is required (the image sets MINI_N8N_REQUIRE_API_KEY): without
MINI_N8N_API_KEY it stops at once with one line saying how to set it, before gunicorn starts."""

from __future__ import annotations

import os
import subprocess
import sys

from mini_n8n.cli import MISSING_API_KEY


def api(**env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MINI_N8N_")}
    # An unreachable Redis and port 1: had it gone on to start gunicorn, that would show.
    environ.update(REDIS_URL="redis://127.0.0.1:1/0", PORT="1", **env)
    return subprocess.run(
        [sys.executable, "-m", "mini_n8n.cli", "api"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_api_without_a_key_where_one_is_required_exits_with_how_to_set_it():
    for key in ({}, {"MINI_N8N_API_KEY": ""}):
        done = api(MINI_N8N_REQUIRE_API_KEY="true", **key)
        assert done.returncode == 1
        assert done.stdout == ""
        assert done.stderr == f"mini-n8n: {MISSING_API_KEY}\n"
    assert "MINI_N8N_API_KEY=" in MISSING_API_KEY and ".env" in MISSING_API_KEY
