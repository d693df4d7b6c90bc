"""Where the miner's blacklist gets the metagraph from.

A :class:`MetagraphSource` hands out the latest snapshot, or ``None`` while
nothing has been synced (the miner then answers 503). The chain layer provides
its own source; :class:`StaticMetagraph` is set by hand (tests, embedded runs)
and :class:`FileMetagraph` follows a JSON file that another process rewrites.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Protocol

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron

log = logging.getLogger(__name__)


class MetagraphSource(Protocol):
    def snapshot(self) -> MetagraphSnapshot | None: ...

    def problem(self) -> str | None:
        """Why the source has no usable snapshot right now, in one line; ``None`` when fine."""
        ...


class StaticMetagraph:
    """A snapshot held in memory; ``update`` swaps it atomically, ``fail`` says why none came."""

    def __init__(self, snapshot: MetagraphSnapshot | None = None) -> None:
        self._snapshot = snapshot
        self._problem: str | None = None

    def snapshot(self) -> MetagraphSnapshot | None:
        return self._snapshot

    def problem(self) -> str | None:
        if self._snapshot is not None:
            return None
        return self._problem or "no metagraph yet"

    def update(self, snapshot: MetagraphSnapshot | None) -> None:
        self._snapshot = snapshot
        self._problem = None

    def fail(self, problem: str) -> None:
        """Why the latest snapshot could not be had; the previous one, if any, is kept."""
        self._problem = problem


def netuid_mismatch(snapshot: MetagraphSnapshot, netuid: int) -> str | None:
    """Why a metagraph cannot be this miner's: it is of another subnet. None when it can."""
    if snapshot.netuid == netuid:
        return None
    return f"the metagraph is of netuid {snapshot.netuid}, but this miner serves netuid {netuid} (--netuid)"


class FileMetagraph:
    """A snapshot read from a JSON file, re-read when the file changes.

    The file's mtime is checked at most once per ``check_interval_s``, so the
    per-request cost is a clock read. A file that is missing, invalid or (given
    ``netuid``) of another subnet keeps the previous snapshot (``None`` before the first good read); :meth:`problem`
    says what is wrong, and each new problem is logged once after the first read.
    Writers should replace the file atomically (write, then rename).
    """

    def __init__(self, path: Path, *, netuid: int | None = None, check_interval_s: float = 1.0) -> None:
        self._path = Path(path)
        self._netuid = netuid
        self._interval = check_interval_s
        self._snapshot: MetagraphSnapshot | None = None
        self._problem: str | None = None
        self._mtime_ns: int | None = None
        self._next_check = 0.0
        self._reload()  # the first result is the caller's to report

    def snapshot(self) -> MetagraphSnapshot | None:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self._interval
            problem = self._problem
            self._reload()
            if self._problem is not None and self._problem != problem:
                log.warning("%s", self._problem)
        return self._snapshot

    def problem(self) -> str | None:
        return self._problem

    def _reload(self) -> None:
        try:
            mtime_ns = os.stat(self._path).st_mtime_ns
            if mtime_ns == self._mtime_ns:
                return
            snapshot = snapshot_from_json(self._path.read_bytes())
            self._mtime_ns = mtime_ns
            mismatch = None if self._netuid is None else netuid_mismatch(snapshot, self._netuid)
            if mismatch is not None:
                self._problem = f"metagraph file {self._path}: {mismatch}"
                return
            self._snapshot = snapshot
            self._problem = None
        except FileNotFoundError:
            self._problem = f"metagraph file {self._path}: no such file"
        except OSError as exc:
            self._problem = f"metagraph file {self._path}: cannot read: {exc.strerror or exc}"
        except ValueError as exc:
            self._problem = f"metagraph file {self._path}: not valid: {exc}"


def snapshot_to_dict(snapshot: MetagraphSnapshot) -> dict[str, Any]:
    """The JSON form read by :func:`snapshot_from_json`."""
    return {
        "netuid": snapshot.netuid,
        "block": snapshot.block,
        "neurons": [_neuron_to_dict(n) for n in snapshot.neurons],
    }


def snapshot_from_json(raw: bytes | str) -> MetagraphSnapshot:
    """Parse ``{"netuid", "block", "neurons": [{"uid", "hotkey", "stake",
    "validator_permit", "axon": {"host", "port"} | null}]}``.

    Raises ``ValueError`` naming the offending neuron and field.
    """
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("metagraph JSON must be an object")
    neurons = doc.get("neurons", [])
    if not isinstance(neurons, list):
        raise ValueError("metagraph 'neurons' must be a list")
    try:
        return MetagraphSnapshot(
            netuid=int(doc["netuid"]),
            block=int(doc.get("block", 0)),
            neurons=tuple(_neuron_from_dict(i, n) for i, n in enumerate(neurons)),
        )
    except KeyError as exc:
        raise ValueError(f"metagraph is missing {exc.args[0]!r}") from None


def _neuron_to_dict(neuron: Neuron) -> dict[str, Any]:
    axon = None if neuron.axon is None else {"host": neuron.axon.host, "port": neuron.axon.port}
    return {
        "uid": neuron.uid,
        "hotkey": neuron.hotkey,
        "stake": neuron.stake,
        "validator_permit": neuron.validator_permit,
        "axon": axon,
    }


def _neuron_from_dict(index: int, item: Any) -> Neuron:
    if not isinstance(item, dict):
        raise ValueError(f"neurons[{index}] must be an object")
    try:
        axon = item.get("axon")
        return Neuron(
            uid=int(item["uid"]),
            hotkey=str(item["hotkey"]),
            stake=float(item.get("stake", 0.0)),
            validator_permit=bool(item.get("validator_permit", False)),
            axon=None if axon is None else Axon(host=str(axon["host"]), port=int(axon["port"])),
        )
    except KeyError as exc:
        raise ValueError(f"neurons[{index}] is missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"neurons[{index}] is invalid: {exc}") from None
