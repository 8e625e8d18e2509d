"""A network of its own for the page tests' Chromium.

Chromium watches this machine's addresses and links (netlink), and when one comes or goes it
fails every connection it is still opening with `net::ERR_NETWORK_CHANGED`. The fault laboratory
(tests/faultlab) and the compose tests (podman's bridge) add and remove links while page tests
run beside them on other xdist processes, so a page now and then lost a module or a fetch for no
fault of the code under test.

As root, the run's Chromium starts in a network namespace made here, with only a loopback, where
no other test's links are seen. It reaches the deployments on this machine's loopback through a
SOCKS5 proxy (Playwright's `proxy` setting, loopback included): the proxy listens on one port
number both inside that namespace (for Chromium) and in ours (for Playwright's driver, which makes
`route.fetch` requests itself, through the same setting), and every connection it forwards is made
from ours. Without root,
Chromium runs on the machine's network: no test changes it there (faultlab and podman need root).

`BrowserNetwork.close` removes the namespace and stops the proxy, whatever happened before."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

CLONE_NEWNET = 0x40000000
SOCKS_VERSION = 5
NO_AUTHENTICATION = 0
CONNECT = 1
IPV4, DOMAIN, IPV6 = 1, 3, 4
SUCCEEDED, HOST_UNREACHABLE, COMMAND_NOT_SUPPORTED = 0, 4, 7


def possible() -> bool:
    """Whether this machine lets the run give Chromium a namespace (root, iproute2, nsenter)."""
    return os.geteuid() == 0 and all(shutil.which(tool) for tool in ("ip", "nsenter"))


class BrowserNetwork:
    """A namespace with a loopback only, the proxy into ours, and a launcher for Chromium."""

    def __init__(self, chromium: str) -> None:
        self.namespace = f"mnbr{uuid.uuid4().hex[:6]}"
        _run("ip", "netns", "add", self.namespace)
        self._folder = tempfile.TemporaryDirectory(prefix="mini-n8n-browser-")
        try:
            _run("ip", "-n", self.namespace, "link", "set", "lo", "up")
            self._servers = _listen_twice(f"/run/netns/{self.namespace}")
            self.executable = self._launcher(chromium)
        except BaseException:
            self.close()
            raise
        for server in self._servers:
            threading.Thread(
                target=_serve, args=(server,), name="browser-socks", daemon=True
            ).start()

    @property
    def proxy(self) -> dict[str, str]:
        """Playwright's `proxy` launch setting: every URL, loopback too, through the proxy."""
        port = self._servers[0].getsockname()[1]
        return {"server": f"socks5://127.0.0.1:{port}"}

    def _launcher(self, chromium: str) -> str:
        """A script that runs Chromium inside the namespace (Playwright takes one executable)."""
        path = Path(self._folder.name) / "chromium"
        path.write_text(
            f'#!/bin/sh\nexec nsenter --net=/run/netns/{self.namespace} -- "{chromium}" "$@"\n'
        )
        path.chmod(0o755)
        return str(path)

    def close(self) -> None:
        for server in getattr(self, "_servers", ()):
            with contextlib.suppress(OSError):
                server.close()
        with contextlib.suppress(RuntimeError):
            _run("ip", "netns", "del", self.namespace)
        self._folder.cleanup()


def _listen_twice(namespace: str, tries: int = 20) -> tuple[socket.socket, socket.socket]:
    """Listening sockets on one port number, on the namespace's loopback and on ours: a free
    port there may be taken here, so another is tried."""
    for _ in range(tries):
        there = _listen_in(namespace, 0)
        try:
            here = socket.create_server(("127.0.0.1", there.getsockname()[1]))
        except OSError:
            there.close()
            continue
        return there, here
    raise RuntimeError(f"no port free both in {namespace} and here after {tries} tries")


def _listen_in(namespace: str, port: int) -> socket.socket:
    """A listening socket on the namespace's loopback; only this thread enters it, and only
    while the socket is made (a socket belongs to the namespace it was made in)."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/thread-self/ns/net") as home, open(namespace) as there:
        _setns(libc, there.fileno())
        try:
            return socket.create_server(("127.0.0.1", port))
        finally:
            _setns(libc, home.fileno())


def _serve(server: socket.socket) -> None:
    while True:
        try:
            client, _ = server.accept()
        except OSError:  # closed
            return
        threading.Thread(target=_relay, args=(client,), daemon=True).start()


def _setns(libc: ctypes.CDLL, fd: int) -> None:
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


def _relay(client: socket.socket) -> None:
    """One SOCKS5 CONNECT (RFC 1928, no authentication), then bytes both ways until both close."""
    with client:
        try:
            target = _handshake(client)
        except (OSError, ValueError):
            return
        if target is None:
            return
        with target:
            other = threading.Thread(target=_pump, args=(target, client), daemon=True)
            other.start()
            _pump(client, target)
            other.join()


def _handshake(client: socket.socket) -> socket.socket | None:
    version, count = _read(client, 2)
    methods = _read(client, count)
    if version != SOCKS_VERSION or NO_AUTHENTICATION not in methods:
        client.sendall(bytes([SOCKS_VERSION, 0xFF]))
        return None
    client.sendall(bytes([SOCKS_VERSION, NO_AUTHENTICATION]))
    _, command, _, kind = _read(client, 4)
    if kind == IPV4:
        host = socket.inet_ntop(socket.AF_INET, _read(client, 4))
    elif kind == IPV6:
        host = socket.inet_ntop(socket.AF_INET6, _read(client, 16))
    else:
        host = _read(client, _read(client, 1)[0]).decode("idna")
    (port,) = struct.unpack("!H", _read(client, 2))
    if command != CONNECT:
        _reply(client, COMMAND_NOT_SUPPORTED)
        return None
    try:
        target = socket.create_connection((host, port))
    except OSError:
        _reply(client, HOST_UNREACHABLE)
        return None
    _reply(client, SUCCEEDED)
    return target


def _reply(client: socket.socket, status: int) -> None:
    client.sendall(bytes([SOCKS_VERSION, status, 0, IPV4, 0, 0, 0, 0, 0, 0]))


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ValueError("the client closed during the SOCKS handshake")
        data += chunk
    return data


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` ends, then end `sink`'s sending side (a half-close, as TCP allows)."""
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
