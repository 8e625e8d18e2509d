"""The schedule of one execution: the nodes queued to run, and the inputs held for nodes that take
several (a Merge), in n8n's v1 execution order (WorkflowExecute's nodeExecutionStack and
waitingExecution).

- A node's children run before its siblings: after a node runs, each output that has items hands
  them to the nodes connected to it, and those go to the front of the queue, the one highest on
  the canvas (then leftmost) first. An output without items runs nothing after it.
- A node with several main inputs is held until every input has items; it then runs at once
  with all of them. When nothing else is queued, a held node runs with what it has (each missing
  input empty) unless its type requires the missing inputs (`NodeType.required_inputs`) or one of
  its ancestors is itself held: so a Merge after an IF runs once the IF's other branch cannot
  bring anything.

Everything here is plain JSON once encoded (`to_json`), so an execution that waits (a Chat node)
keeps its queue and its held inputs, and any process resumes it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from engine.node import Item
from engine.workflow import Connection, Node, Workflow

Source = dict[str, Any]  # {"previousNode", "previousNodeOutput", "previousNodeRun"}


@dataclass
class Frame:
    """A node to run, with its items per main input and where each input came from."""

    node: Node
    inputs: list[list[Item]]
    sources: list[Source | None]

    @property
    def items(self) -> list[Item]:
        return self.inputs[0] if self.inputs else []

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node.name, "inputs": self.inputs, "sources": self.sources}

    @classmethod
    def from_json(cls, workflow: Workflow, data: Any) -> Frame:
        if isinstance(data, list):  # [name, items, parent]: a state written by an older engine
            name, items, parent = data
            return cls(
                workflow.nodes[name], [items], [{"previousNode": parent} if parent else None]
            )
        return cls(workflow.nodes[data["node"]], data["inputs"], data["sources"])


@dataclass
class _Held:
    """Inputs gathered so far for one run of a node with several inputs (None: not yet)."""

    inputs: list[list[Item] | None]
    sources: list[Source | None]


@dataclass
class Schedule:
    workflow: Workflow
    queue: deque[Frame] = field(default_factory=deque)
    held: dict[str, list[_Held]] = field(default_factory=dict)

    def start(self, node: Node, items: list[Item]) -> None:
        self.queue.append(Frame(node, [items], []))

    def next(self) -> Frame | None:
        """The next node to run: the queue's front, else a held node that may run now."""
        if not self.queue:
            self._release_held()
        return self.queue.popleft() if self.queue else None

    def pending(self) -> bool:
        return bool(self.queue)

    def add_children(self, node: Node, outputs: list[list[Item]], run_index: int) -> None:
        """Queue what `node`'s outputs feed (n8n: nodesToAdd, sorted, then addNodeToBeExecuted)."""
        found: list[tuple[Connection, int]] = []
        for output_index, items in enumerate(outputs):
            if items:
                found += [
                    (c, output_index) for c in self.workflow.main_children(node.name, output_index)
                ]
        # n8n sorts by position, lowest on the canvas first, then puts each at the queue's
        # front: the one highest (then leftmost) ends up running first.
        found.sort(key=lambda pair: self._position(pair[0].target), reverse=True)
        for conn, output_index in found:
            source = {
                "previousNode": node.name,
                "previousNodeOutput": output_index,
                "previousNodeRun": run_index,
            }
            self._add(conn, outputs[output_index], source)

    def _position(self, name: str) -> tuple[float, float]:
        position = list(self.workflow.nodes[name].position) + [0, 0]
        return (float(position[1]), float(position[0]))

    def _add(self, conn: Connection, items: list[Item], source: Source) -> None:
        target = self.workflow.nodes[conn.target]
        width = self.workflow.main_input_count(target.name)
        if width <= 1:
            self.queue.appendleft(Frame(target, [items], [source]))
            return
        entries = self.held.setdefault(target.name, [])
        entry = next((e for e in entries if e.inputs[conn.target_input] is None), None)
        if entry is None:
            entry = _Held([None] * width, [None] * width)
            entries.append(entry)
        entry.inputs[conn.target_input] = items
        entry.sources[conn.target_input] = source
        if all(inputs is not None for inputs in entry.inputs):
            self._unhold(target.name, entry)
            self.queue.appendleft(Frame(target, _filled(entry.inputs), entry.sources))

    def _unhold(self, name: str, entry: _Held) -> None:
        entries = self.held[name]
        entries.remove(entry)
        if not entries:
            del self.held[name]

    def _release_held(self) -> None:
        """Nothing is queued: run the first held node that may run with the inputs it has
        (n8n's v1 check of waitingExecution once the stack is empty). A held entry without any
        items is dropped and the search starts again."""
        restart = True
        while restart:
            restart = False
            for name in list(self.held):
                if not self._may_run_partly(name):
                    continue
                entry = self.held[name][0]
                self._unhold(name, entry)
                if any(entry.inputs):
                    node = self.workflow.nodes[name]
                    inputs = _filled(entry.inputs)
                    inputs += [[] for _ in range(self._width(node) - len(inputs))]
                    self.queue.append(Frame(node, inputs, entry.sources))
                    return
                restart = True
                break

    def _may_run_partly(self, name: str) -> bool:
        node = self.workflow.nodes[name]
        required = self.workflow.node_type(name).required_inputs(node)
        width = self._width(node)
        if required is not None and (
            (isinstance(required, list) and len(required) == width) or required == width
        ):
            return False
        if any(parent in self.held for parent in self.workflow.main_ancestors(name)):
            return False
        entry = self.held[name][0]
        with_data = [i for i, inputs in enumerate(entry.inputs) if inputs is not None]
        if isinstance(required, list):
            return all(index in with_data for index in required)
        return required is None or len(with_data) >= required

    def _width(self, node: Node) -> int:
        return self.workflow.node_type(node.name).main_input_count(node)

    # --- plain JSON, for a waiting execution ----------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "stack": [frame.to_json() for frame in self.queue],
            "held": {
                name: [{"inputs": e.inputs, "sources": e.sources} for e in entries]
                for name, entries in self.held.items()
            },
        }

    @classmethod
    def from_json(cls, workflow: Workflow, state: dict[str, Any]) -> Schedule:
        schedule = cls(workflow, deque(Frame.from_json(workflow, f) for f in state["stack"]))
        for name, entries in (state.get("held") or {}).items():
            schedule.held[name] = [_Held(e["inputs"], e["sources"]) for e in entries]
        return schedule


def _filled(inputs: list[list[Item] | None]) -> list[list[Item]]:
    return [items if items is not None else [] for items in inputs]
