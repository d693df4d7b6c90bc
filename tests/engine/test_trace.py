"""RunTrace keeps every transition as its record, in order, with or without a sink;
an Event is a frozen dataclass of its fields."""

import dataclasses

import pytest

from engine.model import Event
from engine.trace import RunTrace, transition_record

EVENTS = [
    Event(0.0, "a", "pending", "ready", None),
    Event(0.1234567, "a", "ready", "running", None),
    Event(0.2, "b", "running", "failed", "boom", 3),
]


def test_without_a_sink_the_records_are_those_of_every_transition_in_order():
    trace = RunTrace()
    for event in EVENTS[:2]:
        trace(event)
    assert trace.events == [transition_record(e) for e in EVENTS[:2]]
    trace(EVENTS[2])  # a transition after the records were read is added after them
    assert trace.events == [transition_record(e) for e in EVENTS]
    assert trace.events[1]["t"] == 0.123457 and trace.events[2]["frame"] == 3


def test_a_sink_gets_each_record_as_it_happens_until_it_fails_and_none_is_lost():
    seen: list[dict] = []

    def sink(record: dict) -> None:
        if len(seen) == 2:
            raise BrokenPipeError
        seen.append(record)

    trace = RunTrace(sink)
    trace(EVENTS[0])
    assert seen == [transition_record(EVENTS[0])]
    for event in EVENTS[1:]:
        trace(event)
    assert seen == [transition_record(e) for e in EVENTS[:2]]
    assert trace.events == [transition_record(e) for e in EVENTS]


def test_an_event_is_the_frozen_dataclass_its_fields_say():
    event = Event(0.5, "a", "ready", "running", None)
    assert dataclasses.astuple(event) == (0.5, "a", "ready", "running", None, None)
    assert event == Event(t=0.5, node_id="a", old="ready", new="running", reason=None, frame=None)
    assert dataclasses.replace(event, frame=2).frame == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.t = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Event(0.5, "a")  # type: ignore[call-arg]
