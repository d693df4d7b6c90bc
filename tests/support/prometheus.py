"""A real Prometheus for the tests: started on a free loopback port with its config and
TSDB in a temporary folder, always stopped (SIGTERM, then SIGKILL), polled through its
HTTP API until a bounded deadline (Prometheus cannot notify anyone of a scrape).

Needs the ``prometheus`` and ``promtool`` binaries (Debian package ``prometheus``,
installed by ``scripts/bootstrap``). Without them the tests skip, or fail when the
``CI`` environment variable is set, so CI cannot pass by skipping.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

DEADLINE_S = 30.0
POLL_INTERVAL_S = 0.1  # Prometheus has no push notification of a scrape: we ask again
STOP_TIMEOUT_S = 10.0


def require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        message = f"{binary!r} is not on PATH: install the Debian package 'prometheus' (scripts/bootstrap does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class PrometheusUnderTest:
    url: str
    process: subprocess.Popen
    log: Path

    def _log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    async def until(
        self,
        client: httpx.AsyncClient,
        path: str,
        params: dict[str, str],
        found: Callable,
        *,
        deadline_s: float = DEADLINE_S,
    ) -> Any:
        """Ask ``path`` until ``found(data)`` is not ``None`` and return that.

        Fails with Prometheus's log when it exits, or with the last answer at the deadline.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        last: Any = "no answer yet"
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"prometheus exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                response = await client.get(self.url + path, params=params)
                last = response.json()["data"] if response.status_code == 200 else response.text
                result = found(last) if response.status_code == 200 else None
            except httpx.TransportError as exc:  # not listening yet
                last, result = repr(exc), None
            if result is not None:
                return result
            if loop.time() > deadline:
                pytest.fail(f"{path} {params}: not there after {deadline_s} s; last answer: {last}\n{self._log_tail()}")
            await asyncio.sleep(POLL_INTERVAL_S)

    async def series(self, client: httpx.AsyncClient, promql: str, *labels: str) -> dict[tuple[str, ...], float]:
        """The instant vector of ``promql`` once it is non-empty, keyed by ``labels``' values."""
        result = await self.until(client, "/api/v1/query", {"query": promql}, lambda data: data["result"] or None)
        return {tuple(s["metric"].get(label, "") for label in labels): float(s["value"][1]) for s in result}


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[str], PrometheusUnderTest]]:
    """Starts a real Prometheus with a given config (a dict); stops it at teardown."""
    binary = require("prometheus")
    started: list[subprocess.Popen] = []

    def start(settings: dict[str, Any]) -> PrometheusUnderTest:
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps(settings))  # JSON is valid YAML
        log = tmp_path / "prometheus.log"
        address = f"127.0.0.1:{free_port()}"
        command = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={address}",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append(process)
        return PrometheusUnderTest(f"http://{address}", process, log)

    yield start
    for process in started:
        _stop(process)
