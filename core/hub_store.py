"""Chat Hub conversations in Redis: each user's conversations, each conversation's message tree
and attachments, and the one reply that may run in it at a time.

Keys (core/keys.py): `hub:conversation:<sid>` (the record), `…:messages` (HASH id -> message),
`…:text:<mid>` (an AI message's text while it streams, core/hub_stream.py), `…:files` (HASH
"<mid>:<index>" -> base64), `…:active` (the running reply), `…:memory` (the memory lists runs
were given), and per user `hub:user:<uid>:conversations` (ZSET by lastMessageAt, the sidebar).

A conversation belongs to its owner: every read here takes the user and answers None for
another's, so a caller cannot forget the check. Bounds (core/hub_settings.py): conversations per
user, messages per conversation; a refused write changes nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from core.clock import now_ms
from core.hub_batch import Batch
from core.hub_records import AI, HubMessage, HubSession, MessageStatus
from core.hub_settings import HubSettings
from core.keys import Keys
from core.redis_clients import is_cluster, script

# A claim on a conversation's one running reply, taken before its execution exists (the
# create, the task): it lasts this long unless the execution's id replaces it.
CLAIM_SECONDS = 120
# How many times an optimistic update (WATCH) tries before it gives up.
UPDATE_ATTEMPTS = 20

# KEYS: active, then memory lists to write. ARGV: token, seconds, expected current value ('' =
# none), then per list: its ttl, how many elements, the elements (oldest first). Takes the
# claim when the key holds what the caller saw (nothing, or a finished execution's id), and
# with it writes each list anew: the claim is what lets a reply write its memory.
_CLAIM = """
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[3] then return current end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
local at = 4
for i = 2, #KEYS do
  local ttl, count = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  redis.call('DEL', KEYS[i])
  if count > 0 then
    redis.call('LPUSH', KEYS[i], unpack(ARGV, at + 2, at + 1 + count))
    if ttl > 0 then redis.call('EXPIRE', KEYS[i], ttl) end
  end
  at = at + 2 + count
end
return ''
"""
# KEYS: active. ARGV: expected, new value ('' = delete). Compare and set.
_SWAP = """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""


def _pairs(reply: Any) -> dict[str, Any]:
    """A hash's fields as a dict, from a reply of either protocol (a flat list in RESP2)."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


@dataclass(frozen=True)
class MemoryWrite:
    """A memory list to hold `elements` (stored messages, oldest first) and nothing else."""

    key: str
    ttl: int
    elements: list[str]

    def rewrite(self, client: Any) -> None:
        pipe = client.pipeline(transaction=True)
        pipe.delete(self.key)
        if self.elements:
            pipe.lpush(self.key, *self.elements)  # oldest first: the newest lands at 0
            if self.ttl > 0:
                pipe.expire(self.key, self.ttl)
        pipe.execute()


class HubLimit(Exception):
    """A bound of core/hub_settings.py would be passed: nothing was written."""


class IdTaken(Exception):
    """A message id the client chose is already in the conversation: nothing was written."""


@dataclass
class Lookup:
    """What a message needs to know of its conversation, read in one round trip."""

    session: HubSession | None  # the user's conversation, if it exists
    taken: bool  # the id is another user's conversation
    messages: dict[str, HubMessage] = field(default_factory=dict)
    conversations: int = 0  # how many the user has
    also: list[Any] = field(default_factory=list)  # the values of the keys asked beside


class ConversationStore:
    def __init__(self, client: Any, keys: Keys, settings: HubSettings):
        self.client = client
        self.keys = keys
        self.settings = settings
        self.cluster = is_cluster(client)
        self._claim = script(client, _CLAIM)
        self._swap = script(client, _SWAP)

    # --- conversations ----------------------------------------------------------------------
    def get(self, session_id: str, user_id: str) -> HubSession | None:
        """The user's conversation; None when there is none, or it is another user's."""
        raw = self.client.get(self.keys.hub_conversation(session_id))
        if raw is None:
            return None
        session = HubSession.from_json(raw)
        return session if session.owner_id == user_id else None

    def lookup(self, session_id: str, user_id: str, also: list[str] | None = None) -> Lookup:
        """The conversation, its messages and the user's count, with the values of the string
        keys `also` (a workflow the message goes to), in one round trip."""
        batch = Batch(self.client)
        batch.call("GET", self.keys.hub_conversation(session_id))
        batch.call("HGETALL", self.keys.hub_messages(session_id))
        batch.call("ZCARD", self.keys.hub_conversations(user_id))
        for key in also or []:
            batch.call("GET", key)
        raw, messages, count, *values = batch.execute()
        session = HubSession.from_json(raw) if raw is not None else None
        if session is not None and session.owner_id != user_id:
            return Lookup(None, True)
        found = {mid: HubMessage.from_json(m) for mid, m in _pairs(messages).items()}
        return Lookup(session, False, found, int(count), values)

    def queue_save(self, batch: Batch, session: HubSession, create: bool = False) -> int:
        """Store the conversation (`create`: a new one, listed for its owner) in `batch`: the
        index of the reply that says it was written."""
        session.updated_at = now_ms()
        key = self.keys.hub_conversation(session.id)
        index = batch.call("SET", key, session.to_json(), "NX" if create else "XX")
        batch.call("ZADD", self.keys.hub_conversations(session.owner_id),
                   *(() if create else ("XX",)), session.last_message_at, session.id)  # fmt: skip
        return index

    def queue_message(self, batch: Batch, message: HubMessage, files: list[str]) -> int:
        """A new message (and its files) in `batch`: its reply's index (0: the id was taken)."""
        index = batch.call("HSETNX", self.keys.hub_messages(message.session_id), message.id,
                           message.to_json())  # fmt: skip
        if files:
            named = [w for i, data in enumerate(files) for w in (f"{message.id}:{i}", data)]
            batch.call("HSET", self.keys.hub_files(message.session_id), *named)
        return index

    def queue_hand_over(self, batch: Batch, session_id: str, held: str, execution_id: str) -> int:
        return batch.script(self._swap, [self.keys.hub_active(session_id)], [held, execution_id])

    def queue_release(self, batch: Batch, session_id: str, held: str) -> int:
        return batch.script(self._swap, [self.keys.hub_active(session_id)], [held, ""])

    def create(self, session: HubSession) -> bool:
        """Store a new conversation; False if its id is taken (by this user or another)."""
        index = self.keys.hub_conversations(session.owner_id)
        if self.client.zcard(index) >= self.settings.max_conversations:
            raise HubLimit(
                f"You have {self.settings.max_conversations} conversations, the most one user "
                "may keep: delete some to start a new one."
            )
        if not self.client.set(self.keys.hub_conversation(session.id), session.to_json(), nx=True):
            return False
        self.client.zadd(index, {session.id: session.last_message_at})
        return True

    def save(self, session: HubSession) -> bool:
        """Store a change; False when the conversation is gone (deleted meanwhile: it stays
        gone)."""
        session.updated_at = now_ms()
        key = self.keys.hub_conversation(session.id)
        return bool(self.client.set(key, session.to_json(), xx=True))

    def page(
        self, user_id: str, limit: int, cursor: str | None = None
    ) -> tuple[list[HubSession], bool]:
        """Up to `limit` conversations after `cursor` (a conversation id), newest message first;
        and whether more follow. An unknown cursor starts from the top."""
        index = self.keys.hub_conversations(user_id)
        start = 0
        if cursor:
            rank = self.client.zrevrank(index, cursor)
            start = 0 if rank is None else rank + 1
        ids = self.client.zrevrange(index, start, start + limit)
        more = len(ids) > limit
        ids = ids[:limit]
        raws = self.client.mget([self.keys.hub_conversation(i) for i in ids]) if ids else []
        sessions = [HubSession.from_json(r) for r in raws if r]
        return [s for s in sessions if s.owner_id == user_id], more

    def all_ids(self, user_id: str) -> list[str]:
        return self.client.zrevrange(self.keys.hub_conversations(user_id), 0, -1)

    def delete(self, session: HubSession) -> None:
        """The conversation, its messages, texts, attachments, events and the memory lists its
        runs were given; then its place in the owner's list."""
        sid = self.keys
        memory = list(self.client.smembers(sid.hub_memory(session.id)))
        texts = [
            sid.hub_text(session.id, m) for m in self.client.hkeys(sid.hub_messages(session.id))
        ]
        own = [
            sid.hub_conversation(session.id),
            sid.hub_messages(session.id),
            sid.hub_files(session.id),
            sid.hub_seq(session.id),
            sid.hub_events(session.id),
            sid.hub_active(session.id),
            sid.hub_memory(session.id),
            *texts,
        ]
        self.client.delete(*own)  # one slot: the conversation's hash tag
        for key in memory:  # chat memory keeps n8n's names: a key per command in a cluster
            self.client.delete(key)
        self.client.zrem(self.keys.hub_conversations(session.owner_id), session.id)

    def remember_memory(self, session_id: str, key: str) -> None:
        """A memory list a run of this conversation was given, deleted with it."""
        self.client.sadd(self.keys.hub_memory(session_id), key)

    # --- messages ---------------------------------------------------------------------------
    def messages(self, session_id: str) -> dict[str, HubMessage]:
        """Every message of the tree, by id; a streaming AI message with its text so far."""
        raws = self.client.hgetall(self.keys.hub_messages(session_id))
        found = {mid: HubMessage.from_json(raw) for mid, raw in raws.items()}
        streaming = [m for m in found.values() if m.type == AI and not m.content]
        if streaming:
            texts = self.client.mget([self.keys.hub_text(session_id, m.id) for m in streaming])
            for message, text in zip(streaming, texts, strict=True):
                if text:
                    message.content = text
        return found

    def message(self, session_id: str, message_id: str) -> HubMessage | None:
        raw = self.client.hget(self.keys.hub_messages(session_id), message_id)
        if raw is None:
            return None
        message = HubMessage.from_json(raw)
        if message.type == AI and not message.content:
            message.content = self.client.get(self.keys.hub_text(session_id, message_id)) or ""
        return message

    def add(self, session: HubSession, message: HubMessage, files: list[str] | None = None) -> None:
        """A new message (and its attachments' data, base64) in the tree; the conversation's
        lastMessageAt moves to it."""
        sid = session.id
        if self.client.hlen(self.keys.hub_messages(sid)) >= self.settings.max_messages:
            raise HubLimit(
                f"This conversation has {self.settings.max_messages} messages, the most one may "
                "keep: start a new one."
            )
        if not self.client.hsetnx(self.keys.hub_messages(sid), message.id, message.to_json()):
            raise IdTaken(f"The message id {message.id} is taken.")
        if files:
            named = {f"{message.id}:{index}": data for index, data in enumerate(files)}
            self.client.hset(self.keys.hub_files(sid), mapping=named)
        self.touch(session, message.created_at)

    def touch(self, session: HubSession, at: int) -> None:
        session.last_message_at = max(session.last_message_at, at)
        if self.save(session):
            self.client.zadd(self.keys.hub_conversations(session.owner_id),
                             {session.id: session.last_message_at}, xx=True)  # fmt: skip

    def change(self, session_id: str, user_id: str,
               change: Callable[[HubSession], bool]) -> HubSession | None:  # fmt: skip
        """Change the user's conversation (`change` returns False to leave it); optimistic, so
        a rename and a title or a reply's end never overwrite each other. None: not theirs."""
        key = self.keys.hub_conversation(session_id)
        for _ in range(UPDATE_ATTEMPTS):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(key)
                    raw = pipe.get(key)
                    session = HubSession.from_json(raw) if raw is not None else None
                    if session is None or session.owner_id != user_id:
                        return None
                    if not change(session):
                        return session
                    session.updated_at = now_ms()
                    pipe.multi()
                    pipe.set(key, session.to_json(), xx=True)
                    pipe.execute()
                    return session
                except redis.WatchError:
                    continue
        raise redis.RedisError(f"conversation {session_id} kept changing; try again")

    def update(
        self, session_id: str, message_id: str, change: Callable[[HubMessage], bool]
    ) -> HubMessage | None:
        """Change a stored message (`change` returns False to leave it); optimistic, so a
        concurrent writer (a stop beside the relay) is never overwritten."""
        key = self.keys.hub_messages(session_id)
        for _ in range(UPDATE_ATTEMPTS):
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    pipe.watch(key)
                    raw = pipe.hget(key, message_id)
                    if raw is None:
                        return None
                    message = HubMessage.from_json(raw)
                    if not change(message):
                        return message
                    message.updated_at = now_ms()
                    pipe.multi()
                    pipe.hset(key, message_id, message.to_json())
                    pipe.execute()
                    return message
                except redis.WatchError:
                    continue
        raise redis.RedisError(f"message {message_id} kept changing; try again")

    def finish(self, session_id: str, message_id: str, status: MessageStatus,
               text: str | None = None) -> HubMessage | None:  # fmt: skip
        """A streaming AI message's end: its text (what streamed, or `text`) into the record,
        its streaming text key gone. A message already ended (a stop came first) keeps its
        status."""
        text_key = self.keys.hub_text(session_id, message_id)
        streamed = "" if text is not None else self.client.get(text_key) or ""

        def change(message: HubMessage) -> bool:
            message.content = text if text is not None else (message.content or streamed)
            if message.status in (MessageStatus.RUNNING, MessageStatus.WAITING):
                message.status = status
            return True

        message = self.update(session_id, message_id, change)
        self.client.delete(text_key)
        return message

    def file(self, session_id: str, message_id: str, index: int) -> str | None:
        return self.client.hget(self.keys.hub_files(session_id), f"{message_id}:{index}")

    # --- the one running reply --------------------------------------------------------------
    def active(self, session_id: str) -> str:
        """What holds the conversation's running reply: an execution id, a claim, or ''."""
        return self.client.get(self.keys.hub_active(session_id)) or ""

    def claim(self, session_id: str, seen: str = "",
              memory: list[MemoryWrite] | None = None) -> tuple[str | None, str]:  # fmt: skip
        """Take the conversation's running reply: (a claim token, '') if it was free (or still
        held what the caller saw: a finished execution), else (None, what holds it). With it,
        `memory`'s lists are written anew (in the same step on one server; after it in a
        cluster, whose lists are in other slots)."""
        token = "claim-" + secrets.token_hex(8)
        together = [] if self.cluster else memory or []
        keys = [self.keys.hub_active(session_id), *(m.key for m in together)]
        args: list[Any] = [token, CLAIM_SECONDS, seen]
        for write in together:
            args += [write.ttl, len(write.elements), *write.elements]
        held = self._claim(keys=keys, args=args)
        if held != "":
            return None, held
        if self.cluster:
            for write in memory or []:
                write.rewrite(self.client)
        return token, ""

    def hand_over(self, session_id: str, held: str, execution_id: str) -> bool:
        """The claim `held` becomes its execution's id (which ends it with the reply)."""
        return bool(self._swap(keys=[self.keys.hub_active(session_id)], args=[held, execution_id]))

    def release(self, session_id: str, held: str) -> bool:
        return bool(self._swap(keys=[self.keys.hub_active(session_id)], args=[held, ""]))
