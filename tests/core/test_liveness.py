"""One liveness rule: the Lua the scripts run gives the same verdict as the Python the api runs,
for every status and every state of the keys that keep an execution alive."""

from __future__ import annotations

import itertools

from core import liveness
from core.execution_record import Status
from core.liveness import Verdict, judge

_LUA = (
    liveness.LUA_JUDGE
    + """
local status = ARGV[1]
if status == '' then status = false end
return judge(status, ARGV[2] == '1', ARGV[3] == '1')
"""
)


def test_the_scripts_and_python_judge_alike(redis_client):
    for status, leased, queued in itertools.product([None, *Status], (False, True), (False, True)):
        lua = redis_client.eval(_LUA, 0, status or "", int(leased), int(queued))
        assert lua == judge(status, leased, queued).value, (status, leased, queued)


def test_what_keeps_each_status_alive():
    assert judge(Status.RUNNING, leased=True, queued=False) == Verdict.ALIVE
    assert judge(Status.RUNNING, leased=False, queued=True) == Verdict.LOST
    assert judge(Status.NEW, leased=False, queued=True) == Verdict.ALIVE  # in the broker's queue
    assert judge(Status.NEW, leased=True, queued=False) == Verdict.ALIVE  # held for its turn
    assert judge(Status.NEW, leased=False, queued=False) == Verdict.LOST
    assert judge(Status.WAITING, leased=False, queued=False) == Verdict.ALIVE
    assert judge(Status.SUCCESS, leased=True, queued=True) == Verdict.ENDED
    assert judge(None, leased=True, queued=True) == Verdict.ENDED
