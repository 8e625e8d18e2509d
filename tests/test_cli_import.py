"""`mini-n8n import`, `workflows`, `activate` as a user runs them (a subprocess): a bad file, an
unknown id or an unreachable Redis is one line on stderr naming what is wrong, and a non-zero
exit; never a traceback. Nothing of a batch is written when one of its files is bad."""

from __future__ import annotations

import json
import subprocess

from mini_n8n.redis_server import free_port
from tests.test_cli_run import run_cli
from tests.workflows import GREETING, example


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one error line, after the line saying which Redis was read (when one was)."""
    lines = [line for line in done.stderr.splitlines() if not line.startswith("Redis: ")]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_importing_a_workflow_with_an_unknown_node_type_names_the_node(
    redis_url, keys, redis_client, tmp_path
):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(example(GREETING)))
    bad = tmp_path / "bad.json"
    workflow = example(GREETING)
    workflow["nodes"][0]["type"] = "n8n-nodes-base.noSuchNode"
    bad.write_text(json.dumps(workflow))
    done = run_cli(redis_url, keys, "import", str(good), str(bad))
    assert done.returncode == 1 and done.stdout == ""
    name = workflow["nodes"][0]["name"]
    assert error_line(done) == (
        f'mini-n8n: {bad}: Node "{name}": unknown node type "n8n-nodes-base.noSuchNode"'
    )
    assert not redis_client.exists(keys.workflows())  # the good file was not imported either


def test_a_file_that_is_missing_or_not_json_is_one_line(redis_url, keys, tmp_path):
    missing = run_cli(redis_url, keys, "import", str(tmp_path / "missing.json"))
    assert missing.returncode == 1
    assert (
        error_line(missing) == f"mini-n8n: {tmp_path / 'missing.json'}: No such file or directory"
    )
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    done = run_cli(redis_url, keys, "import", str(broken))
    assert done.returncode == 1
    assert error_line(done).startswith(f"mini-n8n: {broken}: not valid JSON: ")


def test_import_then_list_and_an_unknown_id_is_an_error(redis_url, keys, tmp_path):
    path = tmp_path / "greeting.json"
    path.write_text(json.dumps(example(GREETING)))
    done = run_cli(redis_url, keys, "import", str(path), "--activate")
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"Redis: {redis_url} (REDIS_URL)\n"
    listed = run_cli(redis_url, keys, "workflows")
    assert listed.stdout == "greetWebhook01\tactive\tGreeting webhook (lastNode)\n"
    unknown = run_cli(redis_url, keys, "activate", "nope")
    assert unknown.returncode == 1
    assert error_line(unknown) == f"mini-n8n: no workflow nope in {redis_url}"


def test_an_unreachable_redis_is_one_line(keys, tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = run_cli(url, keys, "workflows")
    assert done.returncode == 1
    assert error_line(done).startswith(f"mini-n8n: cannot reach Redis at {url}")
