"""A plan builder for miners: write a workflow plan as Python, checked as it is built.

Ops are calls to catalogue actions, wired by reference::

    search = tool("search", subnet="sn5")
    upper = tool("text_transform", subnet="sn1", op="upper")

    @graph(inputs=["question"])
    def answer():
        hits = search(query=PARENT["question"])
        loud = upper(text=hits["text"])
        START >> hits >> loud >> END

    plan = answer.compile()          # a plain WorkflowPlan

- ``op["k"]`` reads a sibling's output ``k``: ``text``, ``code`` (``artifacts.code``),
  a metadata key the action declares (``artifacts.metadata.k``) or a name the op
  factory declared with ``returns={...}``. Index deeper with more ``[...]``.
- ``PARENT["k"]`` reads the enclosing graph's values: at the top level the task's
  inputs (compiled to ``${input.k}``), inside a nested graph what its caller passed
  and what was written into it, walking outwards until ``k`` is found.
- ``START >> a >> b >> END`` orders ops (references order them too); ``b >> END``
  forwards ``b``'s outputs to the graph's result.
- ``a["k"] >> PARENT["k2"]``, ``a = f(..., outputs={"k": PARENT["k2"]})`` and
  ``outputs={"*": PARENT}`` write upward: into the graph's result (its caller reads
  it as ``sub["k2"]``) and into the enclosing graph's values.
- A ``@graph`` called inside another graph is flattened into plain nodes whose ids
  carry its name as a prefix (``verify-cls``).

Every reference is checked when it is written, against the action's declared
outputs (:mod:`protocol.actions`) and the graph's values; a :class:`BuildError`
names the op, the key and what exists. ``.compile()`` returns a plan that
:func:`protocol.validation.check_plan` accepts; every DataRef in it is written by
:func:`protocol.dataref.ref`. At the top level a plan's final output is one node's
output, so everything written to the top-level result must come from one op.

A build belongs to the thread, or asyncio task, that runs it: the graphs being built
are kept in a context variable, so plans built at the same time in different threads
or tasks never see each other's ops. An op made in a thread or task the build did not
start (or copy its context to) is refused as being outside a graph.
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from .actions import ACTIONS, ActionSpec
from .dataref import INPUT, find_refs, ref
from .plan import WorkflowPlan
from .validation import check_plan

__all__ = ["END", "PARENT", "START", "BuildError", "Op", "OpFactory", "Ref", "graph", "op", "tool"]

_OPTIONS = ("estimated_cost", "estimated_latency", "touches", "parallel_safe")
_POLICY = ("retry_count", "timeout_seconds")
_SEPARATOR = "-"


class BuildError(ValueError):
    """A plan cannot be built as written; the message names the op, the key and what exists."""


# -- references -------------------------------------------------------------------------


class Ref:
    """One value a node can read: a path in an op's output, or in the task's inputs.

    ``str(r)`` is the DataRef text, so a ref may be interpolated into a string param.
    """

    __slots__ = ("source", "path", "op")

    def __init__(self, source: str, path: tuple[str, ...], op: Op | None) -> None:
        self.source, self.path, self.op = source, path, op

    def __getitem__(self, key: str | int) -> Ref:
        path = (*self.path, str(key))
        if self.op is not None:
            problem = self.op.factory.spec.path_problem(path)
            if problem is not None:
                raise BuildError(f"{self.source}: {problem} (reading {self.op.id}{_indexes(path, self.op)})")
        return Ref(self.source, path, self.op)

    def __str__(self) -> str:
        return ref(self.source, *self.path)

    __format__ = lambda self, spec: str(self)  # noqa: E731 — f"{r}" is the ref's text

    def __rshift__(self, target: Any) -> Any:
        if not isinstance(target, _ParentKey):
            raise BuildError(f"{self.source}: a value can only be written to PARENT[...], not {target!r}")
        _current("write to PARENT").write(target.key, self)
        return target

    def __repr__(self) -> str:
        return f"Ref({str(self)!r})"


class _ParentKey:
    """``PARENT["k"]``: looked up in the graph being built when it is used."""

    __slots__ = ("key", "path")

    def __init__(self, key: str, path: tuple[str, ...] = ()) -> None:
        self.key, self.path = key, path

    def __getitem__(self, key: str | int) -> _ParentKey:
        return _ParentKey(self.key, (*self.path, str(key)))

    def resolve(self, user: str) -> Any:
        value = _current(f'PARENT["{self.key}"]').lookup(self.key, user)
        for step in self.path:
            if not isinstance(value, Ref):
                raise BuildError(f"{user}: PARENT[{self.key!r}] is a constant; it cannot be indexed")
            value = value[step]
        return value

    def __str__(self) -> str:
        return str(self.resolve("(string)"))

    __format__ = lambda self, spec: str(self)  # noqa: E731

    def __repr__(self) -> str:
        return f"PARENT[{self.key!r}]"


class _Parent:
    """The enclosing graph's values; see the module docstring."""

    def __getitem__(self, key: str) -> _ParentKey:
        if not isinstance(key, str) or not key:
            raise BuildError(f"PARENT keys are non-empty strings, not {key!r}")
        return _ParentKey(key)

    def __repr__(self) -> str:
        return "PARENT"


class _Start:
    def __rshift__(self, other: Any) -> Any:
        return other

    def __repr__(self) -> str:
        return "START"


class _End:
    def __rrshift__(self, other: Any) -> Any:
        for item in _many(other):
            _current("END").end(item)
        return self

    def __repr__(self) -> str:
        return "END"


PARENT = _Parent()
START = _Start()
END = _End()


# -- ops --------------------------------------------------------------------------------


class OpFactory:
    """Makes ops of one action: ``tool(...)`` and ``@op(...)`` return one."""

    def __init__(
        self,
        name: str,
        action: str,
        subnet: str,
        params: Callable[..., dict[str, Any]],
        returns: Mapping[str, str],
    ) -> None:
        spec = ACTIONS.get(action)
        if spec is None:
            raise BuildError(f"{name}: unknown action {action!r} (actions: {', '.join(sorted(ACTIONS))})")
        self.name, self.action, self.subnet, self.spec = name, action, subnet, spec
        self._params = params
        self.returns = {alias: _declared_path(name, spec, target) for alias, target in returns.items()}

    def __call__(self, *, id: str | None = None, outputs: Mapping[str, Any] | None = None, **kwargs: Any) -> Op:
        g = _current(f"{self.name}(...)")
        node_id = g.node_id(id or _assigned_name(sys._getframe(1)) or self.name)
        options = {k: kwargs.pop(k) for k in (*_OPTIONS, *_POLICY) if k in kwargs}
        arguments = {k: _resolve(v, node_id) for k, v in kwargs.items()}
        node = Op(self, node_id, _resolve(self._params(**arguments), node_id), options)
        g.add(node)
        for key, target in (outputs or {}).items():
            g.forward(node, key, target)
        return node

    def output_path(self, key: str) -> tuple[str, ...] | None:
        """Where output ``key`` lives in a node output, or None if this action has no such output."""
        if key in self.returns:
            return self.returns[key]
        for path in (("text",), ("artifacts", "code"), ("artifacts", "metadata", key)):
            if path[-1] == key and self.spec.declares(path):
                return path
        return None

    def output_names(self) -> list[str]:
        names = [*self.returns, "text"]
        if self.spec.code:
            names.append("code")
        names += sorted(self.spec.metadata or ())
        return list(dict.fromkeys(names))

    def __repr__(self) -> str:
        return f"<op {self.name}: {self.action} on {self.subnet}>"


def _declared_path(name: str, spec: ActionSpec, target: str) -> tuple[str, ...]:
    path = tuple(target.split("."))
    if target in ("code", "text"):
        path = ("artifacts", "code") if target == "code" else ("text",)
    elif len(path) == 1:
        path = ("artifacts", "metadata", target)
    if not spec.declares(path):
        raise BuildError(f"{name}: returns names {target!r}, which {spec.name} does not output")
    problem = spec.path_problem(path)
    if problem is not None:
        raise BuildError(f"{name}: returns names {target!r}: {problem}")
    return path


def _indexes(path: tuple[str, ...], op: Op) -> str:
    """``path`` as the builder spells it: ``["hits"][0]["text"]``."""
    shown = path[2:] if path[:2] == ("artifacts", "metadata") else path
    return "".join(f"[{step}]" if step.isdigit() else f'["{step}"]' for step in shown)


def tool(
    action: str, *, subnet: str, name: str | None = None, returns: Mapping[str, str] | None = None, **defaults: Any
) -> OpFactory:
    """An op factory for a catalogue action; ``defaults`` are params every call starts from."""
    return OpFactory(name or action, action, subnet, lambda **kw: {**defaults, **kw}, returns or {})


def op(
    action: str, *, subnet: str, returns: Mapping[str, str] | None = None
) -> Callable[[Callable[..., dict[str, Any]]], OpFactory]:
    """Decorate a function that turns an op's arguments into the action's params."""

    def wrap(fn: Callable[..., dict[str, Any]]) -> OpFactory:
        return OpFactory(fn.__name__, action, subnet, fn, returns or {})

    return wrap


class Op:
    """One node of the plan being built; ``op["k"]`` is a reference to its output ``k``."""

    __slots__ = ("factory", "id", "params", "options", "after")

    def __init__(self, factory: OpFactory, node_id: str, params: dict[str, Any], options: dict[str, Any]) -> None:
        if not isinstance(params, dict):
            raise BuildError(f"{node_id}: params must be a dict, not {type(params).__name__}")
        self.factory, self.id, self.params, self.options = factory, node_id, params, options
        self.after: list[str] = []  # explicit predecessors (>>)

    def __getitem__(self, key: str) -> Ref:
        path = self.factory.output_path(key)
        if path is None:
            raise BuildError(
                f"{self.id}: {self.factory.action} has no output {key!r} "
                f"(outputs: {', '.join(self.factory.output_names())})"
            )
        return Ref(self.id, path, self)

    def keys(self) -> list[str]:
        return self.factory.output_names()

    @property
    def roots(self) -> list[Op]:
        return [self]

    sinks = roots

    def __rshift__(self, other: Any) -> Any:
        if other is END:
            _current("END").end(self)
            return END
        for item in _many(other):
            for first in item.roots:
                first.after.append(self.id)
        return other

    def __rrshift__(self, other: Any) -> Any:  # [a, b] >> c
        for item in _many(other):
            item >> self
        return self

    def __repr__(self) -> str:
        return f"<{self.id}: {self.factory.action}>"


class Call:
    """A nested graph placed in its caller: ``sub["k"]`` reads what it wrote upward."""

    __slots__ = ("name", "scope")

    def __init__(self, name: str, scope: Scope) -> None:
        self.name, self.scope = name, scope

    def __getitem__(self, key: str) -> Ref:
        value = self.scope.result.get(key)
        if not isinstance(value, Ref):
            raise BuildError(
                f"{self.name}: the graph wrote no {key!r} upward (it wrote: {', '.join(self.scope.result) or 'nothing'})"
            )
        return value

    def keys(self) -> list[str]:
        return list(self.scope.result)

    @property
    def roots(self) -> list[Op]:
        """The graph's ops with no predecessor inside it."""
        inside = {o.id for o in self._ops()}
        return [o for o in self._ops() if not inside.intersection([*o.after, *_sources(o)])]

    @property
    def sinks(self) -> list[Op]:
        """The graph's ops no other op inside it follows."""
        used = {p for o in self._ops() for p in (*o.after, *_sources(o))}
        return [o for o in self._ops() if o.id not in used]

    def _ops(self) -> list[Op]:
        return self.scope.all_ops[self.scope.first : self.scope.stop]

    def __rshift__(self, other: Any) -> Any:
        if other is END:
            for key, value in self.scope.result.items():
                _current("END").write(key, value)
            return END
        for sink in self.sinks:
            sink >> other
        return other

    def __rrshift__(self, other: Any) -> Any:
        for item in _many(other):
            for sink in item.sinks:
                for root in self.roots:
                    root.after.append(sink.id)
        return self


def _many(value: Any) -> list[Any]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, (Op, Call)):
            raise BuildError(f">> connects ops and graphs, not {item!r}")
    return items


_STORES = {"STORE_FAST", "STORE_NAME", "STORE_DEREF", "STORE_GLOBAL"}


@functools.lru_cache(maxsize=4096)
def _stored_after(code: Any, offset: int) -> str | None:
    """The variable the call at ``offset`` in ``code`` is assigned to (``g = greet(...)``), if any."""
    instructions = list(dis.get_instructions(code))
    for n, instruction in enumerate(instructions[:-1]):
        if instruction.offset == offset:
            following = instructions[n + 1]
            return following.argval if following.opname in _STORES else None
    return None


def _assigned_name(frame: Any) -> str | None:
    """Ops are named after the variable they are assigned to, so plans read like their source."""
    name = _stored_after(frame.f_code, frame.f_lasti)
    return name if name and name.isidentifier() and len(name) <= 48 else None


def _sources(node: Op) -> list[str]:
    """The nodes ``node``'s params read, whether as refs or as ref text in a string."""
    return [r.node_id for r in find_refs(_params(node.params, node.id)) if r.node_id != INPUT]


def _resolve(value: Any, user: str) -> Any:
    """An op argument with every ``PARENT[...]`` looked up in the graph being built."""
    if isinstance(value, _ParentKey):
        return value.resolve(user)
    if isinstance(value, dict):
        return {k: _resolve(v, user) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_resolve(v, user) for v in value]
    return value


# -- graphs -----------------------------------------------------------------------------

# The graphs being built, innermost last. A context variable, so each thread and each
# asyncio task sees only its own builds; a tuple, so a context copied while a graph is
# being built (a task or thread started from its body) cannot change its parent's stack.
_BUILDING: ContextVar[tuple[Scope, ...]] = ContextVar("dagnet_plan_builder", default=())


def _current(what: str) -> Scope:
    building = _BUILDING.get()
    if not building:
        raise BuildError(f"{what} is used outside a @graph being built")
    return building[-1]


class Scope:
    """The state of one graph body while it runs: its values, its result, where its ops start in ``all_ops``."""

    def __init__(self, name: str, prefix: str, values: dict[str, Any], parent: Scope | None, ids: set[str]) -> None:
        self.name, self.prefix, self.parent = name, prefix, parent
        self.values = values  # what PARENT["k"] finds here: inputs, arguments, values written in
        self.result: dict[str, Any] = {}  # written upward; the caller reads it
        self.all_ops: list[Op] = parent.all_ops if parent else []
        self.first = len(self.all_ops)  # this graph's ops, nested ones included, are all_ops[first:stop]
        self.stop = self.first
        self.ids = ids
        self.last: Op | None = None  # the op sent to END

    def node_id(self, base: str) -> str:
        stem = f"{self.prefix}{base}"
        node_id, n = stem, 1
        while node_id in self.ids:
            n += 1
            node_id = f"{stem}_{n}"
        self.ids.add(node_id)
        return node_id

    def add(self, node: Op) -> None:
        self.all_ops.append(node)

    def lookup(self, key: str, user: str) -> Any:
        scope: Scope | None = self
        while scope is not None:
            if key in scope.values:
                return scope.values[key]
            scope = scope.parent
        raise BuildError(self._missing(key, user))

    def _missing(self, key: str, user: str) -> str:
        known = ", ".join(sorted({k for s in self._chain() for k in s.values})) or "none"
        message = f'{user}: PARENT["{key}"] is not a value of graph {self.name} (values: {known})'
        owners = [o.id for o in self.all_ops if key in o.keys()]
        if owners:
            message += f'; "{key}" is an output of {owners[0]}, not of the parent: write {owners[0]}["{key}"]'
        return message

    def _chain(self) -> Iterable[Scope]:
        scope: Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def write(self, key: str, value: Ref) -> None:
        """``value >> PARENT[key]``: into this graph's result and the enclosing graph's values."""
        if self.parent is None and self.result and _owner(self.result) != value.source:
            raise BuildError(
                f"{value.source}: the plan's final output is one node's; {_owner(self.result)} already "
                f"writes to the top-level result ({', '.join(self.result)})"
            )
        self.result[key] = value
        self.values.setdefault(key, value)
        if self.parent is not None:
            self.parent.values[key] = value

    def forward(self, node: Op, key: str, target: Any) -> None:
        if key == "*":
            if target is not PARENT:
                raise BuildError(f'{node.id}: outputs={{"*": ...}} forwards to PARENT only')
            for name in node.keys():
                self.write(name, node[name])
            return
        if not isinstance(target, _ParentKey) or target.path:
            raise BuildError(f'{node.id}: outputs={{"{key}": ...}} must name PARENT["..."]')
        self.write(target.key, node[key])

    def end(self, node: Op | Call) -> None:
        if isinstance(node, Call):
            node >> END
            return
        self.last = node
        self.forward(node, "*", PARENT)


def _owner(result: Mapping[str, Ref]) -> str:
    return next(iter(result.values())).source


class GraphFunction:
    """A ``@graph`` function: ``.compile()`` at the top level, called inside another graph."""

    def __init__(self, fn: Callable[..., Any], inputs: Iterable[str] | Mapping[str, Any] | None) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.inputs = _input_names(inputs)
        self.params = list(inspect.signature(fn).parameters)

    def __call__(self, *, name: str | None = None, **arguments: Any) -> Call:
        caller = _current(f"{self.fn.__name__}(...)")
        label = name or self.fn.__name__
        prefix = caller.node_id(label) + _SEPARATOR
        values = {k: _resolve(v, label) for k, v in arguments.items()}
        scope = Scope(label, prefix, dict(values), caller, caller.ids)
        self._run(scope, values)
        return Call(label, scope)

    def compile(self, *, max_parallel: int | None = None) -> WorkflowPlan:
        """Build the graph at the top level and return its plain workflow plan."""
        values = {k: Ref(INPUT, (k,), None) for k in self.inputs}
        scope = Scope(self.fn.__name__, "", dict(values), None, set())
        self._run(scope, values)
        return _plan(scope, max_parallel)

    def _run(self, scope: Scope, values: Mapping[str, Any]) -> None:
        missing = [p for p in self.params if p not in values]
        if missing:
            raise BuildError(f"{scope.name}: missing argument(s) {', '.join(missing)}")
        token = _BUILDING.set((*_BUILDING.get(), scope))
        try:
            self.fn(**{p: values[p] for p in self.params})
        finally:
            _BUILDING.reset(token)
            scope.stop = len(scope.all_ops)


def graph(fn: Callable[..., Any] | None = None, *, inputs: Iterable[str] | Mapping[str, Any] | None = None) -> Any:
    """Make a graph from a function: ``@graph`` or ``@graph(inputs=[...])``.

    ``inputs`` names the task's inputs (a list of names, or the task's JSON Schema);
    it matters only for the graph that is compiled.
    """
    if fn is not None:
        return GraphFunction(fn, inputs)
    return lambda f: GraphFunction(f, inputs)


def _input_names(inputs: Iterable[str] | Mapping[str, Any] | None) -> list[str]:
    if inputs is None:
        return []
    if isinstance(inputs, Mapping):
        return list((inputs.get("properties") or {}).keys())
    return list(inputs)


# -- compiling --------------------------------------------------------------------------


def _plan(root: Scope, max_parallel: int | None) -> WorkflowPlan:
    ops = root.all_ops
    if not ops:
        raise BuildError(f"{root.name}: the graph has no ops")
    nodes, policies = [], {}
    edges: dict[tuple[str, str], None] = {}  # an ordered set
    for node in ops:
        params = _params(node.params, node.id)
        nodes.append(
            {
                "id": node.id,
                "subnet": node.factory.subnet,
                "action": node.factory.action,
                "params": params,
                **{k: v for k, v in node.options.items() if k in _OPTIONS},
            }
        )
        for src in [*node.after, *_sources(node)]:
            edges[(src, node.id)] = None
        policy = {k: v for k, v in node.options.items() if k in _POLICY}
        if policy:
            policies[node.id] = policy
    plan = WorkflowPlan.model_validate(
        {
            "nodes": nodes,
            "edges": [{"from": a, "to": b} for a, b in edges],
            "error_handling": policies,
            "output_node": _output_node(root),
            "max_parallel": max_parallel,
        }
    )
    check = check_plan(plan)
    problems = check.errors + [f"{k}: {v}" for k, v in check.node_errors.items()]
    if problems:
        raise BuildError(f"{root.name}: the compiled plan is invalid: {'; '.join(problems)}")
    return plan


def _params(value: Any, user: str) -> Any:
    """Params as JSON: refs become DataRef text; anything else must already be JSON."""
    if isinstance(value, Ref):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _params(v, user) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_params(v, user) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise BuildError(f"{user}: a param of type {type(value).__name__} is not JSON")


def _output_node(root: Scope) -> str | None:
    if root.result:
        return _owner(root.result)
    return root.last.id if root.last is not None else None
