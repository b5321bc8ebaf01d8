"""The offline planner: ``plan(request) -> PlanResult``."""

from planner.plan import plan

__all__ = ["plan"]
