"""Hosts for the fault laboratory: Linux network namespaces, each with one veth pair to a
bridge of the run's own in the root namespace, so the test (in the root namespace) reaches every
host and the hosts reach each other, and a fault can come between two of them.

- Names carry a tag unique to the run (`fl` + 6 hex digits: namespaces `<tag>-<host>`, the
  bridge `<tag>br`, veths `<tag>v<n>`), and the subnet is a /24 of 10.0.0.0/8 that no route of
  this machine uses yet, so parallel or leftover runs never collide. An `unreachable` route for
  the subnet stays under the bridge's own: should the bridge go first, traffic for the hosts
  fails here instead of leaving by the default route. Traffic goes only to the hosts made here.
- A partition is nftables in one host's namespace dropping what it sends to, and what it gets
  from, the other host: silence, as a cut cable or a lost route looks (no reset, no error).
- Latency is a delay proxy (tests/faultlab/delay.py) on the client's host: this kernel has no
  netem (CONFIG_NET_SCH_NETEM), and nftables cannot hold a packet back.

`Network.close` removes everything it made, whatever happened before."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import subprocess
import uuid
from dataclasses import dataclass

TABLE = "faultlab"


def missing() -> str | None:
    """Why this machine cannot make the laboratory's hosts, or None if it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables (scripts/ensure-nftables)")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed ({package})"
    probe = f"fl{uuid.uuid4().hex[:6]}-probe"
    try:  # root in a container may still be refused namespaces
        run("ip", "netns", "add", probe)
    except RuntimeError as err:
        return f"cannot make a network namespace: {err}"
    run("ip", "netns", "del", probe)
    return None


def run(*argv: str, stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Host:
    name: str
    ns: str
    ip: str
    veth: str  # its end in the root namespace, on the bridge

    def argv(self, command: list[str]) -> list[str]:
        """`command` run inside this host."""
        return ["ip", "netns", "exec", self.ns, *command]

    def cut_off(self, peer: Host) -> None:
        """Drop everything between this host and `peer`, both ways (until `mend`)."""
        rules = (
            f"table inet {TABLE} {{\n"
            f"  chain out {{ type filter hook output priority 0; ip daddr {peer.ip} drop; }}\n"
            f"  chain in {{ type filter hook input priority 0; ip saddr {peer.ip} drop; }}\n"
            "}\n"
        )
        run(*self.argv(["nft", "-f", "-"]), stdin=rules)

    def mend(self) -> None:
        with contextlib.suppress(RuntimeError):  # nothing was cut
            run(*self.argv(["nft", "delete", "table", "inet", TABLE]))


class Network:
    def __init__(self) -> None:
        self.tag = f"fl{uuid.uuid4().hex[:6]}"
        self.bridge = f"{self.tag}br"
        self.subnet = _free_subnet()
        self.hosts: list[Host] = []
        self._made: list[list[str]] = []  # how to undo each step taken, newest last

    def open(self) -> Network:
        gateway = f"{self.subnet.network_address + 1}/{self.subnet.prefixlen}"
        self._step(["ip", "route", "add", "unreachable", str(self.subnet), "metric", "4000"],
                   ["ip", "route", "del", "unreachable", str(self.subnet), "metric", "4000"])  # fmt: skip
        self._step(["ip", "link", "add", self.bridge, "type", "bridge"],
                   ["ip", "link", "del", self.bridge])  # fmt: skip
        run("ip", "addr", "add", gateway, "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        return self

    def host(self, name: str) -> Host:
        number = len(self.hosts)
        host = Host(name, f"{self.tag}-{name}", str(self.subnet.network_address + number + 2),
                    f"{self.tag}v{number}")  # fmt: skip
        self._step(["ip", "netns", "add", host.ns], ["ip", "netns", "del", host.ns])
        inner = f"{self.tag}n{number}"
        self._step(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", inner],
                   ["ip", "link", "del", host.veth])  # fmt: skip
        run("ip", "link", "set", inner, "netns", host.ns)
        run("ip", "-n", host.ns, "link", "set", inner, "name", "eth0")
        run("ip", "-n", host.ns, "addr", "add", f"{host.ip}/{self.subnet.prefixlen}", "dev", "eth0")
        run("ip", "-n", host.ns, "link", "set", "eth0", "up")
        run("ip", "-n", host.ns, "link", "set", "lo", "up")
        run("ip", "link", "set", host.veth, "master", self.bridge)
        run("ip", "link", "set", host.veth, "up")
        self.hosts.append(host)
        return host

    def _step(self, do: list[str], undo: list[str]) -> None:
        run(*do)
        self._made.append(undo)

    def close(self) -> None:
        """Undo every step, newest first; a step that fails does not stop the others."""
        while self._made:
            with contextlib.suppress(RuntimeError):
                run(*self._made.pop())


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.0.0.0/8 that no address or route of this machine overlaps."""
    taken = [ipaddress.ip_network(w, strict=False) for w in _routes_and_addresses()]
    for _ in range(100):
        candidate = ipaddress.ip_network(
            f"10.{random.randrange(64, 250)}.{random.randrange(256)}.0/24"
        )
        if not any(candidate.overlaps(t) for t in taken):
            return candidate
    raise RuntimeError("no free /24 in 10.0.0.0/8")


def _routes_and_addresses() -> list[str]:
    words = run("ip", "-4", "route", "show", "table", "all").split()
    words += run("ip", "-4", "-o", "addr", "show").split()
    found = []
    for word in words:
        with contextlib.suppress(ValueError):
            network = ipaddress.ip_network(word, strict=False)
            if network.version == 4:
                found.append(word)
    return found
