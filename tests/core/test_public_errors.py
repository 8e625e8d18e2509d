"""core/public_errors.py: what a public client (a webhook's or a chat's) is told of a failure."""

from __future__ import annotations

import pytest

from core.execution_record import Status
from core.public_errors import public_chunk, public_error
from core.stops import STOPPED_NEW
from core.waiting import EXPIRED

GENERIC = "The workflow could not answer (execution e1)."
UPSTREAM = "OpenAI Chat Model: request rejected (400): bad request ... db password hunter2"


@pytest.mark.parametrize(
    "error",
    [
        UPSTREAM,
        "The execution failed in its worker: ConnectionError: Error 111 connecting to h:6379.",
        "could not start: Redis is unreachable",
        "The execution timed out after 600 s (MINI_N8N_EXECUTION_TIMEOUT). db password hunter2",
        None,
        "",
    ],
)
def test_a_failure_the_lifecycle_did_not_write_is_the_generic_text_with_the_execution_id(error):
    assert public_error(Status.ERROR, error, "e1") == GENERIC


@pytest.mark.parametrize(
    "status, error",
    [
        (Status.CANCELED, STOPPED_NEW),
        (
            Status.CRASHED,
            "The worker running this execution was lost (it stopped renewing its lease).",
        ),
        (Status.ERROR, "The execution timed out after 0.5 s (MINI_N8N_EXECUTION_TIMEOUT)."),
        (
            Status.ERROR,
            "The execution used more than 60 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS).",
        ),
        (Status.ERROR, EXPIRED),
    ],
)
def test_what_the_lifecycle_wrote_about_the_execution_goes_out_as_written(status, error):
    assert public_error(status, error, "e1") == error


def test_a_stop_without_words_says_it_was_stopped():
    assert public_error(Status.CANCELED, None, "e1") == "The execution was stopped."


def test_what_the_caller_wrote_itself_goes_out_as_written():
    said = "Redis was unreachable for 46 s; the outcome is unknown."
    assert public_error(Status.ERROR, said, "e1", ours=True) == said


def test_an_error_chunk_keeps_its_metadata_and_loses_its_text():
    chunk = {"type": "error", "content": UPSTREAM, "metadata": {"nodeName": "AI Agent"}}
    assert public_chunk(chunk, "e1") == {
        "type": "error",
        "content": GENERIC,
        "metadata": {"nodeName": "AI Agent"},
    }
    assert chunk["content"] == UPSTREAM  # the engine's own chunk is not changed


def test_an_error_chunk_about_the_executions_limits_keeps_its_words():
    limit = "The execution used more than 1 s of CPU time (MINI_N8N_EXECUTION_CPU_SECONDS)."
    chunk = {"type": "error", "content": limit, "metadata": {}}
    assert public_chunk(chunk, "e1") == chunk


def test_other_chunks_pass_as_they_are():
    item = {"type": "item", "content": "db password hunter2", "metadata": {}}
    assert public_chunk(item, "e1") is item


def test_a_failed_tool_calls_step_line_keeps_its_metadata_and_loses_the_tools_error():
    meta = {"toolName": "http", "toolCallId": "c1", "toolError": UPSTREAM, "durationMs": 3}
    chunk = {"type": "tool-call-end", "metadata": meta}
    assert public_chunk(chunk, "e1") == {
        "type": "tool-call-end",
        "metadata": {**meta, "toolError": GENERIC},
    }
    assert chunk["metadata"]["toolError"] == UPSTREAM  # the engine's own chunk is not changed
    done = {"type": "tool-call-end", "metadata": {"toolName": "http", "toolOutput": "84"}}
    assert public_chunk(done, "e1") is done
