"""``dagnet bench``: one module per benchmark, each ``run_*`` (a JSON-able dict of
ratios and medians) plus ``render_*`` (the same dict as tables). docs/benchmarks.md
says what each measures."""

from pathlib import Path

DEFAULT_TASKSET = Path(__file__).resolve().parents[2] / "benchmarks" / "v1.json"
"""The benchmark task set the benchmarks use unless given another."""
