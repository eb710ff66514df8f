"""Thin adapters of pev to agent frameworks; each module imports its framework lazily.

- ``pev.integrations.langgraph``: a lint node and a route on its result.
- ``pev.integrations.openai_agents``: an output guardrail for a planner agent.
- ``pev.integrations.pydantic_ai``: an output validator that sends lint errors back to the model.
- ``pev.integrations.claude_agent_sdk``: pev's MCP server and a Stop hook that calls the gate.
"""
