"""`mini-n8n chats`: the Chat Hub's conversations in Redis, read as the deployment's operator
(the command line holds the machine's credential, as the api key does: every user's).

    mini-n8n chats                  every conversation: id, user, last message, agent, title
    mini-n8n chats --user ID        one user's
    mini-n8n chats show ID          one conversation's messages, oldest first, with their tree
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

# Nothing that imports redis at this module's import: `mini-n8n worker` patches with gevent
# first (mini_n8n/cli.py), and the command line imports this module to build its parser.


def add_parser(sub) -> None:
    p = sub.add_parser(
        "chats",
        help="list the Chat Hub's conversations, or show one",
        description="Lists conversations one a line, newest message first: id, user, time of "
        "the last message, agent, title (tab-separated). `show ID` prints one's messages.",
    )
    p.add_argument("action", nargs="?", choices=["show"])
    p.add_argument("id", nargs="?")
    p.add_argument("--user", help="only this user's conversations")


def run(args: argparse.Namespace, store: Callable) -> int:
    from core.hub_records import HubSession
    from core.hub_settings import HubSettings
    from core.hub_store import ConversationStore
    from mini_n8n.local_state import CliError

    workflows, client, _ = store()
    conversations = ConversationStore(client, workflows.keys, HubSettings())
    if args.action == "show":
        if not args.id:
            raise CliError("a conversation id is needed: mini-n8n chats show ID")
        return _show(conversations, args.id)
    users = [args.user] if args.user else _users(client, workflows.keys)
    found: list[HubSession] = []
    for user in users:
        for session_id in conversations.all_ids(user):
            session = conversations.get(session_id, user)
            if session is not None:
                found.append(session)
    for session in sorted(found, key=lambda s: (-s.last_message_at, s.id)):
        agent = session.agent_name or session.model or ""
        print(f"{session.id}\t{session.owner_id}\t{_time(session.last_message_at)}\t{agent}\t"
              f"{session.title}")  # fmt: skip
    return 0


def _users(client, keys) -> list[str]:
    users = {keys.hub_user_of(k) for k in client.scan_iter(match=keys.hub_conversations_pattern())}
    return sorted(u for u in users if u)


def _show(conversations: Any, session_id: str) -> int:
    from core.hub_records import HubSession
    from mini_n8n.local_state import CliError

    raw = conversations.client.get(conversations.keys.hub_conversation(session_id))
    if raw is None:
        raise CliError(f"no conversation {session_id}")
    session = HubSession.from_json(raw)
    print(f"{session.title} ({session.owner_id}, {session.agent_name or session.model or ''})")
    messages = sorted(conversations.messages(session_id).values(),
                      key=lambda m: (m.created_at, m.id))  # fmt: skip
    for message in messages:
        print(_line(message), file=sys.stdout)
    return 0


def _line(message: Any) -> str:
    links = f" <- {message.previous_message_id}" if message.previous_message_id else ""
    if message.revision_of_message_id:
        links += f" (revises {message.revision_of_message_id})"
    if message.retry_of_message_id:
        links += f" (retries {message.retry_of_message_id})"
    text = message.content.replace("\n", " ")
    return (f"{_time(message.created_at)}\t{message.id}{links}\t{message.type}\t{message.status}"
            f"\t{text}")  # fmt: skip


def _time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")
