"""A worker's stop switches: a stop broadcast on `executions:stop` flips the switch of the
execution if it runs here, and nothing else."""

from __future__ import annotations

import pytest

from worker.stops import Stops

WAIT = 5.0


@pytest.fixture
def stops(redis_url, keys):
    stops = Stops(redis_url, keys.stop_channel())
    stops.start()
    assert stops.listening.wait(WAIT)
    yield stops
    stops.close()


def test_a_broadcast_stop_cancels_the_execution_running_here(stops, redis_client, keys):
    cancel = stops.add("e1")
    redis_client.publish(keys.stop_channel(), "e1")
    assert cancel.wait(WAIT)


def test_a_stop_for_an_execution_running_elsewhere_changes_nothing_here(stops, redis_client, keys):
    other, last = stops.add("e1"), stops.add("e2")
    redis_client.publish(keys.stop_channel(), "not-here")
    redis_client.publish(keys.stop_channel(), "e2")
    assert last.wait(WAIT)  # heard in order: "not-here" was handled before
    assert not other.is_set()
    assert stops.running() == ["e1", "e2"]


def test_a_finished_execution_can_no_longer_be_stopped(stops):
    stops.add("e1")
    stops.remove("e1")
    assert stops.stop("e1") is False
    assert stops.running() == []


def test_closing_ends_the_listener(stops):
    thread = stops._thread
    stops.close()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert not stops.listening.is_set()
