"""`dagnet tasks list | show`: the shipped families, as miners receive them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from neurons.cli import app
from neurons.commands.tasks import family_lines
from protocol.synapse import TaskPackage
from tasks import family, load_families


def _invoke(*args: str, columns: int = 80):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})


@pytest.mark.parametrize("columns", [80, 60, 200])
def test_list_is_one_line_per_family_within_the_terminal(columns):
    result = _invoke("tasks", "list", columns=columns)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [f.task_id for f in load_families()]
    assert all(line.split()[1] == f.task_type for line, f in zip(lines, load_families()))
    assert max(map(len, lines)) <= columns


def test_list_json_carries_the_whole_description():
    rows = json.loads(_invoke("tasks", "list", "--json").stdout)
    assert rows == [
        {"task_id": f.task_id, "task_type": f.task_type, "description": f.package.description} for f in load_families()
    ]


def test_family_lines_cut_only_the_description():
    lines = family_lines([{"task_id": "a", "task_type": "rag", "description": "one two three"}], 12)
    assert lines == ["a  rag  one…"]


def test_show_is_the_package_a_validator_sends():
    result = _invoke("tasks", "show", "rag_towns")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    found = family("rag_towns")
    sent = found.task(found.instance(12345)).package()  # what the validator's step sends, for any instance
    assert shown == json.loads(sent.model_dump_json(by_alias=True, exclude_none=True))
    TaskPackage.model_validate(shown)


def test_show_with_a_seed_adds_that_instance_s_hidden_inputs():
    shown = json.loads(_invoke("tasks", "show", "dt_sales", "--seed", "4").stdout)
    found = family("dt_sales")
    assert shown["seed"] == 4 and shown["instance_inputs"] == found.instance(4).inputs
    other = json.loads(_invoke("tasks", "show", "dt_sales", "--seed", "5").stdout)
    assert other["instance_inputs"] != shown["instance_inputs"]
    assert {k: v for k, v in shown.items() if k not in ("seed", "instance_inputs")} == json.loads(
        _invoke("tasks", "show", "dt_sales").stdout
    )


def test_drawn_families_are_listed_and_shown_for_a_secret_and_tempo():
    """A validator's drawn families (`gen_*`, 18 % of localnet steps) are shown as it sends
    them: found with the secret and tempo they were drawn for, checked as it checks them."""
    from tasks import drawn_families
    from validator.reference import reference_solves

    expected = drawn_families(7, 3, 2, verify=reference_solves)
    rows = json.loads(_invoke("tasks", "list", "--json", "--secret", "7", "--tempo", "3", "--drawn", "2").stdout)
    assert [r["task_id"] for r in rows] == [f.task_id for f in (*load_families(), *expected)]
    drawn = expected[0].task_id
    shown = _invoke("tasks", "show", drawn, "--secret", "7", "--tempo", "3", "--drawn", "2", "--tier", "goal")
    assert shown.exit_code == 0, shown.output
    assert (
        TaskPackage.model_validate_json(shown.stdout).task_id == drawn
        and json.loads(shown.stdout)["hint_tier"] == "goal"
    )
    without = _invoke("tasks", "show", drawn)
    assert without.exit_code == 2 and "give the --secret and --tempo" in without.stderr
