"""A deployment for the hub's tests: tests/e2e's, with api processes that know the test users
(tests/hub/identity_app.py) and the hub's settings (a model list for the fake OpenAI server)."""

from __future__ import annotations

import sys

from mini_n8n.redis_server import free_port
from tests.e2e.deployment import Deployment, Process, _wait_http

APP = "tests.hub.identity_app:app"


class HubDeployment(Deployment):
    def start_api(self, **env: str) -> str:
        port = free_port()
        merged = {**self.env, "PORT": str(port), "HOST": "127.0.0.1", **env}
        # As `mini-n8n api` runs it (mini_n8n/cli.py), the keep-alive included: gunicorn's own
        # 2 s closed an idle connection just as a test's next request went out on it.
        argv = [
            sys.executable, "-m", "gunicorn", "--worker-class", "gevent", "--workers", "1",
            "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "5", "--keep-alive", "5",
            "--config", "python:api.gunicorn_conf", APP,
        ]  # fmt: skip
        proc = Process(f"api:{port}", argv, merged)
        self.processes.append(proc)
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/healthz", proc)
        self.apis.append((proc, base))
        return base
