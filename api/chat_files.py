"""A chat message sent as multipart/form-data (the widget does this when files are attached),
turned into the item n8n's Chat Trigger outputs:

    {"json": {<form fields>, "files": [{fileName, fileSize, fileType, mimeType, fileExtension,
                                        binaryKey}]},
     "binary": {"data0": {data (base64), mimeType, fileName, fileExtension, fileSize, fileType}}}

Every form field stays the text it came as, `metadata` too: the widget sends it as a JSON string
and n8n keeps it one, so an export's `JSON.parse($json.metadata)` works (sent as JSON, a
message's `metadata` is an object, as in n8n). Limits: MINI_N8N_CHAT_FILE_MAX_BYTES per file
(5 MiB) and MINI_N8N_CHAT_FILES_MAX_BYTES for all files of one message (10 MiB) -> 413; the whole
body stays under MINI_N8N_MAX_BODY_BYTES.
A file whose type `allowedFilesMimeTypes` does not list -> 400.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import PurePath
from typing import Any

from flask import Request
from werkzeug.datastructures import FileStorage

from api.errors import ApiError
from engine.binary_data import file_type, pretty_bytes


def multipart_item(request: Request, settings, patterns: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = request.form.to_dict()
    item: dict[str, Any] = {"json": fields}
    parts = [f for _, f in request.files.items(multi=True) if f.filename or f.content_length]
    if not parts:
        return item
    total = 0
    fields["files"], item["binary"] = [], {}
    for index, part in enumerate(parts):
        # From its start: a request routed again (api/webhooks.py) reads its files a second time.
        part.stream.seek(0)
        data = part.stream.read(settings.chat_file_max_bytes + 1)
        if len(data) > settings.chat_file_max_bytes:
            raise ApiError(413, f"A file may be at most {settings.chat_file_max_bytes} bytes")
        total += len(data)
        if total > settings.chat_files_max_bytes:
            raise ApiError(413, f"The files may be at most {settings.chat_files_max_bytes} bytes")
        binary = _binary(part, data)
        if not allowed(binary["mimeType"], binary["fileName"], patterns):
            raise ApiError(400, f"Files of type {binary['mimeType']} are not allowed")
        key = f"data{index}"
        item["binary"][key] = binary
        info = {k: v for k, v in binary.items() if k != "data"}
        fields["files"].append({**info, "binaryKey": key})
    return item


def _binary(part: FileStorage, data: bytes) -> dict[str, Any]:
    return binary_data(part.filename, part.mimetype, base64.b64encode(data).decode("ascii"))


def binary_data(filename: str | None, mime: str | None, data: str) -> dict[str, Any]:
    """n8n's binary data of a file (`data`: its content in base64)."""
    name = PurePath(filename or "file").name or "file"
    mime = mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
    size = len(data) * 3 // 4 - data[-2:].count("=")
    binary = {
        "data": data,
        "mimeType": mime,
        "fileName": name,
        "fileExtension": PurePath(name).suffix.lstrip(".").lower(),
        "fileSize": pretty_bytes(size),
    }
    kind = file_type(mime)
    if kind:
        binary["fileType"] = kind
    return binary


def allowed(mime: str, name: str, patterns: list[str]) -> bool:
    """Whether a file of type `mime` named `name` matches one of the MIME patterns
    (`image/*`, `*`) or extensions (`.pdf`) of a chat's allowedFilesMimeTypes."""
    mime, name = mime.lower(), name.lower()
    for pattern in patterns:
        if pattern in ("*", "*/*") or pattern == mime:
            return True
        if pattern.endswith("/*") and mime.startswith(pattern[:-1]):
            return True
        if pattern.startswith(".") and name.endswith(pattern):
            return True
    return False


def reply_files(files: Any, settings, patterns: list[str]) -> int:
    """A reply's files over the chat socket (`[{name, type, data: a data URL}]`), held to the
    limits and types of files POSTed as multipart: ApiError if they break one; else how many
    characters their data URLs take."""
    if files is None:
        return 0
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise ApiError(400, '"files" must be a list of {name, type, data} objects.')
    total = characters = 0
    for file in files:
        name, mime, data = file.get("name"), file.get("type"), file.get("data")
        if not all(isinstance(v, str) for v in (name, mime, data)):
            raise ApiError(400, 'Each file needs a "name", a "type" and "data" (a data URL).')
        size, characters = _data_url_size(data), characters + len(data)
        if size > settings.chat_file_max_bytes:
            raise ApiError(413, f"A file may be at most {settings.chat_file_max_bytes} bytes")
        total += size
        if total > settings.chat_files_max_bytes:
            raise ApiError(413, f"The files may be at most {settings.chat_files_max_bytes} bytes")
        if not allowed(mime, name, patterns):
            raise ApiError(400, f"Files of type {mime} are not allowed")
    return characters


def reply_binary(files: Any) -> dict[str, Any]:
    """A reply's files over the chat socket (checked by `reply_files`) as n8n's chat service
    keeps them: binary data `data_0`, `data_1`, ..., the base64 after a data URL's `base64,`."""
    if not isinstance(files, list):
        return {}
    return {
        f"data_{index}": binary_data(file["name"], file["type"], _base64_of(file["data"]))
        for index, file in enumerate(files)
    }


def _base64_of(data: str) -> str:
    return data.split("base64,", 1)[1] if "base64," in data else data


def _data_url_size(data: str) -> int:
    """The size of what a base64 data URL holds, without decoding it."""
    _, _, payload = data.partition(",")
    return len(payload) * 3 // 4
