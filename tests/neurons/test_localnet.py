"""`dagnet localnet` end to end: separate processes on the embedded chain, the incentive at work.

The default run (one miner per strategy of the mix, epochs of 20 one-second blocks), for 6
epochs rather than the default 4: the validator plays the hidden world and tells each
miner how its plans ran, and by the last epoch the learner, which learns from that
feedback, must hold the highest weight and incentive; the naive planner scores below good,
and the miner whose plans are invalid and the one replaying precomputed answers (each step
draws a hidden instance) get nothing.

Why 6: the last weights of a 4-epoch run see about 45 steps, and the per-step difference
between the learner's S and good's has an SD of about 0.38 (a node that runs out of
retries zeroes a step), so that window's standard error is about 0.057. In 16 runs on
2026-11-29 (load 1.5–6) the learner's lead over good at the last weights was 0.025 to
0.235 (mean 0.158): the lead is real, but its lower tail is within two standard errors of
0, and one CI run failed the claim (its numbers were not kept; a failure now prints them).
Six epochs give the last weights about 70 steps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scoring.margin import FLOOR

pytestmark = pytest.mark.e2e


ROOT = Path(__file__).resolve().parents[2]
DAGNET = [sys.executable, "-m", "neurons"]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def _evidence(summary: dict, run_dir: Path) -> str:
    """What a failed assertion shows: the summary as a table (a list of dicts is clipped by
    pytest's repr) and what the validator logged of each weight setting."""
    head = {key: value for key, value in summary.items() if key != "miners"}
    columns = ("uid", "strategy", "steps_scored", "mean_S", "mean_margin", "beats_reference", "weight", "incentive")
    rows = [" ".join(f"{key}={_short(row.get(key))}" for key in columns) for row in summary["miners"]]
    log = run_dir / "validator.log"
    lines = [line for line in log.read_text().splitlines() if "weights set" in line] if log.exists() else []
    return "\n".join([repr(head), *rows, *lines])


def _short(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def test_the_default_localnet_pays_the_learner_most_and_the_cheats_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "net"
    done = subprocess.run(
        [*DAGNET, "localnet", "--tempos", "6", "--json", "--dir", str(run_dir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    by_strategy = {row["strategy"]: row for row in summary["miners"]}
    assert set(by_strategy) == {"good", "naive", "invalid", "precompute", "learner"}
    good, naive, learner = by_strategy["good"], by_strategy["naive"], by_strategy["learner"]
    assert summary["steps"] >= 3 and all(row["steps_scored"] >= 3 for row in summary["miners"])
    others = [row for row in summary["miners"] if row is not learner]
    assert all(learner["weight"] > row["weight"] and learner["incentive"] > row["incentive"] for row in others), (
        _evidence(summary, run_dir)
    )
    assert naive["mean_S"] < good["mean_S"], _evidence(summary, run_dir)
    assert by_strategy["invalid"]["emission"] == 0 and by_strategy["invalid"]["weight"] == 0
    # The validator draws a hidden instance of a v2 family each step: a stored answer is wrong.
    # Wrong is not always worth 0: a stored rag answer once carried a year the drawn instance
    # also had (S 0.219 on one step of 17; 0.004 of the emission in one CI run). The floor
    # now pays only a mean S clear of its standard error (docs/scoring.md), which one such
    # step is not; several would be, and earn the cheat its part of the floor's 5 %: never
    # more, and less than the learner.
    cheat = by_strategy["precompute"]
    assert cheat["emission"] <= FLOOR and cheat["weight"] <= FLOOR, _evidence(summary, run_dir)
    assert cheat["emission"] < learner["emission"], _evidence(summary, run_dir)
    logs = {p.name for p in run_dir.glob("*.log")}
    assert {"chain.log", "validator.log"} <= logs and len(logs) == 7  # no tool provider: the validator executes
    # Miners follow the chain (their blacklists read its metagraph), not a file written for them.
    assert {p.name for p in run_dir.glob("*.json")} == {"prometheus-targets.json"}
    for log in logs - {"chain.log", "validator.log"}:
        assert f"network=embedded:{run_dir / 'chain.sqlite'}" in (run_dir / log).read_text(), log
    assert not _processes_mentioning(str(run_dir))


def test_ctrl_c_stops_every_process_and_prints_what_was_reached(tmp_path: Path) -> None:
    run_dir = tmp_path / "net"
    process = subprocess.Popen(
        [
            *DAGNET,
            "localnet",
            "--miners",
            "2",
            "--duration",
            "600",
            "--block-time",
            "1",
            "--json",
            "--dir",
            str(run_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 180
    validator_log = run_dir / "validator.log"
    while not (validator_log.exists() and "listening on" in validator_log.read_text()):
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "the validator never started"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["block"] >= summary["start_block"] > 0
    assert [row["strategy"] for row in summary["miners"]] == ["good", "naive"]
    assert not _processes_mentioning(str(run_dir))


def _until_weights_follow_steps(process: subprocess.Popen, log: Path, *, steps: int, within_s: float) -> None:
    """Wait until the validator's ``log`` shows weights set after ``steps`` scored steps."""
    deadline = time.monotonic() + within_s
    while True:
        lines = log.read_text().splitlines() if log.exists() else []
        scored = [n for n, line in enumerate(lines) if re.search(r"scored \d+ miners in", line)]
        if len(scored) >= steps and any("weights set at block" in line for line in lines[scored[steps - 1] :]):
            return
        assert process.poll() is None, process.stderr.read()[-3000:] if process.stderr else ""
        assert time.monotonic() < deadline, f"{len(scored)} steps scored in {within_s:.0f} s"
        time.sleep(0.5)


def test_a_planner_that_cannot_be_loaded_stops_localnet_before_it_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [*DAGNET, "localnet", "--planner", "psychic", "--dir", str(tmp_path / "net")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "unknown planner 'psychic'" in done.stderr and not (tmp_path / "net").exists()


TEMPLATE = ROOT / "examples" / "planner-template"
TEMPLATE_PLANNER = "planner_template.planner:TemplatePlanner"


@pytest.mark.e2e
def test_evals_default_mix_says_what_the_template_earns_beside_good_in_a_localnet(tmp_path: Path) -> None:
    """Issue 30: eval said 0.263 (the full tier only) where the chain paid 0.00004. Eval
    now says what validators pay (the margin over the reference): the template does not
    beat it, so it is paid from the floor, below good, and the chain agrees that it is no
    beater: it holds no beater's pay. Its margin over the localnet's few steps is not
    compared: it is luck either way (+0.095 over 3 steps in one run, where eval's 48
    instances say it loses), and a beater's margin must clear its error counted in worlds,
    which a few steps of one or two worlds never do. Its floor
    weight itself is not compared: the floor splits in proportion to mean S over the
    window the last weights saw (a few steps here, against eval's 48 instances), so the
    instances a short localnet happens to send move it by tenths (0.41 against eval's 0.33
    in one run, 0.0 in another). The same localnet shows `--planner package.module:attr` found from the
    working folder (the template's, not installed): one more miner, named in the summary,
    with its own log."""
    evaluated = subprocess.run(
        [*DAGNET, "eval", TEMPLATE_PLANNER, "--seeds", "1", "--json"],
        cwd=TEMPLATE,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    promised = json.loads(evaluated.stdout)["types"]["all"]
    assert promised["margin"]["mean"] <= 0 and promised["weights"]["planner"] < promised["weights"]["good"], promised
    run_dir = tmp_path / "net"
    served = subprocess.Popen(
        [
            *DAGNET,
            "localnet",
            "--miners",
            "2",
            "--planner",
            TEMPLATE_PLANNER,
            "--duration",
            "900",
            "--tempo",
            "10",
            "--block-time",
            "1",
            "--json",
            "--dir",
            str(run_dir),
        ],
        cwd=TEMPLATE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Stopped (Ctrl-C) once weights were set after three scored steps, not after a fixed
    # number of blocks: at load 8-10 a 20-block run scored one step.
    try:
        _until_weights_follow_steps(served, run_dir / "validator.log", steps=3, within_s=600)
    finally:
        served.send_signal(signal.SIGINT)
        out, err = served.communicate(timeout=60)
    assert served.returncode == 0, err[-3000:]
    summary = json.loads(out)
    rows = {row["strategy"]: row for row in summary["miners"]}
    assert list(rows) == ["good", "naive", TEMPLATE_PLANNER]
    template = rows[TEMPLATE_PLANNER]
    # Scored, not S > 0: in the hidden world a plan with the template's retries fails a node
    # on a good share of instances, and a loaded run scores only a few steps (4 at load 5:
    # all four S 0.0 in one run).
    assert template["steps_scored"] >= 3, rows
    assert summary["payout"] != "margin" or template["weight"] <= FLOOR + 1e-6, summary
    uid = rows[TEMPLATE_PLANNER]["uid"]
    assert (run_dir / f"miner-{uid}-planner_template.planner-TemplatePlanner.log").exists()
    assert not _processes_mentioning(str(run_dir))
