"""An item's binary file as n8n describes it (its prepareBinaryData): the bytes in base64 with
their MIME type, file name and extension, a size as people read it and a kind of file. Chat
uploads (api/chat_files.py) and the HTTP Request node's file answers are written so."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import PurePath
from typing import Any

FILE_TYPES = (  # n8n's fileTypeFromMimeType, in its order
    ("application/json", "json"),
    ("text/html", "html"),
    ("image/", "image"),
    ("audio/", "audio"),
    ("video/", "video"),
    ("text/", "text"),
    ("application/javascript", "text"),
    ("application/pdf", "pdf"),
)


def pretty_bytes(size: int) -> str:
    """n8n shows sizes with the pretty-bytes package: three significant digits, powers of 1000."""
    units = ["B", "kB", "MB", "GB"]
    value, unit = float(size), 0
    while value >= 1000 and unit < len(units) - 1:
        value, unit = value / 1000, unit + 1
    return f"{float(f'{value:.3g}'):g} {units[unit]}"


def file_type(mime: str) -> str | None:
    return next((kind for prefix, kind in FILE_TYPES if mime.startswith(prefix)), None)


def binary_entry(data: bytes, mime: str, file_name: str | None = None) -> dict[str, Any]:
    """The binary entry of `data`; without a file name, the extension comes from the type."""
    extension = (
        PurePath(file_name).suffix.lstrip(".").lower()
        if file_name
        else (mimetypes.guess_extension(mime) or "").lstrip(".")
    )
    entry: dict[str, Any] = {"data": base64.b64encode(data).decode("ascii"), "mimeType": mime}
    if file_name:
        entry["fileName"] = file_name
    if extension:
        entry["fileExtension"] = extension
    entry["fileSize"] = pretty_bytes(len(data))
    kind = file_type(mime)
    if kind:
        entry["fileType"] = kind
    return entry
