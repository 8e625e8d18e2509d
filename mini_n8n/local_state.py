"""What `mini-n8n up` remembers in its state folder, and how the other commands find its Redis.

`up` keeps `./.mini-n8n/state.json` (beside the embedded Redis's AOF data in `./.mini-n8n/redis/`):

    {"version": 1, "redis_url": "redis://127.0.0.1:40123/0", "embedded_redis_port": 40123,
     "api_key": "...", "key_prefix": "", "memory_key_prefix": "chat:"}

`redis_url` is the Redis the last `up` in this folder used, `embedded_redis_port` the port its
embedded valkey-server keeps across restarts (while free), `api_key` the generated REST/editor key
kept across restarts. The file is private to its owner (mode 0600): it holds the key.

Which Redis a command uses, in this order:
  1. `REDIS_URL`, when it is set;
  2. else the local deployment's: `redis_url` of ./.mini-n8n/state.json (key prefixes too, unless
     MINI_N8N_KEY_PREFIX / MINI_N8N_MEMORY_KEY_PREFIX are set);
  3. else none: a command that needs Redis stops and says so. No Redis that merely answers on
     6379 is ever used unasked.
Every command says on stderr which Redis it reads.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from core.settings import Settings

STATE_DIR = Path(".mini-n8n")
STATE_FILE = STATE_DIR / "state.json"
STATE_VERSION = 1


class CliError(Exception):
    """A failure the command line reports as one line, `mini-n8n: <message>`, and exit `code`."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclass
class LocalState:
    redis_url: str | None = None
    embedded_redis_port: int | None = None
    api_key: str | None = None
    key_prefix: str | None = None
    memory_key_prefix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, **dataclasses.asdict(self)}


def load_state(path: Path = STATE_FILE) -> LocalState | None:
    """The state `up` left here; None when there is none. A damaged file is a CliError."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise CliError(
            f"cannot read {path}: {err} (delete it; `mini-n8n up` writes it again)"
        ) from None
    if not isinstance(data, dict):
        raise CliError(f"{path} is not a JSON object (delete it; `mini-n8n up` writes it again)")
    port = data.get("embedded_redis_port")

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    return LocalState(
        redis_url=text("redis_url") or None,
        embedded_redis_port=port if isinstance(port, int) and 0 < port < 65536 else None,
        api_key=text("api_key") or None,
        key_prefix=text("key_prefix"),
        memory_key_prefix=text("memory_key_prefix"),
    )


def save_state(state: LocalState, path: Path = STATE_FILE) -> None:
    """Write atomically, readable by its owner only (it holds the api key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(state.to_json(), out, indent=2)
        out.write("\n")
    os.replace(tmp, path)


@dataclass(frozen=True)
class RedisChoice:
    """The Redis a command uses and why: `settings.redis_url` is it, `source` says where from."""

    settings: Settings
    source: str  # "REDIS_URL" or the state file's path
    from_state: bool

    @property
    def url(self) -> str:
        return self.settings.redis_url

    def describe(self) -> str:
        return f"Redis: {safe_url(self.url)} ({self.source})"


def choose_redis(state_path: Path = STATE_FILE) -> RedisChoice | None:
    """REDIS_URL when set, else the local deployment's (the state file), else None."""
    settings = Settings.from_env()
    if os.environ.get("REDIS_URL"):
        return RedisChoice(settings, "REDIS_URL", from_state=False)
    state = load_state(state_path)
    if state is None or not state.redis_url:
        return None
    changes: dict[str, Any] = {"redis_url": state.redis_url}
    if not os.environ.get("CELERY_BROKER_URL"):
        changes["broker_url"] = state.redis_url
    if "MINI_N8N_KEY_PREFIX" not in os.environ and state.key_prefix is not None:
        changes["key_prefix"] = state.key_prefix
    if "MINI_N8N_MEMORY_KEY_PREFIX" not in os.environ and state.memory_key_prefix is not None:
        changes["memory_key_prefix"] = state.memory_key_prefix
    source = f"the local deployment's, from {state_path}"
    return RedisChoice(dataclasses.replace(settings, **changes), source, from_state=True)


def no_redis_message(state_path: Path = STATE_FILE) -> str:
    return (
        f"no Redis to use: REDIS_URL is not set and there is no {state_path} here "
        "(start `mini-n8n up` in this folder, or run this in the folder where it runs, "
        "or set REDIS_URL)"
    )


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))
