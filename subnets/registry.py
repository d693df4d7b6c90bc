"""``default_registry``: every reference tool, under the action name planners use.

Action names are a contract shared with planners and benchmark tasks: ``echo``,
``calculator``, ``json_transform``, ``csv_to_json``, ``json_to_csv``,
``text_transform``, ``search``, ``python_exec``, ``split``, ``collect`` and, when
configured, ``llm``.
"""

from __future__ import annotations

from pathlib import Path

from sandbox import SandboxLimits

from .base import ToolRegistry
from .calculator import CALCULATOR
from .echo import ECHO
from .frames import COLLECT, SPLIT
from .llm import LLMConfig, llm_spec
from .python_exec import python_exec_spec
from .retrieval import search_spec
from .text import TEXT_TRANSFORM
from .transform import CSV_TO_JSON, JSON_TO_CSV, JSON_TRANSFORM

DEFAULT_CORPUS_DIR = Path(__file__).resolve().parents[1] / "tasks" / "corpus"
"""The corpus shipped with the repository (``tasks/corpus/``)."""


def default_registry(
    *, corpus_dir: Path | None = None, llm: LLMConfig | None = None, sandbox_limits: SandboxLimits | None = None
) -> ToolRegistry:
    """A fresh registry of the reference tools.

    ``search`` reads ``corpus_dir`` (default: the shipped corpus) on first use;
    ``python_exec`` runs under ``sandbox_limits`` (default: the sandbox's own).
    """
    registry = ToolRegistry()
    for spec in (ECHO, CALCULATOR, JSON_TRANSFORM, CSV_TO_JSON, JSON_TO_CSV, TEXT_TRANSFORM, SPLIT, COLLECT):
        registry.register(spec)
    registry.register(search_spec(corpus_dir or DEFAULT_CORPUS_DIR))
    registry.register(python_exec_spec(sandbox_limits))
    if llm is not None:
        registry.register(llm_spec(llm))
    return registry
