"""A task family: the package a miner sees, and the generator only validators run.

The package carries a description, the inputs' JSON Schema, a public ``example``
instance, step hints that read the inputs through ``${input.*}``, constraints and the
subnets on offer. The generator turns a seed into an :class:`Instance`: input values
and the reference those values call for. A plan is scored on an instance it never saw,
so it has to run the inputs through the tools; an answer worked out from the example
is wrong on nearly every other instance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.hints import EXAMPLES, PublicExample
from protocol.synapse import StepHint, TaskPackage
from protocol.task import Task, synthetic_variant

from .seed import EXAMPLE_SEED, Draw, public_seed

__all__ = ["Family", "Generator", "Instance", "draw_instance", "example_output"]

Generator = Callable[[Draw], tuple[dict[str, Any], ...]]
"""``draw -> (input values, reference[, holdings])``; plain Python, independent of the
tools. ``holdings`` is the data the task's subnets hold for the instance, by id."""


def example_output(task_type: str, reference: dict[str, Any]) -> dict[str, Any]:
    """What a correct plan answers, as a public example shows it (``PublicExample.output``)."""
    if task_type == "code":
        return {"entry_point": reference["entry_point"], "cases": reference["cases"]}
    if task_type == "rag":
        return {"text": reference["reference_answer"]}
    if task_type == "agent":
        return {
            "json": {item["key"]: item["equals"] for item in reference["goal_checklist"] if item["type"] == "json_key"}
        }
    return {"json": reference["expected_output"]}


@dataclass(frozen=True, slots=True)
class Instance:
    """One drawn instance: what ``${input.*}`` binds to and what scoring compares with."""

    seed: int
    inputs: dict[str, Any]
    reference: dict[str, Any]
    holdings: dict[str, Any] = field(default_factory=dict)


def draw_instance(generate: Generator, seed: int) -> Instance:
    """The instance ``generate`` draws from ``seed``."""
    inputs, reference, *held = generate(Draw(seed))
    return Instance(seed, inputs, reference, held[0] if held else {})


@dataclass(frozen=True, slots=True)
class Family:
    """``package`` is what miners see (its ``example`` included); ``generate`` stays here."""

    package: TaskPackage
    generate: Generator
    program: tuple[StepHint, ...] = ()
    """The generator's own best program when it is not the hinted steps (a shorter one the
    reference planner does not find): what ``dagnet bench tasks --tiers``' oracle runs
    beside the hints. Never sent to miners."""

    @property
    def task_id(self) -> str:
        return self.package.task_id

    @property
    def task_type(self) -> str:
        return self.package.task_type

    def instance(self, seed: int) -> Instance:
        return draw_instance(self.generate, seed)

    def example(self) -> Instance:
        """The public instance shown in the package."""
        return self.instance(EXAMPLE_SEED)

    def public_instances(self, k: int = EXAMPLES) -> list[Instance]:
        """The instances of the package's ``k`` public examples (:func:`~tasks.seed.public_seed`)."""
        return [self.instance(public_seed(self.task_id, index)) for index in range(k)]

    def public_examples(self, k: int = EXAMPLES, instances: list[Instance] | None = None) -> list[PublicExample]:
        """The package's ``k`` public examples, with the answer each calls for; from
        ``instances`` when the caller drew :meth:`public_instances` already."""
        return [
            PublicExample(
                inputs=found.inputs, holdings=found.holdings, output=example_output(self.task_type, found.reference)
            )
            for found in (self.public_instances(k) if instances is None else instances)
        ]

    def task(self, instance: Instance) -> Task:
        """The package with ``instance``: what the validator executes and scores."""
        return Task.model_validate(
            {
                **self.package.model_dump(),
                "reference": instance.reference,
                "instance_inputs": instance.inputs,
                "seed": instance.seed,
                "holdings": instance.holdings,
            }
        )

    def synthetic(self, seed: int) -> Family:
        """The family under its :func:`~protocol.task.synthetic_variant` package; its
        instances are drawn fresh like any other."""
        return Family(synthetic_variant(self.package, seed), self.generate, self.program)
