"""Watching a run: every lifecycle transition as a JSON-ready record, kept and streamed.

A :class:`RunTrace` is the executor's ``on_event`` callback. It keeps every
transition (the run page draws its timeline from them) and hands each one, as it
happens, to an optional sink (``dagnet run --events`` writes them as JSON lines).

A record is ``{"event": "transition", "t", "node", "from", "to", "reason"}``, plus
``"frame"`` for a frame instance's transition; ``t`` is seconds from the start of
execution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .executor import Event

__all__ = ["RunTrace", "transition_record"]

Sink = Callable[[dict[str, Any]], None]


def transition_record(event: Event) -> dict[str, Any]:
    """The JSON form of one lifecycle transition."""
    record = {
        "event": "transition",
        "t": round(event.t, 6),
        "node": event.node_id,
        "from": event.old,
        "to": event.new,
        "reason": event.reason,
    }
    if event.frame is not None:
        record["frame"] = event.frame
    return record


class RunTrace:
    """Collects transitions; forwards each to ``sink`` until the sink first fails.

    The executor requires its callback never to raise, so a sink that breaks (a
    closed pipe) is dropped and the run goes on; the records are still kept.

    With no sink to hand them to, transitions are kept as the executor's
    :class:`Event` objects and made records only when :attr:`events` is read:
    ``dagnet run`` without ``--events`` or ``--html`` never reads them, and building
    a record is most of what tracing a zero-delay node costs.
    """

    __slots__ = ("_records", "_held", "_sink")

    def __init__(self, sink: Sink | None = None) -> None:
        self._records: list[dict[str, Any]] = []
        self._held: list[Event] = []  # transitions after _records, not made records yet
        self._sink = sink

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every transition so far as its record, in order."""
        if self._held:
            self._records.extend(map(transition_record, self._held))
            self._held.clear()
        return self._records

    def __call__(self, event: Event) -> None:
        if self._sink is None:
            self._held.append(event)
            return
        record = transition_record(event)
        self._records.append(record)
        try:
            self._sink(record)
        except Exception:  # noqa: BLE001 — see the class docstring
            self._sink = None
