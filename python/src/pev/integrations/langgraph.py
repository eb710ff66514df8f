"""LangGraph: a node that lints the state's plan, and a route on its result.

    g.add_node("lint", lint_node(policy))
    g.add_conditional_edges("lint", route_on_lint(ok="execute", retry="planner"), ["execute", "planner", END])

The node writes ``state[result_key]`` (the lint result as ``pev lint --format json`` prints it,
plus ``feedback``, the text for the planner) and never raises for findings.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .. import _lint

END = "__end__"  # langgraph.graph.END, without importing langgraph at import time


def lint_node(
    policy: Any = None,
    *,
    plan_key: str = "plan",
    result_key: str = "lint",
    fail_risk: float | None = None,
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """A graph node: lints ``state[plan_key]`` and returns ``{result_key: {...}}``."""
    compiled = _lint.as_policy(policy)

    def lint(state: Mapping[str, Any]) -> dict[str, Any]:
        result = _lint.lint(state[plan_key], compiled, fail_risk=fail_risk)
        out = result.to_dict()
        out["feedback"] = "" if result.ok else result.feedback()
        return {result_key: out}

    lint.__name__ = "pev_lint"
    return lint


def route_on_lint(
    *,
    ok: str,
    retry: str,
    give_up: str = END,
    result_key: str = "lint",
    tries_key: str = "tries",
    max_tries: int = 3,
) -> Callable[[Mapping[str, Any]], str]:
    """A router for ``add_conditional_edges``: ``ok`` when the plan may run, ``retry`` (back to
    the planner) while ``state[tries_key] < max_tries``, else ``give_up``."""

    def route(state: Mapping[str, Any]) -> str:
        if state[result_key]["status"] != "error":
            return ok
        return retry if int(state.get(tries_key, 0) or 0) < max_tries else give_up

    route.__name__ = "pev_route"
    return route
