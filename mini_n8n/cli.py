"""The `mini-n8n` command. Imports stay inside the commands: `worker` must monkey-patch with
gevent before redis and Celery are imported."""

from __future__ import annotations

import argparse
import json
import os
import sys

# gunicorn's default without the query string: the editor's push URL carries the api key.
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s "%(f)s" "%(a)s"'


def main(argv: list[str] | None = None) -> int:
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

    args = parser.parse_args(argv)
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
    }[args.command]
    return handler(args) or 0


def _run(args) -> int:
    from mini_n8n.local_run import run_file

    try:
        item = json.loads(args.input)
    except ValueError as err:
        print(f"--input is not valid JSON: {err}", file=sys.stderr)
        return 2
    return run_file(args.file, item, out=sys.stdout)


def _api(args) -> int:
    from core.settings import Settings

    settings = Settings.from_env()
    argv = [
        sys.executable, "-m", "gunicorn",
        "--worker-class", "gevent",
        "--workers", os.environ.get("WEB_CONCURRENCY", "1"),
        "--worker-connections", os.environ.get("MINI_N8N_WORKER_CONNECTIONS", "10000"),
        "--bind", f"{os.environ.get('HOST', '0.0.0.0')}:{settings.port}",
        "--graceful-timeout", os.environ.get("MINI_N8N_GRACEFUL_TIMEOUT", "20"),
        "--keep-alive", "5",
        "--config", "python:api.gunicorn_conf",
        "--access-logfile", "-" if os.environ.get("MINI_N8N_ACCESS_LOG") else "/dev/null",
        "--access-logformat", ACCESS_LOG_FORMAT,
        "api.wsgi:app",
    ]  # fmt: skip
    os.execv(sys.executable, argv)
    return 0


def _worker(args) -> int:
    if args.pool == "gevent":
        from gevent import monkey

        monkey.patch_all()
    from worker.celery_app import connect_worker_signals, create_celery

    app = create_celery()
    connect_worker_signals(app)
    concurrency = args.concurrency or int(os.environ.get("WORKER_CONCURRENCY", "100"))
    argv = [
        "worker",
        "--pool", args.pool,
        "--concurrency", str(concurrency),
        "--queues", args.queues or app.settings.task_queue,
        "--hostname", f"worker-{os.getpid()}@%h",
        "--loglevel", os.environ.get("MINI_N8N_LOG_LEVEL", "INFO"),
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    app.worker_main(argv)
    return 0


def _store():
    import redis

    from core.keys import Keys
    from core.settings import Settings
    from core.workflow_store import WorkflowStore
    from engine.workflow import load_workflow

    settings = Settings.from_env()
    client = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    return WorkflowStore(client, Keys.from_settings(settings), load_workflow), client, settings


def _import(args) -> int:
    store, _, _ = _store()
    for path in args.files:
        for line in store.import_file(path, activate=args.activate):
            print(line)
    return 0


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

    store, client, _ = _store()
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
