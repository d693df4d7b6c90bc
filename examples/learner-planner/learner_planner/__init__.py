"""A dagnet planner that learns from feedback (docs/planner.md "Learning from feedback")."""

from .learner import Learner, SubnetStats

__all__ = ["Learner", "SubnetStats"]
