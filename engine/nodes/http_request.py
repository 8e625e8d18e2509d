"""HTTP Request (`n8n-nodes-base.httpRequest`, versions 3 to 4.5): one request per input item,
its answer as items, as n8n's HttpRequestV3 makes them.

The request is built from the parameters (engine/http_build.py) with the credential's parts
(engine/http_auth.py) and sent by the client the runner lends (Services.http,
engine/http_client.py), which alone decides where this deployment may connect and how large an
answer may be (models/http_requests.py). The answer becomes items as n8n's do
(engine/http_output.py). Items are sent one after another (n8n sends them all at once);
"Batching" waits its interval between batches as n8n does.

Refused at import, with the node's name: pagination, SSL client certificates, a proxy, and the
credential types this node cannot send (n8n's OAuth, digest, and predefined types other than
OpenAI's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.description import CredentialSlot, NodeDescription, Property, shown_values
from engine.errors import ExecutionCanceled, NodeExecutionError, WorkflowValidationError
from engine.http_auth import authentication
from engine.http_build import ItemParameters, build
from engine.http_client import HttpFailure, IncomingResponse, OutgoingRequest
from engine.http_output import failure_error, items, status_error
from engine.http_properties import GENERIC_AUTH, PREDEFINED_AUTH, PROPERTIES, TOOL_DESCRIPTION
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node

VERSIONS = (3, 4, 4.1, 4.2, 4.3, 4.4, 4.5)
DEFAULT_VERSION = 4.5  # n8n 2.41.1's defaultVersion: what its editor gives a new node


def credential_slots() -> tuple[CredentialSlot, ...]:
    """One per credential type the form offers, shown when the node's authentication names it."""
    generic = tuple(
        CredentialSlot(
            name,
            True,
            {"show": {"authentication": ("genericCredentialType",), "genericAuthType": (name,)}},
        )  # fmt: skip
        for name, _ in GENERIC_AUTH
    )
    predefined = tuple(
        CredentialSlot(
            name,
            True,
            {
                "show": {
                    "authentication": ("predefinedCredentialType",),
                    "nodeCredentialType": (name,),
                }
            },
        )  # fmt: skip
        for name, _ in PREDEFINED_AUTH
    )
    return generic + predefined


@register
class HttpRequest(NodeType):
    type = "n8n-nodes-base.httpRequest"
    description = NodeDescription(
        display_name="HTTP Request",
        group="core",
        description=TOOL_DESCRIPTION,
        version=DEFAULT_VERSION,
        versions=VERSIONS,
        subtitle="http request api url fetch rest",
        credentials=credential_slots(),
        properties=PROPERTIES,
    )

    def validate(self, node: Node) -> None:
        refuse_unsupported(node)

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [request_items(ctx, self.description.properties)]


def refuse_unsupported(node: Node) -> None:
    """What n8n's node does and this one does not: refused when the workflow is imported."""
    params = node.parameters or {}
    options = params.get("options") if isinstance(params.get("options"), dict) else {}
    pagination = ((options or {}).get("pagination") or {}).get("pagination")
    if isinstance(pagination, dict) and pagination.get("paginationMode") != "off":
        problem = "pagination (options.pagination) is not supported"
    elif (options or {}).get("proxy"):
        problem = "a proxy (options.proxy) is not supported"
    elif params.get("provideSslCertificates") is True:
        problem = "SSL client certificates (provideSslCertificates) are not supported"
    else:
        return
    raise WorkflowValidationError(f"{problem} by mini-n8n's HTTP Request node", node=node.name)


def request_items(
    ctx: ExecuteFunctions,
    properties: tuple[Property, ...],
    optimizer: Callable[[ExecuteFunctions, int], Any] | None = None,
) -> list[Item]:
    """The items of every input item's request, in order (`optimizer`: the HTTP Request Tool's
    response optimizer for an item, engine/http_optimize.py)."""
    client = ctx.services.http
    if client is None:
        raise NodeExecutionError("this runner lends no HTTP client", node=ctx.node.name)
    version = ctx.node.type_version
    shown = set(shown_values(properties, ctx.node.parameters, version))
    size, interval = _batching(ctx)
    out: list[Item] = []
    for index, item in enumerate(ctx.input_items):
        ctx.checkpoint()
        if index and interval > 0 and size > 0 and index % size == 0:
            _wait(ctx, interval)
        params = ItemParameters(ctx, index, shown)
        auth = authentication(ctx, index)
        request, settings = build(params, version, auth, item)
        auth.check(request.url, ctx.node.name, index)
        response = _send(ctx, client, request, index)
        if not settings.never_error and not 200 <= response.status < 300:
            raise status_error(response, auth, ctx.node.name, index)
        field = ((params.option("response") or {}).get("response") or {}).get("outputPropertyName")
        optimize = optimizer(ctx, index) if optimizer is not None else None
        out.extend(items(response, settings, item, index, ctx.node.name, field, optimize))
    return out


def _send(
    ctx: ExecuteFunctions, client: Any, request: OutgoingRequest, index: int
) -> IncomingResponse:
    try:
        return client.send(request, ctx.cancel)
    except HttpFailure as failure:
        raise failure_error(failure, ctx.node.name, index) from None


def _batching(ctx: ExecuteFunctions) -> tuple[int, float]:
    """(items per batch, seconds between batches) of options.batching; (0, 0) without it."""
    options = ctx.node.parameters.get("options")
    if not isinstance(options, dict) or "batching" not in options:
        return 0, 0.0
    batch = (ctx.get_parameter("options.batching", {}, 0) or {}).get("batch") or {}
    size, interval = batch.get("batchSize", 50), batch.get("batchInterval", 1000)
    size = int(size) if isinstance(size, int | float) and size > 0 else 1
    return size, float(interval) / 1000 if isinstance(interval, int | float) else 0.0


def _wait(ctx: ExecuteFunctions, seconds: float) -> None:
    """A pause between batches, in short sleeps, so that a stop ends it at once."""
    slept = 0.0
    while slept < seconds:
        if ctx.cancel.is_set():
            raise ExecutionCanceled()
        step = min(0.1, seconds - slept)
        ctx.services.sleep(step)
        slept += step
