"""The execution record's codec, and the header the Redis scripts read without decoding it:
whatever a record holds, Lua reads the same status, revision and claim as Python."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.execution_record import (
    LUA_HEADER,
    ExecutionRecord,
    RecordError,
    Status,
    WorkerRef,
    header,
)

# Any JSON value, with text that includes lone surrogates and quotes.
TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
RECORDS = st.builds(
    ExecutionRecord,
    id=st.text("0123456789abcdef", min_size=1, max_size=16),
    workflow_id=TEXT,
    status=st.sampled_from(Status),
    rev=st.integers(0, 10**6),
    claim=st.text("0123456789abcdefABCXYZ", max_size=16),
    session_id=st.none() | TEXT,
    error=st.none() | TEXT,
    run_data=st.dictionaries(
        TEXT, st.lists(st.dictionaries(TEXT, JSON, max_size=3), max_size=2), max_size=3
    ),
    worker=st.none() | st.builds(WorkerRef, TEXT, st.integers(1, 2**22)),
)
_LUA_READ = f"""
local status, rev, claim = string.match(ARGV[1], '{LUA_HEADER}')
if not status then return {{}} end
return {{status, rev, claim}}
"""


@settings(
    max_examples=150,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(record=RECORDS)
def test_a_record_reads_back_as_written_and_lua_reads_its_header_as_python_does(
    record, redis_client
):
    text = record.encode()
    assert ExecutionRecord.decode(text) == record
    read = header(text)
    assert (read.status, read.rev, read.claim) == (record.status, record.rev, record.claim)
    assert redis_client.eval(_LUA_READ, 0, text) == [
        record.status.value,
        str(record.rev),
        record.claim,
    ]


def test_every_status_begins_the_record_in_the_same_form():
    for status in Status:
        text = ExecutionRecord("e1", "w1", status=status, rev=3, claim="ab12").encode()
        assert text.startswith(f'{{"status":"{status.value}","rev":3,"claim":"ab12",')


def test_a_claim_token_that_the_scripts_could_not_read_is_refused():
    with pytest.raises(RecordError):
        ExecutionRecord("e1", "w1", claim='a"b').encode()


def test_text_that_is_not_a_record_is_named_so():
    for text in ("[]", "not json", '{"status":"new"}'):
        with pytest.raises(RecordError):
            ExecutionRecord.decode(text)
    with pytest.raises(RecordError):
        header('{"id":"e1","status":"new"}')
