"""/healthz while maximum-size bodies arrive (DESIGN invariant 9).

One api (gunicorn + gevent) and one worker. For each kind of body, COPIES of it are sent at once
by curl processes (not threads of this process, whose GIL would delay the /healthz client) while
/healthz is asked in a loop; then all kinds together. Prints the worst and p99 /healthz time,
the answers' statuses, and the api's memory (RSS of its process tree) before and at its peak.

    .venv/bin/python bench/large_bodies.py [COPIES [LIMIT_MIB]]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _common import pct, redis_server

from tests.e2e.deployment import Deployment, chat_url, fresh_ids
from tests.e2e.sockets import process_tree
from tests.e2e.test_hostile_input import _double_workflow, _hook_url
from tests.workflows import REDIS_CHAT, example

MIB = 1024 * 1024
# Just under the webhook limit, MINI_N8N_MAX_BODY_BYTES (16 MiB, n8n's, unless given in MiB).
LIMIT = int(sys.argv[2]) * MIB if len(sys.argv) > 2 else 16 * MIB
SIZE = LIMIT - 1024


def rss_mib(pid: int) -> float:
    total = 0
    for child in process_tree(pid):
        try:
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def kinds(hook: str, chat: str) -> dict[str, tuple[str, bytes, str]]:
    return {
        "JSON, integers": (hook, b"[" + b"1," * (SIZE // 2 - 1) + b"1]", "application/json"),
        "JSON, one string": (hook, b'{"q":"' + b"7" * (SIZE - 8) + b'"}', "application/json"),
        "form, %-escapes": (hook, b"a=" + b"%41" * (SIZE // 3 - 1), "application/x-www-form-urlencoded"),
        "form, one field": (hook, b"a=" + b"b" * (SIZE - 2), "application/x-www-form-urlencoded"),
        "chat JSON, 1 MiB of brackets": (chat, b'{"sessionId":"b","chatInput":"' + b"[]," * (MIB // 3 - 20) + b'"}', "application/json"),
    }  # fmt: skip


def run(deploy: Deployment, api_pid: int, bodies: list[tuple[str, bytes, str]]) -> str:
    with tempfile.TemporaryDirectory() as folder:
        argvs = []
        for index, (url, data, mime) in enumerate(bodies):
            path = Path(folder) / f"b{index}"
            path.write_bytes(data)
            argvs.append(
                ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary",
                 f"@{path}", "-H", f"content-type: {mime}", url]
            )  # fmt: skip
        before = rss_mib(api_pid)
        peak, latencies = before, []
        with httpx.Client(base_url=deploy.base) as client:
            client.get("/healthz")
            procs = [subprocess.Popen(a, stdout=subprocess.PIPE, text=True) for a in argvs]
            while any(p.poll() is None for p in procs):
                started = time.perf_counter()
                client.get("/healthz")
                latencies.append(time.perf_counter() - started)
                peak = max(peak, rss_mib(api_pid))
        statuses = sorted(int(p.stdout.read() or 0) for p in procs)
    ms = [x * 1000 for x in latencies]
    return (
        f"healthz worst {max(ms):6.1f} ms  p99 {pct(ms, 99):6.1f} ms  (n={len(ms):4})  "
        f"api {before:5.0f} -> peak {peak:5.0f} MiB  answers {statuses}"
    )


def main() -> None:
    copies = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    env = {"MINI_N8N_MAX_BODY_BYTES": str(LIMIT)}
    with redis_server() as url, Deployment.running(url, **env) as deploy:
        received = _double_workflow()
        received["nodes"][0]["parameters"]["responseMode"] = "onReceived"
        hook = _hook_url(deploy.base, deploy.activate(received))
        chat = chat_url(deploy.base, deploy.activate(fresh_ids(example(REDIS_CHAT))))
        api_pid = deploy.apis[0][0].pid
        every = kinds(hook, chat)
        print(
            f"body limit {LIMIT // MIB} MiB; {copies} bodies of each kind at once, /healthz asked in a loop meanwhile"
        )
        for name, body in every.items():
            print(f"{name:<30} {run(deploy, api_pid, [body] * copies)}")
        print(f"{'all kinds together':<30} {run(deploy, api_pid, list(every.values()) * copies)}")


if __name__ == "__main__":
    main()
