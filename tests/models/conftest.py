"""One real deployment (gunicorn+gevent api, Celery gevent worker) for the tests/models suite,
wired to a fake OpenAI-compatible server through a credentials file, as an operator would."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from mini_n8n.redis_server import free_port
from tests.e2e.deployment import Deployment, fresh_ids
from tests.fakes.openai_server import start_fake_openai
from tests.workflows import node

EXPORT = Path(__file__).resolve().parents[2] / "examples" / "n8n-exports" / "chat-openai-redis.json"
SECRET = "sk-test-SECRET-6789"  # distinctive, so a leak anywhere is found by a plain search
DECOY_SECRET = "sk-test-DECOY-4321"
URL_SECRET = "proxy-SECRET-pw"
API_KEY = "models-suite-api-key"
MODEL = "OpenAI Chat Model"
ELSEWHERE = "127.0.0.2"  # another host to a client, on this machine's loopback
DOMAIN_CREDENTIALS = {
    "OpenAi to 127.0.0.2": {"allowedHttpRequestDomains": "domains", "allowedDomains": ELSEWHERE},
    "OpenAi to its own URL": {"allowedHttpRequestDomains": "none"},
    "OpenAi anywhere": {"allowedHttpRequestDomains": "all"},
}


def export() -> dict:
    """The n8n export exactly as the file holds it."""
    return json.loads(EXPORT.read_text())


def openai_chat(model: str | None = None, settings: dict | None = None, **options) -> dict:
    """The export with fresh ids (one webhook URL per test) and, optionally, n8n options of the
    OpenAI Chat Model (timeout in ms, maxRetries, baseURL...) or workflow settings."""
    workflow = fresh_ids(export())
    params = node(workflow, MODEL)["parameters"]
    params["options"].update(options)
    if model is not None:
        params["model"] = {"__rl": True, "value": model, "mode": "list", "cachedResultName": model}
    if settings:
        workflow["settings"] = {**workflow["settings"], **settings}
    return workflow


def credentials(openai_url: str, redis_url: str, closed_url: str) -> list[dict]:
    """The deployment's credentials. The export's ids are not these ones (a real deployment's
    never are): the OpenAI one is matched by its name among several of that type. The last
    three differ only in where a workflow's own base URL may take them (their Allowed HTTP
    Request Domains)."""
    redis_at = urlsplit(redis_url)
    return [
        *(
            {
                "id": f"deploy-openai-{name}",
                "name": name,
                "type": "openAiApi",
                "data": {"apiKey": SECRET, "url": openai_url, **domains},
            }
            for name, domains in DOMAIN_CREDENTIALS.items()
        ),
        {
            "id": "deploy-openai-1",
            "name": "OpenAi account",
            "type": "openAiApi",
            "data": {"apiKey": SECRET, "url": openai_url},
        },
        {
            "id": "deploy-openai-2",
            "name": "Some other account",
            "type": "openAiApi",
            "data": {"apiKey": DECOY_SECRET, "url": closed_url},
        },
        {
            "id": "deploy-openai-3",
            "name": "OpenAi via proxy",
            "type": "openAiApi",
            # A password in the URL (a proxy's basic auth): as secret as the key.
            "data": {"apiKey": SECRET, "url": openai_url.replace("//", f"//proxy:{URL_SECRET}@")},
        },
        {
            "id": "deploy-redis-1",
            "name": "Redis account",
            "type": "redis",
            "data": {
                "host": redis_at.hostname,
                "port": redis_at.port,
                "database": int((redis_at.path or "/0").strip("/") or 0),
                "password": "",
            },
        },
    ]


@pytest.fixture(scope="package")
def fake():
    server, _ = start_fake_openai()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def elsewhere():
    """A second OpenAI-compatible server, on another host than the credentials' own URL."""
    server, _ = start_fake_openai(ELSEWHERE)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def fresh_fake(fake, elsewhere):
    """Each test starts with healthy, fast fakes and empty request logs."""
    for server in (fake, elsewhere):
        server.fail, server.fail_count, server.retry_after = None, None, "1"
        server.delay_per_token = 0.0
        server.requests.clear()
        server.sent.clear()
        server.client_gone.clear()
    return fake


@pytest.fixture(scope="package")
def closed_url():
    """An OpenAI base URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture(scope="package")
def deploy(redis_url, fake, elsewhere, closed_url, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "credentials.json"
    path.write_text(json.dumps(credentials(fake.base_url, redis_url, closed_url)))
    with Deployment.running(
        redis_url,
        MINI_N8N_CREDENTIALS_FILE=str(path),
        MINI_N8N_API_KEY=API_KEY,
        MINI_N8N_LEASE_SECONDS="2",
        MINI_N8N_KEEPALIVE_SECONDS="1",
    ) as deployment:
        yield deployment


def stop_via_rest(deploy, execution_id: str) -> httpx.Response:
    return httpx.post(
        f"{deploy.base}/rest/executions/{execution_id}/stop",
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )


def logs(deploy) -> str:
    return "".join(line for proc in deploy.processes for line in proc.lines)
