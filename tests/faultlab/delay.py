"""A TCP proxy that delays what it carries, each way: the laboratory's latency between two hosts
(this kernel has no netem). Run on the client's host, in front of the server:

    python -m tests.faultlab.delay 127.0.0.1:6379 10.x.y.2:6379 --delay-ms 100 --jitter-ms 50

It forwards at once until SIGUSR1 turns the delay on (SIGUSR2 turns it off): then every chunk
read is written out `delay ± jitter` ms later (uniform), never before the chunk read before it,
so a stream keeps its order. A close or a reset on one side closes the other."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import time

State = dict[str, float]


def _address(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def _delay(state: State) -> float:
    if not state["on"]:
        return 0.0
    spread = state["jitter"]
    return max(state["delay"] + random.uniform(-spread, spread), 0.0) / 1000


async def _carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: State):
    """Read one side, write the other later; ends at EOF or an error on either side."""
    queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

    async def take() -> None:
        try:
            while data := await reader.read(65536):
                queue.put_nowait((time.monotonic() + _delay(state), data))
        except OSError:
            pass
        queue.put_nowait(None)

    taking = asyncio.ensure_future(take())
    try:
        while (item := await queue.get()) is not None:
            due, data = item
            await asyncio.sleep(max(due - time.monotonic(), 0))
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        taking.cancel()
        writer.close()


async def _serve(target: tuple[str, int], state: State, client_r, client_w) -> None:
    try:
        server_r, server_w = await asyncio.open_connection(*target)
    except OSError:
        client_w.close()
        return
    await asyncio.gather(_carry(client_r, server_w, state), _carry(server_r, client_w, state))


async def main(listen: str, target: str, delay_ms: float, jitter_ms: float) -> None:
    state: State = {"on": 0.0, "delay": delay_ms, "jitter": jitter_ms}
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, state.__setitem__, "on", 1.0)
    loop.add_signal_handler(signal.SIGUSR2, state.__setitem__, "on", 0.0)
    server = await asyncio.start_server(
        lambda r, w: _serve(_address(target), state, r, w), *_address(listen)
    )
    print(f"delay proxy listening on {listen} for {target}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("listen")
    parser.add_argument("target")
    parser.add_argument("--delay-ms", type=float, default=100)
    parser.add_argument("--jitter-ms", type=float, default=50)
    options = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(options.listen, options.target, options.delay_ms, options.jitter_ms))
