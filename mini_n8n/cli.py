"""The `mini-n8n` command. Imports stay inside the commands: `worker` must monkey-patch with
gevent before redis and Celery are imported."""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial

from mini_n8n import chats_cli, users_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mini-n8n", description="n8n-style chat workflows in queue mode"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("up", help="run everything on this machine (Redis, api, a worker)")
    p.add_argument("--workflows", help="folder of workflows to import and activate")
    p.add_argument("--workers", type=int, default=1, help="worker processes to start")
    sub.add_parser("api", help="run the api under gunicorn with gevent workers")
    p = sub.add_parser("worker", help="run a Celery worker")
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument("--queues", default=None, help="Celery queues to take tasks from")
    p.add_argument("--pool", default="gevent", choices=["gevent", "threads", "solo", "prefork"])
    p = sub.add_parser("run", help="run a workflow in this process and print its chunks")
    p.add_argument("file")
    p.add_argument("--input", default="{}", help="the trigger's output item, as JSON")
    p = sub.add_parser("import", help="import workflow files into Redis")
    p.add_argument("files", nargs="+")
    p.add_argument("--activate", action="store_true")
    sub.add_parser("workflows", help="list stored workflows")
    for name in ("activate", "deactivate"):
        sub.add_parser(name, help=f"{name} a workflow").add_argument("id")
    p = sub.add_parser(
        "sessions",
        help="list, show or clear chat sessions in Redis",
        description="Lists every session, one a line; a protected chat's (basic auth, or not "
        "public) has its workflow id in a second, tab-separated column. Show or clear one with "
        "--workflow ID.",
    )
    p.add_argument("action", nargs="?", choices=["show", "clear"])
    p.add_argument("id", nargs="?")
    p.add_argument("--workflow", help="the workflow of a protected chat's session")
    p = sub.add_parser("chat", help="chat with a Chat Trigger URL from the terminal")
    p.add_argument("url")
    p.add_argument("--session", default=None)
    chats_cli.add_parser(sub)
    users_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = {
        "up": _up,
        "api": _api,
        "worker": _worker,
        "run": _run,
        "import": _import,
        "workflows": _workflows,
        "activate": _activate,
        "deactivate": _deactivate,
        "sessions": _sessions,
        "chat": _chat,
        "chats": lambda args: chats_cli.run(args, _store),
        "users": lambda args: users_cli.run(args, _store),
    }[args.command]
    try:
        return handler(args) or 0
    except Exception as err:
        message, code = _error_line(err)
        if message is None:
            raise  # not one of ours: a bug, whose traceback is worth having
        print(f"mini-n8n: {message}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return 130


# What `mini-n8n api` says when the deployment requires a key (the image does) and none is set.
MISSING_API_KEY = (
    "MINI_N8N_API_KEY is not set, and this deployment requires one for REST and the editor: "
    "set it in the api's environment (docker compose: a file holding it, named in .env as "
    "MINI_N8N_API_KEY_SECRET=<its path>, see docs/deploy.md; docker run: "
    "-e MINI_N8N_API_KEY_FILE=<a file mounted in the container> or -e MINI_N8N_API_KEY=...)"
)

# The Redis the current command reads (a local_state.RedisChoice), for error messages.
_redis_in_use = None


def _error_line(err: Exception) -> tuple[str | None, int]:
    """(one readable line, exit code) for the errors a command reports; (None, 0) for others."""
    import redis

    from core.credentials import CredentialError
    from core.workflow_store import ActivationError, WorkflowNotFound
    from mini_n8n.local_state import CliError, safe_url

    choice = _redis_in_use
    where = safe_url(choice.url) if choice is not None else "the configured Redis"
    if isinstance(err, CliError):
        return str(err), err.code
    if isinstance(err, (redis.ConnectionError, redis.TimeoutError)):
        hint = " (is `mini-n8n up` running in this folder?)" if choice and choice.from_state else ""
        return f"cannot reach Redis at {where}{hint}: {err}", 1
    if isinstance(err, redis.RedisError):
        return f"Redis at {where} answered: {err}", 1
    if isinstance(err, WorkflowNotFound):
        return f"no workflow {err} in {where}", 1
    if isinstance(err, (ActivationError, CredentialError)):
        return str(err), 1
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON: {err}", 1
    if isinstance(err, ValueError):  # the engine's WorkflowValidationError, a reserved key...
        return str(err), 1
    if isinstance(err, OSError):
        name = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or err}{name}", 1
    return None, 0


def _run(args) -> int:
    from mini_n8n.local_run import run_file

    try:
        item = json.loads(args.input)
    except ValueError as err:
        print(f"--input is not valid JSON: {err}", file=sys.stderr)
        return 2
    choice = _choose_redis()
    if choice is None:
        from mini_n8n.local_state import no_redis_message

        # A workflow without a Redis node runs anyway; a Redis Chat Memory fails and says why.
        print(f"Redis: none ({no_redis_message()})", file=sys.stderr)
        return run_file(args.file, item, out=sys.stdout, settings=None)
    print(choice.describe(), file=sys.stderr)
    if choice.from_state:
        _require_data(choice)  # never write a chat into a Redis that is not the deployment's
    return run_file(args.file, item, out=sys.stdout, settings=choice.settings)


def _api(args) -> int:
    from core.settings import Settings

    settings = Settings.from_env()
    if settings.require_api_key and not settings.api_key:
        from mini_n8n.local_state import CliError

        raise CliError(MISSING_API_KEY)
    argv = [
        sys.executable, "-m", "gunicorn",
        "--worker-class", "gevent",
        "--workers", os.environ.get("WEB_CONCURRENCY", "1"),
        "--worker-connections", os.environ.get("MINI_N8N_WORKER_CONNECTIONS", "16384"),
        "--bind", f"{os.environ.get('HOST', '0.0.0.0')}:{settings.port}",
        "--graceful-timeout", os.environ.get("MINI_N8N_GRACEFUL_TIMEOUT", "20"),
        "--keep-alive", os.environ.get("MINI_N8N_KEEP_ALIVE", "5"),
        "--config", "python:api.gunicorn_conf",
        "api.wsgi:app",
    ]  # fmt: skip
    # No gunicorn access log: the app writes one line per request itself (api/access_log.py),
    # with the execution id and never the query string; logging is set in api.gunicorn_conf.
    os.execv(sys.executable, argv)
    return 0


def _worker(args) -> int:
    if args.pool == "gevent":
        from gevent import monkey

        monkey.patch_all()
    from core import logs
    from worker.celery_app import connect_worker_logging, connect_worker_signals, create_celery

    app = create_celery()
    connect_worker_signals(app)
    # Celery sets up logging when the worker starts: through ours (core/logs.py), not its own.
    connect_worker_logging(app.settings)
    concurrency = args.concurrency or int(os.environ.get("WORKER_CONCURRENCY", "100"))
    # --quiet: no start banner in JSON, where every line must be an object.
    quiet = ["--quiet"] if app.settings.log_format == "json" else []
    argv = [
        *quiet,
        "worker",
        "--pool", args.pool,
        "--concurrency", str(concurrency),
        "--queues", args.queues or app.settings.task_queue,
        "--hostname", f"worker-{os.getpid()}@%h",
        "--loglevel", logs.env_level(),
        "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    # Heartbeats stay on (one small event every 2 s): with gossip off they are what keeps the
    # worker's event dispatcher alive, so Flower can turn task events on and show it online.
    # Warm start: the node modules (and the model client under them) took seconds to import. Imported
    # inside the first execution, they held up this process's lease greenlet long enough for
    # that execution to be declared lost; now they are loaded before the worker takes a task.
    import engine.nodes  # noqa: F401

    app.worker_main(argv)
    return 0


def _choose_redis():
    global _redis_in_use
    from mini_n8n.local_state import choose_redis

    choice = choose_redis()
    _redis_in_use = choice
    return choice


def _require_data(choice) -> None:
    """A Redis that holds no mini-n8n data (no `workflows` set under the prefix) is not the
    deployment's: stop instead of answering with nothing."""
    import redis

    from core.keys import Keys
    from mini_n8n.local_state import CliError, safe_url

    keys = Keys.from_settings(choice.settings)
    client = redis.Redis.from_url(choice.url, socket_connect_timeout=2)
    try:
        if client.exists(keys.workflows()):
            return
    finally:
        client.close()
    hint = (
        "is `mini-n8n up` running from this folder?"
        if choice.from_state
        else "check REDIS_URL and MINI_N8N_KEY_PREFIX"
    )
    raise CliError(
        f"no mini-n8n data in {safe_url(choice.url)} (no {keys.workflows()!r} key): "
        f"not the deployment's Redis; {hint}"
    )


def _store(require_data: bool = True):
    """The workflow store on the chosen Redis, which is said on stderr."""
    from core.keys import Keys
    from core.redis_clients import connect
    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow
    from mini_n8n.local_state import CliError, no_redis_message

    choice = _choose_redis()
    if choice is None:
        raise CliError(no_redis_message())
    print(choice.describe(), file=sys.stderr)
    if require_data:
        _require_data(choice)
    settings = choice.settings
    client = connect(settings.redis_url, settings.redis_cluster, decode_responses=True)
    parse = partial(load_workflow, max_nodes=settings.max_nodes)
    return WorkflowStore(client, Keys.from_settings(settings), parse), client, settings


def _import(args) -> int:
    for path in args.files:  # every file is checked before anything is written
        try:
            _check_file(path)
        except Exception as err:
            raise _file_error(path, err) from None
    store, _, _ = _store(require_data=False)
    for path in args.files:
        try:
            lines = store.import_file(path, activate=args.activate)
        except Exception as err:
            raise _file_error(path, err) from None
        for line in lines:
            print(line)
    return 0


def _file_error(path: str, err: Exception) -> Exception:
    """The error as one line that names the file; `err` itself when it is not one of ours."""
    from mini_n8n.local_state import CliError

    if isinstance(err, OSError) and not isinstance(err, ConnectionError):
        return CliError(f"{path}: {err.strerror or err}")
    message, _ = _error_line(err)
    return err if message is None else CliError(f"{path}: {message}")


def _check_file(path: str) -> None:
    from pathlib import Path

    from core.settings import Settings
    from engine.workflow import load_workflow

    data = json.loads(Path(path).read_text())
    max_nodes = Settings.from_env().max_nodes
    for item in data if isinstance(data, list) else [data]:
        load_workflow(item, max_nodes=max_nodes)


def _workflows(args) -> int:
    store, _, _ = _store()
    for data in store.list():
        state = "active" if data.get("active") else "inactive"
        print(f"{data['id']}\t{state}\t{data.get('name', '')}")
    return 0


def _activate(args) -> int:
    store, _, settings = _store()
    for warning in store.activate(args.id, queue_mode=settings.executions_mode == "queue"):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"activated {args.id}")
    return 0


def _deactivate(args) -> int:
    store, _, _ = _store()
    store.deactivate(args.id)
    print(f"deactivated {args.id}")
    return 0


def _sessions(args) -> int:
    from core.keys import ReservedKeyError
    from memory.redis import RedisMemory, protected_sessions
    from mini_n8n.local_state import CliError, safe_url

    store, client, settings = _store()
    memory = RedisMemory(client, store.keys, workflow_id=args.workflow)
    if args.action is None:
        for session in memory.sessions():
            print(session if args.workflow is None else f"{session}\t{args.workflow}")
        if args.workflow is None:
            for workflow_id, session in protected_sessions(client, store.keys):
                print(f"{session}\t{workflow_id}")
        return 0
    if not args.id:
        print("a session id is needed", file=sys.stderr)
        return 2
    try:
        if not client.exists(memory.key(args.id)):
            of = f" of workflow {args.workflow}" if args.workflow else ""
            hint = "" if args.workflow else " (a protected chat's needs --workflow WF)"
            raise CliError(f"no session {args.id}{of} in {safe_url(settings.redis_url)}{hint}")
        if args.action == "clear":
            memory.clear(args.id)
            print(f"cleared {args.id}")
            return 0
        for message in memory.messages(args.id):
            print(f"{message.role}: {message.content}")
    except ReservedKeyError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


def _up(args) -> int:
    from mini_n8n.up import up

    return up(workflows=args.workflows, workers=args.workers)


def _chat(args) -> int:
    from mini_n8n.chat_client import chat

    return chat(args.url, session=args.session)


if __name__ == "__main__":
    sys.exit(main())
