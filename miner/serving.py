"""Which tools a miner serves on ``/NodeSynapse``: none, unless its operator names them.

``MinerSettings.serve`` maps a partner subnet to the actions served on it; ``"*"``
(:data:`EVERY`) stands for every subnet, or every action. A call outside the table is
refused (404 ``not_served``) before anything runs.

``python_exec`` runs the caller's code, so it is served only where the sandbox is bwrap
(:data:`sandbox.PRIVATE_ISOLATION`): under a fallback, code a remote validator sends
can read the miner's files and environment (docs/sandbox.md). A table that names
``python_exec`` on a machine without bwrap stops the miner at start
(:meth:`ToolMenu.check_sandbox`); one that serves it only through ``"*"`` refuses
each call with the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence

from sandbox import PRIVATE_ISOLATION, isolation_available

__all__ = ["CODE_ACTIONS", "EVERY", "EVERY_TOOL", "ToolMenu"]

EVERY = "*"
"""As a subnet or an action of ``MinerSettings.serve``: all of them."""

EVERY_TOOL = {EVERY: [EVERY]}
"""A ``serve`` table for every action on every subnet (``python_exec`` still only under bwrap)."""

CODE_ACTIONS = frozenset({"python_exec"})
"""Actions that run the caller's code: served only under :data:`sandbox.PRIVATE_ISOLATION`."""


class ToolMenu:
    """The (subnet, action) pairs a miner answers, from ``MinerSettings.serve``.

    ``actions`` are the registry's; a table naming another is a ``ValueError``.
    ``isolation`` reports the sandbox (probed once per process, in a thread: the probe
    starts processes).
    """

    __slots__ = ("_table", "_isolation")

    def __init__(
        self,
        table: Mapping[str, Sequence[str]],
        actions: Iterable[str],
        *,
        isolation: Callable[[], str] = isolation_available,
    ) -> None:
        known = set(actions)
        for subnet, served in table.items():
            unknown = sorted(set(served) - known - {EVERY})
            if unknown:
                raise ValueError(f"serve.{subnet}: unknown action {unknown[0]!r} (known: {', '.join(sorted(known))})")
        self._table = {subnet: frozenset(served) for subnet, served in table.items()}
        self._isolation = isolation

    def named_code(self) -> list[str]:
        """The subnets on which a code action is named outright (not through ``"*"``)."""
        return sorted(subnet for subnet, served in self._table.items() if served & CODE_ACTIONS)

    def check_sandbox(self) -> None:
        """``ValueError`` when the table names a code action and the sandbox here is not bwrap."""
        named = self.named_code()
        if named and (isolation := self._isolation()) != PRIVATE_ISOLATION:
            raise ValueError(
                f"serve.{named[0]} names python_exec, which a miner serves only under {PRIVATE_ISOLATION}; "
                f"the sandbox here is {isolation} (docs/sandbox.md): install bubblewrap or remove python_exec"
            )

    async def refusal(self, subnet: str, action: str) -> str | None:
        """Why ``action`` on ``subnet`` is not served here, or ``None`` when it is."""
        served = self._table.get(subnet, frozenset()) | self._table.get(EVERY, frozenset())
        if action not in served and EVERY not in served:
            return f"this miner does not serve {action} on subnet {subnet}"
        if action in CODE_ACTIONS:
            isolation = await asyncio.to_thread(self._isolation)
            if isolation != PRIVATE_ISOLATION:
                return f"this miner serves {action} only under {PRIVATE_ISOLATION}; its sandbox is {isolation}"
        return None
