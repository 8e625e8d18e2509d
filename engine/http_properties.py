"""The HTTP Request node's form: n8n's version 3 to 4.5 parameters (its V3 Description), as the
editor shows them and the engine checks them, and the options its HTTP Request Tool adds.

n8n declares some names twice, each shown for one content type (`bodyParameters`, `specifyBody`,
`body`); a form here names each parameter once, so those are one declaration each, shown where
either of n8n's was, and the node reads them as n8n's does. What mini-n8n does not do is left
out (pagination, SSL client certificates, proxies, OAuth); the node refuses a workflow that uses
it when it is imported (engine/nodes/http_request.py `validate`).
"""

from __future__ import annotations

from engine.description import FieldGroup, Option, Property

METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
WEBDAV_METHODS = ("COPY", "MKCOL", "MOVE", "PROPFIND", "REPORT")
# The generic credential types the node sends (n8n's list has digest and OAuth too).
GENERIC_AUTH = (
    ("httpBasicAuth", "Basic Auth"),
    ("httpBearerAuth", "Bearer Auth"),
    ("httpCustomAuth", "Custom Auth"),
    ("httpHeaderAuth", "Header Auth"),
    ("httpQueryAuth", "Query Auth"),
)
# The predefined credential types it knows how to apply (n8n: every type with `authenticate`).
PREDEFINED_AUTH = (("openAiApi", "OpenAI"),)


def _show(**conditions: tuple) -> dict:
    return {"show": conditions}


def _pairs(name: str, display: str, show: dict, values: tuple[Property, ...] = ()) -> Property:
    """A list of name/value rows (n8n's `{parameters: [{name, value}]}`)."""
    rows = values or (
        Property("name", "Name", "string", ""),
        Property("value", "Value", "string", ""),
    )
    return Property(
        name,
        display,
        "fixedCollection",
        {"parameters": [{"name": "", "value": ""}]},
        groups=(FieldGroup("parameters", display, rows),),
        display_options=show,
        type_options={"multipleValues": True},
        placeholder=f"Add {display}",
    )


def _json(name: str, show: dict) -> Property:
    return Property(name, "JSON", "json", "", display_options=show, type_options={"rows": 4})


def _specify(name: str, display: str, show: dict, *extra: Option) -> Property:
    options = (Option("keypair", "Using Fields Below"), Option("json", "Using JSON"), *extra)
    return Property(name, display, "options", "keypair", options=options, display_options=show)


REQUEST = (
    Property(
        "method",
        "Method",
        "options",
        "GET",
        options=tuple(Option(m, m) for m in METHODS + WEBDAV_METHODS),
        description="The request method to use (COPY, MKCOL, MOVE, PROPFIND and REPORT: "
        "n8n shows them with the option Enable WebDAV Methods)",
    ),
    Property(
        "url",
        "URL",
        "string",
        "",
        required=True,
        placeholder="http://example.com/index.html",
        description="The URL to make the request to",
    ),
    Property(
        "authentication",
        "Authentication",
        "options",
        "none",
        options=(
            Option("none", "None"),
            Option("predefinedCredentialType", "Predefined Credential Type"),
            Option("genericCredentialType", "Generic Credential Type"),
        ),
    ),
    Property(
        "nodeCredentialType",
        "Credential Type",
        "options",
        "",
        required=True,
        options=tuple(Option(value, name) for value, name in PREDEFINED_AUTH),
        display_options=_show(authentication=("predefinedCredentialType",)),
    ),
    Property(
        "genericAuthType",
        "Generic Auth Type",
        "options",
        "",
        required=True,
        options=tuple(Option(value, name) for value, name in GENERIC_AUTH),
        display_options=_show(authentication=("genericCredentialType",)),
    ),
)

QUERY_AND_HEADERS = (
    Property(
        "sendQuery",
        "Send Query Parameters",
        "boolean",
        False,
        description="Whether the request has query params or not",
    ),  # fmt: skip
    _specify("specifyQuery", "Specify Query Parameters", _show(sendQuery=(True,))),
    _pairs(
        "queryParameters", "Query Parameters", _show(sendQuery=(True,), specifyQuery=("keypair",))
    ),
    _json("jsonQuery", _show(sendQuery=(True,), specifyQuery=("json",))),
    Property(
        "sendHeaders",
        "Send Headers",
        "boolean",
        False,
        description="Whether the request has headers or not",
    ),  # fmt: skip
    _specify("specifyHeaders", "Specify Headers", _show(sendHeaders=(True,))),
    _pairs("headerParameters", "Headers", _show(sendHeaders=(True,), specifyHeaders=("keypair",))),
    _json("jsonHeaders", _show(sendHeaders=(True,), specifyHeaders=("json",))),
)

_MULTIPART = {"show": {"/contentType": ("multipart-form-data",)}}
BODY = (
    Property(
        "sendBody",
        "Send Body",
        "boolean",
        False,
        description="Whether the request has a body or not",
    ),  # fmt: skip
    Property(
        "contentType",
        "Body Content Type",
        "options",
        "json",
        options=(
            Option("form-urlencoded", "Form URL Encoded"),
            Option("multipart-form-data", "Form-Data"),
            Option("json", "JSON"),
            Option("binaryData", "n8n Binary File"),
            Option("raw", "Raw"),
        ),
        display_options=_show(sendBody=(True,)),
        description="Content-Type to use to send body parameters",
    ),
    _specify(
        "specifyBody",
        "Specify Body",
        _show(sendBody=(True,), contentType=("json", "form-urlencoded")),
        Option("string", "Using Single Field"),
    ),
    _pairs(
        "bodyParameters",
        "Body Parameters",
        {
            "show": {
                "sendBody": (True,),
                "contentType": ("json", "form-urlencoded", "multipart-form-data"),
            },
            "hide": {"specifyBody": ("json", "string")},
        },  # fmt: skip
        (
            Property(
                "parameterType",
                "Type",
                "options",
                "formData",
                options=(
                    Option("formBinaryData", "n8n Binary File"),
                    Option("formData", "Form Data"),
                ),
                display_options=_MULTIPART,
            ),  # fmt: skip
            Property("name", "Name", "string", ""),
            Property(
                "value",
                "Value",
                "string",
                "",
                display_options={"hide": {"parameterType": ("formBinaryData",)}},
            ),  # fmt: skip
            Property(
                "inputDataFieldName",
                "Input Data Field Name",
                "string",
                "",
                display_options={"show": {"parameterType": ("formBinaryData",)}},
            ),  # fmt: skip
        ),
    ),
    _json("jsonBody", _show(sendBody=(True,), contentType=("json",), specifyBody=("json",))),
    Property(
        "body",
        "Body",
        "string",
        "",
        display_options={
            "show": {"sendBody": (True,), "contentType": ("form-urlencoded", "raw")},
            "hide": {"specifyBody": ("keypair",)},
        },
        placeholder="field1=value1&field2=value2",
    ),
    Property(
        "inputDataFieldName",
        "Input Data Field Name",
        "string",
        "",
        display_options=_show(sendBody=(True,), contentType=("binaryData",)),
        description="The name of the incoming field containing the binary file data to be "
        "processed",
    ),
    Property(
        "rawContentType",
        "Content Type",
        "string",
        "",
        display_options=_show(sendBody=(True,), contentType=("raw",)),
        placeholder="text/html",
    ),
)

_RESPONSE = (
    Property("fullResponse", "Include Response Headers and Status", "boolean", False),
    Property(
        "neverError",
        "Never Error",
        "boolean",
        False,
        description="Whether to succeed also when the status code is not 2xx",
    ),  # fmt: skip
    Property(
        "responseFormat",
        "Response Format",
        "options",
        "autodetect",
        options=(
            Option("autodetect", "Autodetect"),
            Option("file", "File"),
            Option("json", "JSON"),
            Option("text", "Text"),
        ),
    ),
    Property(
        "outputPropertyName",
        "Put Output in Field",
        "string",
        "data",
        display_options={"show": {"responseFormat": ("file", "text")}},
    ),  # fmt: skip
)
OPTIONS = Property(
    "options",
    "Options",
    "collection",
    {},
    placeholder="Add option",
    children=(
        Property(
            "batching",
            "Batching",
            "fixedCollection",
            {"batch": {}},
            groups=(
                FieldGroup(
                    "batch",
                    "Batching",
                    (
                        Property(
                            "batchSize",
                            "Items per Batch",
                            "number",
                            50,
                            type_options={"minValue": -1},
                        ),  # fmt: skip
                        Property(
                            "batchInterval",
                            "Batch Interval (ms)",
                            "number",
                            1000,
                            type_options={"minValue": 0},
                        ),  # fmt: skip
                    ),
                ),
            ),
        ),
        Property("allowUnauthorizedCerts", "Ignore SSL Issues (Insecure)", "boolean", False),
        Property(
            "queryParameterArrays",
            "Array Format in Query Parameters",
            "options",
            "brackets",
            options=(
                Option("repeat", "No Brackets", "e.g. foo=bar&foo=qux"),
                Option("brackets", "Brackets Only", "e.g. foo[]=bar&foo[]=qux"),
                Option("indices", "Brackets with Indices", "e.g. foo[0]=bar&foo[1]=qux"),
            ),
            display_options={"show": {"/sendQuery": (True,)}},
        ),
        Property("lowercaseHeaders", "Lowercase Headers", "boolean", True),
        Property(
            "redirect",
            "Redirects",
            "fixedCollection",
            {"redirect": {}},
            groups=(
                FieldGroup(
                    "redirect",
                    "Redirect",
                    (
                        Property(
                            "followRedirects",
                            "Follow Redirects",
                            "boolean",
                            True,
                            description="Versions 1 to 3 follow none unless set",
                        ),  # fmt: skip
                        Property(
                            "maxRedirects",
                            "Max Redirects",
                            "number",
                            21,
                            display_options={"show": {"followRedirects": (True,)}},
                        ),  # fmt: skip
                    ),
                ),
            ),
        ),
        Property(
            "response",
            "Response",
            "fixedCollection",
            {"response": {}},
            groups=(FieldGroup("response", "Response", _RESPONSE),),
        ),
        Property(
            "timeout",
            "Timeout",
            "number",
            10000,
            type_options={"minValue": 1},
            description="Time in ms to wait for the server to send response headers (and "
            "start the response body) before aborting the request",
        ),
        Property(
            "sendCredentialsOnCrossOriginRedirect",
            "Send Credentials on Cross-Origin Redirect",
            "boolean",
            False,
            description='Whether to send credentials, like the "Authorization" header, on '
            "redirects to a different origin (before version 4.4: sent unless set)",
        ),
        Property("webdavMethods", "Enable WebDAV Methods", "boolean", False),
    ),
)

PROPERTIES = (*REQUEST, *QUERY_AND_HEADERS, *BODY, OPTIONS)

# What the HTTP Request Tool adds (n8n's convertNodeToAiTool and optimizeResponseProperties).
_OPTIMIZE = {"show": {"optimizeResponse": (True,)}}
_JSON_OUT = {"show": {"optimizeResponse": (True,), "responseType": ("json",)}}
_TEXT_OUT = {"show": {"optimizeResponse": (True,), "responseType": ("text", "html")}}
_HTML_OUT = {"show": {"optimizeResponse": (True,), "responseType": ("html",)}}
TOOL_DESCRIPTION = "Makes an HTTP request and returns the response data"
TOOL_PROPERTIES = (
    Property(
        "toolDescription",
        "Description",
        "string",
        TOOL_DESCRIPTION,
        required=True,
        type_options={"rows": 2},
        description="Explain to the LLM what this tool does, a good, specific description "
        "would allow LLMs to produce expected results much more often",
    ),
    *PROPERTIES,
    Property(
        "optimizeResponse",
        "Optimize Response",
        "boolean",
        False,
        description="Whether to optimize the tool response to reduce the amount of data "
        "passed to the LLM",
    ),  # fmt: skip
    Property(
        "responseType",
        "Expected Response Type",
        "options",
        "json",
        options=(Option("json", "JSON"), Option("html", "HTML"), Option("text", "Text")),
        display_options=_OPTIMIZE,
    ),
    Property(
        "dataField",
        "Field Containing Data",
        "string",
        "",
        display_options=_JSON_OUT,
        placeholder="e.g. records",
    ),  # fmt: skip
    Property(
        "fieldsToInclude",
        "Include Fields",
        "options",
        "all",
        options=(
            Option("all", "All"),
            Option("selected", "Selected"),
            Option("except", "Except"),
        ),
        display_options=_JSON_OUT,
    ),
    Property(
        "fields",
        "Fields",
        "string",
        "",
        placeholder="e.g. field1,field2",
        display_options={**_JSON_OUT, "hide": {"fieldsToInclude": ("all",)}},
    ),
    Property(
        "cssSelector",
        "Selector (CSS)",
        "string",
        "body",
        placeholder="e.g. body",
        display_options=_HTML_OUT,
        description="The element whose content is returned (only body here)",
    ),  # fmt: skip
    Property(
        "onlyContent",
        "Return Only Content",
        "boolean",
        False,
        display_options=_HTML_OUT,
        description="Whether to return only the text of the element, without tags",
    ),  # fmt: skip
    Property("truncateResponse", "Truncate Response", "boolean", False, display_options=_TEXT_OUT),
    Property(
        "maxLength",
        "Max Response Characters",
        "number",
        1000,
        type_options={"minValue": 1},
        display_options={"show": {**_TEXT_OUT["show"], "truncateResponse": (True,)}},
    ),
)
