"""`mini-n8n up`: everything on one machine, in the foreground.

Uses REDIS_URL if a server answers there, else starts the embedded valkey-server (AOF in
./.mini-n8n/redis); imports and activates ./workflows (or the bundled examples); starts the api
(gunicorn + gevent) and N Celery workers as child processes; waits until /readyz answers and
prints the URLs. Ctrl-C or SIGTERM stops everything it started: children first (SIGTERM, then
SIGKILL after a grace period), the embedded Redis last. A child that dies on its own stops the
rest, and `up` exits non-zero.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from core.keys import Keys
from core.settings import Settings
from mini_n8n.redis_server import EmbeddedRedis, free_port, reachable

DATA_DIR = Path(".mini-n8n") / "redis"
BUNDLED_WORKFLOWS = Path(__file__).resolve().parent.parent / "examples" / "workflows"
READY_TIMEOUT_SECONDS = 60.0  # gunicorn + gevent start in about a second; slow disks need more
POLL_SECONDS = 0.2
# How long children get to finish open streams and in-flight executions after SIGTERM.
STOP_GRACE_SECONDS = float(os.environ.get("MINI_N8N_STOP_GRACE_SECONDS", "25"))


class Stack:
    """The processes `up` started, stopped in reverse order of importance."""

    def __init__(self) -> None:
        self.redis: EmbeddedRedis | None = None
        self.children: list[tuple[str, subprocess.Popen]] = []

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        cmd = [sys.executable, "-m", "mini_n8n.cli", *args]
        # A session of their own: Ctrl-C reaches only `up`, which then stops them in order.
        process = subprocess.Popen(
            cmd, env=env, start_new_session=True, preexec_fn=_die_with_parent
        )
        self.children.append((name, process))

    def exited(self) -> tuple[str, int] | None:
        for name, process in self.children:
            code = process.poll()
            if code is not None:
                return name, code
        return None

    def stop(self, grace: float = STOP_GRACE_SECONDS, hurry: threading.Event | None = None) -> None:
        for _, process in self.children:
            _signal(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _, process in self.children:
            while process.poll() is None and time.monotonic() < deadline:
                if hurry is not None and hurry.is_set():
                    break
                time.sleep(0.05)
            if process.poll() is None:
                _signal(process, signal.SIGKILL)
                process.wait()
        if self.redis is not None:
            self.redis.stop()
            self.redis = None


def up(workflows: str | None, workers: int) -> int:
    settings = Settings.from_env()
    if not _port_free(settings.port):
        print(
            f"port {settings.port} is in use: stop what listens there or set PORT", file=sys.stderr
        )
        return 1
    stack = Stack()
    stopping, hurry = threading.Event(), threading.Event()

    def on_signal(signum, frame) -> None:
        if stopping.is_set():
            hurry.set()  # a second Ctrl-C: do not wait for the grace period
        stopping.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _run(stack, settings, workflows, max(1, workers), stopping)
    finally:
        print("mini-n8n: stopping...", file=sys.stderr)
        stack.stop(hurry=hurry)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run(stack: Stack, settings: Settings, workflows: str | None, workers: int, stopping) -> int:
    env = dict(os.environ)
    redis_url = _redis(stack, settings, env)
    env["REDIS_URL"] = redis_url
    env.setdefault("MINI_N8N_API_KEY", secrets.token_urlsafe(24))
    folder = _workflows_folder(workflows)
    # `up` imports them itself (its output is the user's) so the api must not import again.
    env.pop("MINI_N8N_WORKFLOWS_DIR", None)
    keys = Keys.from_settings(settings)
    if folder is not None:
        _import(redis_url, keys, folder)
    stack.spawn("api", ["api"], env)
    for _ in range(workers):
        stack.spawn("worker", ["worker"], env)
    base = f"http://127.0.0.1:{settings.port}"
    if not _wait_ready(base, stack, stopping):
        return 0 if stopping.is_set() else 1
    _print_urls(settings, redis_url, env["MINI_N8N_API_KEY"], keys)
    while not stopping.wait(POLL_SECONDS):
        dead = stack.exited()
        if dead:
            print(f"mini-n8n: the {dead[0]} exited with code {dead[1]}", file=sys.stderr)
            return 1
    return 0


def _redis(stack: Stack, settings: Settings, env: dict[str, str]) -> str:
    if reachable(settings.redis_url):
        print(f"Redis: using {settings.redis_url}")
        return settings.redis_url
    if os.environ.get("REDIS_URL"):
        print(f"Redis: nothing answers at {settings.redis_url}; starting an embedded one")
    port = 6379 if _port_free(6379, "127.0.0.1") else free_port()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    stack.redis = EmbeddedRedis(port=port, data_dir=str(DATA_DIR.resolve())).start()
    # The broker follows: a CELERY_BROKER_URL pointing elsewhere would not answer either.
    env["CELERY_BROKER_URL"] = stack.redis.url
    print(f"Redis: embedded valkey-server at {stack.redis.url} (data in {DATA_DIR}/)")
    return stack.redis.url


def _workflows_folder(option: str | None) -> Path | None:
    if option:
        if Path(option).is_dir():
            return Path(option)
        print(f"warning: {option} is not a folder; no workflows imported", file=sys.stderr)
        return None
    for candidate in (os.environ.get("MINI_N8N_WORKFLOWS_DIR"), "workflows"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    if BUNDLED_WORKFLOWS.is_dir():
        return BUNDLED_WORKFLOWS
    print("no ./workflows folder and no bundled examples: nothing imported", file=sys.stderr)
    return None


def _import(redis_url: str, keys: Keys, folder: Path) -> None:
    import redis

    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        print(f"Workflows: importing {folder}")
        store = WorkflowStore(client, keys, load_workflow)
        for line in store.import_directory(folder, activate=True):
            print(f"  {line}")
    finally:
        client.close()


def _wait_ready(base: str, stack: Stack, stopping: threading.Event) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if _get_ok(f"{base}/readyz"):
            return True
        dead = stack.exited()
        if dead:
            print(f"mini-n8n: the {dead[0]} exited at start (code {dead[1]})", file=sys.stderr)
            return False
        if stopping.wait(POLL_SECONDS):
            return False
    print(
        f"mini-n8n: {base}/readyz did not answer within {READY_TIMEOUT_SECONDS:.0f} s",
        file=sys.stderr,
    )
    return False


def _print_urls(settings: Settings, redis_url: str, api_key: str, keys: Keys) -> None:
    base = f"http://localhost:{settings.port}"
    lines = [
        "",
        "mini-n8n is up.",
        f"  API:     {base}  (REST under /rest, key in MINI_N8N_API_KEY)",
    ]
    for name, path, hosted in _chat_webhooks(redis_url, keys):
        lines.append(f'  Chat "{name}": POST {base}/webhook/{path}')
        if hosted:
            lines.append(f"      hosted chat page: {base}/webhook/{path}")
    lines.append(f"  Editor:  {base}/#key={api_key}")
    lines += [
        "",
        "  Try:     curl -N -H 'Content-Type: application/json' "
        '-d \'{"sessionId":"a","chatInput":"What is 19 * 23?"}\' <chat URL>',
        f"  Memory:  REDIS_URL={redis_url} mini-n8n sessions",
    ]
    if keys.memory_prefix:  # with n8n's bare keys a pattern would match every key
        lines.append(
            f"           redis-cli -u {redis_url} --scan --pattern '{keys.chat_pattern()}'"
        )
    lines += ["  Ctrl-C stops everything.", ""]
    print("\n".join(lines), flush=True)


def _chat_webhooks(redis_url: str, keys: Keys) -> list[tuple[str, str, bool]]:
    """(workflow name, path, serves a hosted page) for each active Chat Trigger."""
    import redis

    from core.workflow_store import WorkflowStore
    from engine.errors import WorkflowValidationError
    from engine.nodes.chat_trigger import ChatTrigger, chat_settings
    from engine.webhooks import workflow_webhooks
    from engine.workflow import load_workflow

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    found = []
    try:
        for data in WorkflowStore(client, keys, load_workflow).list():
            if not data.get("active"):
                continue
            try:
                workflow = load_workflow(data)
            except WorkflowValidationError:
                continue
            for node_name, spec in workflow_webhooks(workflow):
                node = workflow.nodes[node_name]
                if node.type != ChatTrigger.type or spec.method != "POST":
                    continue
                found.append((workflow.name, spec.path, chat_settings(node).hosted_page))
    finally:
        client.close()
    return found


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _port_free(port: int, host: str = "") -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _signal(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


def _die_with_parent() -> None:
    """In the child: get SIGTERM if `up` itself is killed, so nothing is left behind (Linux)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
