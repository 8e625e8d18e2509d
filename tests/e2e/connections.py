"""A deployment's Redis connections, by kind, as Redis lists them (CLIENT LIST), and killing
those of one kind (CLIENT KILL ID), as a proxy, a failover or Redis's own limits would drop them.

Most connections carry a name (CLIENT SETNAME: mini-n8n-api, -relay, -worker, -heartbeat);
Celery's broker connections (kombu's) and the workers' stop listener carry none, so a
connection's owner is found from its address: the process that holds the socket (`ss -tnp`),
or a parent of it (gunicorn's worker under the api's master)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import redis

Connection = dict[str, str]


def _named(name: str, *cmds: str) -> Callable[[Connection, str], bool]:
    """Connections of that name, whose last command was one of `cmds` (any, without)."""

    def matches(conn: Connection, owner: str) -> bool:
        return conn.get("name") == name and (not cmds or conn.get("cmd") in cmds)

    return matches


def _broker(conn: Connection, owner: str) -> bool:
    """A worker's unnamed connections, but for its stop listener (a plain SUBSCRIBE)."""
    return owner == "worker" and not conn.get("name") and conn.get("sub") == "0"


# kind -> which connections are of it (a connection and the role of its owner: api, worker, "").
KINDS: dict[str, Callable[[Connection, str], bool]] = {
    "the worker's broker connections": _broker,
    "the worker's store connections": _named("mini-n8n-worker"),
    "the worker's lease heartbeat": _named("mini-n8n-heartbeat"),
    # The outbox publishes each execution event with a script that keeps it (core/replay.py).
    "the outbox's publish connection": _named("mini-n8n-worker", "publish", "evalsha"),
    "the api's relay subscription": _named("mini-n8n-relay"),
    "the api's pool": _named("mini-n8n-api"),
}
EVERY_NORMAL = "every normal connection (CLIENT KILL TYPE normal SKIPME yes)"
EVERY_PUBSUB = "every pub/sub connection (CLIENT KILL TYPE pubsub)"


def connections(client: redis.Redis, roles: dict[int, str]) -> list[tuple[Connection, str]]:
    """Every connection Redis lists, with the role of the process holding it (`roles`: pid ->
    role; "" when none of them holds it, as the test's own)."""
    owners = _socket_owners()
    listed = client.client_list()
    return [(c, _role(owners.get(c["addr"]), roles)) for c in listed]


def kill(client: redis.Redis, kind: str, roles: dict[int, str]) -> int:
    """Kill the connections of `kind` (a key of KINDS, or EVERY_*): how many were killed."""
    if kind == EVERY_NORMAL:
        return int(client.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"))
    if kind == EVERY_PUBSUB:
        return int(client.execute_command("CLIENT", "KILL", "TYPE", "pubsub"))
    matches = KINDS[kind]
    ids = [c["id"] for c, role in connections(client, roles) if matches(c, role)]
    for connection_id in ids:
        client.execute_command("CLIENT", "KILL", "ID", connection_id)
    return len(ids)


def _socket_owners() -> dict[str, int]:
    """Local address "ip:port" of every TCP socket on this host -> the pid holding it."""
    listing = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=True).stdout
    owners = {}
    for line in listing.splitlines():
        fields, pid = line.split(), re.search(r"pid=(\d+)", line)
        if len(fields) >= 4 and pid:
            owners[fields[3]] = int(pid.group(1))
    return owners


def _role(pid: int | None, roles: dict[int, str]) -> str:
    while pid and pid > 1:
        if pid in roles:
            return roles[pid]
        pid = _parent(pid)
    return ""


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])
