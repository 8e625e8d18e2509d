"""Model calls back to back on a kept-alive connection, timed: milliseconds from each call's
start to its first token against a server that Nagles its answers (tests/models/test_sockets.py).
A delayed ACK of ours would add about 40 ms to every call after the first; the test asserts the
connection kept and each request sent in one write, the figures are here.

    python bench/kept_alive_calls.py [CALLS]
"""

from __future__ import annotations

import statistics
import sys

import _common  # noqa: F401  (puts this tree first on the path)

from tests.models.test_sockets import NaglingServer, first_token_ms


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    server = NaglingServer()
    try:
        figures = first_token_ms(server, calls)
    finally:
        server.stop()
    later = figures[1:]
    print(f"first call {figures[0]:.1f} ms (a new connection)")
    print(f"later calls: median {statistics.median(later):.1f} ms, worst {max(later):.1f} ms")
    print(f"connections accepted: {server.accepted} (1: every later call reused it)")


if __name__ == "__main__":
    main()
