"""Seed 002's examples, written with the plan builder (docs/plan-builder.md).

Run ``python examples/seed002_builder.py`` to (re)write the compiled plans next to
this file; ``dagnet plan check examples/seed002_hello.json`` accepts each of them.
"""

from __future__ import annotations

import json
from pathlib import Path

from protocol.builder import END, PARENT, START, graph, op, tool


@op("text_transform", subnet="sn1", returns={"greeting": "text"})
def greet(name):
    """Hello, <name>! — its text is declared under the name ``greeting``."""
    return {"op": "template", "text": "Hello, {name}!", "values": {"name": name}}


upper = tool("text_transform", subnet="sn1", op="upper")
template = tool("text_transform", subnet="sn1", op="template")
calculator = tool("calculator", subnet="sn2")


@graph(inputs=["name"])
def hello():
    """Sibling refs and ordering with >>: the graph's result is u's output."""
    g = greet(name=PARENT["name"])  # PARENT["name"]: the task's input
    u = upper(text=g["greeting"])  # g["greeting"]: a sibling's output
    START >> g >> u >> END


@graph(inputs=["name"])
def hello_outputs():
    """The same graph, its result written upward with outputs=."""
    g = greet(name=PARENT["name"])
    u = upper(text=g["greeting"], outputs={"text": PARENT["answer"]})  # noqa: F841  (the builder names the op after its variable)


@graph(inputs=["name"])
def hello_arrow():
    """…and with the >> form of the same mapping."""
    g = greet(name=PARENT["name"])
    u = upper(text=g["greeting"])
    u["text"] >> PARENT["answer"]


@graph(inputs=["name"])
def hello_wildcard():
    """outputs={"*": PARENT} forwards every output of the op."""
    g = greet(name=PARENT["name"])
    u = upper(text=g["greeting"], outputs={"*": PARENT})  # noqa: F841  (the builder names the op after its variable)


@graph
def verify():
    """A nested graph: reads PARENT["score"] from its caller, writes trace upward."""
    cls = calculator(expression=f"{PARENT['score']} * 10")
    work = template(text="grade {grade} of 10", values={"grade": cls["value"]})
    work["text"] >> PARENT["trace"]


@graph(inputs=["name", "score"])
def graded():
    """main calls verify; verify's ops become verify-cls and verify-work."""
    g = greet(name=PARENT["name"])
    verify(score=PARENT["score"])
    report = template(text="{hello} {trace}", values={"hello": g["greeting"], "trace": PARENT["trace"]})
    START >> g >> report >> END


EXAMPLES = {
    "seed002_hello": hello,
    "seed002_hello_outputs": hello_outputs,
    "seed002_hello_arrow": hello_arrow,
    "seed002_hello_wildcard": hello_wildcard,
    "seed002_graded": graded,
}


def compiled() -> dict[str, dict]:
    """Every example as the plan JSON it compiles to."""
    return {name: fn.compile().to_wire() for name, fn in EXAMPLES.items()}


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for name, plan in compiled().items():
        (here / f"{name}.json").write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
