"""A hub message's files, as n8n's Chat Hub sends them: inline in the JSON body, each
`{"data": <base64>, "mimeType", "fileName"}` (a `data:` URL prefix is allowed too).

Checked before anything is written: the body's own limit first (the REST door's, api/body_limit.py),
then each file against MINI_N8N_CHAT_FILE_MAX_BYTES and all of a message's against
MINI_N8N_CHAT_FILES_MAX_BYTES (413), and its type against what the agent takes (400): a workflow
agent's Chat Trigger `allowFileUploads` and `allowedFilesMimeTypes`, the hub's own agents text.
An edit's new files are checked the same way (n8n skips that check on edit).

How they reach the agent: a workflow agent gets them as the Chat Trigger's multipart item does
(`binary.data0…` and `json.files`); the hub's own agents read text files inline in the message,
as n8n's generated workflows do ("File: name / Content: …").
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from api.chat_files import allowed
from api.errors import ApiError
from core.hub_records import Attachment
from engine.binary_data import file_type, pretty_bytes

MAX_FILES = 20  # per message: n8n sets none; each one is a hash field and a binary of the item


@dataclass(frozen=True)
class File:
    name: str
    mime_type: str
    data: str  # base64

    @property
    def size(self) -> int:
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    def record(self) -> Attachment:
        return Attachment(self.name, self.mime_type, self.size)


def parse(value: Any, field: str = "attachments") -> list[File]:
    """The body's files, their base64 checked (400 naming what is wrong)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(f, dict) for f in value):
        raise ApiError(400, f'"{field}" must be a list of {{data, mimeType, fileName}} objects')
    if len(value) > MAX_FILES:
        raise ApiError(400, f"A message may have at most {MAX_FILES} files")
    files = []
    for entry in value:
        data, mime, name = entry.get("data"), entry.get("mimeType"), entry.get("fileName")
        if not all(isinstance(v, str) for v in (data, mime, name)) or not name:
            raise ApiError(400, 'Each file needs "data" (base64), a "mimeType" and a "fileName"')
        if data.startswith("data:"):
            data = data.partition(",")[2]
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, f'The data of "{name}" is not base64') from None
        files.append(File(PurePath(name).name or "file", mime.lower().strip(), data))
    return files


def check(files: list[File], patterns: list[str] | None, settings) -> None:
    """Sizes (413) and types (400) against the agent's rules."""
    total = 0
    for file in files:
        if file.size > settings.chat_file_max_bytes:
            raise ApiError(413, f"A file may be at most {settings.chat_file_max_bytes} bytes")
        total += file.size
        if total > settings.chat_files_max_bytes:
            raise ApiError(413, f"The files may be at most {settings.chat_files_max_bytes} bytes")
        if patterns is None:
            raise ApiError(400, "This agent does not accept files")
        if not allowed(file.mime_type, file.name, patterns):
            raise ApiError(400, f"Files of type {file.mime_type} are not allowed for this agent")


def trigger_item(base: dict[str, Any], files: list[File]) -> dict[str, Any]:
    """The Chat Trigger's item for a message with `files`, as its multipart POST builds it."""
    item: dict[str, Any] = {"json": dict(base)}
    if not files:
        return item
    item["json"]["files"], item["binary"] = [], {}
    for index, file in enumerate(files):
        key = f"data{index}"
        binary = {
            "data": file.data,
            "mimeType": file.mime_type,
            "fileName": file.name,
            "fileExtension": PurePath(file.name).suffix.lstrip(".").lower(),
            "fileSize": pretty_bytes(file.size),
        }
        kind = file_type(file.mime_type)
        if kind:
            binary["fileType"] = kind
        item["binary"][key] = binary
        item["json"]["files"].append({**{k: v for k, v in binary.items() if k != "data"},
                                      "binaryKey": key})  # fmt: skip
    return item


def inline(text: str, files: list[File]) -> str:
    """The message with its text files written into it, for the hub's own agents."""
    parts = [text]
    for file in files:
        content = base64.b64decode(file.data).decode("utf-8", "replace")
        parts.append(f"File: {file.name}\nContent:\n{content}")
    return "\n\n".join(p for p in parts if p)
