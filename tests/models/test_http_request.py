"""The HTTP Request nodes' client on real sockets (models/http_requests.py, built from settings as
a worker builds it), against fixed-answer servers on loopback (tests/fakes/http_answers.py):
methods, credentials, redirects, timeouts, the size bound, where it may connect (the resolved
address, on every hop) and that a credential goes nowhere it should not."""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading

import pytest

from core.credentials import CredentialStore
from core.settings import Settings
from engine.errors import ExecutionCanceled
from engine.executor import run_workflow
from engine.http_client import HttpFailure, OutgoingRequest
from engine.services import Services
from engine.workflow import load_workflow
from models.egress import EgressPolicy
from models.http_requests import HttpRequests
from tests.engine.http_cases import error, http_workflow, output
from tests.fakes.http_answers import PNG_BODY, start_http_answers

SECRET = "hdr-SECRET-5521"  # distinctive: a leak anywhere is found by a plain search
MAX_BYTES = 64 * 1024


def client(ranges: str = "127.0.0.1/32", **settings) -> HttpRequests:
    """The client as a worker builds it, allowed to reach `ranges` beside public addresses."""
    values = {"http_allowed_ip_ranges": ranges, "http_max_response_bytes": MAX_BYTES, **settings}
    return HttpRequests.from_settings(Settings(**values))


@pytest.fixture(scope="module")
def server():
    answers = start_http_answers("127.0.0.1")
    yield answers
    answers.stop()


@pytest.fixture(scope="module")
def other_host():
    """Another loopback address (127.0.0.2): another origin, and a private one."""
    answers = start_http_answers("127.0.0.2")
    yield answers
    answers.stop()


def run(parameters: dict, http: HttpRequests, version: float = 4.2, credentials=None, refs=None):
    workflow = load_workflow(http_workflow(parameters, version, refs))
    services = Services(http=http, credentials=CredentialStore(credentials or []))
    return run_workflow(workflow, [{"json": {}}], services=services)


HEADER_AUTH = {
    "authentication": "genericCredentialType",
    "genericAuthType": "httpHeaderAuth",
}
HEADER_CREDENTIAL = [{"id": "h1", "name": "Header", "type": "httpHeaderAuth",
                      "data": {"name": "X-Api-Key", "value": SECRET}}]  # fmt: skip


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_each_method_reaches_the_server_with_its_body(server, method):
    params = {"method": method, "url": f"{server.url}/echo", "sendBody": True,
              "bodyParameters": {"parameters": [{"name": "a", "value": "1"}]}}  # fmt: skip
    [echo] = output(run(params, client()))
    assert (echo["method"], json.loads(echo["body"])) == (method, {"a": "1"})


def test_head_gets_the_headers_and_no_body(server):
    options = {"response": {"response": {"fullResponse": True}}}
    [item] = output(
        run({"method": "HEAD", "url": f"{server.url}/json", "options": options}, client())
    )
    assert item["statusCode"] == 200 and item["headers"]["content-type"].startswith(
        "application/json"
    )


def test_a_files_answer_is_read_whole(server):
    http = client()
    answer = http.send(OutgoingRequest("GET", f"{server.url}/file.png"))
    assert (answer.status, answer.body) == (200, PNG_BODY)


def test_kept_alive_connections_serve_the_next_requests(server):
    http, before = client(), len(server.open)
    for _ in range(3):
        assert http.send(OutgoingRequest("GET", f"{server.url}/json")).status == 200
    assert len(server.open) - before == 1


def test_header_and_basic_credentials_reach_the_server(server):
    [echo] = output(run({"url": f"{server.url}/echo", **HEADER_AUTH}, client(),
                        credentials=HEADER_CREDENTIAL))  # fmt: skip
    assert echo["headers"]["x-api-key"] == SECRET
    basic = [{"type": "httpBasicAuth", "data": {"user": "ada", "password": "pw"}}]
    params = {"url": f"{server.url}/echo", "authentication": "genericCredentialType",
              "genericAuthType": "httpBasicAuth"}  # fmt: skip
    [echo] = output(run(params, client(), credentials=basic))
    assert echo["headers"]["authorization"] == "Basic " + base64.b64encode(b"ada:pw").decode()


def test_a_hanging_server_gives_the_timeout_error_and_the_node_fails(server):
    err = error(run({"url": f"{server.url}/hang", "options": {"timeout": 300}}, client()))
    assert err["message"] == "The connection was aborted, perhaps the server is offline"
    assert (err["httpCode"], err["description"]) == ("ECONNABORTED", None)  # as n8n's


def test_a_closed_port_is_refused_as_n8n_words_it():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connecting is refused
        err = error(run({"url": f"http://127.0.0.1:{port}/x"}, client()))
    assert err["message"] == "The service refused the connection - perhaps it is offline"
    assert err["httpCode"] == "ECONNREFUSED"


def test_an_answer_of_exactly_the_bound_is_read_and_one_byte_more_fails(server):
    http = client()
    assert (
        len(http.send(OutgoingRequest("GET", f"{server.url}/big?bytes={MAX_BYTES}")).body)
        == MAX_BYTES
    )
    for path in ("big", "gzip"):  # gzip: the bound counts what it inflates to
        with pytest.raises(HttpFailure) as info:
            http.send(OutgoingRequest("GET", f"{server.url}/{path}?bytes={MAX_BYTES + 1}"))
        assert info.value.code == "TOO_LARGE"
        assert "MINI_N8N_HTTP_MAX_RESPONSE_BYTES" in info.value.message


def test_a_small_gzip_answer_that_inflates_past_the_bound_is_stopped_early(server):
    http = client(http_max_response_bytes=1024)
    with pytest.raises(HttpFailure) as info:
        http.send(OutgoingRequest("GET", f"{server.url}/gzip?bytes={8 * 1024 * 1024}"))
    assert info.value.code == "TOO_LARGE"


def test_loopback_and_private_addresses_are_refused_unless_allowed(server):
    err = error(run({"url": f"{server.url}/json"}, client(ranges="")))
    assert (
        err["message"] == "The request was blocked because it resolves to a restricted IP address"
    )
    assert "MINI_N8N_HTTP_ALLOWED_IP_RANGES" in err["description"]
    assert output(run({"url": f"{server.url}/json"}, client(ranges="", http_allow_private=True)))


def test_a_name_is_judged_by_the_address_it_resolves_to(server):
    """`localhost` is a name, not an address: its resolved 127.0.0.1 is what is checked."""
    err = error(run({"url": f"http://localhost:{server.port}/json"}, client(ranges="")))
    assert (
        err["message"] == "The request was blocked because it resolves to a restricted IP address"
    )
    allowed = client(ranges="", http_allowed_hostnames="localhost")
    assert output(run({"url": f"http://localhost:{server.port}/json"}, allowed))


def test_a_redirect_to_a_private_address_is_refused_and_never_reaches_it(server, other_host):
    before = len(other_host.requests)
    target = f"{other_host.url}/json"
    err = error(run({"url": f"{server.url}/redirect?to={target}"}, client("127.0.0.1/32")))
    assert (
        err["message"] == "The request was blocked because it resolves to a restricted IP address"
    )
    assert "127.0.0.2" in err["description"]
    assert len(other_host.requests) == before


def test_redirects_are_followed_up_to_their_bound(server):
    http = client()
    assert output(run({"url": f"{server.url}/redirect?to=/json"}, http))[0]["name"] == "Ada"
    loop = f"{server.url}/loop"
    options = {"redirect": {"redirect": {"followRedirects": True, "maxRedirects": 2}}}
    err = error(run({"url": loop, "options": options}, http))
    assert err["message"] == "Maximum number of redirects (2) exceeded"


def test_a_post_redirected_by_303_becomes_a_get_without_its_body(server):
    params = {"method": "POST", "url": f"{server.url}/redirect?status=303&to=/echo",
              "sendBody": True, "bodyParameters": {"parameters": [{"name": "a", "value": "1"}]}}  # fmt: skip
    [echo] = output(run(params, client()))
    assert (echo["method"], echo["body"]) == ("GET", "")
    assert "content-type" not in echo["headers"]


def test_credentials_are_dropped_on_a_redirect_to_another_origin_from_4_4(server, other_host):
    """Same origin: kept. Another origin: dropped from 4.4 on (n8n's default), also the
    credential's own header (n8n drops only Authorization and Cookie)."""
    http = client("127.0.0.0/8")
    same = {"url": f"{server.url}/redirect?to=/echo", **HEADER_AUTH}
    [echo] = output(run(same, http, 4.4, HEADER_CREDENTIAL))
    assert echo["headers"]["x-api-key"] == SECRET
    other = {"url": f"{server.url}/redirect?to={other_host.url}/echo", **HEADER_AUTH}
    [echo] = output(run(other, http, 4.4, HEADER_CREDENTIAL))
    assert "x-api-key" not in echo["headers"]
    [echo] = output(run(other, http, 4.2, HEADER_CREDENTIAL))  # before 4.4, n8n sent them
    assert echo["headers"]["x-api-key"] == SECRET


def test_a_redirect_outside_the_credentials_domains_is_refused(server, other_host):
    credential = [{"type": "httpHeaderAuth", "data": {"name": "X-Api-Key", "value": SECRET,
                   "allowedHttpRequestDomains": "domains", "allowedDomains": "127.0.0.1"}}]  # fmt: skip
    params = {"url": f"{server.url}/redirect?to={other_host.url}/echo", **HEADER_AUTH}
    before = len(other_host.requests)
    err = error(run(params, client("127.0.0.0/8"), 4.2, credential))
    assert err["message"].startswith("Domain not allowed: This credential is restricted from "
                                     "accessing 127.0.0.2")  # fmt: skip
    assert len(other_host.requests) == before


def test_a_credential_is_in_no_error_record_or_log_line(server, caplog):
    caplog.set_level(logging.DEBUG)
    params = {"url": f"{server.url}/status/401?key={SECRET}", **HEADER_AUTH}
    done = run(params, client(), credentials=HEADER_CREDENTIAL)
    err = error(done)
    assert err["message"] == "Authorization failed - please check your credentials"
    recorded = json.dumps(done.run_data) + (done.error or "") + caplog.text
    assert SECRET not in recorded.replace(f"key={SECRET}", "")  # the URL is the workflow's own
    assert SECRET not in caplog.text


def test_a_stop_ends_the_wait_for_an_answer():
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel does), never answers
    cancel = threading.Event()
    http = client()
    threading.Timer(0.2, cancel.set).start()
    with pytest.raises(ExecutionCanceled):
        http.send(
            OutgoingRequest("GET", f"http://127.0.0.1:{listener.getsockname()[1]}/", timeout=60),
            cancel,
        )
    listener.close()


@pytest.mark.parametrize(
    ("address", "allowed"),
    [("127.0.0.1", False), ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False),
     ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("::1", False),
     ("fe80::1", False), ("fd00::1", False), ("::ffff:127.0.0.1", False), ("224.0.0.1", False),
     ("8.8.8.8", True), ("2606:4700:4700::1111", True)],
)  # fmt: skip
def test_only_public_addresses_are_allowed_by_default(address, allowed):
    import ipaddress

    assert EgressPolicy().address_allowed(ipaddress.ip_address(address)) is allowed


def test_every_address_a_name_resolves_to_must_be_allowed():
    def resolve(host, port, type=0):
        return [(2, 1, 6, "", ("93.184.216.34", port)), (2, 1, 6, "", ("10.0.0.5", port))]

    with pytest.raises(HttpFailure) as info:
        EgressPolicy().addresses("rebinding.example", 443, resolve)
    assert (
        info.value.code == "SSRF_BLOCKED"
        and "'rebinding.example' (10.0.0.5)" in info.value.description
    )


def test_the_connection_goes_to_the_address_that_was_checked_without_a_second_lookup(server):
    """A name only the client's resolver knows: connecting by the name again would fail."""
    looked_up = []

    def resolve(host, port, type=0):
        looked_up.append(host)
        return [(2, 1, 6, "", (server.host, port))]

    http = HttpRequests(EgressPolicy.from_settings(Settings(http_allowed_ip_ranges="127.0.0.1/32")),
                        MAX_BYTES, resolve=resolve)  # fmt: skip
    answer = http.send(OutgoingRequest("GET", f"http://only-here.test:{server.port}/json"))
    assert answer.status == 200 and looked_up == ["only-here.test"]


def test_a_header_http_cannot_carry_fails_before_anything_is_sent(server):
    before = len(server.requests)
    params = {"url": f"{server.url}/echo", "sendHeaders": True,
              "headerParameters": {"parameters": [{"name": "X-Custom", "value": "a\r\nInjected: 1"}]}}  # fmt: skip
    err = error(run(params, client()))
    assert err["message"] == 'Invalid character in header content ["x-custom"]'
    assert len(server.requests) == before
    latin = {**params, "headerParameters": {"parameters": [{"name": "X-Custom", "value": "café"}]}}
    [echo] = output(run(latin, client()))
    assert echo["headers"]["x-custom"] == "café"  # Latin-1 on the wire, as Node.js sends it
