"""`mini-n8n up`: everything on one machine, in the foreground.

Redis: REDIS_URL when it is set (and `up` stops if nothing answers there); otherwise its own
embedded valkey-server, AOF in ./.mini-n8n/redis, on the port kept in ./.mini-n8n/state.json
(a new free port the first time, or when another program holds that one). Never a Redis that
merely answers on 6379. The generated api key is kept there too, so both survive a restart
(mini_n8n/local_state.py has the file's format). `up` imports and activates ./workflows (or the
bundled examples), keeping any workflow changed since its import (core/folder_import.py); starts
the api (gunicorn + gevent) and N Celery workers as child processes; waits until /readyz answers
and prints the URLs. A process that dies on its own once the stack is up (the api, a worker, the
embedded Redis) is started again, and `up` says which and why (mini_n8n/supervision.py); one that
dies while the stack starts stops it, and `up` exits non-zero. Ctrl-C or SIGTERM stops everything
it started: children first (SIGTERM, then SIGKILL after a grace period), the embedded Redis last.
"""

from __future__ import annotations

import contextlib
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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import quote

from core import logs
from core.keys import Keys
from core.redis_clients import connect
from core.settings import Settings
from mini_n8n.local_state import (
    STATE_DIR,
    STATE_FILE,
    CliError,
    LocalState,
    load_state,
    safe_url,
    save_state,
)
from mini_n8n.redis_server import (
    EmbeddedRedis,
    die_with_parent,
    free_port,
    reachable,
    redis_cli_command,
)
from mini_n8n.supervision import Supervised, exit_reason, say

DATA_DIR = STATE_DIR / "redis"
BUNDLED_WORKFLOWS = Path(__file__).resolve().parent.parent / "examples" / "workflows"
READY_TIMEOUT_SECONDS = 60.0  # gunicorn + gevent start in about a second; slow disks need more
POLL_SECONDS = 0.2
# How long children get to finish open streams and in-flight executions after SIGTERM.
STOP_GRACE_SECONDS = float(os.environ.get("MINI_N8N_STOP_GRACE_SECONDS", "25"))
SAY_EVERY_SECONDS = 5.0  # how often a stop that is still waiting says for what


class Stack:
    """The processes `up` started, stopped in reverse order of importance."""

    def __init__(self) -> None:
        self.redis: EmbeddedRedis | None = None
        self.redis_watch: Supervised | None = None  # the embedded Redis, when it is ours
        self.adopted_redis: str | None = None  # an earlier run's embedded Redis, shut down at end
        self.children: list[Supervised] = []

    def start_redis(self, port: int, data_dir: str) -> str:
        """Our own embedded Redis (its URL), started again on the same port and data if it dies."""

        def start() -> subprocess.Popen:
            server = EmbeddedRedis(port=port, data_dir=data_dir, die_with_parent=True).start()
            self.redis = server
            return server.process  # type: ignore[return-value]  # started: it has one

        self.redis_watch = Supervised("embedded Redis", start)
        return f"redis://127.0.0.1:{port}/0"

    def spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        cmd = [sys.executable, "-m", "mini_n8n.cli", *args]

        def start() -> subprocess.Popen:
            # A session of their own: Ctrl-C reaches only `up`, which then stops them in order.
            return subprocess.Popen(
                cmd, env=env, start_new_session=True, preexec_fn=die_with_parent
            )

        self.children.append(Supervised(name, start))

    def exited(self) -> tuple[str, int] | None:
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                return child.name, code
        return None

    def supervise(self) -> None:
        """Start again what died: the embedded Redis first, which the others need."""
        for watched in [self.redis_watch, *self.children]:
            if watched is not None:
                watched.check()

    def stop(self, grace: float = STOP_GRACE_SECONDS, hurry: threading.Event | None = None) -> None:
        """SIGTERM to each child, then wait for them all, saying every few seconds which are
        still running; what outlives `grace` (or a second Ctrl-C) gets SIGKILL, said so too."""
        running = [child for child in self.children if child.process.poll() is None]
        for child in running:
            _signal(child.process, signal.SIGTERM)
        if running:
            say(f"stopping {_names(running)}...")
        start = time.monotonic()
        said = start
        while running and time.monotonic() - start < grace:
            if hurry is not None and hurry.is_set():
                break
            time.sleep(0.05)
            running = [child for child in running if child.process.poll() is None]
            if running and time.monotonic() - said >= SAY_EVERY_SECONDS:
                said = time.monotonic()
                left = max(0, round(grace - (said - start)))
                what = "what it is doing" if len(running) == 1 else "what they are doing"
                say(
                    f"still waiting for {_names(running)} to finish {what} "
                    f"(at most {left} s more; Ctrl-C again stops at once)"
                )
        for child in running:
            if child.process.poll() is None:
                say(f"the {child.name} (pid {child.process.pid}) did not stop: killing it")
                _signal(child.process, signal.SIGKILL)
                child.process.wait()
        if self.redis is not None:
            self.redis.stop()
            self.redis = None
        if self.adopted_redis is not None:
            _shutdown(self.adopted_redis)
            self.adopted_redis = None


def up(workflows: str | None, workers: int) -> int:
    settings = Settings.from_env()
    # Lines `up` logs itself (workflow import warnings...) in the format its children use; what
    # it prints for the user (URLs, progress) stays plain text.
    logs.configure(settings.log_format)
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
        stack.stop(hurry=hurry)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _run(stack: Stack, settings: Settings, workflows: str | None, workers: int, stopping) -> int:
    env = dict(os.environ)
    try:
        state = load_state() or LocalState()
    except CliError as err:
        print(f"warning: {err}; starting with a fresh one", file=sys.stderr)
        state = LocalState()
    redis_url = _redis(stack, settings, env, state)
    if redis_url is None:
        return 1
    env["REDIS_URL"] = redis_url
    if "MINI_N8N_API_KEY" in os.environ:  # the user's own (empty: no key, loopback only)
        key_source = "MINI_N8N_API_KEY"
    else:
        state.api_key = state.api_key or secrets.token_urlsafe(24)
        env["MINI_N8N_API_KEY"] = state.api_key
        key_source = f"kept in {STATE_FILE}"
    state.redis_url = redis_url
    state.key_prefix = settings.key_prefix
    state.memory_key_prefix = settings.memory_key_prefix
    save_state(state)
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
    _print_urls(settings, redis_url, env["MINI_N8N_API_KEY"], key_source, keys)
    while not stopping.wait(POLL_SECONDS):
        stack.supervise()
    return 0


def _redis(stack: Stack, settings: Settings, env: dict[str, str], state: LocalState) -> str | None:
    """The rule: REDIS_URL when set, else our own embedded Redis on its kept port."""
    if os.environ.get("REDIS_URL"):
        url = settings.redis_url
        if not reachable(url):
            print(
                f"mini-n8n: cannot reach Redis at {safe_url(url)} (REDIS_URL): start it, or "
                "unset REDIS_URL to use the embedded one",
                file=sys.stderr,
            )
            return None
        note = "" if _has_data(url, Keys.from_settings(settings)) else "; no mini-n8n data yet"
        print(f"Redis: {safe_url(url)} (REDIS_URL{note})")
        return url
    data_dir = DATA_DIR.resolve()
    port = state.embedded_redis_port
    if port is not None and not _port_free(port, "127.0.0.1"):
        url = f"redis://127.0.0.1:{port}/0"
        if _is_ours(url, data_dir):
            # An earlier `up` here was killed before it could stop it: same data, so use it.
            stack.adopted_redis = url
            print(f"Redis: embedded valkey-server at {url}, still running from an earlier run")
            env["CELERY_BROKER_URL"] = url
            return url
        print(
            f"Redis: port {port} (kept in {STATE_FILE}) is taken by another program; "
            "the embedded valkey-server moves to a new port"
        )
        port = None
    if port is None:
        port = free_port()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    url = stack.start_redis(port, str(data_dir))
    state.embedded_redis_port = port
    # The broker follows: a CELERY_BROKER_URL pointing elsewhere would not answer either.
    env["CELERY_BROKER_URL"] = url
    print(
        f"Redis: embedded valkey-server at {url} (data in {DATA_DIR}/, "
        f"port kept in {STATE_FILE}; set REDIS_URL to use another Redis)"
    )
    return url


def _has_data(url: str, keys: Keys) -> bool:

    client = connect(url, keys.cluster, socket_connect_timeout=2)
    try:
        return bool(client.exists(keys.workflows()))
    finally:
        client.close()


def _is_ours(url: str, data_dir: Path) -> bool:
    """Whether the Redis at url is an embedded one keeping its data in data_dir."""
    import redis

    client = redis.Redis.from_url(
        url, socket_connect_timeout=1, socket_timeout=1, decode_responses=True
    )
    try:
        found = str(client.config_get("dir").get("dir") or "")
        return bool(found) and Path(found).resolve() == data_dir
    except (redis.RedisError, OSError, ValueError):
        return False
    finally:
        client.close()


def _shutdown(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=5)
    with contextlib.suppress(redis.RedisError, OSError):
        client.shutdown()  # AOF: nothing is lost
    client.close()


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

    from core.folder_import import import_folder
    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow

    client = connect(redis_url, keys.cluster, decode_responses=True)
    try:
        print(f"Workflows: importing {folder} (a workflow changed since its import is kept)")
        parse = partial(load_workflow, max_nodes=Settings.from_env().max_nodes)
        store = WorkflowStore(client, keys, parse)
        for line in import_folder(store, folder):
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
            print(f"mini-n8n: the {dead[0]} {exit_reason(dead[1])} at start", file=sys.stderr)
            return False
        if stopping.wait(POLL_SECONDS):
            return False
    print(
        f"mini-n8n: {base}/readyz did not answer within {READY_TIMEOUT_SECONDS:.0f} s",
        file=sys.stderr,
    )
    return False


def _print_urls(
    settings: Settings, redis_url: str, api_key: str, key_source: str, keys: Keys
) -> None:
    """The banner. Every command it prints runs as printed, from another terminal in this folder
    (tests/test_up.py runs them)."""
    base = f"http://localhost:{settings.port}"
    chats = _chat_webhooks(redis_url, keys)
    lines = ["", "mini-n8n is up."]
    for chat in chats:
        lines.append(f'  Chat "{chat.name}": {_chat_line(chat, base)}')
    editor = f"{base}/#key={quote(api_key, safe='')}" if api_key else f"{base}/"
    lines.append(f"  Editor:  {editor}  (opening this link signs the browser in)")
    lines.append(f"  Hub:     {base}/home/chat  (the Chat Hub: sign in as one of the people below)")
    lines.append(f"  API:     {base}/rest  (key {key_source})")
    lines.append(
        f"  People:  {cli_command()} users add EMAIL --role owner|member|chat  (the password on "
        f"standard input), then sign in at {base}/signin"
    )
    demo = _demo_chat(chats)
    if demo is not None:
        lines += [
            "",
            "  Try, from another terminal in this folder:",
            *_try_commands(f"{base}/webhook/{demo.path}", redis_url, keys),
        ]
    lines += ["", "  Ctrl-C stops everything.", ""]
    print("\n".join(lines), flush=True)


def _chat_line(chat: ChatUrl, base: str) -> str:
    if not chat.public and chat.in_hub:
        return f"in the Chat Hub, {base}/home/chat  (not public: its URL answers 404)"
    if not chat.public:
        return "not public, its URL answers 404"
    url = f"{base}/webhook/{chat.path}"
    notes = [chat.response_mode]
    if chat.basic_auth:
        notes.append("basic auth")
    if chat.hosted:
        notes.append("open it in a browser for its chat page")
    return f"{url}  ({'; '.join(notes)})"


def _demo_chat(chats: list[ChatUrl]) -> ChatUrl | None:
    """The chat the banner's commands talk to: a public one that streams without a login (the
    calculator chat of the examples), else any public one without a login."""
    open_chats = [c for c in chats if c.public and not c.basic_auth]
    streaming = [c for c in open_chats if c.response_mode == "streaming"]
    candidates = streaming or open_chats
    return candidates[0] if candidates else None


def _try_commands(url: str, redis_url: str, keys: Keys) -> list[str]:
    cli = cli_command()
    body = '{"action":"sendMessage","sessionId":"demo","chatInput":"What is 19 * 23?"}'
    commands = [
        f"curl -N -H 'Content-Type: application/json' -d '{body}' {url}",
        f"{cli} chat {url}",
        f"{cli} sessions",
        f"{cli} sessions show demo",
    ]
    if keys.memory_prefix:  # with n8n's bare keys the list is named by the session id alone
        commands.append(
            f"{redis_cli_command()} -u {safe_url(redis_url)} LRANGE {keys.chat('demo')} 0 -1"
        )
    return [f"    {command}" for command in commands]


def cli_command() -> str:
    """How to call `mini-n8n` from here: the virtualenv's script, which is rarely on the PATH."""
    script = Path(sys.executable).parent / "mini-n8n"
    if not script.exists():
        return "mini-n8n"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


@dataclass(frozen=True)
class ChatUrl:
    name: str
    path: str
    public: bool  # false: the URL answers 404
    hosted: bool  # GET serves the hosted chat page
    basic_auth: bool
    response_mode: str
    in_hub: bool = False  # availableInChat: a workflow agent of the Chat Hub


def _chat_webhooks(redis_url: str, keys: Keys) -> list[ChatUrl]:
    """Each active Chat Trigger's URL, and whether it answers."""

    from core.workflow_store import WorkflowStore
    from engine.errors import WorkflowValidationError
    from engine.nodes.chat_trigger import ChatTrigger, chat_settings
    from engine.webhooks import workflow_webhooks
    from engine.workflow import load_workflow

    client = connect(redis_url, keys.cluster, decode_responses=True)
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
                chat = chat_settings(node)
                found.append(
                    ChatUrl(
                        name=workflow.name,
                        path=spec.path,
                        public=chat.public,
                        hosted=chat.hosted_page,
                        basic_auth=chat.authentication == "basicAuth",
                        response_mode=chat.response_mode,
                        in_hub=chat.params.get("availableInChat") is True,
                    )
                )
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


def _names(children: list[Supervised]) -> str:
    """ "the api (pid 12) and the worker (pid 13)": who a stop waits for."""
    named = [f"the {child.name} (pid {child.process.pid})" for child in children]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _signal(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)
