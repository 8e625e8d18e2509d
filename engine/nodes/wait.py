"""Wait (`n8n-nodes-base.wait`): pause the execution, then go on with the node's items. Versions 1
and 1.1 as n8n 2.41.1 has them (1.1 waits 5 seconds by default, 1 one hour).

- `resume` "timeInterval" (`amount` `unit`) or "specificTime" (`dateTime`; a time without an
  offset is in the workflow's `settings.timezone`, n8n's default America/New_York): the
  execution waits until then and goes on with the node's input items.
- "webhook": it waits until `$execution.resumeUrl` is called (`<WEBHOOK_URL>webhook-waiting/
  <execution id>[/<webhookSuffix>]?signature=<token>`) with the node's `httpMethod`, and goes
  on with the request as its item (`headers`, `params`, `query`, `body`, as the Webhook node
  gives it); `incomingAuthentication` none or basicAuth; `responseMode` onReceived, lastNode or
  responseNode answers the call (api/wait_webhook.py). `limitWaitTime` ends the wait without a
  call, the node's input going on, as in n8n.
- "form" is not supported (refused when the workflow is saved), nor header or JWT auth (not
  offered).

Every wait holds no worker: the node raises WaitingForReply, the execution's state goes to Redis
(`waiting`, with its deadline in `executions:waiting`), and whichever worker the sweep or the
call hands it to goes on. n8n keeps a wait under 65 s in its process and puts a longer one in
its database; here every wait is in Redis, whatever its length, and a wait of 0 goes on at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.workflow_store import WEBHOOK_METHODS
from engine.description import CredentialSlot, NodeDescription, Option, Property
from engine.errors import NodeExecutionError, WaitingForReply, WorkflowValidationError
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node

UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}
DEFAULT_TIMEZONE = "America/New_York"  # n8n's GENERIC_TIMEZONE default
# n8n's threshold: a shorter wait stays in its process; the request that started the execution
# then gets the answer after it. A longer one is answered when the wait begins (api/responses.py).
SHORT_WAIT_MS = 65_000
_WEBHOOK = {"resume": ("webhook",)}
_LIMITED = {"limitWaitTime": (True,), "resume": ("webhook", "form")}
_UNITS = tuple(Option(u, u.capitalize()) for u in UNIT_SECONDS)


def _amount(default: float, versions: Any) -> Property:
    return Property("amount", "Wait Amount", "number", default,
                    description="The time to wait",
                    type_options={"minValue": 0, "numberPrecision": 2},
                    display_options={"show": {"resume": ("timeInterval",), "@version": versions}})  # fmt: skip


def _unit(default: str, versions: Any) -> Property:
    return Property("unit", "Wait Unit", "options", default, options=_UNITS,
                    description="The time unit of the Wait Amount value",
                    display_options={"show": {"resume": ("timeInterval",), "@version": versions}})  # fmt: skip


_V1, _V1_1 = (1,), ({"_cnd": {"gte": 1.1}},)
_RESPONSE_MODES = (
    Option("onReceived", "Immediately", "As soon as this node executes"),
    Option("lastNode", "When Last Node Finishes", "Returns data of the last-executed node"),
    Option("responseNode", "Using 'Respond to Webhook' Node", "Response defined in that node"),
)
_PROPERTIES = (
    Property(
        "resume",
        "Resume",
        "options",
        "timeInterval",
        description="Determines the waiting mode to use before the workflow continues",
        options=(
            Option("timeInterval", "After Time Interval", "Waits for a certain amount of time"),
            Option("specificTime", "At Specified Time", "Waits until a specific date and time"),
            Option("webhook", "On Webhook Call", "Waits for a webhook call before continuing"),
            Option("form", "On Form Submitted", "Not supported by mini-n8n"),
        ),
    ),
    Property(
        "incomingAuthentication",
        "Authentication",
        "options",
        "none",
        description="If and how incoming resume-webhook-requests to $execution.resumeUrl "
        "should be authenticated for additional security",
        options=(Option("basicAuth", "Basic Auth"), Option("none", "None")),
        display_options={"show": _WEBHOOK},
    ),
    Property(
        "dateTime",
        "Date and Time",
        "string",
        "",
        required=True,
        description="The date and time to wait for before continuing",
        display_options={"show": {"resume": ("specificTime",)}},
    ),  # fmt: skip
    _amount(1, _V1),
    _amount(5, _V1_1),
    _unit("hours", _V1),
    _unit("seconds", _V1_1),
    Property(
        "httpMethod",
        "HTTP Method",
        "options",
        "GET",
        description="The HTTP method of the Webhook call",
        options=tuple(Option(m, m) for m in sorted(WEBHOOK_METHODS)),
        display_options={"show": _WEBHOOK},
    ),  # fmt: skip
    Property(
        "responseCode",
        "Response Code",
        "number",
        200,
        description="The HTTP Response code to return",
        type_options={"minValue": 100, "maxValue": 599},
        display_options={"show": _WEBHOOK, "hide": {"responseMode": ("responseNode",)}},
    ),  # fmt: skip
    Property(
        "responseMode",
        "Respond",
        "options",
        "onReceived",
        options=_RESPONSE_MODES,
        description="When and how to respond to the webhook",
        display_options={"show": _WEBHOOK},
    ),  # fmt: skip
    Property(
        "responseData",
        "Response Data",
        "options",
        "firstEntryJson",
        options=(
            Option("allEntries", "All Entries", "Returns all the entries of the last node"),
            Option("firstEntryJson", "First Entry JSON", "The JSON of the first entry"),
            Option("noData", "No Response Body", "Returns without a body"),
        ),
        display_options={"show": {**_WEBHOOK, "responseMode": ("lastNode",)}},
    ),
    Property(
        "limitWaitTime",
        "Limit Wait Time",
        "boolean",
        False,
        description="Whether to limit the time this node should wait for a user response "
        "before execution resumes",
        display_options={"show": {"resume": ("webhook", "form")}},
    ),  # fmt: skip
    Property(
        "limitType",
        "Limit Type",
        "options",
        "afterTimeInterval",
        options=(
            Option("afterTimeInterval", "After Time Interval"),
            Option("atSpecifiedTime", "At Specified Time"),
        ),
        display_options={"show": _LIMITED},
    ),
    Property(
        "resumeAmount",
        "Amount",
        "number",
        1,
        description="The time to wait",
        type_options={"minValue": 0, "numberPrecision": 2},
        display_options={"show": {**_LIMITED, "limitType": ("afterTimeInterval",)}},
    ),  # fmt: skip
    Property(
        "resumeUnit",
        "Unit",
        "options",
        "hours",
        options=_UNITS,
        display_options={"show": {**_LIMITED, "limitType": ("afterTimeInterval",)}},
    ),  # fmt: skip
    Property(
        "maxDateAndTime",
        "Max Date and Time",
        "string",
        "",
        description="Continue execution after the specified date and time",
        display_options={"show": {**_LIMITED, "limitType": ("atSpecifiedTime",)}},
    ),  # fmt: skip
    Property(
        "options",
        "Options",
        "collection",
        {},
        placeholder="Add option",
        display_options={"show": _WEBHOOK},
        children=(
            Property(
                "noResponseBody",
                "No Response Body",
                "boolean",
                False,
                description="Whether to send any body in the response",
                display_options={"show": {"/responseMode": ("onReceived",)}},
            ),  # fmt: skip
            Property(
                "responseData",
                "Response Data",
                "string",
                "",
                description="Custom response data to send",
                display_options={"show": {"/responseMode": ("onReceived",)}},
            ),  # fmt: skip
            Property(
                "webhookSuffix",
                "Webhook Suffix",
                "string",
                "",
                placeholder="webhook",
                description="This suffix path will be appended to the restart URL. "
                "Helpful when using multiple wait nodes.",
            ),  # fmt: skip
        ),
    ),
)


@dataclass(frozen=True)
class ResumeWebhook:
    """How a Wait node's resume URL is answered (api/wait_webhook.py)."""

    method: str
    suffix: str  # "" or the path after the execution id
    response_mode: str  # onReceived, lastNode, responseNode
    response_code: int
    response_data: str  # lastNode: allEntries, firstEntryJson, noData; onReceived: custom text
    no_body: bool
    basic_auth: bool  # the node's httpBasicAuth credential guards it


@register
class Wait(NodeType):
    type = "n8n-nodes-base.wait"
    description = NodeDescription(
        display_name="Wait",
        group="core",
        description="Wait before continue with execution",
        subtitle="wait delay pause sleep resume webhook",
        version=1.1,
        versions=(1, 1.1),
        webhook=True,  # n8n gives it a webhookId: the resume call's item names its URL
        credentials=(
            CredentialSlot(
                "httpBasicAuth", True, {"show": {"incomingAuthentication": ("basicAuth",)}}
            ),  # fmt: skip
        ),
        properties=_PROPERTIES,
    )

    def validate(self, node: Node) -> None:
        params = {**self.defaults, **node.parameters}
        if params.get("resume") == "form":
            raise WorkflowValidationError(
                'Resume "On Form Submitted" is not supported (n8n forms are not served here)',
                node=node.name,
            )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        resume = ctx.get_parameter("resume", "timeInterval")
        items = ctx.input_items
        if resume == "webhook":
            raise WaitingForReply([items], _limit(ctx), wait_for="webhook")
        now_ms = ctx.services.clock() * 1000
        till = _interval(ctx, now_ms) if resume == "timeInterval" else _specific(ctx)
        if till <= now_ms:
            return [items]
        raise WaitingForReply([items], int(till), wait_for="time")

    def resume(self, ctx: ExecuteFunctions, reply: Item) -> NodeOutput:
        """The call of its resume URL: the request is the node's item (n8n runs the Webhook
        node's handler, then the Wait node, disabled, passes that item on)."""
        return [[reply]]


def resume_webhook(node: Node) -> ResumeWebhook:
    params = {**Wait.defaults, **node.parameters}
    given = params.get("options")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    try:
        code = int(params.get("responseCode") or 200)
    except (TypeError, ValueError):
        code = 200
    mode = str(params.get("responseMode") or "onReceived")
    data = params.get("responseData") if mode == "lastNode" else options.get("responseData")
    return ResumeWebhook(
        method=str(params.get("httpMethod") or "GET").upper(),
        suffix=str(options.get("webhookSuffix") or "").strip("/"),
        response_mode=mode,
        response_code=code,
        response_data=str(data or ("firstEntryJson" if mode == "lastNode" else "")),
        no_body=options.get("noResponseBody") is True,
        basic_auth=params.get("incomingAuthentication") == "basicAuth",
    )


def _interval(ctx: ExecuteFunctions, now_ms: float) -> float:
    # Each version has its defaults (1: 1 hour, 1.1: 5 seconds), which an export leaves out.
    given, first = ctx.node.parameters, ctx.node.type_version < 1.1
    unit = ctx.get_parameter("unit") if "unit" in given else ("hours" if first else "seconds")
    if unit not in UNIT_SECONDS:
        raise NodeExecutionError(
            "Invalid wait unit. Valid units are 'seconds', 'minutes', 'hours', or 'days'."
        )
    amount = ctx.get_parameter("amount") if "amount" in given else (1 if first else 5)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not amount >= 0:
        raise NodeExecutionError("Invalid wait amount. Please enter a number that is 0 or greater.")
    return now_ms + amount * UNIT_SECONDS[unit] * 1000


def _specific(ctx: ExecuteFunctions) -> float:
    moment = parse_moment(ctx.get_parameter("dateTime", ""), _zone(ctx))
    if moment is None:
        raise NodeExecutionError(
            "Cannot put execution to wait because `dateTime` parameter is not a valid date. "
            "Please pick a specific date and time to wait until."
        )
    return moment.timestamp() * 1000


def _limit(ctx: ExecuteFunctions) -> int | None:
    """limitWaitTime's deadline (ms); None: the wait lasts until the URL is called."""
    if ctx.get_parameter("limitWaitTime", False) is not True:
        return None
    if ctx.get_parameter("limitType", "afterTimeInterval") == "afterTimeInterval":
        amount = ctx.get_parameter("resumeAmount", 1)
        unit = UNIT_SECONDS.get(ctx.get_parameter("resumeUnit", "hours"), 3600)
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise NodeExecutionError("Limit Wait Time needs an amount of time")
        return int((ctx.services.clock() + amount * unit) * 1000)
    moment = parse_moment(ctx.get_parameter("maxDateAndTime", ""), _zone(ctx))
    if moment is None:
        raise NodeExecutionError("Limit Wait Time: the Max Date and Time is not a valid date")
    return int(moment.timestamp() * 1000)


def _zone(ctx: ExecuteFunctions) -> ZoneInfo:
    name = ctx.workflow.settings.get("timezone") or DEFAULT_TIMEZONE
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo(DEFAULT_TIMEZONE)


def parse_moment(value: Any, zone: ZoneInfo) -> datetime | None:
    """A date and time as n8n's tryToParseDateTime reads the common forms (ISO 8601, with a
    space for the T too, and RFC 2822 / HTTP dates), in `zone` when it names no offset."""
    text = str(value or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=zone)
