"""What a sandboxed run may use, and what it reports back."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run ceilings. Every limit applies to each process of the run.

    ``cpu_seconds`` is per process (RLIMIT_CPU); ``wall_seconds`` bounds the whole
    run, children included. ``max_output_bytes`` caps stdout and stderr each;
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
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")


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


class SandboxUnavailable(RuntimeError):
    """No isolation works on this machine, so untrusted code is refused."""
