"""`mini-n8n run`: a workflow in-process, its chunks printed as NDJSON lines, then its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.workflows import EXAMPLES, REDIS_CHAT, SIMPLE_CHAT


def run_cli(redis_url: str | None, keys, *args: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MINI_N8N_KEY_PREFIX": keys.prefix}
    env.pop("REDIS_URL", None)
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    return subprocess.run(
        [sys.executable, "-m", "mini_n8n.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=cwd,
    )


def test_run_prints_chunks_then_the_output(redis_url, keys, redis_client):
    message = json.dumps({"sessionId": "cli", "chatInput": "What is 19 * 23?"})
    done = run_cli(redis_url, keys, "run", str(EXAMPLES / REDIS_CHAT), "--input", message)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    chunks, output = lines[:-1], lines[-1]
    assert [c["type"] for c in chunks][0] == "begin" and chunks[-1]["type"] == "end"
    text = "".join(c["content"] for c in chunks if c["type"] == "item")
    assert text == "Based on the tools: Calculator returned 437."
    assert output == {"output": text}
    assert redis_client.llen(keys.chat("cli")) == 2  # the turn is in Redis memory
    assert done.stderr == f"Redis: {redis_url} (REDIS_URL)\n"


def test_without_redis_url_or_a_deployment_here_run_uses_no_redis_and_says_so(keys, tmp_path):
    """Never a Redis that merely answers on 6379: a Redis memory fails, saying why."""
    message = json.dumps({"sessionId": "cli", "chatInput": "What is 19 * 23?"})
    done = run_cli(None, keys, "run", str(EXAMPLES / REDIS_CHAT), "--input", message, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Redis: none (no Redis to use: REDIS_URL is not set")
    assert "no Redis connection is configured" in done.stderr
    assert "Traceback" not in done.stderr
    simple = run_cli(
        None, keys, "run", str(EXAMPLES / SIMPLE_CHAT), "--input", message, cwd=tmp_path
    )
    assert simple.returncode == 0, simple.stderr  # Simple Memory needs no Redis


def test_run_does_not_write_into_a_state_files_redis_without_mini_n8n_data(
    redis_url, keys, redis_client, tmp_path
):
    state = {"version": 1, "redis_url": redis_url, "key_prefix": keys.prefix}
    (tmp_path / ".mini-n8n").mkdir()
    (tmp_path / ".mini-n8n" / "state.json").write_text(json.dumps(state))
    message = json.dumps({"sessionId": "stray", "chatInput": "What is 19 * 23?"})
    done = run_cli(None, keys, "run", str(EXAMPLES / REDIS_CHAT), "--input", message, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert f"mini-n8n: no mini-n8n data in {redis_url}" in done.stderr
    assert not redis_client.exists(keys.chat("stray"))


def test_run_rejects_bad_input_json(redis_url, keys):
    done = run_cli(redis_url, keys, "run", str(EXAMPLES / REDIS_CHAT), "--input", "{nope")
    assert done.returncode == 2
    assert "not valid JSON" in done.stderr


def test_run_prints_a_lone_surrogate_from_an_expression_as_a_json_escape(redis_url, keys, tmp_path):
    workflow = {
        "name": "surrogate",
        "nodes": [
            {"id": "1", "name": "Start", "type": "n8n-nodes-base.webhook", "typeVersion": 2,
             "position": [0, 0], "parameters": {"path": "s", "httpMethod": "POST"}},
            {"id": "2", "name": "Set", "type": "n8n-nodes-base.set", "typeVersion": 3.4,
             "position": [200, 0], "parameters": {"assignments": {"assignments": [
                 {"id": "a", "name": "text", "value": "={{ 'a\\ud800b' }}", "type": "string"}]}}},
        ],
        "connections": {"Start": {"main": [[{"node": "Set", "type": "main", "index": 0}]]}},
    }  # fmt: skip
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(workflow))
    done = run_cli(redis_url, keys, "run", str(path), "--input", "{}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == '{"text":"a\\ud800b"}'
    assert json.loads(done.stdout.splitlines()[-1]) == {"text": "a\ud800b"}


def test_run_waits_out_a_wait_and_calls_a_stored_sub_workflow(
    redis_url, keys, redis_client, tmp_path
):
    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow
    from tests.sub_workflows import CHAT, chat_trigger, execute_workflow, greeter, wait_seconds
    from tests.sub_workflows import workflow as build

    child = greeter()
    WorkflowStore(redis_client, keys, load_workflow).save(child)
    call = execute_workflow("Call", child["id"], {"name": "={{ $json.chatInput }}",
                                                  "age": "={{ 2 }}"}, {"age": "number"})  # fmt: skip
    flow = build("Wait, then call", [chat_trigger(), wait_seconds("Wait", 0.01), call],
                 [CHAT, "Wait", "Call"])  # fmt: skip
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(flow))
    done = run_cli(redis_url, keys, "run", str(path), "--input", json.dumps({"chatInput": "Cy"}))
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout.splitlines()[-1])
    assert output == {"greeting": "Hello Cy, next year you are 3", "name": "Cy"}
