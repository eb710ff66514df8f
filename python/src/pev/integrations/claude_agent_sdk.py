"""Claude Agent SDK: pev's MCP server and a Stop hook that calls ``pev gate``.

    options = ClaudeAgentOptions(
        cwd=site, allowed_tools=["mcp__pev"],
        mcp_servers={"pev": mcp_server(site)},
        hooks={"Stop": [HookMatcher(hooks=[stop_hook(workspace=site)], timeout=600)]})
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable

from .._process import agate
from .._process import mcp_server as _mcp_server

HookCallback = Callable[[Any, "str | None", Any], Awaitable[dict[str, Any]]]


def mcp_server(workspace: os.PathLike[str] | str | None = None, *, store: str | None = None) -> dict[str, Any]:
    """``ClaudeAgentOptions(mcp_servers={"pev": mcp_server(site)})``."""
    return _mcp_server(workspace, store=store)


def stop_hook(**gate_options: Any) -> HookCallback:
    """A hook callback (Stop, SubagentStop, PostToolUse) answering as ``pev gate`` does; the
    output spells ``continue`` as ``continue_``, as the SDK's type wants it."""

    async def pev_stop_gate(input_data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        decision = await agate(dict(input_data), **gate_options)
        return decision.as_claude_hook_output()

    return pev_stop_gate
