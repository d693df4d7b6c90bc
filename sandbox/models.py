"""What a sandboxed run may use, and what it reports back."""

from __future__ import annotations

from dataclasses import dataclass, replace

FALLBACK_PROCESSES = 4
"""The processes a run may have when no cgroup bounds it as a whole (docs/sandbox.md)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run ceilings.

    ``cpu_seconds`` and ``memory_bytes`` are per process (RLIMIT_CPU, RLIMIT_AS);
    ``wall_seconds`` bounds the whole run, children included, and ``total_memory_bytes``
    its processes and its ``/tmp`` together (a cgroup of its own, or, where there is
    none, :meth:`without_cgroup`). ``max_output_bytes`` caps stdout and stderr each;
    ``max_disk_bytes`` is the size of the private ``/tmp`` (bubblewrap only).
    """

    cpu_seconds: float = 5
    wall_seconds: float = 10
    memory_bytes: int = 512 * 2**20
    max_processes: int = 64
    max_file_bytes: int = 8 * 2**20
    max_output_bytes: int = 64 * 1024
    max_open_files: int = 256
    max_disk_bytes: int = 64 * 2**20
    total_memory_bytes: int = 2**30

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ValueError(f"SandboxLimits.{name} must be a positive finite number, got {value!r}")
        for name in (
            "memory_bytes",
            "max_processes",
            "max_file_bytes",
            "max_output_bytes",
            "max_open_files",
            "max_disk_bytes",
            "total_memory_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.total_memory_bytes <= self.max_disk_bytes:
            raise ValueError("SandboxLimits.total_memory_bytes must exceed max_disk_bytes (its /tmp counts in it)")

    def without_cgroup(self) -> SandboxLimits:
        """The limits that still bound the run's total where no cgroup holds it: at most
        :data:`FALLBACK_PROCESSES` processes, each with an equal share (RLIMIT_AS) of the
        total left beside a full ``/tmp``."""
        processes = min(self.max_processes, FALLBACK_PROCESSES)
        share = (self.total_memory_bytes - self.max_disk_bytes) // processes
        return replace(self, max_processes=processes, memory_bytes=min(self.memory_bytes, share))


@dataclass
class SandboxResult:
    """The outcome of one run.

    ``returncode`` is ``None`` when the run was killed at its wall timeout; a
    program killed by signal N reports ``128 + N`` whichever isolation ran it.
    ``stdout``/``stderr`` hold at most ``max_output_bytes`` each (decoded as UTF-8
    with replacement); ``output_truncated`` says that more was written and discarded.
    """

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    output_truncated: bool
    wall_s: float
    isolation: str
    memory_peak_bytes: int | None = None
    """The most memory the run's processes (and its ``/tmp``) held at once, read from its
    cgroup; None without one."""


class SandboxUnavailable(RuntimeError):
    """No isolation works on this machine, so untrusted code is refused."""
