"""HTTP Request in-process: the request each set of parameters builds (as n8n's version 3 to 4.5
builds it), the items each answer gives, n8n's error messages, credentials and where they may
go, and what is refused at import. The client is a recording stand-in (tests/engine/http_cases.py).
"""

from __future__ import annotations

import base64
import json

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from tests.engine.http_cases import (
    RecordingClient,
    answer,
    error,
    http_workflow,
    output,
    run_http,
)

URL = "https://api.example.com/v1/things"
SECRET = "s3cr3t-token-7788"


def pairs(*rows: tuple[str, str]) -> dict:
    return {"parameters": [{"name": n, "value": v} for n, v in rows]}


def test_a_get_carries_n8ns_headers_and_its_query_as_qs_writes_it():
    client = RecordingClient()
    params = {"url": URL + "?x=0", "sendQuery": True,
              "queryParameters": pairs(("q", "a b:c"), ("who", "={{ $json.who }}"))}  # fmt: skip
    run = run_http(params, client, [{"json": {"who": "Ada"}}])
    request = client.requests[0]
    assert (request.method, request.url) == ("GET", URL + "?x=0&q=a%20b%3Ac&who=Ada")
    assert client.header("user-agent") == "n8n"
    assert client.header("accept").startswith("application/json,text/html")
    assert request.body is None and request.timeout == 300  # n8n's default: five minutes
    assert output(run) == [{"ok": True}]


def test_repeated_query_names_overwrite_before_4_3_and_become_indices_from_4_3():
    params = {"url": URL, "sendQuery": True, "queryParameters": pairs(("a", "1"), ("a", "2"))}
    older, newer = RecordingClient(), RecordingClient()
    run_http(params, older, version=4.2)
    run_http(params, newer, version=4.3)
    assert older.requests[0].url == URL + "?a=2"
    assert newer.requests[0].url == URL + "?a%5B0%5D=1&a%5B1%5D=2"


def test_a_json_body_of_fields_nests_dotted_names_from_version_4():
    params = {"method": "POST", "url": URL, "sendBody": True,
              "bodyParameters": pairs(("name", "Ada"), ("nested.value", "1"))}  # fmt: skip
    v4, v3 = RecordingClient(), RecordingClient()
    run_http(params, v4, version=4.2)
    run_http(params, v3, version=3)
    assert json.loads(v4.requests[0].body) == {"name": "Ada", "nested": {"value": "1"}}
    assert json.loads(v3.requests[0].body) == {"name": "Ada", "nested.value": "1"}
    assert v4.header("content-type") == "application/json"


def test_a_json_body_that_is_not_json_fails_naming_the_field():
    params = {"method": "POST", "url": URL, "sendBody": True, "specifyBody": "json",
              "jsonBody": "{not json"}  # fmt: skip
    client = RecordingClient()
    err = error(run_http(params, client))
    assert err["message"] == 'The value in the "JSON Body" field is not valid JSON'
    assert client.requests == []


def test_form_raw_and_binary_bodies_carry_their_content_types():
    form, raw, binary = RecordingClient(), RecordingClient(), RecordingClient()
    run_http({"method": "POST", "url": URL, "sendBody": True, "contentType": "form-urlencoded",
              "bodyParameters": pairs(("a", "1 2"), ("b", "x&y"))}, form)  # fmt: skip
    run_http({"method": "PUT", "url": URL, "sendBody": True, "contentType": "raw",
              "rawContentType": "text/csv", "body": "a,b\n1,2"}, raw)  # fmt: skip
    item = {"json": {}, "binary": {"doc": {"data": base64.b64encode(b"%PDF").decode(),
                                           "mimeType": "application/pdf"}}}  # fmt: skip
    run_http({"method": "POST", "url": URL, "sendBody": True, "contentType": "binaryData",
              "inputDataFieldName": "doc"}, binary, [item])  # fmt: skip
    assert (form.requests[0].body, form.header("content-type")) == (
        b"a=1%202&b=x%26y",
        "application/x-www-form-urlencoded",
    )
    assert (raw.requests[0].body, raw.header("content-type")) == (b"a,b\n1,2", "text/csv")
    assert (binary.requests[0].body, binary.header("content-type")) == (b"%PDF", "application/pdf")


def test_a_multipart_body_holds_each_field_and_file_as_a_part():
    client = RecordingClient()
    item = {"json": {}, "binary": {"f": {"data": base64.b64encode(b"hello").decode(),
                                         "mimeType": "text/plain", "fileName": "a.txt"}}}  # fmt: skip
    rows = [{"name": "title", "value": "Hi"},
            {"parameterType": "formBinaryData", "name": "file", "inputDataFieldName": "f"}]  # fmt: skip
    run_http({"method": "POST", "url": URL, "sendBody": True, "contentType": "multipart-form-data",
              "bodyParameters": {"parameters": rows}}, client, [item])  # fmt: skip
    boundary = client.header("content-type").split("boundary=")[1]
    body = client.requests[0].body.decode()
    assert f'--{boundary}\r\nContent-Disposition: form-data; name="title"\r\n\r\nHi\r\n' in body
    assert 'name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n' in body
    assert body.endswith(f"--{boundary}--\r\n")


def test_headers_are_lower_cased_unless_the_option_says_not():
    lower, kept = RecordingClient(), RecordingClient()
    params = {"url": URL, "sendHeaders": True, "headerParameters": pairs(("X-Trace", "1"))}
    run_http(params, lower)
    run_http({**params, "options": {"lowercaseHeaders": False}}, kept)
    assert ("x-trace", "1") in lower.requests[0].headers
    assert ("X-Trace", "1") in kept.requests[0].headers


def test_redirects_timeout_and_cross_origin_credentials_follow_the_version():
    clients = {v: RecordingClient() for v in (3, 4.2, 4.4)}
    for version, client in clients.items():
        run_http({"url": URL, "options": {"timeout": 1500}}, client, version=version)
    assert clients[3].requests[0].max_redirects == 0  # version 3 follows none unless set
    assert clients[4.2].requests[0].max_redirects == 21
    assert clients[4.2].requests[0].credentials_cross_origin is True  # before 4.4
    assert clients[4.4].requests[0].credentials_cross_origin is False
    assert clients[4.4].requests[0].timeout == 1.5
    off = RecordingClient()
    run_http({"url": URL, "options": {"redirect": {"redirect": {"followRedirects": False}}}}, off)
    assert off.requests[0].max_redirects == 0


@pytest.mark.parametrize(
    ("kind", "data", "header"),
    [
        ("httpBasicAuth", {"user": "ada", "password": SECRET},
         ("Authorization", "Basic " + base64.b64encode(f"ada:{SECRET}".encode()).decode())),
        ("httpBearerAuth", {"token": SECRET}, ("Authorization", f"Bearer {SECRET}")),
        ("httpHeaderAuth", {"name": "X-Api-Key", "value": SECRET}, ("X-Api-Key", SECRET)),
        ("httpCustomAuth", {"json": json.dumps({"headers": {"X-Custom": SECRET}})},
         ("X-Custom", SECRET)),
    ],
)  # fmt: skip
def test_generic_credentials_add_their_header_and_mark_it_a_credential(kind, data, header):
    client = RecordingClient()
    credential = {"id": "c1", "name": "cred", "type": kind, "data": data}
    params = {"url": URL, "authentication": "genericCredentialType", "genericAuthType": kind}
    run = run_http(params, client, credentials=[credential])
    assert output(run) == [{"ok": True}]
    assert header in client.requests[0].headers
    assert header[0].lower() in client.requests[0].credential_headers


def test_query_auth_and_openai_credentials():
    query, openai = RecordingClient(), RecordingClient()
    run_http({"url": URL, "authentication": "genericCredentialType", "genericAuthType": "httpQueryAuth"},
             query, credentials=[{"type": "httpQueryAuth", "data": {"name": "key", "value": "k1"}}])  # fmt: skip
    own = "https://api.openai.com/v1"
    run_http({"url": own + "/models", "authentication": "predefinedCredentialType",
              "nodeCredentialType": "openAiApi"}, openai,
             credentials=[{"type": "openAiApi", "data": {"apiKey": SECRET, "organizationId": "org-1"}}])  # fmt: skip
    assert query.requests[0].url == URL + "?key=k1"
    assert ("Authorization", f"Bearer {SECRET}") in openai.requests[0].headers
    assert ("OpenAI-Organization", "org-1") in openai.requests[0].headers
    assert openai.requests[0].allowed_domains == "api.openai.com"  # its own host only


def test_a_credential_goes_only_where_its_allowed_domains_say_and_nothing_is_sent_otherwise():
    params = {
        "url": URL,
        "authentication": "genericCredentialType",
        "genericAuthType": "httpBearerAuth",
    }
    listed = {
        "token": SECRET,
        "allowedHttpRequestDomains": "domains",
        "allowedDomains": "*.example.org",
    }
    blocked = {"token": SECRET, "allowedHttpRequestDomains": "none"}
    for data, message in (
        (listed, "Domain not allowed: This credential is restricted from accessing "
                 "api.example.com. Only the following domains are allowed: *.example.org"),
        (blocked, "This credential is configured to prevent use within an HTTP Request or "
                  "GraphQL node"),
    ):  # fmt: skip
        client = RecordingClient()
        err = error(
            run_http(params, client, credentials=[{"type": "httpBearerAuth", "data": data}])
        )
        assert err["message"] == message
        assert client.requests == []
    allowed = RecordingClient()
    ok = {**listed, "allowedDomains": "*.example.com"}
    run_http(params, allowed, credentials=[{"type": "httpBearerAuth", "data": ok}])
    assert allowed.requests[0].allowed_domains == "*.example.com"  # redirects are held to it


def test_status_errors_say_what_n8n_says_and_hide_the_credential_the_server_echoed():
    echoed = RecordingClient(lambda r: answer(401, {"message": f"bad token {SECRET}"}))
    params = {
        "url": URL,
        "authentication": "genericCredentialType",
        "genericAuthType": "httpBearerAuth",
    }
    run = run_http(
        params, echoed, credentials=[{"type": "httpBearerAuth", "data": {"token": SECRET}}]
    )
    err = error(run)
    assert (err["message"], err["httpCode"]) == (
        "Authorization failed - please check your credentials",
        "401",
    )
    assert err["description"] == "bad token **hidden**"
    assert SECRET not in json.dumps(run.run_data) and SECRET not in (run.error or "")
    for status, message in ((429, "The service is receiving too many requests from you"),
                            (418, "Your request is invalid or could not be processed by the service"),
                            (502, "Bad gateway - the service failed to handle your request")):  # fmt: skip
        err = error(run_http({"url": URL}, RecordingClient(lambda r, s=status: answer(s, {}))))
        assert (err["message"], err["httpCode"]) == (message, str(status))


def test_never_error_hands_on_the_answer_with_its_status():
    client = RecordingClient(
        lambda r: answer(500, {"message": "down"}, reason="Internal Server Error")
    )
    options = {"response": {"response": {"neverError": True, "fullResponse": True}}}
    assert output(run_http({"url": URL, "options": options}, client)) == [{
        "body": {"message": "down"}, "headers": {"content-type": "application/json"},
        "statusCode": 500, "statusMessage": "Internal Server Error"}]  # fmt: skip


def test_answers_become_items_as_n8n_makes_them():
    def run(body, content_type, **response):
        client = RecordingClient(lambda r: answer(200, body, content_type))
        options = {"response": {"response": response}} if response else {}
        return output(run_http({"url": URL, "options": options}, client))

    assert run([{"n": 1}, {"n": 2}], "application/json") == [{"n": 1}, {"n": 2}]
    assert run(b"", "application/json") == [{}]
    assert run(b"plain words", "text/plain") == [{"data": "plain words"}]
    assert run(b"", "text/plain") == [{}]
    assert run({"a": 1}, "application/json", responseFormat="text") == [{"data": '{"a":1}'}]
    assert run(b"caf\xe9", "text/plain; charset=latin-1") == [{"data": "café"}]
    bad = RecordingClient(lambda r: answer(200, b"{oops", "application/json"))
    assert error(run_http({"url": URL}, bad))["message"] == "Invalid JSON in response body"


def test_a_file_answer_is_a_binary_item_beside_the_input_json():
    client = RecordingClient(lambda r: answer(200, b"\x89PNG....", "image/png"))
    run = run_http({"url": "https://x.example/pic.png"}, client, [{"json": {"keep": 1}}])
    item = run.run_data["HTTP Request"][0]["data"]["main"][0][0]
    assert item["json"] == {"keep": 1}
    assert item["binary"]["data"] == {
        "data": base64.b64encode(b"\x89PNG....").decode(), "mimeType": "image/png",
        "fileExtension": "png", "fileSize": "8 B", "fileType": "image", "fileName": "pic.png"}  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pagination": {"pagination": {"paginationMode": "updateAParameterInEachRequest"}}},
         "pagination (options.pagination) is not supported"),
        ({"proxy": "http://proxy:3128"}, "a proxy (options.proxy) is not supported"),
    ],
)  # fmt: skip
def test_what_the_node_cannot_do_is_refused_at_import_naming_the_node(options, message):
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(http_workflow({"url": URL, "options": options}))
    assert info.value.node == "HTTP Request" and message in info.value.message


def test_a_credential_type_it_cannot_send_is_refused_at_import():
    params = {"url": URL, "authentication": "genericCredentialType", "genericAuthType": "oAuth2Api"}
    with pytest.raises(WorkflowValidationError) as info:
        load_workflow(http_workflow(params))
    assert 'unknown generic auth type "oAuth2Api"' in info.value.message


def test_batching_waits_its_interval_before_each_new_batch():
    client, waits = RecordingClient(), []
    services = Services(http=client, sleep=waits.append)
    options = {"batching": {"batch": {"batchSize": 2, "batchInterval": 250}}}
    run = run_workflow(load_workflow(http_workflow({"url": URL, "options": options})),
                       [{"json": {"i": i}} for i in range(5)], services=services)  # fmt: skip
    assert run.status == "success" and len(client.requests) == 5
    assert round(sum(waits), 6) == 0.5  # before items 2 and 4: two batch intervals
