"""The `dagnet` command line: the root app and the list of commands.

Each command lives in its own module under :mod:`neurons.commands` and registers
itself with ``register(app)``; adding one is a module and a line in ``COMMANDS``
(docs/architecture.md). Command modules import their heavy dependencies inside the
command function, so ``dagnet --help`` and ``dagnet run`` never load a web server
or the chain SDK.

Imports run one way: this module → the command modules → the process modules
(:mod:`neurons.miner`, :mod:`neurons.validator`, imported inside the command). A
process module never imports this one, except under its ``if __name__ ==
"__main__":`` guard, which makes ``python -m neurons.miner`` mean ``dagnet miner``:
that file then runs as ``__main__``, so the guard is an entry point, not an import
cycle (tests/project/test_architecture.py checks the whole graph, function-level imports
included).

Stable: scripts depend on the flags, output and exit codes (docs/cli.md).
"""

from __future__ import annotations

import typer

from neurons.commands import bench, chain, eval, localnet, miner, plan, run, score, subnet, tasks, validator, wallet
from neurons.commands.common import OneLineErrors

COMMANDS = (plan, run, score, tasks, eval, miner, validator, localnet, chain, wallet, subnet, bench)


def _show_version(value: bool) -> None:
    if value:
        from protocol.synapse import SCORING_VERSION
        from protocol.version import package_version

        typer.echo(f"dagnet {package_version()} (scoring version {SCORING_VERSION})")
        raise typer.Exit()


app = typer.Typer(
    cls=OneLineErrors,
    help="dagnet: workflow-orchestration subnet tools. Exit codes: 0 success, 1 `run` did not complete, 2 invalid input.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    _: bool = typer.Option(
        False,
        "--version",
        callback=_show_version,
        is_eager=True,
        help="Print the version and the scoring version, and exit.",
    ),
) -> None:
    """dagnet: workflow-orchestration subnet tools."""


for _command in COMMANDS:
    _command.register(app)


def main(args: list[str] | None = None) -> None:
    """The console script; ``args`` defaults to the process's arguments."""
    app(args, prog_name="dagnet")


if __name__ == "__main__":  # pragma: no cover
    main()
