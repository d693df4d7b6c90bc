"""``dagnet validator``: run a validator, or re-score one stored execution (``--replay``);
``dagnet validator tasks``: each task's lifecycle in a state file, and ``--reset``.

``validator`` is a group whose callback is the validator itself, so ``dagnet
validator --wallet-name W ...`` runs it and ``dagnet validator tasks ...`` does not.
The process (chain, loop, state, ``/health``) is :mod:`neurons.validator`, imported
only when the validator runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from pydantic import TypeAdapter, ValidationError

from neurons.commands.common import JsonOpt, configure_logging, describe, error, fail, print_json
from neurons.commands.network import DevKeyOpt, HotkeyOpt, NeuronNetworkOpt, NeuronWalletOpt, WalletPathOpt, network_of
from neurons.files import InputError, read_text
from neurons.settings import build_settings, with_setting_flags
from protocol.errors import format_validation_error
from validator.providers import EVERY_SUBNET
from validator.settings import ProviderEntry, ValidatorSettings

validator_app = typer.Typer(invoke_without_command=True)  # the help is the callback's docstring

StateOpt = Annotated[Path, typer.Option(help="The validator's SQLite state file.")]
DEFAULT_STATE = ValidatorSettings.model_fields["state"].default


def register(app: typer.Typer) -> None:
    app.add_typer(validator_app, name="validator")


SETTING_FLAGS = {
    "netuid": "--netuid",
    "state": "--state",
    "tasks": "--tasks",
    "host": "--host",
    "port": "--port",
    "sample_size": "--sample-size",
    "query_timeout_s": "--query-timeout",
    "exec_concurrency": "--exec-concurrency",
    "max_frames": "--max-frames",
    "max_frame_instances": "--max-frame-instances",
    "poll_s": "--poll",
    "log_level": "--log-level",
}
"""The settings an operator sets by flag (any setting can be set with --config or --set)."""


@validator_app.callback()
@with_setting_flags(ValidatorSettings, SETTING_FLAGS)
def validator(
    ctx: typer.Context,
    dev_key: DevKeyOpt = None,
    wallet_name: NeuronWalletOpt = None,
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    network: NeuronNetworkOpt = None,
    chain_endpoint: Annotated[
        Optional[str],
        typer.Option("--chain-endpoint", "--subtensor.chain_endpoint", help="Overrides --network.  [default: none]"),
    ] = None,
    providers: Annotated[
        Optional[Path],
        typer.Option(
            metavar="FILE",
            help='JSON [{uid, hotkey, url}]: external tool providers of every subnet, short for --set \'adapters.*={"kind": "dagnet", "providers": [...]}\'.  [default: none: the validator executes every plan itself]',
        ),
    ] = None,
    config_file: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            metavar="FILE",
            help="Settings file (TOML or JSON) with any validator setting, the adapters table too.  [default: none]",
        ),
    ] = None,
    sets: Annotated[
        Optional[list[str]],
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help='Override one setting, e.g. sample_size=64 or \'adapters.sn8={"kind": "dagnet", "netuid": 8}\' (repeatable; after --config).',
        ),
    ] = None,
    replay_id: Annotated[
        Optional[int],
        typer.Option(
            "--replay",
            metavar="RECORD",
            help="Re-score stored execution RECORD and exit (0 identical, 1 not).  [default: none: run]",
        ),
    ] = None,
    reset: Annotated[
        bool,
        typer.Option(
            "--reset",
            help="Start on a state file that is empty, has lost its instance secret or has a weak one by making a new secret in it (drawn-family records made before no longer replay).  [default: off: such a file is refused]",
        ),
    ] = False,
    *,
    settings_flags: dict[str, Any],
) -> None:
    """Validate: query miners, execute and score their plans, set weights once per tempo.

    Run with a key (--dev-key or --wallet.name) and the options below; `dagnet validator
    tasks` shows the task lifecycle kept in a state file instead.

    Settings: defaults, then --config FILE, then each --set, then the flags above.
    """
    if ctx.invoked_subcommand is not None:
        return
    try:
        overrides = [*(sets or ()), *([providers_override(providers)] if providers is not None else [])]
        settings = build_settings(ValidatorSettings, config_file=config_file, overrides=overrides, flags=settings_flags)
    except InputError as exc:
        fail(str(exc))
    if replay_id is not None:
        _replay(settings.state, settings.tasks, replay_id, settings.drawn_per_tempo)
        return
    from chain.base import ChainError
    from neurons.listen import PortInUse
    from neurons.validator import ValidatorProcessConfig, run_validator
    from validator.state import StateRefused

    try:
        config = ValidatorProcessConfig(
            **dict(settings),
            dev_key=dev_key,
            wallet_name=wallet_name,
            wallet_hotkey=wallet_hotkey,
            wallet_path=wallet_path,
            network=network,
            chain_endpoint=chain_endpoint,
        )
        config.wallet()  # a key that cannot be loaded is an input error, found before anything starts
    except ValueError as exc:
        fail(describe(exc))
    network_of(network, chain_endpoint, default=None)  # a validator never picks a chain on its own
    configure_logging(config.log_level, timestamps=True)
    try:
        asyncio.run(run_validator(config, reset=reset))
    except PortInUse as exc:
        fail(f"port {exc.port} is in use (--port)")
    except (StateRefused, ChainError) as exc:  # a chain error here: at start, before any step
        fail(str(exc))
    except (KeyError, OSError, ValueError) as exc:
        error(str(exc))
        raise typer.Exit(1) from None


_PROVIDER_LIST = TypeAdapter(list[ProviderEntry])


def providers_override(path: Path) -> str:
    """``--providers FILE`` as the ``--set`` it stands for: ``adapters.*`` = a dagnet adapter
    with the file's ``[{"uid", "hotkey", "url"}, ...]``."""
    try:
        entries = _PROVIDER_LIST.validate_json(read_text(path))
    except ValidationError as exc:
        raise InputError(f"{path}: not a providers list: {format_validation_error(exc)}") from None
    adapter = {"kind": "dagnet", "providers": [entry.model_dump() for entry in entries]}
    return f"adapters.{EVERY_SUBNET}={json.dumps(adapter)}"


def _replay(state: Path, tasks: Path, record_id: int, drawn_per_tempo: int) -> None:
    """Exit 0 identical, 1 not, 3 nothing could be compared (the record kept its final
    output and its score capped); a capped record's note goes to stderr too."""
    from neurons.localrun import load_task_source
    from validator.audit import replay_record
    from validator.sources import drawn_source

    if not state.exists():
        fail(f"no state file {state}")
    try:
        result = replay_record(state, record_id, load_task_source(tasks), drawn_source(tasks, drawn_per_tempo))
    except (LookupError, OSError, ValueError) as exc:
        fail(str(exc).strip("'"))
    except sqlite3.DatabaseError as exc:  # a file damaged past what opening it reads
        fail(f"the state file {state} cannot be read: {exc}")
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    typer.echo(f"record {record_id}: {result['explanation']}", err=True)
    if result["unchecked"] is not None:
        typer.echo(f"note: record {record_id} is capped: {result['unchecked']}", err=True)
    if result["identical"] is None:
        raise typer.Exit(3)
    if not result["identical"]:
        raise typer.Exit(1)


@validator_app.command("tasks")
def tasks(
    state: StateOpt = DEFAULT_STATE,
    reset: Annotated[bool, typer.Option("--reset", help="Make every task active again, no failures counted.")] = False,
    as_json: bool = JsonOpt,
) -> None:
    """List each task's lifecycle state; --reset makes every task active again.

    A task is active, or set aside (since and until which block, and why); the
    failures column counts the steps in a row its reference plan failed.
    """
    with _opened(state) as store:
        if reset:
            store.reset_tasks()
        rows = [_lifecycle_row(task) for task in store.task_lifecycles().values()]
    if as_json:
        print_json(rows)
        return
    for line in _lifecycle_lines(rows):
        typer.echo(line)


@contextlib.contextmanager
def _opened(state: Path) -> Iterator[Any]:
    """The state file open, closed after; a missing or refused file is an input error."""
    from validator.state import StateRefused, ValidatorState

    if not state.exists():
        fail(f"no state file {state}")
    try:
        store = ValidatorState(state)
    except StateRefused as exc:
        fail(str(exc))
    try:
        yield store
    except sqlite3.DatabaseError as exc:  # a file damaged past what opening it reads
        fail(f"the state file {state} cannot be read: {exc}")
    finally:
        store.close()


def _lifecycle_row(task: Any) -> dict[str, Any]:
    return {
        "task_id": task.task_id,
        "state": task.state,
        "since_block": task.since_block,
        "until_block": task.until_block,
        "reason": task.reason,
        "reference_failures": task.reference_failures,
    }


_COLUMNS = (
    ("task", "task_id"),
    ("state", "state"),
    ("since", "since_block"),
    ("until", "until_block"),
    ("ref. failures", "reference_failures"),
    ("reason", "reason"),
)


def _lifecycle_lines(rows: list[dict[str, Any]]) -> list[str]:
    return _aligned(_COLUMNS, rows) if rows else ["no task in the state file yet"]


def _aligned(columns: tuple[tuple[str, str], ...], rows: list[dict[str, Any]]) -> list[str]:
    """A header and one aligned line per row (``-`` for what is not set); the last column whole."""
    table = [[header for header, _ in columns]]
    table += [["-" if row[key] is None else str(row[key]) for _, key in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns) - 1)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(line, widths)), line[-1]]).rstrip() for line in table]


@validator_app.command("records")
def records(
    state: StateOpt = DEFAULT_STATE,
    miner: Annotated[
        Optional[int], typer.Option("--miner", metavar="UID", help="Only this miner's records.  [default: every miner]")
    ] = None,
    task: Annotated[
        Optional[str],
        typer.Option(
            "--task", metavar="ID", help="Only this task's records (as sent, or its base task).  [default: every task]"
        ),
    ] = None,
    last: Annotated[int, typer.Option("--last", min=1, metavar="N", help="The newest N records that match.")] = 20,
    as_json: bool = JsonOpt,
) -> None:
    """List stored execution records, oldest first: the id `--replay` takes, block, uid,
    task, tier, S and what it is made of (or why it is 0)."""
    with _opened(state) as store:
        rows = [_record_row(record) for record in store.executions(uid=miner, task_id=task, last=last)]
        empty = not rows and not store.executions(last=1)
    if as_json:
        print_json(rows)
        return
    nothing = "no record in the state file yet" if empty else "no record matches"
    for line in _aligned(_RECORD_COLUMNS, rows) if rows else [nothing]:
        typer.echo(line)


def _record_row(record: Any) -> dict[str, Any]:
    score = record.score if isinstance(record.score, dict) else {}
    return {
        "id": record.id,
        "block": record.block,
        "uid": record.uid,
        "task_id": record.task_id,
        "tier": record.hint_tier,
        "S": score.get("S"),
        "reason": record.reason,
        "explanation": record.explain(),
    }


_RECORD_COLUMNS = (
    ("id", "id"),
    ("block", "block"),
    ("uid", "uid"),
    ("task", "task_id"),
    ("tier", "tier"),
    ("outcome", "explanation"),
)
