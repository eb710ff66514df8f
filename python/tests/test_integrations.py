"""The adapters, against the real framework packages (installed by .ci/run), offline: LangGraph
needs no model; the Agents SDK and PydanticAI talk to a local mock of the Chat Completions API
(mock_openai.py) that checks their requests as the real API does."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, TypedDict

import pytest

import pev
from mock_openai import MockOpenAI

POLICY = {"bounds": {"payments.refund.amount": [0, 1000]}, "approve_tools": ["payments.*", "notify.*"]}
BAD_PLAN = {
    "goal": "Refund order 42",
    "steps": [{"id": "refund", "tool": "payments.refund", "parameters": {"order": 42, "amount": 5000},
               "acceptance_criteria": ["refund recorded"]}],
}
GOOD_PLAN = {
    "goal": "Refund order 42",
    "steps": [{"id": "refund", "tool": "payments.refund", "parameters": {"order": 42, "amount": 50},
               "acceptance_criteria": ["refund recorded"]}],
}


def test_the_plans_are_what_the_tests_need() -> None:
    assert pev.lint(BAD_PLAN, POLICY).has("BOUND_VIOLATION") and not pev.lint(BAD_PLAN, POLICY).ok
    assert pev.lint(GOOD_PLAN, POLICY).ok


def test_langgraph_lint_node_routes_back_to_the_planner_then_on() -> None:
    pytest.importorskip("langgraph")
    from langgraph.graph import END, START, StateGraph

    from pev.integrations.langgraph import lint_node, route_on_lint

    class State(TypedDict, total=False):
        plan: dict[str, Any]
        lint: dict[str, Any]
        tries: int
        feedback_seen: list[str]
        executed: bool

    def planner(state: State) -> dict[str, Any]:
        tries = state.get("tries", 0)
        seen = list(state.get("feedback_seen", []))
        if "lint" in state:
            seen.append(state["lint"]["feedback"])
        return {"plan": BAD_PLAN if tries == 0 else GOOD_PLAN, "tries": tries + 1, "feedback_seen": seen}

    def execute(state: State) -> dict[str, Any]:
        return {"executed": True}

    g = StateGraph(State)
    g.add_node("planner", planner)
    g.add_node("lint", lint_node(POLICY))
    g.add_node("execute", execute)
    g.add_edge(START, "planner")
    g.add_edge("planner", "lint")
    g.add_conditional_edges("lint", route_on_lint(ok="execute", retry="planner"), ["planner", "execute", END])
    g.add_edge("execute", END)
    out = g.compile().invoke({})
    assert out["tries"] == 2 and out["executed"] is True
    assert out["lint"]["status"] != "error"
    assert "BOUND_VIOLATION" in out["feedback_seen"][0]

    # A planner that never fixes its plan is given up on after max_tries.
    def stubborn(state: State) -> dict[str, Any]:
        return {"plan": BAD_PLAN, "tries": state.get("tries", 0) + 1}

    g2 = StateGraph(State)
    g2.add_node("planner", stubborn)
    g2.add_node("lint", lint_node(POLICY))
    g2.add_node("execute", execute)
    g2.add_edge(START, "planner")
    g2.add_edge("planner", "lint")
    g2.add_conditional_edges("lint", route_on_lint(ok="execute", retry="planner", max_tries=3), ["planner", "execute", END])
    out2 = g2.compile().invoke({})
    assert out2["tries"] == 3 and "executed" not in out2


def _plan_model() -> Any:
    from pydantic import BaseModel, ConfigDict

    class Plan(BaseModel):
        model_config = ConfigDict(extra="allow")
        goal: str
        steps: list[dict[str, Any]]

    return Plan


def test_openai_agents_guardrail_trips_on_a_bad_plan() -> None:
    pytest.importorskip("agents")
    from agents import (
        Agent,
        AgentOutputSchema,
        OpenAIChatCompletionsModel,
        OutputGuardrailTripwireTriggered,
        Runner,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    from pev.integrations.openai_agents import plan_guardrail

    set_tracing_disabled(True)
    Plan = _plan_model()

    async def go(answer: dict[str, Any], mock: MockOpenAI) -> Any:
        client = AsyncOpenAI(base_url=mock.base_url, api_key="sk-test", max_retries=0)
        planner = Agent(
            name="planner",
            instructions="Write a pev plan as JSON.",
            model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
            output_type=AgentOutputSchema(Plan, strict_json_schema=False),
            output_guardrails=[plan_guardrail(POLICY)],
        )
        return await Runner.run(planner, "Refund order 42")

    with MockOpenAI([BAD_PLAN]) as mock:
        with pytest.raises(OutputGuardrailTripwireTriggered) as info:
            asyncio.run(go(BAD_PLAN, mock))
        assert mock.rejected == [] and len(mock.requests) == 1
        assert mock.requests[0]["model"] == "gpt-4o-mini"
    output_info = info.value.guardrail_result.output.output_info
    assert [e["code"] for e in output_info["errors"]] == ["BOUND_VIOLATION"]
    assert "BOUND_VIOLATION" in output_info["feedback"]

    with MockOpenAI([GOOD_PLAN]) as mock:
        result = asyncio.run(go(GOOD_PLAN, mock))
        assert mock.rejected == []
    assert result.final_output.steps[0]["parameters"]["amount"] == 50


def test_pydantic_ai_validator_sends_the_findings_back_to_the_model() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from pev.integrations.pydantic_ai import plan_validator

    Plan = _plan_model()
    with MockOpenAI([BAD_PLAN, GOOD_PLAN]) as mock:
        model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(base_url=mock.base_url, api_key="sk-test"))
        planner = Agent(model, output_type=Plan, retries=3, instructions="Write a pev plan.")
        planner.output_validator(plan_validator(POLICY))
        result = planner.run_sync("Refund order 42")
        assert mock.rejected == []
        assert len(mock.requests) == 2
        # The second request carries the lint findings back to the model, as a tool result.
        second = json.dumps(mock.requests[1]["messages"])
        assert "BOUND_VIOLATION" in second and "payments.refund" in second
    assert result.output.steps[0]["parameters"]["amount"] == 50


def test_the_mock_rejects_what_the_real_api_rejects() -> None:
    with MockOpenAI([GOOD_PLAN]) as mock:
        assert mock.answer("/v1/chat/completions", None, b"{}")[0] == 401
        assert mock.answer("/v1/completions", "Bearer k", b"{}")[0] == 404
        status, body = mock.answer("/v1/chat/completions", "Bearer k", json.dumps({"model": "m"}).encode())
        assert status == 400 and body["error"]["param"] == "messages"
        status, body = mock.answer("/v1/chat/completions", "Bearer k", json.dumps({"model": "m", "messages": [{"role": "robot"}]}).encode())
        assert status == 400 and body["error"]["code"] == "invalid_value"
        assert mock.requests == []


def test_claude_agent_sdk_stop_hook_answers_as_the_gate(tmp_path: Any) -> None:
    from pev.integrations.claude_agent_sdk import mcp_server, stop_hook

    payload = {"session_id": f"s-{uuid.uuid4()}", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path),
               "hook_event_name": "Stop", "stop_hook_active": False}
    hook = stop_hook(workspace=tmp_path)
    out = asyncio.run(hook(payload, None, None))
    direct = pev.gate(payload, workspace=tmp_path)
    assert out == direct.as_claude_hook_output()
    server = mcp_server(tmp_path)
    assert server["type"] == "stdio" and server["args"][:1] == ["mcp"]
