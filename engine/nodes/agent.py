"""AI Agent (`@n8n/n8n-nodes-langchain.agent`): a tool-calling loop over a chat model.

For each input item: load the session's history from memory, ask the model with
[system?, *history, this turn's input], run the tools it calls and ask again, until it answers
with text or `maxIterations` is reached. While streaming, the answer's tokens leave as
begin / item* / end chunks. The turn is saved to memory only once the answer is complete.
Every model, tool and memory call is recorded as a run of that sub-node.

As n8n 2.41.1 does, per typeVersion (checked on it: tests/fixtures/n8n_memory/):
- a system message only when the workflow sets `options.systemMessage` (before 1.9, n8n's
  "You are a helpful assistant" when it does not);
- from 3, a tool call goes back to the model, and into memory, as n8n's Agent 3.x writes it
  (memory/tool_turn.py: `content: []`, the call's id in its `args`, the tool's output items as
  JSON); before 3, as LangChain's AgentExecutor sends it (the model's message, the tool's output
  as it is) and memory keeps the turn's text only.
The history is cut as n8n's loadMemory cuts it (memory/history.py): the memory's window,
orphaned tool messages dropped, and with `options.maxTokensFromMemory` (which n8n reads from 3
and hides from its form; we show it and read it in every version) the newest messages that fit,
counted with the model's tokenizer (engine/tokenizer.py) or, with `options.tokenCount`
`estimate`, n8n's estimate when it cannot download one.
Two options of ours:
- `keepToolCallsInMemory` (default: on from 3, off before, as n8n keeps them): off, a turn is
  saved as its question and answer; on, with its tool calls in n8n 3.x's form.
- `streamToolCalls`, off by default: while streaming, each tool call also leaves as a
  `tool-call-start` chunk (tool name, input) and a `tool-call-end` chunk (output or error,
  duration), the chunk types n8n PR #36755 proposed; `@n8n/chat` ignores types it does not know.

From typeVersion 3 (n8n's Tools Agent V3, where each model call after a tool call is a new run of
the Agent node), a streamed answer that called tools is one begin / end per model call, the
later ones numbered with the next run indexes: `begin, end, begin, item*, end` for one tool
round. Before 3 (V2, one LangChain executor), it is one begin / end whatever the tools.
"""

from __future__ import annotations

import time
from typing import Any

from core.jsontext import dumps
from engine import tokenizer
from engine.description import Input, NodeDescription, Option, Property
from engine.errors import NodeExecutionError
from engine.llm import ChatModel, TokenCallback, Tool
from engine.node import ExecuteFunctions, Item, NodeOutput, NodeType
from engine.registry import register
from engine.workflow import Node
from memory.base import SessionMemory
from memory.history import load_for_model
from memory.messages import ChatMessage, ToolCall, human, system, tool
from memory.tool_turn import call_messages, observation, saved_turn

NO_PROMPT = (
    "No prompt specified: expected to find the prompt in an input field called 'chatInput' "
    "(this is what the Chat Trigger outputs). Set the prompt source to 'Define below' to "
    "give one explicitly."
)
DEFAULT_SYSTEM_MESSAGE = "You are a helpful assistant"  # n8n's, sent unasked before 1.9
SYSTEM_MESSAGE_OPTIONAL_FROM = 1.9
TOOL_TURNS_FROM = 3  # n8n's Agent 3.x runs tools through its engine and keeps them in memory


@register
class Agent(NodeType):
    type = "@n8n/n8n-nodes-langchain.agent"
    description = NodeDescription(
        display_name="AI Agent",
        group="agent",
        description="Generates an action plan and executes it. Can use external tools.",
        version=2.2,
        subtitle="agent tools chat",
        inputs=(
            Input("main"),
            # One model, as n8n without "Enable Fallback Model" (we have no fallback).
            Input("ai_languageModel", required=True, max_connections=1),
            Input("ai_memory", max_connections=1),
            Input("ai_tool"),
        ),
        properties=(
            Property(
                "promptType",
                "Source for Prompt (User Message)",
                "options",
                "auto",
                options=(
                    Option("auto", "Connected Chat Trigger Node"),
                    Option("define", "Define below"),
                ),
            ),
            Property(
                "text",
                "Prompt (User Message)",
                "string",
                "={{ $json.chatInput }}",
                required=True,
                display_options={"show": {"promptType": ("define",)}},
                type_options={"rows": 2},
            ),
            Property(
                "options",
                "Options",
                "collection",
                {},
                placeholder="Add Option",
                children=(
                    Property(
                        "systemMessage",
                        "System Message",
                        "string",
                        DEFAULT_SYSTEM_MESSAGE,
                        description="Sent before the conversation; without this option no "
                        "system message is sent (from typeVersion 1.9, as in n8n)",
                        type_options={"rows": 6},
                    ),
                    Property(
                        "maxIterations",
                        "Max Iterations",
                        "number",
                        10,
                        type_options={"minValue": 1},
                    ),
                    Property("enableStreaming", "Enable Streaming", "boolean", True),
                    Property(
                        "maxTokensFromMemory",
                        "Max Tokens From Memory",
                        "number",
                        0,
                        description="Send the model only the newest messages of the memory "
                        "that fit in this many tokens, starting on a user message (0: all the "
                        "memory's window)",
                        type_options={"minValue": 0},
                    ),
                    Property(
                        "tokenCount",
                        "Count Memory Tokens With",
                        "options",
                        "tokenizer",
                        options=(
                            Option("tokenizer", "The Model's Tokenizer"),
                            Option(
                                "estimate",
                                "Estimate (Length / 4)",
                                "What n8n counts when it cannot download the tokenizer",
                            ),
                        ),
                        description="How Max Tokens From Memory counts a message (not in n8n)",
                    ),
                    Property(
                        "keepToolCallsInMemory",
                        "Keep Tool Calls in Memory",
                        "boolean",
                        True,
                        description="Save a turn's tool calls and results in memory, so later "
                        "turns see them, as n8n's Agent 3.x does (default: on from typeVersion "
                        "3, off before, as n8n; the switch is ours)",
                    ),
                    Property(
                        "streamToolCalls",
                        "Stream Tool Calls",
                        "boolean",
                        False,
                        description="While streaming, send a line when a tool starts and one "
                        "when it ends (not in n8n; @n8n/chat ignores them)",
                    ),
                ),
            ),
        ),
    )

    def execute(self, ctx: ExecuteFunctions) -> NodeOutput:
        return [[_AgentTurn(ctx, index).run() for index in range(len(ctx.input_items))]]


class _AgentTurn:
    """One input item's conversation turn."""

    def __init__(self, ctx: ExecuteFunctions, index: int):
        self.ctx = ctx
        self.index = index
        self.model_node = ctx.sub_nodes("ai_languageModel")[0]
        memory_nodes = ctx.sub_nodes("ai_memory")
        self.memory_node = memory_nodes[0] if memory_nodes else None
        self.tools: dict[str, tuple[Node, Tool]] = {}
        for node in ctx.sub_nodes("ai_tool"):
            supplied: Tool = ctx.supply(node, index)
            self.tools[supplied.name] = (node, supplied)
        self.model: ChatModel = ctx.supply(self.model_node, index)
        self.v3 = ctx.node.type_version >= TOOL_TURNS_FROM
        # this turn's tool calls and what the model was told of their outputs
        self.calls: list[tuple[ToolCall, str]] = []
        self.stream_tools = False
        # V3: model calls after the first are runs of their own (their index past the node's).
        self.runs_per_call = ctx.node.type_version >= 3
        self.extra_runs = 0

    def run(self) -> Item:
        ctx, index = self.ctx, self.index
        text = self._prompt()
        memory = self._memory()
        history = self._load_history(memory, text) if memory else []
        instructions = self._system_message()
        messages = [*([system(instructions)] if instructions else []), *history, human(text)]
        streaming = ctx.is_streaming() and bool(ctx.get_parameter("options.enableStreaming", True))
        self.stream_tools = streaming and self._option("streamToolCalls", False) is True
        if streaming:
            ctx.send_chunk("begin", index)
        output = self._loop(messages, streaming)
        if streaming:
            ctx.send_chunk("end", index, None, self._run())
        if memory:
            self._save_turn(memory, text, output)
        return {"json": {"output": output}, "pairedItem": {"item": index}}

    def _memory(self) -> tuple[Node, SessionMemory] | None:
        """The memory sub-node and the session it supplies for this item, if one is connected."""
        if self.memory_node is None:
            return None
        return self.memory_node, self.ctx.supply(self.memory_node, self.index)

    def _prompt(self) -> str:
        ctx = self.ctx
        if ctx.get_parameter("promptType", "auto", self.index) == "auto":
            value = ctx.input_items[self.index].get("json", {}).get("chatInput")
        else:
            value = ctx.get_parameter("text", "", self.index)
        if value in (None, ""):
            raise NodeExecutionError(NO_PROMPT, node=ctx.node.name, item_index=self.index)
        return value if isinstance(value, str) else str(value)

    def _given(self, name: str) -> bool:
        """Whether the workflow sets option `name` (n8n reads an unset option as undefined,
        not as the default its form would fill in)."""
        options = self.ctx.node.parameters.get("options")
        return isinstance(options, dict) and options.get(name) is not None

    def _system_message(self) -> str | None:
        """n8n's `options.systemMessage ?? (typeVersion < 1.9)`: an empty one sends none."""
        if not self._given("systemMessage"):
            old = self.ctx.node.type_version < SYSTEM_MESSAGE_OPTIONAL_FROM
            return DEFAULT_SYSTEM_MESSAGE if old else None
        value = self._option("systemMessage", "")
        return str(value) if value else None

    def _max_iterations(self) -> int:
        try:
            return max(int(self.ctx.get_parameter("options.maxIterations", 10, self.index)), 1)
        except (TypeError, ValueError):
            return 10

    def _option(self, name: str, default: Any) -> Any:
        return self.ctx.get_parameter(f"options.{name}", default, self.index)

    def _loop(self, messages: list[ChatMessage], streaming: bool) -> str:
        ctx, index = self.ctx, self.index
        model = self.model
        tools = [t for _, t in self.tools.values()]
        on_token = (
            (lambda token: ctx.send_chunk("item", index, token, self._run())) if streaming else None
        )
        for step in range(self._max_iterations()):
            ctx.checkpoint()
            if step and streaming and self.runs_per_call:
                ctx.send_chunk("end", index, None, self._run())
                self.extra_runs += 1
                ctx.send_chunk("begin", index, None, self._run())
            reply = ctx.run_sub(
                self.model_node,
                "ai_languageModel",
                {"messages": [m.to_stored() for m in messages], "tools": [t.name for t in tools]},
                lambda: self._invoke(model, messages, tools, on_token),
                lambda r: {"response": r.to_stored()["data"]},
            )
            if not reply.tool_calls:
                return reply.content
            if not self.v3:  # LangChain's AgentExecutor: the model's message, then the outputs
                messages.append(reply)
            for call in reply.tool_calls:
                output = self._call_tool(call)
                told = self._told(call, output)
                self.calls.append((call, told))
                if self.v3:
                    messages.extend(call_messages(call, told, named=False))
                else:
                    messages.append(tool(output, call.id))
        raise NodeExecutionError(
            "Agent stopped due to max iterations.", node=ctx.node.name, item_index=index
        )

    def _run(self) -> dict[str, Any] | None:
        """A chunk's run index past the node's own, for a V3 model call after a tool call."""
        return {"runIndex": self.ctx.run_index + self.extra_runs} if self.extra_runs else None

    def _invoke(
        self,
        model: ChatModel,
        messages: list[ChatMessage],
        tools: list[Tool],
        on_token: TokenCallback | None,
    ) -> ChatMessage:
        """One model call, reported to `services.on_model_call` with its tokens when given."""
        report = self.ctx.services.on_model_call
        if report is None:
            return model.invoke(messages, tools, on_token, self.ctx.cancel)
        tokens = 0

        def counted(token: str) -> None:
            nonlocal tokens
            tokens += 1
            if on_token is not None:
                on_token(token)

        try:
            reply = model.invoke(messages, tools, counted if on_token else None, self.ctx.cancel)
        except Exception:
            report("error", tokens)
            raise
        report("success", tokens)
        return reply

    def _told(self, call: ToolCall, output: str) -> str:
        """What n8n's Agent 3.x tells the model of a call's output: a tool that says so itself
        (a sub-workflow's items), else `[{"response": output}]`."""
        supplied = self.tools.get(call.name)
        observe = getattr(supplied[1], "observation", None) if supplied else None
        return observe(output) if observe else observation(output)

    def _call_tool(self, call: ToolCall) -> str:
        found = self.tools.get(call.name)
        node_name = found[0].name if found else None
        self._tool_chunk("tool-call-start", call, node_name, {"toolInput": dumps(call.args)})
        started = time.monotonic()
        if not found:
            error = f"Error: there is no tool called {call.name!r}"
            self._tool_chunk("tool-call-end", call, None, {"toolError": error}, started)
            return error
        node, supplied = found
        try:
            output = self.ctx.run_sub(
                node,
                "ai_tool",
                dict(call.args),
                lambda: supplied.call(call.args),
                lambda r: {"response": r},
            )
        except Exception as err:
            self._tool_chunk("tool-call-end", call, node.name, {"toolError": str(err)}, started)
            raise
        self._tool_chunk("tool-call-end", call, node.name, {"toolOutput": output}, started)
        return output

    def _tool_chunk(
        self,
        kind: str,
        call: ToolCall,
        node_name: str | None,
        details: dict[str, Any],
        started: float | None = None,
    ) -> None:
        """A tool step line (option streamToolCalls): the fields n8n PR #36755 proposed
        (toolName, toolCallId, toolInput / toolOutput), plus the tool node's name, an error
        instead of an output, and on the end how long the call took."""
        if not self.stream_tools:
            return
        meta: dict[str, Any] = {"toolName": call.name, "toolCallId": call.id}
        if node_name:
            meta["toolNode"] = node_name
        meta.update(details)
        if started is not None:
            meta["durationMs"] = int((time.monotonic() - started) * 1000)
        self.ctx.send_chunk(kind, self.index, None, meta)

    def _load_history(self, memory: tuple[Node, SessionMemory], text: str) -> list[ChatMessage]:
        node, session = memory
        window = self.ctx.run_sub(
            node,
            "ai_memory",
            {"action": "loadMemoryVariables", "values": {"input": text}},
            session.load,
            lambda msgs: {
                "action": "loadMemoryVariables",
                "chatHistory": [m.to_stored() for m in msgs],
            },
        )
        max_tokens = self._max_tokens()
        model_name = getattr(self.model, "model_name", None)
        by_tokenizer = max_tokens and self._option("tokenCount", "tokenizer") != "estimate"
        count = tokenizer.counter(model_name) if by_tokenizer else tokenizer.estimate
        return load_for_model(window, max_tokens, count)

    def _max_tokens(self) -> int:
        try:
            return max(int(self._option("maxTokensFromMemory", 0) or 0), 0)
        except (TypeError, ValueError):
            return 0

    def _save_turn(self, memory: tuple[Node, SessionMemory], text: str, output: str) -> None:
        node, session = memory
        if self._given("keepToolCallsInMemory"):
            keep = self._option("keepToolCallsInMemory", True) is True
        else:
            keep = self.v3
        turn = saved_turn(text, self.calls if keep else [], output)
        self.ctx.run_sub(
            node,
            "ai_memory",
            {"action": "saveContext", "input": {"input": text}, "output": {"output": output}},
            lambda: session.add_turn(turn),
            lambda _: {"action": "saveContext", "chatHistory": [m.to_stored() for m in turn]},
        )
