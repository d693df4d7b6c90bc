"""A dagnet planner to start from (docs/planner.md, docs/mining.md).

Rename the package and the entry point, then make :meth:`TemplatePlanner.plan` smarter:
``dagnet eval template`` tells you, family by family, whether a change earns more than
``good`` does.
"""

from .planner import TemplatePlanner

__all__ = ["TemplatePlanner"]
