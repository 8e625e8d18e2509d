"""A model answer's body as it arrives: its framing (chunks, a length, the connection's end) and
its content coding (gzip, deflate), each fed the bytes of one network read at a time. Errors are
httpx's own exceptions, as the rest of the client's (models/http.py)."""

from __future__ import annotations

import zlib
from typing import Any

import httpx

MAX_CHUNK_LINE = 4096


def framing(method: str, status: int, fields: dict[bytes, bytes]) -> Any:
    if method == "HEAD" or status in (204, 304):
        return Length(0)
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        return Chunked()
    length = fields.get(b"content-length")
    if length is not None:
        if not length.isdigit():
            raise httpx.RemoteProtocolError("a malformed Content-Length")
        return Length(int(length))
    return UntilClose()


def decoder(encoding: bytes) -> Any:
    encoding = encoding.strip().lower()
    if encoding in (b"", b"identity"):
        return bytes
    if encoding in (b"gzip", b"x-gzip"):
        return Zlib(zlib.MAX_WBITS | 16).feed
    if encoding == b"deflate":
        return Zlib(zlib.MAX_WBITS).feed
    raise httpx.DecodingError(f"unsupported content-encoding {encoding.decode('latin-1')!r}")


class Zlib:
    """gzip, or deflate as servers send it: zlib-wrapped or (some of them) raw."""

    def __init__(self, wbits: int):
        self._wbits = wbits
        self._inflate = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._inflate.decompress(data)
        except zlib.error:
            if self._started or self._wbits != zlib.MAX_WBITS:
                raise httpx.DecodingError("the body could not be decompressed") from None
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._inflate.decompress(data)
        self._started = True
        return out


class Length:
    def __init__(self, length: int):
        self.left = length
        self.done = length == 0

    def feed(self, data: bytes) -> bytes:
        piece = data[: self.left]
        self.left -= len(piece)
        self.done = self.left == 0
        return piece


class UntilClose:
    def __init__(self) -> None:
        self.done = False

    def feed(self, data: bytes) -> bytes:
        return data


class Chunked:
    """Transfer-Encoding: chunked, fed as it arrives: the chunks' data, without their framing."""

    def __init__(self) -> None:
        self.done = False
        self._buffer = b""
        self._left = 0  # of the current chunk's data
        self._state = "size"

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer + data if self._buffer else data
        out = []
        while not self.done:
            if self._state == "data":
                if not buffer:
                    break
                piece = buffer[: self._left]
                out.append(piece)
                buffer = buffer[len(piece) :]
                self._left -= len(piece)
                if self._left:
                    break
                self._state = "end"
                continue
            if self._state == "end":  # the CRLF after a chunk's data
                if len(buffer) < 2:
                    break
                if buffer[:2] != b"\r\n":
                    raise httpx.RemoteProtocolError("a malformed chunk in the answer")
                buffer = buffer[2:]
                self._state = "size"
                continue
            line_end = buffer.find(b"\r\n")
            if line_end < 0:
                if len(buffer) > MAX_CHUNK_LINE:
                    raise httpx.RemoteProtocolError("a malformed chunk in the answer")
                break
            line, buffer = buffer[:line_end], buffer[line_end + 2 :]
            if self._state == "size":
                self._left = _chunk_size(line)
                self._state = "data" if self._left else "trailer"
            elif not line:  # the empty line after the trailer: the body's end
                self.done = True
        self._buffer = buffer
        return b"".join(out)


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    if not size or len(size) > 16 or size.strip(b"0123456789abcdefABCDEF"):
        raise httpx.RemoteProtocolError("a malformed chunk size in the answer")
    return int(size, 16)
