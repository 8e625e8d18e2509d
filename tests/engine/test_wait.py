"""The Wait node in-process: every wait pauses the execution (a Run "waiting" with its deadline and
what ends it), and goes on as a worker continues it: with the node's items when its time came,
with the resume URL's request when it was called."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.errors import WorkflowValidationError
from engine.executor import run_workflow
from engine.services import Services
from engine.workflow import load_workflow
from tests.sub_workflows import CHAT, chat_trigger, node, set_node, wait_for_call, workflow

NOW = 1_800_000_000.0  # the services' clock, in seconds
MESSAGE = {"json": {"sessionId": "s", "action": "sendMessage", "chatInput": "hi"}}
SERVICES = Services(clock=lambda: NOW, webhook_url="https://chat.example.com/")


def waiting(parameters: dict, version: float = 1.1, **settings):
    wait = node("Wait", "n8n-nodes-base.wait", version, parameters, webhookId="w-1")
    flow = workflow("Wait", [chat_trigger(), wait, set_node("After", said="={{ $json.chatInput }}")],
                    [CHAT, "Wait", "After"])  # fmt: skip
    flow["settings"].update(settings)
    return load_workflow(flow)


def paused(flow, services: Services = SERVICES):
    run = run_workflow(flow, [MESSAGE], services=services, execution_id="e1", mode="webhook")
    assert run.status == "waiting", run.error
    return run


def go_on(flow, run, reply=None):
    resume = {"state": run.waiting, "reply": reply, **({"expired": True} if reply is None else {})}
    return run_workflow(flow, [], services=SERVICES, execution_id="e1", mode="webhook",
                        resume=resume)  # fmt: skip


@pytest.mark.parametrize(
    ("version", "parameters", "seconds"),
    [
        (1.1, {}, 5),  # 1.1's default: 5 seconds
        (1, {}, 3600),  # 1's: 1 hour
        (1.1, {"amount": 2, "unit": "minutes"}, 120),
        (1.1, {"amount": 0.01}, 0.01),
        (1.1, {"amount": 1.5, "unit": "days"}, 129600),
    ],
)
def test_a_time_interval_waits_in_redis_until_its_time_then_passes_its_items_on(
    version, parameters, seconds
):
    flow = waiting(parameters, version)
    run = paused(flow)
    assert run.waiting["waitTill"] == int((NOW + seconds) * 1000)
    assert run.waiting["waitFor"] == "time"
    assert run.run_data["Wait"][0]["executionStatus"] == "waiting"
    done = go_on(flow, run)
    assert done.status == "success"
    assert done.run_data["Wait"][0]["data"]["main"] == [[MESSAGE]]
    assert done.first_json() == {"said": "hi"}


def test_a_wait_of_nothing_or_a_time_gone_by_goes_on_at_once():
    for parameters in (
        {"amount": 0},
        {"resume": "specificTime", "dateTime": "2020-01-01T00:00:00Z"},
    ):
        run = run_workflow(waiting(parameters), [MESSAGE], services=SERVICES)
        assert (run.status, run.first_json()) == ("success", {"said": "hi"})


@pytest.mark.parametrize(
    ("moment", "timezone", "expected"),
    [
        ("2030-01-01T10:00:00Z", None, "2030-01-01T10:00:00+00:00"),
        ("2030-01-01T10:00:00+02:00", None, "2030-01-01T08:00:00+00:00"),
        ("2030-01-01T10:00:00", "Europe/Berlin", "2030-01-01T09:00:00+00:00"),
        ("2030-01-01 10:00:00", None, "2030-01-01T15:00:00+00:00"),  # n8n's default zone: New York
        ("Tue, 01 Jan 2030 10:00:00 GMT", None, "2030-01-01T10:00:00+00:00"),
    ],
)
def test_a_specific_time_waits_until_then_a_time_without_offset_in_the_workflows_zone(
    moment, timezone, expected
):
    settings = {"timezone": timezone} if timezone else {}
    run = paused(waiting({"resume": "specificTime", "dateTime": moment}, **settings))
    till = datetime.fromtimestamp(run.waiting["waitTill"] / 1000, UTC)
    assert till.isoformat() == expected


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {"amount": "={{ -1 }}"},
            "Invalid wait amount. Please enter a number that is 0 or greater.",
        ),
        ({"amount": "=abc"}, "Invalid wait amount. Please enter a number that is 0 or greater."),
        ({"resume": "specificTime", "dateTime": "=not a date"}, "`dateTime` parameter is not a"),
    ],
)
def test_a_wait_it_cannot_read_fails_with_n8ns_words(parameters, message):
    run = run_workflow(waiting(parameters), [MESSAGE], services=SERVICES)
    assert (run.status, run.error_node) == ("error", "Wait")
    assert message in run.error


def test_a_wait_for_a_call_has_no_deadline_unless_limited_and_goes_on_with_the_request():
    flow = waiting({"resume": "webhook", "httpMethod": "POST"})
    run = paused(flow)
    assert (run.waiting["waitTill"], run.waiting["waitFor"]) == (None, "webhook")
    request = {"json": {"headers": {}, "params": {}, "query": {}, "body": {"chatInput": "yes"}}}
    done = go_on(flow, run, request)
    assert done.run_data["Wait"][0]["data"]["main"] == [[request]]
    assert done.run_data["After"][0]["executionStatus"] == "success"
    limited = waiting({"resume": "webhook", "limitWaitTime": True, "resumeAmount": 2,
                       "resumeUnit": "minutes"})  # fmt: skip
    run = paused(limited)
    assert run.waiting["waitTill"] == int((NOW + 120) * 1000)
    assert go_on(limited, run).first_json() == {"said": "hi"}  # no call: its items go on


def test_resume_url_is_webhook_url_webhook_waiting_id_with_a_signature_kept_across_the_wait():
    flow = load_workflow(workflow(
        "Link",
        [chat_trigger(), set_node("Link", url="={{ $execution.resumeUrl }}"), wait_for_call("Wait"),
         set_node("Again", url="={{ $execution.resumeUrl }}", mode="={{ $execution.mode }}")],
        [CHAT, "Link", "Wait", "Again"],
    ))  # fmt: skip
    run = paused(flow)
    url = run.run_data["Link"][0]["data"]["main"][0][0]["json"]["url"]
    prefix = "https://chat.example.com/webhook-waiting/e1?signature="
    assert url.startswith(prefix) and len(url) == len(prefix) + 64
    assert run.waiting["resumeToken"] == url.removeprefix(prefix)
    done = go_on(flow, run, {"json": {}})
    assert done.first_json() == {"url": url, "mode": "production"}


@pytest.mark.parametrize(
    ("parameters", "refusal"),
    [
        ({"resume": "form"}, "On Form Submitted"),
        (
            {"resume": "webhook", "incomingAuthentication": "jwtAuth"},
            'unknown authentication "jwtAuth"',
        ),
        ({"unit": "weeks"}, 'unknown wait unit "weeks"'),
    ],
)
def test_what_mini_n8n_cannot_do_is_refused_when_the_workflow_is_loaded(parameters, refusal):
    with pytest.raises(WorkflowValidationError) as info:
        waiting(parameters)
    assert info.value.node == "Wait"
    assert refusal in str(info.value)
