"""Configuration in layers: defaults, then the environment. Each default says why."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

# The bundled example workflows of a source checkout; the image copies them elsewhere and says so.
EXAMPLES_DIR = str(Path(__file__).resolve().parent.parent / "examples" / "workflows")


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def _bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    word = value.strip().lower()
    if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return word in ("1", "true", "yes", "on")


def _float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def _secret(name: str) -> str:
    """NAME, or the content of the file NAME_FILE names: a compose or docker secret, which never
    shows on a command line, in `docker inspect` or in a process's environment."""
    value, path = os.environ.get(name, ""), os.environ.get(f"{name}_FILE", "")
    if not path:
        return value
    if value:
        raise ValueError(f"set {name} or {name}_FILE, not both")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()  # `echo … > file` ends it with a line break
    except OSError as err:
        raise ValueError(f"{name}_FILE: cannot read {path}: {err.strerror}") from None
    if not text:
        raise ValueError(f"{name}_FILE: {path} is empty")
    return text


def _with_password(url: str, name: str) -> str:
    """`url` with the password the file NAME_FILE holds (none: `url` as it is)."""
    if not os.environ.get(f"{name}_FILE"):
        return url
    parts = urlsplit(url)
    if parts.password is not None:
        raise ValueError(f"{name}_FILE is set and the URL holds a password too: keep one")
    user = quote(unquote(parts.username or ""), safe="")
    netloc = f"{user}:{quote(_secret(name), safe='')}@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


@dataclass
class Settings:
    # A local Redis on its default port: what `docker run redis` or a distro package gives.
    redis_url: str = "redis://localhost:6379/0"
    # The broker is the same Redis unless told otherwise: one service to run.
    broker_url: str = ""
    # REDIS_URL names any node of a Redis Cluster: state, memory and the relay use the cluster
    # (hash-tagged keys, sharded pub/sub). The broker cannot be a cluster (kombu speaks to one
    # server), so CELERY_BROKER_URL must then name a plain Redis or RabbitMQ.
    redis_cluster: bool = False
    api_key: str = ""
    # A deployment (the image sets it) refuses to start its api without a key: with none, REST
    # and the editor answer nobody, and nothing would say why.
    require_api_key: bool = False
    workflows_dir: str = ""
    # The bundled examples are a public demo chat: imported and activated only when asked.
    demo: bool = False
    examples_dir: str = EXAMPLES_DIR
    port: int = 5678  # n8n's port, so widget and docs URLs carry over
    # The public base of webhook URLs (n8n's WEBHOOK_URL), for the URLs an execution hands out
    # ($execution.resumeUrl); empty: http://localhost:<PORT>/, as n8n's default.
    webhook_url: str = ""
    # n8n's default body limit (N8N_PAYLOAD_SIZE_MAX = 16 MiB).
    max_body_bytes: int = 16 * 1024 * 1024
    # Files sent to a Chat Trigger travel base64-encoded in the Celery message and the execution
    # record, so they get their own, smaller limits: per file, and for all files of a message.
    chat_file_max_bytes: int = 5 * 1024 * 1024
    chat_files_max_bytes: int = 10 * 1024 * 1024
    # A chat message sent as JSON is text and metadata (files come as multipart or, on the chat
    # socket, as data URLs within the files limits): far less than n8n's 16 MiB.
    chat_body_max_bytes: int = 1024 * 1024
    # How a body (or a chat socket message) must arrive (api/bodies.py `Arrival`). No byte for
    # this long and the sender has stalled: a client that is sending pauses for far less
    # (nginx's client_body_timeout, between two reads, is 60 s).
    body_idle_seconds: float = 10.0
    # Once `body_grace_seconds` are over, bytes a second on average since the start: a phone on
    # a poor network sends several KiB a second (Apache's mod_reqtimeout asks 500); 0 = no rate.
    body_min_rate: float = 1024.0
    body_grace_seconds: float = 5.0
    # Bytes of bodies and messages one api process holds while they arrive: two bodies at the
    # 16 MiB limit, one parsed while the next arrives (large bodies are parsed one at a time);
    # more wait for room, their senders held back by TCP.
    body_buffer_bytes: int = 32 * 1024 * 1024
    # Values (commas and brackets) one JSON body or frame may hold: parsing stays a few ms.
    json_max_values: int = 100_000
    # Open /chat sockets per api process: each costs memory and a greenlet; past this a socket
    # is closed at once with 1013 ("try again later") rather than the process running out.
    chat_socket_max: int = 5000
    # A /chat socket with no frame from its client for this long is closed (1001): a tab left
    # open must not hold memory for ever. The widget answers heartbeats, so a live one stays.
    chat_socket_idle_seconds: float = 600.0
    # Nodes one workflow may have: far more than a real workflow, and the bound of how long
    # activating or running one can take per item.
    max_nodes: int = 500
    # CPU seconds one execution may use (its thread's CPU time, checked between nodes and in
    # long loops): a run that computes rather than waits is stopped well before the wall-clock
    # timeout, and never starves the worker's lease greenlet for long.
    execution_cpu_seconds: float = 60.0
    # A Code node's JavaScript (sandbox/): how long one run may take (seconds; n8n's task runner
    # allows 300, far more than a chat's reply can wait), how much memory its isolate may use
    # (MB), and how many run at once per worker (each in a process of its own, about 70 MB;
    # more wait for a free one).
    code_timeout_seconds: float = 5.0
    code_memory_mb: int = 128
    code_processes: int = 2
    # How long Redis keeps an execution's keys after their last write (seconds): the backstop
    # under the pruning below. Unset, it follows EXECUTIONS_DATA_MAX_AGE, so a finished
    # execution expires that long after it stopped, as n8n prunes (core/retention.py).
    executions_ttl: int = 336 * 3600
    # n8n's pruning of execution history, with its names and defaults (core/retention.py):
    # finished executions older than max age (hours) or beyond the newest max count go.
    executions_prune: bool = True
    executions_max_age_hours: float = 336.0
    executions_prune_max_count: int = 10_000
    # A manual run that is not to be saved stays this long (hours), as n8n's soft-deleted
    # ones do: the user may look at it while building the workflow.
    executions_hard_delete_buffer_hours: float = 1.0
    # n8n's global save defaults ("all" or "none"), which a workflow's settings override.
    executions_save_on_success: str = "all"
    executions_save_on_error: str = "all"
    executions_save_manual: bool = True
    # Quiet streams get a keepalive line after this long; also how often a relay checks that
    # the execution's worker is still alive.
    keepalive_seconds: float = 5.0
    # A chat socket whose client leaves heartbeats unanswered this long is closed (n8n's 60 s).
    chat_heartbeat_timeout_seconds: float = 60.0
    # A worker renews its lease on running executions twice a second; one that misses this long
    # is considered lost and its executions fail. A worker whose process died is noticed within
    # about two seconds by its closed connection (core/presence.py); the lease is the bound for
    # one that is silent but may be alive: paused by the OS, starved of CPU, cut off by the
    # network. Long enough that those come back and go on.
    lease_seconds: float = 30.0
    # How many webhook requests one api process works on at once before their streams open
    # (lookups, records, subscriptions, enqueueing: a few Redis round trips each); the rest wait
    # their turn, so a burst of thousands queues here instead of on the Redis pool.
    max_starting: int = 32
    # How long a request may wait for that turn before it is answered 503 with Retry-After.
    start_wait_seconds: float = 60.0
    # How long a Redis command may take before it fails: past a failover or a pause of Redis
    # (seconds, usually), short enough that a Redis that is gone is noticed.
    redis_timeout_seconds: float = 30.0
    # How long a stream waits for Redis to answer again before it ends with an error: the
    # execution may well finish meanwhile, and its answer is then relayed whole.
    redis_outage_seconds: float = 45.0
    # How long an execution may wait in the queue (no free worker) before it fails.
    queue_timeout_seconds: float = 300.0
    # How long one execution may run before it is stopped.
    execution_timeout_seconds: float = 600.0
    # On SIGTERM a worker lets running executions finish for this long, then stops them.
    shutdown_grace_seconds: float = 8.0
    # Celery queue the api sends to and the worker takes from.
    task_queue: str = "mini-n8n"
    # "queue" sends executions to Celery workers; "regular" runs them inside the api process.
    executions_mode: str = "queue"
    key_prefix: str = ""
    # Public chats' memory is "chat:<sessionKey>", apart from our other keys; "" gives n8n's bare
    # session keys, to take over n8n's sessions or run beside n8n on one Redis.
    memory_key_prefix: str = "chat:"
    # 0 = off: a worker serves /metrics only on a port it is given (one per worker on a host).
    worker_metrics_port: int = 0
    # Loopback: a worker's metrics are for a Prometheus on the same host unless told otherwise
    # (compose sets 0.0.0.0, inside its own network).
    worker_metrics_host: str = "127.0.0.1"
    # Lines a person reads; "json" gives one object per line for a log shipper (core/logs.py).
    log_format: str = "text"
    # Where the HTTP Request nodes may connect (models/egress.py): public addresses only, so a
    # workflow cannot reach this deployment's Redis, its api or a cloud's metadata service;
    # true lets them reach any. The ranges (CIDR) and host names (`*.example.com` for the
    # subdomains) are allowed whatever the rest says, as n8n's N8N_SSRF_ALLOWED_IP_RANGES and
    # N8N_SSRF_ALLOWED_HOSTNAMES.
    http_allow_private: bool = False
    http_allowed_ip_ranges: str = ""
    http_allowed_hostnames: str = ""
    # The most bytes of one answer an HTTP Request node reads (after gzip): its items travel
    # through Redis and the execution's record, which the body limit bounds the same way.
    http_max_response_bytes: int = 16 * 1024 * 1024

    @property
    def public_webhook_url(self) -> str:
        """WEBHOOK_URL with its trailing slash, or this machine's on PORT."""
        return (self.webhook_url or f"http://localhost:{self.port}").rstrip("/") + "/"

    @classmethod
    def from_env(cls) -> Settings:
        # Secrets may come from files (NAME_FILE): the api key, whole URLs, or Redis' password
        # alone, which joins REDIS_URL (docker-compose.yml passes it so).
        redis_url = _with_password(_secret("REDIS_URL") or cls.redis_url, "REDIS_PASSWORD")
        cluster = _bool("MINI_N8N_REDIS_CLUSTER", cls.redis_cluster)
        broker_url = _secret("CELERY_BROKER_URL")
        if cluster and not broker_url:
            raise ValueError(
                "MINI_N8N_REDIS_CLUSTER=true needs CELERY_BROKER_URL: the Celery broker cannot be "
                "a Redis Cluster; name a plain Redis (redis://...) or RabbitMQ (amqp://...)"
            )
        return cls(
            redis_url=redis_url,
            broker_url=broker_url or redis_url,
            redis_cluster=cluster,
            api_key=_secret("MINI_N8N_API_KEY"),
            require_api_key=_bool("MINI_N8N_REQUIRE_API_KEY", cls.require_api_key),
            workflows_dir=os.environ.get("MINI_N8N_WORKFLOWS_DIR", ""),
            demo=_bool("MINI_N8N_DEMO", cls.demo),
            examples_dir=os.environ.get("MINI_N8N_EXAMPLES_DIR") or cls.examples_dir,
            port=_int("PORT", cls.port),
            webhook_url=os.environ.get("WEBHOOK_URL", ""),
            **_bodies(),
            chat_socket_max=_int("MINI_N8N_CHAT_SOCKET_MAX", cls.chat_socket_max),
            chat_socket_idle_seconds=_float(
                "MINI_N8N_CHAT_SOCKET_IDLE_SECONDS", cls.chat_socket_idle_seconds
            ),
            max_nodes=_int("MINI_N8N_MAX_NODES", cls.max_nodes),
            execution_cpu_seconds=_float(
                "MINI_N8N_EXECUTION_CPU_SECONDS", cls.execution_cpu_seconds
            ),
            code_timeout_seconds=_float("MINI_N8N_CODE_TIMEOUT", cls.code_timeout_seconds),
            code_memory_mb=_int("MINI_N8N_CODE_MEMORY_MB", cls.code_memory_mb),
            code_processes=_int("MINI_N8N_CODE_PROCESSES", cls.code_processes),
            **_retention(),
            keepalive_seconds=_float("MINI_N8N_KEEPALIVE_SECONDS", cls.keepalive_seconds),
            chat_heartbeat_timeout_seconds=_float(
                "MINI_N8N_CHAT_HEARTBEAT_TIMEOUT", cls.chat_heartbeat_timeout_seconds
            ),
            lease_seconds=_float("MINI_N8N_LEASE_SECONDS", cls.lease_seconds),
            max_starting=_int("MINI_N8N_MAX_STARTING", cls.max_starting),
            start_wait_seconds=_float("MINI_N8N_START_WAIT", cls.start_wait_seconds),
            redis_timeout_seconds=_float("MINI_N8N_REDIS_TIMEOUT", cls.redis_timeout_seconds),
            redis_outage_seconds=_float("MINI_N8N_REDIS_OUTAGE", cls.redis_outage_seconds),
            queue_timeout_seconds=_float("MINI_N8N_QUEUE_TIMEOUT", cls.queue_timeout_seconds),
            execution_timeout_seconds=_float(
                "MINI_N8N_EXECUTION_TIMEOUT", cls.execution_timeout_seconds
            ),
            shutdown_grace_seconds=_float("MINI_N8N_SHUTDOWN_GRACE", cls.shutdown_grace_seconds),
            task_queue=os.environ.get("MINI_N8N_TASK_QUEUE", cls.task_queue),
            executions_mode=os.environ.get("EXECUTIONS_MODE", cls.executions_mode),
            key_prefix=os.environ.get("MINI_N8N_KEY_PREFIX", ""),
            memory_key_prefix=os.environ.get("MINI_N8N_MEMORY_KEY_PREFIX", cls.memory_key_prefix),
            worker_metrics_port=_int("MINI_N8N_WORKER_METRICS_PORT", cls.worker_metrics_port),
            worker_metrics_host=os.environ.get("MINI_N8N_WORKER_METRICS_HOST")
            or cls.worker_metrics_host,
            log_format=(os.environ.get("MINI_N8N_LOG_FORMAT") or cls.log_format).lower(),
            **_http(),
        )


def _save_mode(name: str, default: str) -> str:
    value = (os.environ.get(name) or default).strip().lower()
    if value not in ("all", "none"):
        raise ValueError(f"{name} must be all or none, not {value!r}")
    return value


def _bodies() -> dict:
    """How large request bodies and chat socket messages may be (api/body_limit.py), and how
    they must arrive (api/bodies.py)."""
    return {
        "max_body_bytes": _int("MINI_N8N_MAX_BODY_BYTES", Settings.max_body_bytes),
        "chat_file_max_bytes": _int("MINI_N8N_CHAT_FILE_MAX_BYTES", Settings.chat_file_max_bytes),
        "chat_files_max_bytes": _int(
            "MINI_N8N_CHAT_FILES_MAX_BYTES", Settings.chat_files_max_bytes
        ),
        "chat_body_max_bytes": _int("MINI_N8N_CHAT_BODY_MAX_BYTES", Settings.chat_body_max_bytes),
        "body_idle_seconds": _float("MINI_N8N_BODY_IDLE_SECONDS", Settings.body_idle_seconds),
        "body_min_rate": _float("MINI_N8N_BODY_MIN_RATE", Settings.body_min_rate),
        "body_grace_seconds": _float("MINI_N8N_BODY_GRACE_SECONDS", Settings.body_grace_seconds),
        "body_buffer_bytes": int(_float("MINI_N8N_BODY_BUFFER_BYTES", Settings.body_buffer_bytes)),
        "json_max_values": _int("MINI_N8N_JSON_MAX_VALUES", Settings.json_max_values),
    }


def _http() -> dict:
    """Where the HTTP Request nodes may connect and how much of an answer they read."""
    return {
        "http_allow_private": _bool("MINI_N8N_HTTP_ALLOW_PRIVATE", Settings.http_allow_private),
        "http_allowed_ip_ranges": os.environ.get("MINI_N8N_HTTP_ALLOWED_IP_RANGES", ""),
        "http_allowed_hostnames": os.environ.get("MINI_N8N_HTTP_ALLOWED_HOSTNAMES", ""),
        "http_max_response_bytes": _int(
            "MINI_N8N_HTTP_MAX_RESPONSE_BYTES", Settings.http_max_response_bytes
        ),
    }


def _retention() -> dict:
    """n8n's execution pruning and save settings; MINI_N8N_EXECUTIONS_TTL (seconds), the older
    name, is the keys' time to live when set, else the max age."""
    max_age = _float("EXECUTIONS_DATA_MAX_AGE", Settings.executions_max_age_hours)
    if max_age <= 0:
        raise ValueError("EXECUTIONS_DATA_MAX_AGE must be a number of hours above 0")
    return {
        "executions_ttl": _int("MINI_N8N_EXECUTIONS_TTL", max(1, round(max_age * 3600))),
        "executions_prune": _bool("EXECUTIONS_DATA_PRUNE", Settings.executions_prune),
        "executions_max_age_hours": max_age,
        "executions_prune_max_count": _int(
            "EXECUTIONS_DATA_PRUNE_MAX_COUNT", Settings.executions_prune_max_count
        ),
        "executions_hard_delete_buffer_hours": _float(
            "EXECUTIONS_DATA_HARD_DELETE_BUFFER", Settings.executions_hard_delete_buffer_hours
        ),
        "executions_save_on_success": _save_mode(
            "EXECUTIONS_DATA_SAVE_ON_SUCCESS", Settings.executions_save_on_success
        ),
        "executions_save_on_error": _save_mode(
            "EXECUTIONS_DATA_SAVE_ON_ERROR", Settings.executions_save_on_error
        ),
        "executions_save_manual": _bool(
            "EXECUTIONS_DATA_SAVE_MANUAL_EXECUTIONS", Settings.executions_save_manual
        ),
    }
