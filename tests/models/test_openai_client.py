"""The OpenAI Chat Model node's client (models/) against a fake OpenAI-compatible server on a
real socket, built as a runner builds it: through the ModelClients it lends the engine."""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import openai
import pytest

from core.credentials import CredentialStore
from engine.errors import ExecutionCanceled, NodeExecutionError
from engine.nodes.lm_chat_openai import LmChatOpenAi
from memory.messages import ToolCall, ai, human, system, tool
from models.clients import ModelClients
from models.openai_chat import OpenAiChatModel
from models.openai_errors import StreamedError
from models.openai_stream import sse_batches
from models.pump import Pump, spawn_thread
from tests.engine.stand_in import StandInContext
from tests.fakes.openai_server import fake_openai
from tests.waiting import wait_until

pytestmark = pytest.mark.fast  # a fake server in this process; no process of ours

KEY = "sk-test-SECRET-123"
ROOT = Path(__file__).resolve().parents[2]


class Calculator:
    name = "calculator"
    description = "Does arithmetic"
    parameters = {"type": "object", "properties": {"input": {"type": "string"}}}

    def call(self, args):
        return "437"


@pytest.fixture
def fake():
    with fake_openai() as (server, _):
        yield server


def store_for(url: str, **domains) -> CredentialStore:
    return CredentialStore(
        [
            {
                "id": "cred1",
                "name": "OpenAi account",
                "type": "openAiApi",
                "data": {"apiKey": KEY, "url": url, **domains},
            }
        ]
    )


def make_model(url: str, model="gpt-4.1-mini", domains=None, **options) -> OpenAiChatModel:
    params = {"model": {"__rl": True, "mode": "list", "value": model}, "options": options}
    refs = {"openAiApi": {"id": "cred1", "name": "OpenAi account"}}
    store = store_for(url, **(domains or {}))
    built = LmChatOpenAi().supply_data(StandInContext(params, refs, store, ModelClients()), 0)
    built.retry_base_delay = 0.01  # keeps the retry tests fast; the policy is what they check
    return built


def invoke_error(model, text="hello there", tools=(), **kw) -> NodeExecutionError:
    with pytest.raises(NodeExecutionError) as info:
        model.invoke([human(text)], list(tools), **kw)
    return info.value


def assert_no_secret(*things) -> None:
    for thing in things:
        assert KEY not in str(thing)
        assert KEY not in repr(thing)


def test_streams_tokens_to_on_token_as_the_server_sends_them(fake):
    fake.delay_per_token = 0.3  # wide enough that a loaded machine still shows it
    received: list[tuple[float, str]] = []
    model = make_model(fake.base_url)
    reply = model.invoke(
        [human("hello there kind world")], [], lambda t: received.append((time.monotonic(), t))
    )
    sent = [(at, piece) for at, kind, piece in fake.sent if kind == "content"]
    assert [t for _, t in received] == ["You ", "said: ", "hello ", "there ", "kind ", "world"]
    assert [p for _, p in sent] == [t for _, t in received]
    assert reply.content == "You said: hello there kind world" and reply.tool_calls == []
    assert received[0][0] < sent[-1][0]  # the first token was in hand before the last was sent
    assert all(got >= at for (got, _), (at, _) in zip(received, sent, strict=True))


def test_consecutive_answers_share_one_connection(fake):
    # Read to its end, a streamed answer gives its connection back for the next call: no new
    # TCP (and, on a real endpoint, TLS) handshake per model call.
    model = make_model(fake.base_url)  # each test's fake has its own port: a client of its own
    for text in ("one", "two", "three"):
        assert model.invoke([human(text)], []).content == f"You said: {text}"
        wait_until_back_in_the_pool(model)
    peers = [r["peer"] for r in fake.requests]
    assert len(peers) == 3 and len(set(peers)) == 1, peers


def wait_until_back_in_the_pool(model) -> None:
    """The answer is handed over as soon as `[DONE]` arrives; the body's last bytes are read
    (and the connection released) just after, on the pump's side."""
    connections = model._clients.client(model.settings, KEY)._direct
    origin = ("http", "127.0.0.1", urlsplit(model.settings.base_url).port)
    deadline = time.monotonic() + 5
    while not connections.idle(origin):
        assert time.monotonic() < deadline, "the connection never went back to the pool"
        time.sleep(0.01)


class HeldReader:
    """A spawn that holds the model call's reader until `release`: what the call does before
    its reader first runs is what the caller does before it waits."""

    def __init__(self) -> None:
        self.held: list = []
        self.spawned = threading.Event()

    def __call__(self, fn):
        self.held.append(fn)
        self.spawned.set()
        return lambda: None

    def release(self) -> None:
        threading.Thread(target=self.held.pop(), daemon=True).start()


def test_on_a_kept_connection_the_request_is_out_before_the_reader_first_runs(fake):
    model = make_model(fake.base_url)
    model.invoke([human("one")], [])
    wait_until_back_in_the_pool(model)
    reader = model._spawn = HeldReader()
    answers: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: answers.put(model.invoke([human("two")], [])), daemon=True
    ).start()
    deadline = time.monotonic() + 5
    while len(fake.requests) < 2:
        assert time.monotonic() < deadline, "the request did not come before its reader ran"
        time.sleep(0.01)
    # The request reached the server while its reader is held: it was written by the caller.
    # The call hands its reader over just after writing, so the spawn may come a moment later.
    assert reader.spawned.wait(5) and len(reader.held) == 1  # handed over, not run
    assert fake.requests[1]["body"]["messages"][-1]["content"] == "two"
    reader.release()
    assert answers.get(timeout=5).content == "You said: two"
    assert len({r["peer"] for r in fake.requests}) == 1  # on the kept connection


def test_a_call_stopped_before_its_reader_ran_closes_the_connection_it_wrote_on(fake):
    model = make_model(fake.base_url)
    model.invoke([human("one")], [])
    wait_until_back_in_the_pool(model)
    model._spawn = HeldReader()
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ExecutionCanceled):
        model.invoke([human("two")], [], cancel=cancel)
    connections = model._clients.client(model.settings, KEY)._direct
    assert connections.idle(("http", "127.0.0.1", urlsplit(model.settings.base_url).port)) == 0
    model._spawn = spawn_thread
    assert model.invoke([human("three")], []).content == "You said: three"
    assert len({r["peer"] for r in fake.requests}) == 2  # the written-on one was not reused


def test_sends_the_key_model_options_and_conversation_in_openai_format(fake):
    model = make_model(fake.base_url, model="gpt-4o-mini", temperature=0.2, maxTokens=50, topP=0.9)
    call = ToolCall("calculator", {"input": "19 * 23"}, "call_1")
    history = [
        system("Be brief."),
        human("19 * 23?"),
        ai("", [call]),
        tool("437", "call_1", "calculator"),
    ]
    reply = model.invoke(history, [Calculator()])
    request = fake.requests[0]
    body = request["body"]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    assert (body["model"], body["stream"], body["temperature"]) == ("gpt-4o-mini", True, 0.2)
    assert (body["max_tokens"], body["top_p"]) == (50, 0.9)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "19 * 23?"},
        {  # as LangChain's converter writes it for n8n: "" kept, the arguments compact
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"input":"19 * 23"}'},
                }
            ],
        },
        {"role": "tool", "content": "437", "name": "calculator", "tool_call_id": "call_1"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "Does arithmetic",
                "parameters": Calculator.parameters,
            },
        }
    ]
    assert reply.content == "Based on the tools: Calculator returned 437."


def test_leaves_unset_options_out_and_no_limit_max_tokens_unsent(fake):
    make_model(fake.base_url, maxTokens=-1).invoke([human("hi")], [])
    body = fake.requests[0]["body"]
    assert not {"temperature", "max_tokens", "top_p", "tools"} & body.keys()
    assert body["model"] == "gpt-4.1-mini"


def test_option_base_url_overrides_the_credential_url_where_the_credential_allows_it(fake):
    allowed = {"allowedHttpRequestDomains": "domains", "allowedDomains": "127.0.0.1"}
    model = make_model("http://localhost:1/v1", domains=allowed, baseURL=fake.base_url)
    assert model.invoke([human("hi")], []).content == "You said: hi"


def test_assembles_a_tool_call_whose_arguments_arrive_in_pieces(fake):
    reply = make_model(fake.base_url).invoke([human("what is 19 * 23?")], [Calculator()])
    pieces = [p for _, kind, p in fake.sent if kind == "tool_call"]
    assert len(pieces) >= 4  # a head plus several argument fragments
    assert reply.tool_calls == [ToolCall("calculator", {"input": "19 * 23"}, "call_fake_0")]
    assert reply.content == ""


def test_assembles_several_interleaved_tool_calls_by_index(fake):
    reply = make_model(fake.base_url).invoke([human("19 * 23 and 7 + 5")], [Calculator()])
    assert [(c.name, c.args, c.id) for c in reply.tool_calls] == [
        ("calculator", {"input": "19 * 23"}, "call_fake_0"),
        ("calculator", {"input": "7 + 5"}, "call_fake_1"),
    ]


FAILURES = [
    ("401", {}, 'authentication failed (401): check the API key of credential "OpenAi account"'),
    ("404", {}, 'model "gpt-4.1-mini" not found (404)'),
    ("429", {"maxRetries": 0}, "rate limited (429); retry after 1 s"),
    ("500", {"maxRetries": 0}, "server error (500) from {url}"),
    ("malformed", {}, "malformed response stream from {url}"),
    ("drop", {}, "the connection to {url} was lost mid-stream"),
    ("hang", {"timeout": 1000}, "timed out after 1 s waiting for {url}"),
    (
        "bad_args",
        {},
        'the model sent malformed arguments for tool "calculator" (not a JSON object)',
    ),
]


@pytest.mark.parametrize(("mode", "options", "expected"), FAILURES, ids=[f[0] for f in FAILURES])
def test_each_failure_is_a_readable_error_without_the_key(fake, caplog, mode, options, expected):
    caplog.set_level(logging.DEBUG)
    fake.fail = mode
    model = make_model(fake.base_url, **options)
    err = invoke_error(
        model, "what is 19 * 23?" if mode == "bad_args" else "hello there", [Calculator()]
    )
    assert str(err) == "OpenAI Chat Model: " + expected.format(url=fake.base_url)
    assert err.__cause__ is None and err.__suppress_context__  # no SDK exception chained along
    assert_no_secret(err, model, caplog.text, [r.getMessage() for r in caplog.records])


def test_unreachable_endpoint_is_retried_then_named(caplog):
    caplog.set_level(logging.INFO)
    model = make_model("http://127.0.0.1:1/v1", maxRetries=2)
    err = invoke_error(model)
    assert str(err) == "OpenAI Chat Model: could not connect to http://127.0.0.1:1/v1"
    assert [
        r.getMessage().rsplit(" in ", 1)[0] for r in caplog.records if "retry" in r.getMessage()
    ] == [
        "OpenAI Chat Model: could not connect to http://127.0.0.1:1/v1; retry 1 of 2",
        "OpenAI Chat Model: could not connect to http://127.0.0.1:1/v1; retry 2 of 2",
    ]
    assert_no_secret(caplog.text)


@pytest.mark.parametrize("mode", ["401", "404"])
def test_auth_and_model_errors_are_never_retried(fake, mode):
    fake.fail = mode
    invoke_error(make_model(fake.base_url, maxRetries=2))
    assert len(fake.requests) == 1


def test_rate_limit_waits_for_retry_after_then_succeeds(fake):
    fake.fail, fake.fail_count = "429", 1
    started = time.monotonic()
    reply = make_model(fake.base_url).invoke([human("hi")], [])
    assert reply.content == "You said: hi"
    assert len(fake.requests) == 2
    assert time.monotonic() - started >= 0.95  # retry-after: 1


def test_rate_limit_asking_for_a_long_pause_is_not_waited_for(fake):
    fake.fail, fake.retry_after = "429", "120"
    err = invoke_error(make_model(fake.base_url))
    assert str(err) == "OpenAI Chat Model: rate limited (429); retry after 120 s"
    assert len(fake.requests) == 1


def test_server_error_before_streaming_is_retried(fake):
    fake.fail, fake.fail_count = "500", 2
    assert make_model(fake.base_url).invoke([human("hi")], []).content == "You said: hi"
    assert len(fake.requests) == 3


@pytest.mark.parametrize("mode", ["malformed", "drop"])
def test_a_stream_broken_after_tokens_is_not_retried(fake, mode):
    fake.fail = mode
    tokens: list[str] = []
    invoke_error(make_model(fake.base_url, maxRetries=2), on_token=tokens.append)
    assert tokens == ["You ", "said: "]
    assert len(fake.requests) == 1


def test_stop_mid_stream_raises_canceled_and_closes_the_stream(fake):
    fake.delay_per_token = 0.3
    cancel = threading.Event()
    tokens: list[str] = []

    def on_token(token: str) -> None:
        tokens.append(token)
        cancel.set()

    model = make_model(fake.base_url)
    with pytest.raises(ExecutionCanceled):
        model.invoke([human("one two three four five six seven eight")], [], on_token, cancel)
    assert tokens == ["You "]  # no token after the stop
    assert fake.client_gone.wait(5)  # the stream was closed, not read to its end
    assert len(fake.sent) < 10  # of the answer's 10 tokens


def _stop_once_asked(fake, cancel: threading.Event) -> None:
    """Stop the call once the server has its request (the model is then waited on)."""
    wait_until(lambda: fake.requests, 10, "the request to reach the server")
    cancel.set()


def test_stop_while_waiting_for_the_first_byte_raises_canceled(fake):
    """Not the timeout's error (the default timeout: 60 s): the stop ended the wait."""
    fake.fail = "hang"
    cancel = threading.Event()
    model = make_model(fake.base_url)
    threading.Thread(target=_stop_once_asked, args=(fake, cancel), daemon=True).start()
    with pytest.raises(ExecutionCanceled):
        model.invoke([human("hi")], [], cancel=cancel)


def test_stop_during_a_retry_wait_raises_canceled(fake):
    """Not the rate limit's error after a 30 s wait and a second 429: the stop ended the wait."""
    fake.fail, fake.retry_after = "429", "30"
    cancel = threading.Event()
    threading.Thread(target=_stop_once_asked, args=(fake, cancel), daemon=True).start()
    with pytest.raises(ExecutionCanceled):
        make_model(fake.base_url).invoke([human("hi")], [], cancel=cancel)
    assert len(fake.requests) == 1


def test_the_node_uses_the_context_cancel_when_invoke_gets_none(fake):
    fake.fail = "hang"
    params = {"model": "gpt-4.1-mini"}
    ctx = StandInContext(params, {}, store_for(fake.base_url), ModelClients())
    model = LmChatOpenAi().supply_data(ctx, 0)
    threading.Timer(0.2, ctx.cancel.set).start()
    with pytest.raises(ExecutionCanceled):
        model.invoke([human("hi")], [])


def test_a_wrong_base_url_path_is_told_apart_from_a_missing_model(fake):
    url = fake.base_url.removesuffix("/v1")
    err = invoke_error(make_model(url))
    assert (
        str(err) == f"OpenAI Chat Model: {url}/chat/completions not found (404): check the base URL"
    )


def test_repr_of_model_hides_the_key(fake):
    model = make_model(fake.base_url)
    assert (
        repr(model)
        == f"OpenAiChatModel(model='gpt-4.1-mini', base_url='{fake.base_url}', api_key=***)"
    )


def test_fake_server_also_answers_without_streaming(fake):
    client = openai.OpenAI(api_key=KEY, base_url=fake.base_url, max_retries=0)
    reply = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "my name is Ada"}]
    )
    assert reply.choices[0].message.content == "Nice to meet you, Ada!"


GEVENT_SCRIPT = textwrap.dedent(
    """
    from gevent import monkey; monkey.patch_all()
    import json, threading, time
    import gevent
    from engine.errors import ExecutionCanceled
    from engine.model_settings import OpenAiSettings
    from memory.messages import human
    from models.clients import ModelClients
    from runtime.patching import unpatched_poll
    from runtime.spawn import spawn
    from tests.fakes.openai_server import start_fake_openai

    server, url = start_fake_openai()
    server.delay_per_token = 0.1
    models = ModelClients(spawn=spawn, poll=unpatched_poll())  # as a worker builds them
    model = models.openai(OpenAiSettings(base_url=url, timeout=30), "sk-test-SECRET-123")
    spans = []

    def timed(i):
        start = time.monotonic()
        answer = model.invoke([human(f"hello {i} a b c")], [])
        spans.append((start, time.monotonic()))
        return answer

    runs = [gevent.spawn(timed, i) for i in range(5)]
    gevent.joinall(runs, raise_error=True)
    # Overlapped rather than queued: every stream had started before the first one ended.
    overlapped = max(s for s, _ in spans) < min(e for _, e in spans)
    server.fail = "hang"
    cancel = threading.Event()
    gevent.spawn_later(0.2, cancel.set)
    started = time.monotonic()
    try:
        model.invoke([human("hi")], [], cancel=cancel)
    except ExecutionCanceled:
        pass
    print(json.dumps({"answers": [r.value.content for r in runs], "overlapped": overlapped,
                      "stop": time.monotonic() - started}))
    """
)


def test_streams_concurrently_and_stops_under_gevent_monkey_patching():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", GEVENT_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["answers"] == [f"You said: hello {i} a b c" for i in range(5)]
    assert result["overlapped"] is True  # 5 streams of ~0.6 s each ran at once, not in a queue
    assert result["stop"] < 10  # the stop ended a request that hangs until its 30 s timeout


def test_server_sent_events_are_read_across_pieces_and_handed_on_per_read():
    """What one read brought is one batch; an event split over reads comes with the read that
    completes it; CRLF lines, several data lines and comments are read as SSE defines them."""
    pieces = [
        b'data: {"a":1}\n\ndata: {"b"',
        b":2}\r\n\r\n: a comment\n\n",
        b"data: x\ndata: y\n\n",
    ]
    assert list(sse_batches(pieces)) == [[b'{"a":1}'], [b'{"b":2}'], [b"x\ny"]]
    assert list(sse_batches([b"data: [DONE]"])) == [[b"[DONE]"]]  # no blank line


def test_the_chunks_of_one_read_are_one_event_and_an_error_comes_after_those_before_it():
    pump = Pump.__new__(Pump)
    pump.events = queue.Queue()
    lone = b'{"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}'  # json reads, orjson not
    assert pump._hand_on([b'{"n":1}', lone]) is False
    assert pump._hand_on([b'{"n":3}', b"[DONE]", b'{"n":4}']) is True
    with pytest.raises(StreamedError):
        pump._hand_on([b'{"n":5}', b'{"error":{"message":"overloaded"}}', b'{"n":6}'])
    events = [pump.events.get_nowait() for _ in range(pump.events.qsize())]
    assert events == [
        ("chunks", [{"n": 1}, json.loads(lone)]),
        ("chunks", [{"n": 3}]),
        ("chunks", [{"n": 5}]),
    ]


@pytest.mark.parametrize("proxied", [False, True])
def test_the_request_is_the_clients_whether_it_goes_straight_or_through_a_configured_proxy(
    fake, monkeypatch, proxied
):
    """With no proxy in the environment the request goes straight to the client's transport;
    with one, through httpx's client and its proxy rules (NO_PROXY lets this one reach the
    fake). The server sees the same request either way: the client's headers and the body."""
    if proxied:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    model = make_model(fake.base_url, model=f"m-{proxied}")  # each fake: its own client
    assert model.invoke([human("hi")], []).content == "You said: hi"
    client = model._clients.client(model.settings, KEY)
    assert (client._direct is None) is proxied
    headers = fake.requests[0]["headers"]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["user-agent"] == client.headers["user-agent"]
    assert headers["accept-encoding"] == client.headers["accept-encoding"]
    assert fake.requests[0]["body"]["model"] == f"m-{proxied}"
