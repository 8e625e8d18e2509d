"""Chat node delivery: time from a Chat node's send (`sentAt`, taken in the worker
when the node sends) to its frame arriving on the client's open chat WebSocket, p50/p99.

Measured on the second Chat node of the ask-my-name workflow, which runs once the client replied
over the socket, so its frame is a live delivery (worker -> Redis pub/sub -> relay -> socket):
- "no wait": the node does not wait for a reply; its message is published at once;
- "waits": the node waits; its message is published once the execution is recorded as waiting
  (so a reply can never come too early), which is included.
n8n's chat service polls its database every 3 s for these messages.

One api and one worker on one Redis, sequential conversations.

    python bench/chat_node_latency.py [N]
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from _common import redis_server, summary

from tests.chat.conversation import ask_name_workflow, next_frame, open_chat, reply, start
from tests.e2e.deployment import Deployment
from tests.workflows import node


def second_message_latency(deploy: Deployment, workflow: dict) -> float:
    session = f"bench-{uuid.uuid4().hex[:10]}"
    execution_id = start(deploy.base, workflow, session)
    with open_chat(deploy.base, session, execution_id) as ws:
        next_frame(ws)  # the question (maybe replayed: the socket may open after its send)
        reply(ws, session, "Ada")
        assert next_frame(ws) == "Nice to meet you, Ada!"
        received = time.time()
    raw = deploy.redis.lindex(deploy.keys.execution_messages(execution_id), 1)
    return received - json.loads(raw)["sentAt"] / 1000


def main(n: int) -> None:
    with redis_server() as url, Deployment.running(url) as deploy:
        no_wait = deploy.activate(ask_name_workflow())
        waits = ask_name_workflow()
        node(waits, "Greet")["parameters"]["options"]["waitUserReply"] = True
        node(waits, "Greet")["parameters"]["options"]["limitWaitTime"] = {
            "values": {"resumeAmount": 1, "resumeUnit": "minutes"}
        }
        deploy.activate(waits)
        for workflow, name in ((no_wait, "no wait"), (waits, "waits")):
            second_message_latency(deploy, workflow)  # warm up
            runs = [second_message_latency(deploy, workflow) for _ in range(n)]
            print(summary(f"Chat node ({name}) send -> frame", runs))
        print("n8n: its chat service polls the database every 3 s (up to 3000 ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
