"""Property-based fuzzing of request bodies against the chat and webhook endpoints, through the
Flask test client against a real valkey. Executions run in the api process (regular mode), so
an accepted body is taken all the way through the engine, the Redis memory and the answer.

For every body: never a 5xx, never an error in the log; a 4xx is JSON with a message and
changes nothing in Redis (no execution, no memory).
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.app import create_app
from core.keys import Keys
from core.settings import Settings
from core.workflow_store import WorkflowStore
from engine.workflow import load_workflow
from tests.e2e.test_hostile_input import _double_workflow, _strict_json
from tests.workflows import REDIS_CHAT, example, with_response_mode

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,  # the same examples on every run: CI is repeatable
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Any code point, lone surrogates included: JSON's \uXXXX escapes can carry every one of them.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)


class NumberLiteral(str):
    """A number written as JSON text, for literals Python would not build as a value."""


NUMBERS = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["1e999", "-1e999", "1" * 5000, "1E-400", "-0"]).map(NumberLiteral),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, ANY_TEXT)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=20,
)


def _encode(value) -> str:
    if isinstance(value, NumberLiteral):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_encode(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)  # ensure_ascii: a lone surrogate becomes its \uXXXX escape


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


WELL_FORMED = st.fixed_dictionaries(  # these run all the way through the workflow
    {"sessionId": st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1),
     "chatInput": ANY_TEXT},
    optional={"action": st.just("sendMessage"), "metadata": st.dictionaries(ANY_TEXT, VALUES)},
).map(_encode)  # fmt: skip
CHAT_BODIES = st.one_of(
    WELL_FORMED,
    WELL_FORMED,
    WELL_FORMED,
    st.fixed_dictionaries(
        {},
        optional={
            "sessionId": SCALARS,
            "chatInput": SCALARS,
            "action": st.sampled_from(["sendMessage", "loadPreviousSession", "other"]),
            "metadata": VALUES,
        },
    ).map(_encode),
    VALUES.map(_encode),
    st.integers(min_value=1, max_value=3000).map(
        lambda d: '{"sessionId":"deep","chatInput":"hi","metadata":{"a":' + _deep(d) + "}}"
    ),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)
WEBHOOK_BODIES = st.one_of(
    st.builds(lambda qty: _encode({"qty": qty}), VALUES),
    VALUES.map(_encode),
    st.integers(min_value=1, max_value=3000).map(lambda d: '{"qty":' + _deep(d) + "}"),
    st.binary(max_size=60).map(lambda b: b.decode("latin-1")),
)


@pytest.fixture(scope="module")
def fuzz_app(redis_url):
    keys = Keys(prefix=f"fz{uuid.uuid4().hex[:8]}:")
    app = create_app(
        settings=Settings(
            redis_url=redis_url,
            key_prefix=keys.prefix,
            executions_mode="regular",
            keepalive_seconds=0.5,
        )
    )
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    store = WorkflowStore(client, keys, load_workflow)
    # Streaming: a run that fails (an empty chatInput gives the Agent no prompt) still answers
    # 200 with an error line; lastNode would answer n8n's documented 500 "Error in workflow".
    chat = with_response_mode(example(REDIS_CHAT), "streaming")
    chat["id"] = "fuzzchat"
    webhook = _double_workflow()
    for workflow in (chat, webhook):
        store.save(workflow)
        store.activate(workflow["id"])
    trigger = next(n for n in chat["nodes"] if n["type"].endswith("chatTrigger"))
    urls = {
        "chat": f"/webhook/{trigger['webhookId']}/chat",
        "webhook": f"/webhook/{webhook['nodes'][0]['parameters']['path']}",
    }
    yield app.test_client(), client, keys, urls
    app.extensions["mini_n8n"].close()
    client.close()


def _state(client, keys) -> tuple[int, int]:
    """How many keys of this deployment hold executions and memory."""
    executions = sum(1 for _ in client.scan_iter(match=f"{keys.prefix}execution:*", count=1000))
    memory = sum(1 for _ in client.scan_iter(match=keys.chat_pattern(), count=1000))
    return executions, memory


def _check(fuzz_app, caplog, url_name: str, body: str, content_type: str) -> None:
    test_client, client, keys, urls = fuzz_app
    before = _state(client, keys)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        response = test_client.post(
            urls[url_name], data=body.encode("utf-8", "surrogatepass"), content_type=content_type
        )
    assert response.status_code < 500, (body[:200], response.data[:300])
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], body[:200]
    if response.status_code >= 400:
        assert response.get_json()["message"]
        assert _state(client, keys) == before, body[:200]
    elif response.mimetype == "application/x-ndjson":
        chunks = [_strict_json(line) for line in response.data.splitlines()]
        assert [c for c in chunks if c["type"] != "keepalive"][-1]["type"] in ("end", "error")
    else:
        _strict_json(response.data)  # every answer is JSON a strict parser reads


@FUZZ
@given(body=CHAT_BODIES)
def test_any_json_body_on_the_chat_url_gets_a_clear_answer_and_never_a_5xx(fuzz_app, caplog, body):
    _check(fuzz_app, caplog, "chat", body, "application/json")


@FUZZ
@given(body=WEBHOOK_BODIES, content_type=st.sampled_from(["application/json", "text/plain"]))
def test_any_body_on_a_webhook_gets_a_clear_answer_and_never_a_5xx(
    fuzz_app, caplog, body, content_type
):
    _check(fuzz_app, caplog, "webhook", body, content_type)
