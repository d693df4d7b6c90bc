"""The run page in a real headless Chromium: it loads without a console message and shows its bars.

Skipped when no ``chromium`` is installed (``scripts/bootstrap`` installs it).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from neurons.cli import app

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/bootstrap installs it)"),
]

SUCCESS = (0x2E, 0x7D, 0x32)
FAILED = (0xC6, 0x28, 0x28)
WIDTH, HEIGHT = 1280, 1000


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--window-size={WIDTH},{HEIGHT}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _bands(image: Image.Image, colour: tuple[int, int, int], min_run: int) -> list[tuple[int, int]]:
    """Vertical extents of the horizontal bars drawn in exactly ``colour``, ``min_run`` px or wider."""
    match = (np.asarray(image.convert("RGB")) == colour).all(axis=2).astype(np.int32)
    # A row holds a bar when some window of min_run consecutive pixels all match.
    windows = np.cumsum(np.pad(match, ((0, 0), (1, 0))), axis=1)
    rows = np.flatnonzero((windows[:, min_run:] - windows[:, :-min_run] == min_run).any(axis=1))
    bands: list[tuple[int, int]] = []
    for y in rows.tolist():
        if bands and y == bands[-1][1] + 1:
            bands[-1] = (bands[-1][0], y)
        else:
            bands.append((y, y))
    return bands


def _page(folder: Path, example: str) -> Path:
    out = folder / "run.html"
    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / example), "--html", str(out)])
    assert out.exists(), result.output
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    return _page(tmp_path_factory.mktemp("page"), "observe.json")


def test_page_loads_in_chromium_without_console_messages_and_runs_its_script(page, tmp_path):
    result = _chromium(tmp_path / "profile", "--dump-dom", page.as_uri())
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script error, no blocked fetch (CSP violations are logged here)
    assert 'data-ready="1"' in result.stdout  # the page's own script ran under its CSP
    assert 'data-node="summarise"' in result.stdout


def test_screenshot_shows_the_timeline_bars(page, tmp_path):
    shot = tmp_path / "run.png"
    result = _chromium(tmp_path / "profile", f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), result.stderr[-2000:]
    image = Image.open(shot)
    assert image.size == (WIDTH, HEIGHT)
    # Each attempt is its own segment: fetch, parse (its 2nd attempt) and summarise
    # succeed on three timeline rows; parse's 1st attempt and both of side's fail on two.
    # Bars are ≥ 40 px wide here; the legend's colour squares are 12 px and do not count.
    assert len(_bands(image, SUCCESS, 40)) == 3
    assert len(_bands(image, FAILED, 40)) == 2


@pytest.fixture(scope="module")
def frames_page(tmp_path_factory) -> Path:
    return _page(tmp_path_factory.mktemp("frames"), "frames_delays.json")


def test_frames_page_loads_and_shows_a_bar_per_frame_instance(frames_page, tmp_path):
    result = _chromium(tmp_path / "profile", "--dump-dom", frames_page.as_uri())
    assert [line for line in result.stderr.splitlines() if ":CONSOLE" in line] == []
    assert 'data-ready="1"' in result.stdout
    shot = tmp_path / "frames.png"
    _chromium(tmp_path / "profile2", f"--screenshot={shot}", frames_page.as_uri())
    image = Image.open(shot)
    # work[0] and work[2] succeed (≥ 0.1 s each); work[1] fails twice (0.2 s per attempt),
    # and the work row itself, spanning its instances, is red because frame 1 failed.
    assert len(_bands(image, SUCCESS, 40)) == 2
    assert len(_bands(image, FAILED, 40)) == 2
