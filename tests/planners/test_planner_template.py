"""The planner template, as a miner uses it: copied, `pip install -e` into a fresh venv,
its own tests run, served by `dagnet miner --planner template` to a signed query, and
evaluated by `dagnet eval template` beside good and naive.

These are the steps of docs/mining.md's walk-through (whose blocks tests/project/test_docs_commands.py
runs as written), here with the miner served to a signed query and options passed;
:func:`test_the_mining_page_shows_these_steps` keeps the page and this file in step."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import httpx
import pytest

from miner.metagraph import snapshot_to_dict
from neurons.localrun import family_task
from protocol.metagraph import Axon
from protocol.response import check_response
from protocol.synapse import TaskPackage
from support.keys import MetagraphBuilder, dev_keypair, signed_headers

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "examples" / "planner-template"
FAMILIES = ("rag_towns", "agent_savings")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv that sees this checkout's environment (dagnet, pip) through a .pth
    file — as --system-site-packages would see a system install — with a copy of the
    template installed editable into it."""
    work = tmp_path_factory.mktemp("template")
    env_dir, package = work / "venv", work / "my-planner"
    shutil.copytree(TEMPLATE, package, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    host = sysconfig.get_paths()["purelib"]  # a site dir: its own .pth files (dagnet's editable finder) apply
    (site / "dagnet-host.pth").write_text(f"import site; site.addsitedir({host!r})\n")
    installed = subprocess.run(  # as a miner does: the build backend comes from the package index
        [python, "-m", "pip", "install", "--no-deps", "-q", "-e", str(package)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    return python


@pytest.mark.e2e
def test_its_own_tests_pass_once_installed(venv: Path) -> None:
    package = venv.parents[2] / "my-planner"
    done = subprocess.run(
        [venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.e2e
async def test_served_by_dagnet_miner_planner_template(venv: Path, tmp_path: Path) -> None:
    snapshot = (
        MetagraphBuilder(netuid=3)
        .validator(dev_keypair("Alice"), stake=2_000.0)
        .miner(dev_keypair("Bob"), axon=Axon("127.0.0.1", 8091))
        .build()
    )
    metagraph = tmp_path / "mg.json"
    metagraph.write_text(json.dumps(snapshot_to_dict(snapshot)))
    proc = subprocess.Popen(
        [
            venv,
            "-m",
            "neurons",
            "miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(metagraph),
            "--netuid",
            "3",
            "--port",
            "0",
            "--planner",
            "template",
            "--set",
            "planner.options.spare_retries=2",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "listening on" in line, line + proc.stderr.read() if proc.poll() is not None else line
        url = line.split("listening on ")[1].split()[0]
        package = family_task(FAMILIES[0], 5).package()
        body = package.model_dump_json().encode()
        headers = signed_headers(dev_keypair("Alice"), dev_keypair("Bob"), "/WorkflowSynapse", body)
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.post(url + "/WorkflowSynapse", content=body, headers=headers)
            health = (await client.get(url + "/health")).json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert answer.status_code == 200, answer.text
    checked = check_response(answer.content, TaskPackage.model_validate_json(body))
    assert checked.ok, checked.reason
    assert "cheapest fast-enough subnets" in checked.synapse.reasoning
    policies = checked.synapse.workflow_plan.error_handling
    assert policies and all(p.retry_count >= 2 for p in policies.values())  # the option reached the planner
    assert health["planner"]["name"] == "template"


@pytest.mark.e2e
def test_evaluated_by_dagnet_eval_beside_good_and_naive(venv: Path) -> None:
    args = [venv, "-m", "neurons", "eval", "template", "--seeds", "2", "--tier", "full"]
    for family in FAMILIES:
        args += ["--family", family]
    table = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("dagnet eval template: 2 curated families x seeds 1..2, at the full tier")
    assert all(len(line) <= 80 for line in lines)
    header = next(line for line in lines if line.startswith("family"))
    assert header.split() == ["family", "S", "succ", "cost", "lat", "rel", "qual", "good", "naive", "wins"]
    for family in FAMILIES:
        row = next(line for line in lines if line.startswith(family)).split()
        assert float(row[1]) > 0.5 and float(row[7]) > 0.5 and float(row[8]) > 0.5, row  # template, good, naive
    share = next(line for line in lines if line.strip().startswith("all ") and "good" in line).split()
    assert share[1] == "template" and share[3] == "good" and share[5] == "naive"
    assert abs(sum(float(share[i]) for i in (2, 4, 6)) - 1.0) < 0.01


def test_the_mining_page_shows_these_steps() -> None:
    from support import doccmds

    blocks = [b for b in doccmds.blocks(ROOT / "docs" / "mining.md") if b.language in doccmds.SHELLS]
    shown = [c.split("#")[0].strip() for block in blocks for c in doccmds.commands(block.text)]
    for step in ("pip install -e ~/my-planner", "(cd ~/my-planner && python -m pytest tests)"):
        assert step in shown, (step, shown)
    assert any(c.startswith("dagnet eval template") for c in shown), shown
    assert any(c.startswith("dagnet miner --planner template") for c in shown), shown


@pytest.mark.e2e  # a venv with the template pip-installed, then `dagnet eval` in it
def test_the_planner_pages_settings_example_is_one_the_template_accepts(venv: Path, tmp_path: Path) -> None:
    """docs/planner.md's `[planner]` table, as a miner's --config, with the template installed."""
    from support import doccmds

    (table,) = [
        b.text for b in doccmds.blocks(ROOT / "docs" / "planner.md") if b.language == "toml" and "[planner]" in b.text
    ]
    config = tmp_path / "miner.toml"
    config.write_text(table)
    done = subprocess.run(
        [
            venv,
            "-m",
            "neurons",
            "eval",
            "template",
            "--config",
            str(config),
            "--family",
            "dt_sales",
            "--seeds",
            "1",
            "--tier",
            "full",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["families"][0]["runs"]["template"]
    assert run["score"]["S"] > 0.5, run
