"""Tables that fit the terminal: columns shortened, then dropped, by priority; cells never cut.

A table a person reads (the localnet leaderboard, ``dagnet chain status``) is
declared as :class:`Column` s. :func:`fit_table` keeps every column when the width
allows; otherwise it first uses the short form of the columns that have one
(a hotkey's first characters), then drops columns, least important first, until
the table fits. A column it keeps is exactly as wide as its widest cell, so a
number is shown whole or not at all — never ``0.8…``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    cell: Callable[[Row], str]
    keep: int = 0
    """Higher is more important: shortened and dropped later. :data:`ALWAYS` is never dropped."""
    short: Callable[[Row], str] | None = None
    """A narrower form of the cell, used before any column is dropped."""
    justify: str = "right"


ALWAYS = 1_000


def terminal_width() -> int:
    """The terminal's columns (``COLUMNS`` first; 80 when there is no terminal)."""
    return shutil.get_terminal_size().columns


def fit_table(columns: Sequence[Column], rows: Sequence[Row], width: int, **table_options: Any) -> Table:
    """A rich table of ``rows`` no wider than ``width`` when the :data:`ALWAYS` columns allow it."""
    shortened: set[int] = set()
    kept = list(range(len(columns)))
    by_priority = sorted(range(len(columns)), key=lambda i: columns[i].keep)

    def cells(i: int) -> list[str]:
        column = columns[i]
        form = column.short if i in shortened and column.short is not None else column.cell
        return [form(row) for row in rows]

    def total() -> int:
        widths = [max([_width(columns[i].header), *map(len, cells(i))]) for i in kept]
        return sum(w + 2 for w in widths) + len(widths) + 1  # one space of padding each side, a rule between

    for i in by_priority:
        if total() <= width:
            break
        if columns[i].short is not None:
            shortened.add(i)
    for i in by_priority:
        if total() <= width:
            break
        if columns[i].keep < ALWAYS:
            kept.remove(i)
    table = Table(**table_options)
    body = {i: cells(i) for i in kept}
    for i in kept:
        table.add_column(
            columns[i].header,
            justify=columns[i].justify,  # type: ignore[arg-type]
            no_wrap=True,
            min_width=max([_width(columns[i].header), *map(len, body[i])]),
        )
    for r in range(len(rows)):
        table.add_row(*(body[i][r] for i in kept))
    return table


def _width(header: str) -> int:
    """A header's width: its longest line (a header may span lines to keep a column narrow)."""
    return max(map(len, header.split("\n")))
