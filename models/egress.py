"""Where the HTTP Request nodes may connect: public addresses only, unless the deployment allows
more (MINI_N8N_HTTP_ALLOW_PRIVATE, MINI_N8N_HTTP_ALLOWED_IP_RANGES,
MINI_N8N_HTTP_ALLOWED_HOSTNAMES; core/settings.py).

A workflow's URL comes from its author, a chat user's message or a model's tool call; without
this rule it could reach this deployment's Redis, its api, the host's other services or a
cloud's metadata service (169.254.169.254). So every connection is checked where it is made, in
the client's network backend: the host name is resolved once, every address it resolves to must
be allowed, and the connection goes to one of those very addresses. A redirect opens its own
connection and is checked the same way, and a DNS answer that changes between a check and the
connection cannot pass (there is no second lookup). TLS still names the host, so certificates
are checked against it.

Allowed: an address that is global (Python's `ipaddress.is_global`: not private, loopback,
link-local, shared, reserved, documentation, unspecified) and not multicast, which covers n8n's
default N8N_SSRF_BLOCKED_IP_RANGES and more; an address in an allowed range; any address of an
allowed host name. n8n checks nothing unless N8N_SSRF_PROTECTION_ENABLED is set; here the
check is on unless MINI_N8N_HTTP_ALLOW_PRIVATE=true.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpcore

from engine.http_client import HttpFailure

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolve = Callable[..., list[Any]]  # socket.getaddrinfo's signature


def _networks(text: str) -> tuple[Network, ...]:
    """A comma-separated list of CIDR ranges; ValueError names a bad one."""
    ranges = []
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            ranges.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(
                f"MINI_N8N_HTTP_ALLOWED_IP_RANGES: {entry!r} is not an IP range (CIDR)"
            ) from None
    return tuple(ranges)


def _hostname(name: str) -> str:
    return name.strip().lower().rstrip(".")


@dataclass(frozen=True)
class EgressPolicy:
    allow_private: bool = False
    allowed_ranges: tuple[Network, ...] = ()
    allowed_hostnames: tuple[str, ...] = ()  # lower case; "*.example.com": its subdomains

    @classmethod
    def from_settings(cls, settings: Any) -> EgressPolicy:
        names = tuple(_hostname(h) for h in settings.http_allowed_hostnames.split(",") if h.strip())
        return cls(
            allow_private=settings.http_allow_private,
            allowed_ranges=_networks(settings.http_allowed_ip_ranges),
            allowed_hostnames=names,
        )

    def host_allowed(self, host: str) -> bool:
        """Whether the host name is allowed whatever it resolves to (n8n's HostnameMatcher)."""
        name = _hostname(host)
        for pattern in self.allowed_hostnames:
            if pattern.startswith("*."):
                if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                    return True
            elif name == pattern:
                return True
        return False

    def address_allowed(self, address: Address) -> bool:
        if self.allow_private or any(address in net for net in self.allowed_ranges):
            return True
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
        if mapped is not None:
            return self.address_allowed(mapped)
        return address.is_global and not address.is_multicast

    def addresses(self, host: str, port: int, resolve: Resolve = socket.getaddrinfo) -> list[str]:
        """The addresses to connect to for `host`, each one allowed; HttpFailure otherwise."""
        literal = host.strip("[]")
        try:
            found = resolve(literal, port, type=socket.SOCK_STREAM)
        except socket.gaierror as err:
            code = "EAI_AGAIN" if err.errno == socket.EAI_AGAIN else "ENOTFOUND"
            raise HttpFailure(code, f"getaddrinfo {code} {host}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if self.allow_private or self.host_allowed(host):
            return addresses
        for text in addresses:
            if not self.address_allowed(ipaddress.ip_address(text.split("%")[0])):
                raise blocked(host, text)
        return addresses


def blocked(host: str, address: str) -> HttpFailure:
    """n8n's SsrfBlockedIpError, naming the setting that would allow it."""
    target = address if host.strip("[]") == address else f"'{host}' ({address})"
    return HttpFailure(
        "SSRF_BLOCKED",
        "The request was blocked because it resolves to a restricted IP address",
        f"The target {target} is not allowed. This is a security measure to prevent "
        "Server-Side Request Forgery (SSRF). To reach internal addresses, an operator sets "
        "MINI_N8N_HTTP_ALLOWED_IP_RANGES or MINI_N8N_HTTP_ALLOWED_HOSTNAMES (or "
        "MINI_N8N_HTTP_ALLOW_PRIVATE=true).",
    )


class GuardedBackend(httpcore.SyncBackend):
    """httpcore's sockets, connecting only to addresses the policy allows (the connection goes
    to the address that was checked, never to a name resolved again)."""

    def __init__(self, policy: EgressPolicy, resolve: Resolve = socket.getaddrinfo):
        self.policy = policy
        self.resolve = resolve

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in self.policy.addresses(host, port, self.resolve):
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                error = err  # as create_connection does: the next address, else the last error
        raise error or httpcore.ConnectError(f"no address for {host}")

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise HttpFailure("SSRF_BLOCKED", "Unix sockets are not reachable from HTTP Request nodes")
