"""What the suite leaves behind (issue 38): a Docker engine it started is stopped, the images
it builds carry the label scripts/clean-test-images removes by, scratch goes to the temp
directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.docker import LABEL, _alive, stop

ROOT = Path(__file__).resolve().parents[2]


def test_stop_ends_a_process_of_another_session_and_reports_a_gone_one() -> None:
    # setsid: like the dockerd scripts/docker-engine starts, not in our process group
    child = subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        assert _alive(child.pid)
        assert stop(child.pid, grace_s=30) is True
        child.wait(timeout=30)  # ours here, so reap it; the fixture's dockerd is init's
        assert not _alive(child.pid)
        assert stop(child.pid) is True  # gone already: nothing to do
    finally:
        child.kill()
        child.wait()


def test_every_image_the_compose_test_builds_carries_the_label_the_clean_script_removes() -> None:
    script = (ROOT / "scripts" / "clean-test-images").read_text()
    key = LABEL.split("=")[0]
    assert f"LABEL={key}\n" in script and "label=$LABEL" in script
    # the test's source with its whitespace dropped: what it passes, however it is formatted
    test = "".join((ROOT / "tests" / "project" / "test_compose_e2e.py").read_text().split())
    assert '"--label",LABEL,base' in test  # the base: dagnet:local, built on it, inherits it
    assert '"--label",LABEL,"-t",PROMETHEUS_IMAGE' in test
    base = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-base-image"), "--label"], capture_output=True, text=True, check=False
    )
    assert base.returncode == 2 and base.stderr.strip() == "build-base-image: --label needs KEY=VALUE"


def test_the_clean_script_parses_and_refuses_an_unknown_option() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "clean-test-images"), "--everything"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.strip() == "clean-test-images: unknown option --everything"
