"""``dagnet tasks list | show``: the shipped task families, as miners see them.

``list`` is one line per family (id, type, the start of its description), cut to
the terminal's width; ``show`` prints a family's task package exactly as a
validator sends it to miners (the JSON of the request body), at a hint tier.
"""

from __future__ import annotations

import json
import shutil
from typing import Annotated, Any, Optional

import typer

from neurons.commands.common import JsonOpt, TierOpt, fail, print_json
from protocol.hints import HintTier
from protocol.task import at_tier
from validator.settings import setting_default

_DRAWN_PER_TEMPO = setting_default("drawn_per_tempo")

tasks_app = typer.Typer(
    help="The shipped task families: list them, show one as a miner receives it.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


SecretOpt = Annotated[
    Optional[int],
    typer.Option(
        "--secret",
        min=0,
        help="A validator's instance secret (its state file keeps it): add the families it draws for --tempo, "
        "checked as it checks them.  [default: none: the curated families only]",
    ),
]
TempoOpt = Annotated[int, typer.Option("--tempo", min=0, help="With --secret: the tempo the families are drawn for.")]
DrawnOpt = Annotated[
    int, typer.Option("--drawn", min=0, max=64, help="With --secret: how many families the validator draws a tempo.")
]


def _families(secret: int | None, tempo: int, count: int) -> list[Any]:
    """The curated families, then those a validator with ``secret`` draws for ``tempo``."""
    from tasks import load_families

    if secret is None:
        return list(load_families())
    from tasks import drawn_families
    from validator.reference import reference_solves

    return [*load_families(), *drawn_families(secret, tempo, count, verify=reference_solves)]


@tasks_app.command("list")
def tasks_list(
    as_json: bool = JsonOpt,
    secret: SecretOpt = None,
    tempo: TempoOpt = 0,
    drawn: DrawnOpt = _DRAWN_PER_TEMPO,
) -> None:
    """One line per task family: its id, its type and the start of its description."""
    rows = [
        {"task_id": f.task_id, "task_type": f.task_type, "description": f.package.description}
        for f in _families(secret, tempo, drawn)
    ]
    if as_json:
        print_json(rows)
        return
    for line in family_lines(rows, shutil.get_terminal_size().columns):
        typer.echo(line)


def family_lines(rows: list[dict[str, str]], width: int) -> list[str]:
    """``rows`` as aligned lines no wider than ``width`` (the description is cut, with ``…``)."""
    id_w = max((len(r["task_id"]) for r in rows), default=0)
    type_w = max((len(r["task_type"]) for r in rows), default=0)
    room = max(0, width - id_w - type_w - 4)
    lines = []
    for row in rows:
        text = " ".join(row["description"].split())
        if len(text) > room:
            text = text[: max(0, room - 1)] + "…" if room else ""
        lines.append(f"{row['task_id']:<{id_w}}  {row['task_type']:<{type_w}}  {text}".rstrip())
    return lines


@tasks_app.command("show")
def tasks_show(
    family_id: Annotated[str, typer.Argument(metavar="FAMILY", help="A task family id (dagnet tasks list).")],
    seed: Annotated[
        Optional[int],
        typer.Option(
            "--seed",
            min=0,
            help="Also show this instance: its seed and the hidden inputs a plan's ${input.*} refs read "
            "(what `dagnet run --task FAMILY --seed N` runs on).  [default: none]",
        ),
    ] = None,
    tier: HintTier = TierOpt,
    secret: SecretOpt = None,
    tempo: TempoOpt = 0,
    drawn: DrawnOpt = _DRAWN_PER_TEMPO,
) -> None:
    """The family's task package as JSON, exactly as a validator sends it to a miner.

    The package is the same for every instance (miners never see the instance);
    --seed adds that instance's seed and hidden inputs; --tier shows it at that hint tier.
    A drawn family (gen_...) is found with the --secret and --tempo it was drawn for.
    """
    from tasks.drawn import PREFIX

    found = {f.task_id: f for f in _families(secret, tempo, drawn)}.get(family_id)
    if found is None and family_id.startswith(PREFIX) and secret is None:
        fail(f"{family_id} is a drawn family: give the --secret and --tempo it was drawn for")
    if found is None:
        fail(
            f"no task family {family_id!r}"
            + (f" (nor among the {drawn} drawn for tempo {tempo})" if secret is not None else "")
        )
    print_json(shown(found, seed, tier))


def shown(found: Any, seed: int | None, tier: HintTier = "full") -> dict[str, Any]:
    """The package's wire JSON at ``tier``, plus ``seed`` and ``instance_inputs`` when a seed is given."""
    package = at_tier(found.package, tier)
    body: dict[str, Any] = json.loads(package.model_dump_json(by_alias=True, exclude_none=True))
    if seed is not None:
        body.update({"seed": seed, "instance_inputs": found.instance(seed).inputs})
    return body
