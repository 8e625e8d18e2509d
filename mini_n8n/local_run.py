"""`mini-n8n run`: one execution in this process, chunks printed as NDJSON as they come."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from core import chunks
from core.keys import Keys
from core.redis_clients import connect
from core.settings import Settings
from engine.errors import EngineError
from engine.executor import run_workflow
from engine.hooks import Hooks
from engine.services import Services
from engine.workflow import load_workflow
from memory.window import InProcessMemory
from models.clients import ModelClients
from models.http_requests import HttpRequests
from sandbox.pool import ProcessPool


def run_file(
    path: str, item: dict[str, Any], out: TextIO = sys.stdout, settings: Settings | None = None
) -> int:
    """`settings` names the Redis (the CLI chooses it); None: no Redis, a Redis node fails."""
    try:
        workflow = load_workflow(json.loads(Path(path).read_text()))
    except (OSError, ValueError, EngineError) as err:
        print(f"cannot load {path}: {err}", file=sys.stderr)
        return 2

    def write(chunk: dict[str, Any]) -> None:
        out.write(chunks.line(chunk))
        out.flush()

    config = settings or Settings.from_env()
    code = ProcessPool(config.code_timeout_seconds, config.code_memory_mb, processes=1)
    services = Services(
        redis=connect(settings.redis_url, settings.redis_cluster, decode_responses=True)
        if settings
        else None,
        credentials=_credentials(),
        keys=Keys.from_settings(config),
        simple_memory=InProcessMemory(),
        chat_models=ModelClients(),  # streams read by threads: this process is not gevent's
        http=HttpRequests.from_settings(config),
        cpu_seconds=config.execution_cpu_seconds,
        code_runner=code,
    )
    if services.redis is not None:  # an Execute Workflow node's sub-workflows, as stored there
        services.workflows = _stored_workflows(services.redis, services.keys)
    hooks = Hooks().add_handler("sendChunk", write)
    # A Chat node's message, as a line of its own (the CLI has no chat to reply from).
    hooks.add_handler("sendMessage", lambda m: write({"type": "message", "content": m.text}))
    try:
        run = run_workflow(
            workflow, [{"json": item}], hooks=hooks, services=services, mode="cli", streaming=True
        )
    finally:
        code.close()
    if run.status == "waiting":
        run = _waited_out(workflow, run, hooks, services)
    if run.status == "waiting":
        node = (run.waiting or {}).get("node")
        print(f'execution waiting: "{node}" waits for a chat reply or a call, which `run` '
              "cannot give (activate the workflow and chat with it)", file=sys.stderr)  # fmt: skip
        return 1
    if run.status != "success":
        print(f"execution {run.status}: {run.error}", file=sys.stderr)
        return 1
    write(run.first_json() or {})
    return 0


def _waited_out(workflow, run, hooks: Hooks, services: Services):
    """The run once its Wait nodes' times are over: this process waits each out, then goes on
    with the node's items (a wait for a reply or a call it cannot end)."""
    while run.status == "waiting" and (run.waiting or {}).get("waitFor") == "time":
        time.sleep(max((run.waiting or {})["waitTill"] / 1000 - time.time(), 0))
        resume = {"state": run.waiting, "reply": None, "expired": True}
        run = run_workflow(workflow, [], hooks=hooks, services=services, mode="cli",
                           streaming=True, resume=resume)  # fmt: skip
    return run


def _stored_workflows(client, keys: Keys):
    from core.workflow_store import WorkflowNotFound, WorkflowStore

    store = WorkflowStore(client, keys, load_workflow)

    def find(workflow_id: str):
        try:
            return store.load(workflow_id)[1]
        except WorkflowNotFound:
            raise LookupError(workflow_id) from None

    return find


def _credentials():
    from core.credentials import CredentialStore

    return CredentialStore.from_env()
