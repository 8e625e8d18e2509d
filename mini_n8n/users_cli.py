"""`mini-n8n users`: add, list, remove users and set their passwords, in the deployment's Redis.

Passwords are read from standard input, never from the command line (where `ps` and the shell's
history would show them): the first line of a pipe (`echo "$PW" | mini-n8n users add ...`), or,
typed at a terminal, twice without echo. Nothing prints a password or its hash.
"""

from __future__ import annotations

import argparse
import getpass
import sys

# core.users's ROLE_NAMES; not imported here: `mini-n8n worker` must patch with gevent before
# anything imports redis (mini_n8n/cli.py).
ROLES = ("owner", "member", "chat")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "users",
        help="add, list or remove users, or set a password (read from standard input)",
        description="People who sign in to the editor and the Chat Hub. Roles: owner "
        "(everything), member (the editor and chat), chat (the Chat Hub only). Passwords are "
        "read from standard input: 8 to 64 characters, with a number and an uppercase letter.",
    )
    actions = p.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a user; the password comes from standard input")
    add.add_argument("email")
    add.add_argument("--role", choices=ROLES, default="member")
    add.add_argument("--first-name", default="")
    add.add_argument("--last-name", default="")
    actions.add_parser("list", help="list users: email, role, name")
    actions.add_parser("remove", help="remove a user, signing out their browsers").add_argument(
        "email"
    )
    actions.add_parser(
        "passwd", help="set a user's password from standard input, signing out their browsers"
    ).add_argument("email")


def run(args: argparse.Namespace, store_and_client) -> int:
    from core.keys import Keys
    from core.users import UserStore

    _, client, settings = store_and_client(require_data=False)
    users = UserStore(client, Keys.from_settings(settings))
    if args.action == "list":
        for user in users.list():
            name = f"{user.first_name} {user.last_name}".strip()
            print(f"{user.email}\t{_short_role(user.role)}\t{name}")
        return 0
    if args.action == "add":
        user = users.add(args.email, read_password(), args.role, args.first_name, args.last_name)
        print(f"added {user.email} ({_short_role(user.role)})")
        return 0
    user = users.find(args.email)
    if args.action == "remove":
        users.remove(user)
        print(f"removed {user.email}")
        return 0
    users.set_password(user, read_password())
    print(f"password set for {user.email}; their browsers are signed out")
    return 0


def read_password() -> str:
    """The first line of standard input; typed at a terminal, twice without echo."""
    from mini_n8n.local_state import CliError

    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != first:
            raise CliError("the two passwords differ: nothing changed")
        return first
    line = sys.stdin.readline()
    if not line:
        raise CliError("no password on standard input: echo it into this command, or type it")
    return line.rstrip("\r\n")


def _short_role(role) -> str:
    from core.users import ROLE_NAMES

    return next(short for short, name in ROLE_NAMES.items() if name is role)
