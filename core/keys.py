"""Every Redis key mini-n8n uses is built here, and only here.

| key                              | type    | holds                                                     |
|----------------------------------|---------|-----------------------------------------------------------|
| <memoryPrefix><sessionKey>       | LIST    | chat memory of a public chat, newest first (LangChain     |
|                                  |         | message JSON); memoryPrefix defaults to "chat:"           |
| memory:<workflowId>:<sessionKey> | LIST    | chat memory of a protected chat (basic auth, or not       |
|                                  |         | public): private to its workflow                          |
| workflow:<id>                    | STRING  | workflow JSON with "active"                               |
| workflow:<id>:snapshot:<digest>  | STRING  | one version's JSON, named by queued tasks; TTL            |
| workflows                        | SET     | ids of all stored workflows                               |
| webhooks                         | HASH    | "<METHOD> <path>" -> workflow id, for active workflows    |
| imports                          | HASH    | workflow id -> the versionId it got when imported from a  |
|                                  |         | workflows folder at start (core/folder_import.py)         |
| execution:<id>                   | STRING  | execution record (status, times, error, run data); TTL    |
| execution:<id>:events            | channel | chunks and the final result of one execution              |
| execution:<id>:sent              | LIST    | the numbered events published on that channel, for a      |
|                                  |         | subscriber that missed some; TTL 30 s (core/replay.py)    |
| execution:<id>:turn              | LIST    | wake-up token for an execution waiting for its session    |
| execution:<id>:lease             | STRING  | held while a worker runs it (or holds it for its turn);   |
|                                  |         | short TTL, renewed every second (core/liveness.py)        |
| execution:<id>:queued            | STRING  | set while it waits in the broker's queue; TTL = the queue |
|                                  |         | timeout                                                   |
| execution:<id>:suspect           | STRING  | when it first looked lost (Redis time, ms); short TTL     |
| execution:<id>:replies           | LIST    | chat messages that arrived while it was not waiting: its  |
|                                  |         | next replies, in order (responseNodes)                    |
| execution:<id>:taken             | STRING  | the reply a Chat node's wait last took, for a retry of it |
| execution:<id>:items             | STRING  | its first items when too large for the task's message;    |
|                                  |         | TTL (core/task.py)                                        |
| execution:<id>:next              | STRING  | the message its session's next execution started with,   |
|                                  |         | when its end started that one (a retry of the end reads)  |
| execution:<id>:stop              | STRING  | set when a stop was asked for; short TTL                  |
| execution:<id>:resume            | STRING  | where a waiting execution resumes (engine state); TTL     |
| execution:<id>:messages          | LIST    | Chat-node messages sent, in order, for the chat socket    |
| execution:<id>:delivered         | STRING  | how many of those messages a chat socket has written      |
| execution:<id>:token             | STRING  | the resumeToken a chat socket must present; TTL           |
| executions:waiting               | ZSET    | waiting executions with a time limit, score = deadline ms |
| executions:stop                  | channel | ids of executions to stop, heard by every worker          |
| executions:running               | ZSET    | leased execution ids, score = lease deadline (ms): where  |
|                                  |         | reapers look; the lease key is the truth                  |
| executions:queued                | ZSET    | new execution ids, score = queue deadline (ms): likewise  |
| executions:workflow:<id>         | ZSET    | execution ids of one workflow, score = creation time (ms) |
| executions:history               | ZSET    | every execution not yet pruned, "<id> <workflowId>",      |
|                                  |         | score = creation time (ms): what pruning walks, oldest    |
|                                  |         | first (core/retention.py)                                 |
| executions:pruning               | STRING  | held by the worker pruning now; short TTL                 |
| session:<workflowId>:<sessionId> | LIST    | executions of one chat session, in arrival order          |
| session:<wf>:<sessionId>:conv... | STRING  | (cluster) the session's unfinished conversation           |
|   ...ersation                    |         | (responseNodes), beside its line: a message joins it      |
| worker:<workerId>                | STRING  | a worker's presence: its heartbeat connection and the     |
|                                  |         | executions it holds; TTL = the lease (core/presence.py)   |
| workers                          | ZSET    | worker ids, score = their last heartbeat (ms)             |
| push:<pushRef>                   | channel | editor events                                             |
| hub:conversation:<sid>           | STRING  | a Chat Hub conversation: owner, title, agent, times       |
|                                  |         | (core/hub_records.py)                                     |
| hub:conversation:<sid>:messages  | HASH    | message id -> message JSON: the conversation's tree       |
| hub:conversation:<sid>:text:<mid>| STRING  | an AI message's text while it streams (APPEND per chunk)  |
| hub:conversation:<sid>:files     | HASH    | "<messageId>:<index>" -> an attachment, base64            |
| hub:conversation:<sid>:seq       | STRING  | the conversation's last push event number                 |
| hub:conversation:<sid>:events    | LIST    | its recent push events, for a reconnect; bounded, TTL     |
| hub:conversation:<sid>:active    | STRING  | the execution of its running reply (one at a time)        |
| hub:conversation:<sid>:memory    | SET     | the memory lists its runs were given (deleted with it)    |
| hub:user:<uid>:conversations     | ZSET    | a user's conversation ids, score = lastMessageAt (ms)     |
| hub:user:<uid>:agents            | HASH    | agent id -> a personal agent's JSON                       |
| hub:push:<uid>                   | channel | a user's Chat Hub push events                             |
| hub:execution:<id>               | STRING  | the Chat Hub reply an execution produces (HubRun); TTL    |
| hub:execution:<id>:relay         | STRING  | held by the api process relaying it; short TTL            |
| user:<id>                        | STRING  | a person's record: email, names, role, argon2 hash of     |
|                                  |         | the password, session epoch (core/users.py)               |
| users                            | HASH    | lower-cased email -> user id                              |
| signin:session:<sha256>          | STRING  | a signed-in browser: "<userId> <epoch>", named by the     |
|                                  |         | digest of its cookie's token; TTL = the cookie's life     |
| signin:failures:<kind>:<subject> | STRING  | failed sign-ins of one account (kind "account", the       |
|                                  |         | email) or address ("address"); TTL (core/signin_throttle) |
| signin:wait:<kind>:<subject>     | STRING  | set while that account or address must wait before its    |
|                                  |         | next try; TTL = the wait                                  |

An optional global prefix (MINI_N8N_KEY_PREFIX) is put in front of every key, so several
deployments can share one Redis database.

In a Redis Cluster (`Keys(cluster=True)`, MINI_N8N_REDIS_CLUSTER) keys that one command, script
or transaction touches together share a hash tag, so they live in one slot:
- an execution's keys tag its id: `execution:{<id>}`, `execution:{<id>}:events`, `:turn`, ...;
- a session's line tags itself: `session:{<workflowId>:<sessionId>}`;
- the workflows, their versions and the webhook table share `{w}`: `{w}:workflows`,
  `{w}:webhooks`, `{w}:imports`, `{w}:workflow:<id>`, `{w}:workflow:<id>:snapshot:<digest>`;
- a Chat Hub conversation's keys tag it: `hub:conversation:{<sid>}`, `…:messages`, `…:events`, …;
  an execution's hub keys tag the execution: `hub:execution:{<id>}`, `…:relay`;
- the users and their email index share `{u}`: `{u}:users`, `{u}:user:<id>`;
- chat memory keeps its names (`chat:<sessionKey>`, n8n's layout; one key per command), and so do
  the `executions:*` indexes, `push:<pushRef>`, the `signin:*` keys and a user's `hub:user:…`,
  `hub:push:…`, each a key of its own.
Commands that span executions (the session's turn hand-over, the liveness of the head of a line)
are then steps of one slot each (core/executions.py). The global prefix may not hold braces then:
it would become the hash tag of every key.

The memory prefix (MINI_N8N_MEMORY_KEY_PREFIX) may be empty: then a public chat's memory is the
bare session key, as n8n's Redis Chat Memory stores it, so mini-n8n and n8n can share sessions.
A session key is then a key name chosen by whoever chats, so `chat()` refuses one that would name
any other key of ours (or of the Celery broker sharing the database) with ReservedKeyError,
rather than read, write or delete it. A protected chat's key can never equal a public one: public
keys start with the memory prefix, which may not start with "memory:", or, with an empty prefix,
a session key starting with "memory:" is refused. The workflow id in a protected key has "%" and
":" escaped (%25, %3A), so the first ":" after it always ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MEMORY_PREFIX = "chat:"  # mini-n8n's layout; "" is n8n's
PROTECTED = "memory:"
# Our own namespaces, and the names Celery's Redis transport (kombu) uses when the broker shares
# the database. A public session key may never produce one of them.
_WORKFLOWS_TAG = "{w}:"  # in a cluster: the one slot of the workflows and the webhook table
_USERS_TAG = "{u}:"  # in a cluster: the one slot of the users and their email index
_OWN_PREFIXES = (
    "workflow:", "execution:", "executions:", "session:", "push:", "worker:", PROTECTED,
    _WORKFLOWS_TAG, "hub:", "user:", "signin:", _USERS_TAG,
)  # fmt: skip
_OWN_NAMES = ("workflows", "webhooks", "imports", "workers", "users")
_BROKER_PREFIXES = ("_kombu.",)
_BROKER_NAMES = ("unacked", "unacked_index", "unacked_mutex")
_KOMBU_PRIORITY_SEP = "\x06\x16"  # "<queue>\x06\x16<n>" are a queue's priority lists
_GLOB_SPECIAL = "\\*?[]"
_EVENTS = ":events"


class ReservedKeyError(ValueError):
    """A session key that would name one of mini-n8n's own keys."""


@dataclass(frozen=True)
class Keys:
    prefix: str = ""
    memory_prefix: str = DEFAULT_MEMORY_PREFIX
    task_queue: str = ""  # the Celery queue, a LIST in this database when the broker shares it
    cluster: bool = False  # hash-tagged keys for a Redis Cluster (see above)

    def __post_init__(self) -> None:
        if self.cluster and ("{" in self.prefix or "}" in self.prefix):
            raise ValueError(
                f'MINI_N8N_KEY_PREFIX "{self.prefix}" holds a brace: in a Redis Cluster it would '
                "be the hash tag of every key, putting them all in one slot"
            )
        if self.memory_prefix and self._reserved(self.memory_prefix + "x"):
            raise ValueError(
                f'MINI_N8N_MEMORY_KEY_PREFIX "{self.memory_prefix}" would put chat memory among '
                "mini-n8n's own keys; use another prefix (default chat:) or none"
            )

    @classmethod
    def from_settings(cls, settings) -> Keys:
        return cls(
            settings.key_prefix,
            settings.memory_key_prefix,
            settings.task_queue,
            cluster=settings.redis_cluster,
        )

    # --- chat memory ----------------------------------------------------------------------
    def chat(self, session_key: str, workflow_id: str | None = None) -> str:
        """The memory list of one session: a public chat's, or a protected one's (workflow_id)."""
        if workflow_id is not None:
            return f"{self.prefix}{PROTECTED}{_escape_id(workflow_id)}:{session_key}"
        body = self.memory_prefix + session_key
        if self._reserved(body):
            raise ReservedKeyError(
                f'The session key "{session_key}" cannot be used: its memory key "{body}" would '
                "be one of mini-n8n's own keys (an empty MINI_N8N_MEMORY_KEY_PREFIX makes session "
                "keys Redis key names)"
            )
        return self.prefix + body

    def chat_pattern(self, workflow_id: str | None = None) -> str:
        """SCAN pattern for the memory lists of public chats, or of one protected chat."""
        if workflow_id is not None:
            return _glob(f"{self.prefix}{PROTECTED}{_escape_id(workflow_id)}:") + "*"
        return _glob(self.prefix + self.memory_prefix) + "*"

    def session_from_chat_key(self, key: str, workflow_id: str | None = None) -> str | None:
        """The session key of a key `chat_pattern(workflow_id)` matched; None if that key is not
        a session's memory (with an empty memory prefix the pattern matches every key)."""
        if workflow_id is not None:
            start = f"{self.prefix}{PROTECTED}{_escape_id(workflow_id)}:"
            return key[len(start) :] if key.startswith(start) else None
        start = self.prefix + self.memory_prefix
        if not key.startswith(start) or self._reserved(key[len(self.prefix) :]):
            return None
        return key[len(start) :]

    def protected_chat_pattern(self) -> str:
        """SCAN pattern for the memory lists of every protected chat."""
        return _glob(self.prefix + PROTECTED) + "*"

    def protected_session_from_key(self, key: str) -> tuple[str, str] | None:
        """(workflow id, session key) of a key `protected_chat_pattern()` matched."""
        start = self.prefix + PROTECTED
        workflow, sep, session = key[len(start) :].partition(":")
        if not key.startswith(start) or not sep:
            return None
        return _unescape_id(workflow), session

    def _reserved(self, body: str) -> bool:
        """Would `prefix + body` name a key that is not a public chat's memory?"""
        if not body or body in _OWN_NAMES or body in _BROKER_NAMES:
            return True
        if body.startswith(_OWN_PREFIXES + _BROKER_PREFIXES):
            return True
        queue = self.task_queue
        return bool(queue) and (body == queue or body.startswith(queue + _KOMBU_PRIORITY_SEP))

    # --- workflows and executions ---------------------------------------------------------
    def workflow(self, workflow_id: str) -> str:
        return f"{self._workflows_space()}workflow:{workflow_id}"

    def workflow_snapshot(self, workflow_id: str, digest: str) -> str:
        return f"{self._workflows_space()}workflow:{workflow_id}:snapshot:{digest}"

    def workflows(self) -> str:
        return f"{self._workflows_space()}workflows"

    def webhooks(self) -> str:
        return f"{self._workflows_space()}webhooks"

    def imports(self) -> str:
        return f"{self._workflows_space()}imports"

    def execution(self, execution_id: str) -> str:
        return self._execution(execution_id)

    def execution_events(self, execution_id: str) -> str:
        return self._execution(execution_id, _EVENTS)

    def execution_sent(self, execution_id: str) -> str:
        return self._execution(execution_id, ":sent")

    def execution_turn(self, execution_id: str) -> str:
        return self._execution(execution_id, ":turn")

    def execution_stop(self, execution_id: str) -> str:
        return self._execution(execution_id, ":stop")

    def execution_resume(self, execution_id: str) -> str:
        return self._execution(execution_id, ":resume")

    def execution_messages(self, execution_id: str) -> str:
        return self._execution(execution_id, ":messages")

    def execution_delivered(self, execution_id: str) -> str:
        return self._execution(execution_id, ":delivered")

    def execution_lease(self, execution_id: str) -> str:
        return self._execution(execution_id, ":lease")

    def execution_queued(self, execution_id: str) -> str:
        return self._execution(execution_id, ":queued")

    def execution_suspect(self, execution_id: str) -> str:
        return self._execution(execution_id, ":suspect")

    def execution_replies(self, execution_id: str) -> str:
        return self._execution(execution_id, ":replies")

    def execution_taken(self, execution_id: str) -> str:
        return self._execution(execution_id, ":taken")

    def execution_next(self, execution_id: str) -> str:
        return self._execution(execution_id, ":next")

    def execution_items(self, execution_id: str) -> str:
        return self._execution(execution_id, ":items")

    def execution_token(self, execution_id: str) -> str:
        return self._execution(execution_id, ":token")

    def waiting(self) -> str:
        return f"{self.prefix}executions:waiting"

    def stop_channel(self) -> str:
        return f"{self.prefix}executions:stop"

    def running(self) -> str:
        return f"{self.prefix}executions:running"

    def queued(self) -> str:
        return f"{self.prefix}executions:queued"

    def workflow_executions(self, workflow_id: str) -> str:
        return f"{self.prefix}executions:workflow:{workflow_id}"

    def executions_history(self) -> str:
        return f"{self.prefix}executions:history"

    def pruning(self) -> str:
        return f"{self.prefix}executions:pruning"

    def session_queue(self, workflow_id: str, session_id: str) -> str:
        if self.cluster:
            return f"{self.prefix}session:{{{workflow_id}:{session_id}}}"
        return f"{self.prefix}session:{workflow_id}:{session_id}"

    def push(self, push_ref: str) -> str:
        return f"{self.prefix}push:{push_ref}"

    def worker(self, worker_id: str) -> str:
        return f"{self.prefix}worker:{worker_id}"

    def workers(self) -> str:
        return f"{self.prefix}workers"

    # --- Chat Hub (core/hub_store.py, core/hub_stream.py, core/hub_agents.py) ----------------
    def hub_conversation(self, session_id: str, suffix: str = "") -> str:
        """A conversation's record; with `suffix` (":messages", ":events", ...) its other keys."""
        if self.cluster:
            return f"{self.prefix}hub:conversation:{{{session_id}}}{suffix}"
        return f"{self.prefix}hub:conversation:{session_id}{suffix}"

    def hub_messages(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":messages")

    def hub_text(self, session_id: str, message_id: str) -> str:
        return self.hub_conversation(session_id, f":text:{message_id}")

    def hub_files(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":files")

    def hub_seq(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":seq")

    def hub_events(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":events")

    def hub_active(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":active")

    def hub_memory(self, session_id: str) -> str:
        return self.hub_conversation(session_id, ":memory")

    def hub_conversations(self, user_id: str) -> str:
        return f"{self.prefix}hub:user:{user_id}:conversations"

    def hub_agents(self, user_id: str) -> str:
        return f"{self.prefix}hub:user:{user_id}:agents"

    def hub_push(self, user_id: str) -> str:
        return f"{self.prefix}hub:push:{user_id}"

    def hub_run(self, execution_id: str) -> str:
        if self.cluster:
            return f"{self.prefix}hub:execution:{{{execution_id}}}"
        return f"{self.prefix}hub:execution:{execution_id}"

    def hub_relay(self, execution_id: str) -> str:
        return self.hub_run(execution_id) + ":relay"

    def hub_conversations_pattern(self) -> str:
        """SCAN pattern for every user's conversation index (`hub_user_of` reads the user)."""
        return _glob(f"{self.prefix}hub:user:") + "*" + _glob(":conversations")

    def hub_user_of(self, key: str) -> str | None:
        """The user id of a key `hub_conversations_pattern` matched."""
        start, end = f"{self.prefix}hub:user:", ":conversations"
        if not key.startswith(start) or not key.endswith(end):
            return None
        return key[len(start) : -len(end)] or None

    # --- people (core/users.py, core/user_sessions.py, core/signin_throttle.py) ---------------
    def user(self, user_id: str) -> str:
        return f"{self._users_space()}user:{user_id}"

    def users(self) -> str:
        return f"{self._users_space()}users"

    def signin_session(self, digest: str) -> str:
        return f"{self.prefix}signin:session:{digest}"

    def signin_failures(self, kind: str, subject: str) -> str:
        return f"{self.prefix}signin:failures:{kind}:{subject}"

    def signin_wait(self, kind: str, subject: str) -> str:
        return f"{self.prefix}signin:wait:{kind}:{subject}"

    def _users_space(self) -> str:
        return self.prefix + (_USERS_TAG if self.cluster else "")

    def _execution(self, execution_id: str, suffix: str = "") -> str:
        if self.cluster:
            return f"{self.prefix}execution:{{{execution_id}}}{suffix}"
        return f"{self.prefix}execution:{execution_id}{suffix}"

    def _workflows_space(self) -> str:
        return self.prefix + (_WORKFLOWS_TAG if self.cluster else "")


def conversation_of(line: str) -> str:
    """The unfinished conversation of a session's line, in the line's slot (a cluster's
    `create` decides there whether a message joins it: core/session_line.py)."""
    return f"{line}:conversation"


def sent_of(channel: str) -> str:
    """The sent list (`execution:<id>:sent`, core/replay.py) of an execution's channel."""
    if not channel.endswith(_EVENTS):
        raise ValueError(f"{channel!r} is not an execution's channel")
    return channel[: -len(_EVENTS)] + ":sent"


def history_member(execution_id: str, workflow_id: str) -> str:
    """An execution's member of `executions:history`: its id, then its workflow's (an execution
    id holds no space), so pruning finds the workflow's index even once the record is gone."""
    return f"{execution_id} {workflow_id}"


def history_entry(member: str) -> tuple[str, str]:
    """(execution id, workflow id) of a `history_member`."""
    execution_id, _, workflow_id = member.partition(" ")
    return execution_id, workflow_id


def _escape_id(workflow_id: str) -> str:
    return workflow_id.replace("%", "%25").replace(":", "%3A")


def _unescape_id(escaped: str) -> str:
    return escaped.replace("%3A", ":").replace("%25", "%")


def _glob(literal: str) -> str:
    """`literal` as a Redis glob pattern that matches only itself."""
    return "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in literal)
