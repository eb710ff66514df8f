"""Everything that touches a workspace, a journal or the sandbox, through the bundled binary:
``run`` (``pev run --json``), ``verify`` (``pev check``), ``gate`` and ``gate_status``
(``pev gate``), and the MCP server's command line. Each has an asyncio twin (``arun``, …).

Results come back as the typed objects of ``pev._types``; ``pev run``'s JSON events go to
``on_event`` as they arrive, one dict per line. Exit 2 (bad input or usage) raises
``PevCommandError`` with the message of the ``error`` event, or of stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ._bin import find_pev_bin
from ._errors import PevCommandError
from ._lint import _json_default
from ._types import GateDecision, RunResult, VerifyResult

EventCallback = Callable[[dict[str, Any]], None]

_EXIT_BAD_INPUT = 2


def _policy_args(policy: Any) -> tuple[list[str], str | None]:
    """``--policy FILE`` for a path, a dict or a ``pev.Policy`` (written to a temp file, which
    the caller removes)."""
    from ._lint import Policy

    if policy is None:
        return [], None
    if isinstance(policy, (str, os.PathLike)):
        return ["--policy", os.fspath(policy)], None
    if isinstance(policy, Policy):
        if policy.rego:
            raise TypeError("pass a policy with Rego modules to run() as its file path")
        policy = policy.to_dict()
    if isinstance(policy, Mapping):
        fd, path = tempfile.mkstemp(prefix="pev-policy-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(dict(policy), f, default=_json_default)
        return ["--policy", path], path
    raise TypeError(f"a policy is a path, a dict or a pev.Policy, not {type(policy).__name__}")


def _plan_arg(plan: Any) -> tuple[str, bytes | None]:
    """The PLAN argument and what goes on stdin: a file stays a path, anything else is JSON."""
    if isinstance(plan, os.PathLike):
        return os.fspath(plan), None
    if isinstance(plan, (str, bytes)):
        text = plan.encode() if isinstance(plan, str) else plan
        return "-", text
    if hasattr(plan, "model_dump"):
        plan = plan.model_dump(mode="json")
    return "-", json.dumps(plan, default=_json_default).encode()


@dataclass
class _RunCall:
    argv: list[str]
    stdin: bytes | None
    cleanup: list[str] = field(default_factory=list)

    def done(self) -> None:
        for path in self.cleanup:
            try:
                os.unlink(path)
            except OSError:
                pass


def _run_call(
    plan: Any,
    workspace: os.PathLike[str] | str,
    *,
    policy: Any,
    jobs: int | None,
    yes: bool,
    scratch: bool,
    store: str | None,
) -> _RunCall:
    plan_arg, stdin = _plan_arg(plan)
    argv = [find_pev_bin(), "run", plan_arg, "--json", "--workspace", os.fspath(workspace)]
    policy_argv, temp = _policy_args(policy)
    argv += policy_argv
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    if yes:
        argv.append("--yes")
    if scratch:
        argv.append("--scratch")
    if store is not None:
        argv += ["--store", store]
    return _RunCall(argv, stdin, [temp] if temp else [])


class _RunReader:
    """Reads ``pev run --json`` lines: hands each event on, keeps the result and any error."""

    def __init__(self, on_event: EventCallback | None) -> None:
        self.on_event = on_event
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.other: list[str] = []

    def line(self, raw: str) -> None:
        raw = raw.strip()
        if not raw:
            return
        try:
            event = json.loads(raw)
        except json.JSONDecodeError:
            self.other.append(raw)
            return
        if not isinstance(event, dict):
            self.other.append(raw)
            return
        if self.on_event is not None:
            self.on_event(event)
        kind = event.get("event") or event.get("type")
        if kind == "run.finished" and isinstance(event.get("result"), dict):
            self.result = event["result"]
        elif kind == "error":
            self.error = str(event.get("message") or event.get("error") or raw)

    def finish(self, code: int, stderr: str) -> RunResult:
        if self.result is not None and code != _EXIT_BAD_INPUT:
            return RunResult.from_dict(self.result)
        message = self.error or stderr.strip() or "\n".join(self.other) or f"pev run exited {code}"
        raise PevCommandError(message, exit_code=code, stderr=stderr)


def run(
    plan: Any,
    workspace: os.PathLike[str] | str = ".",
    *,
    policy: Any = None,
    jobs: int | None = None,
    yes: bool = False,
    scratch: bool = False,
    store: str | None = None,
    timeout: float | None = None,
    on_event: EventCallback | None = None,
) -> RunResult:
    """Runs a plan with ``pev run --json`` in ``workspace`` (sandboxed as pev decides) and returns
    its result; ``on_event`` gets each JSON event as it is printed."""
    call = _run_call(plan, workspace, policy=policy, jobs=jobs, yes=yes, scratch=scratch, store=store)
    reader = _RunReader(on_event)
    try:
        with subprocess.Popen(
            call.argv,
            stdin=subprocess.PIPE if call.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=False,
        ) as proc:
            if call.stdin is not None and proc.stdin is not None:
                proc.stdin.write(call.stdin)
                proc.stdin.close()
            assert proc.stdout is not None and proc.stderr is not None
            stderr_chunks: list[bytes] = []
            import threading

            drain = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read()))  # type: ignore[union-attr]
            drain.start()
            for line in proc.stdout:
                reader.line(line.decode("utf-8", "replace"))
            code = proc.wait(timeout=timeout)
            drain.join()
        return reader.finish(code, b"".join(stderr_chunks).decode("utf-8", "replace"))
    finally:
        call.done()


async def arun(
    plan: Any,
    workspace: os.PathLike[str] | str = ".",
    *,
    policy: Any = None,
    jobs: int | None = None,
    yes: bool = False,
    scratch: bool = False,
    store: str | None = None,
    timeout: float | None = None,
    on_event: EventCallback | None = None,
) -> RunResult:
    """``run`` for asyncio: the process is awaited, events are handed on as they arrive."""
    call = _run_call(plan, workspace, policy=policy, jobs=jobs, yes=yes, scratch=scratch, store=store)
    reader = _RunReader(on_event)
    try:
        proc = await asyncio.create_subprocess_exec(
            *call.argv,
            stdin=asyncio.subprocess.PIPE if call.stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        if call.stdin is not None and proc.stdin is not None:
            proc.stdin.write(call.stdin)
            await proc.stdin.drain()
            proc.stdin.close()
        assert proc.stdout is not None and proc.stderr is not None

        async def read_out() -> None:
            assert proc.stdout is not None
            async for line in proc.stdout:
                reader.line(line.decode("utf-8", "replace"))

        async def everything() -> tuple[int, bytes]:
            assert proc.stderr is not None
            _, err = await asyncio.gather(read_out(), proc.stderr.read())
            return await proc.wait(), err

        try:
            code, err = await asyncio.wait_for(everything(), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        return reader.finish(code, err.decode("utf-8", "replace"))
    finally:
        call.done()


# ---- verify: `pev check` -------------------------------------------------------------------


def _check_call(
    assertions: Any, workspace: os.PathLike[str] | str, policy: Any, outputs: Any
) -> _RunCall:
    if isinstance(assertions, Mapping):
        assertions = [assertions]
    payload = json.dumps(list(assertions), default=_json_default).encode()
    argv = [find_pev_bin(), "check", "-", "--workspace", os.fspath(workspace)]
    policy_argv, temp = _policy_args(policy)
    argv += policy_argv
    cleanup = [temp] if temp else []
    if outputs is not None:
        fd, path = tempfile.mkstemp(prefix="pev-outputs-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(outputs, f, default=_json_default)
        argv += ["--outputs", path]
        cleanup.append(path)
    return _RunCall(argv, payload, cleanup)


def _check_result(code: int, out: str, err: str) -> VerifyResult:
    if code in (0, 1) and out.strip():
        return VerifyResult.from_dict(json.loads(out))
    raise PevCommandError(err.strip() or out.strip() or f"pev check exited {code}", exit_code=code, stderr=err)


def verify(
    assertions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    workspace: os.PathLike[str] | str = ".",
    *,
    policy: Any = None,
    outputs: Mapping[str, Any] | None = None,
) -> VerifyResult:
    """Checks assertions (CONTRACTS.md §2) against a workspace outside a run, with
    ``pev check``: ``command_succeeds`` runs in the sandbox, paths may not leave the workspace.
    ``outputs`` maps step ids to outputs for ``output_contains``/``exit_code_eq``."""
    call = _check_call(assertions, workspace, policy, outputs)
    try:
        proc = subprocess.run(call.argv, input=call.stdin, capture_output=True)
        return _check_result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    finally:
        call.done()


async def averify(
    assertions: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    workspace: os.PathLike[str] | str = ".",
    *,
    policy: Any = None,
    outputs: Mapping[str, Any] | None = None,
) -> VerifyResult:
    """``verify`` for asyncio."""
    call = _check_call(assertions, workspace, policy, outputs)
    try:
        code, out, err = await _communicate(call.argv, call.stdin)
        return _check_result(code, out, err)
    finally:
        call.done()


# ---- the gate ------------------------------------------------------------------------------


def _gate_argv(
    *,
    workspace: os.PathLike[str] | str | None,
    store: str | None,
    max_refusals: int | None,
    from_transcript: bool,
    require_plan: bool,
    record: bool,
    deadline: int | None,
) -> list[str]:
    argv = [find_pev_bin(), "gate"]
    if workspace is not None:
        argv += ["--workspace", os.fspath(workspace)]
    if store is not None:
        argv += ["--store", store]
    if max_refusals is not None:
        argv += ["--max-refusals", str(max_refusals)]
    if from_transcript:
        argv.append("--from-transcript")
    if require_plan:
        argv.append("--require-plan")
    if record:
        argv.append("--record")
    if deadline is not None:
        argv += ["--deadline", str(deadline)]
    return argv


def _gate_decision(code: int, out: str, err: str) -> GateDecision:
    if code == 0:
        return GateDecision.from_output(out)
    raise PevCommandError(err.strip() or f"pev gate exited {code}", exit_code=code, stderr=err)


def gate(
    payload: Mapping[str, Any],
    *,
    workspace: os.PathLike[str] | str | None = None,
    store: str | None = None,
    max_refusals: int | None = None,
    from_transcript: bool = False,
    require_plan: bool = False,
    record: bool = False,
    deadline: int | None = None,
) -> GateDecision:
    """Answers a Stop (or SessionStart/PostToolUse) hook payload as ``pev gate`` does: allow,
    block with the reasons, or stop. pev's gate fails closed: what goes wrong inside it is a
    block, not an exception."""
    argv = _gate_argv(
        workspace=workspace, store=store, max_refusals=max_refusals,
        from_transcript=from_transcript, require_plan=require_plan, record=record, deadline=deadline,
    )
    proc = subprocess.run(argv, input=json.dumps(dict(payload), default=_json_default).encode(), capture_output=True)
    return _gate_decision(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


async def agate(
    payload: Mapping[str, Any],
    *,
    workspace: os.PathLike[str] | str | None = None,
    store: str | None = None,
    max_refusals: int | None = None,
    from_transcript: bool = False,
    require_plan: bool = False,
    record: bool = False,
    deadline: int | None = None,
) -> GateDecision:
    """``gate`` for asyncio (a Claude Agent SDK hook callback is a coroutine)."""
    argv = _gate_argv(
        workspace=workspace, store=store, max_refusals=max_refusals,
        from_transcript=from_transcript, require_plan=require_plan, record=record, deadline=deadline,
    )
    code, out, err = await _communicate(argv, json.dumps(dict(payload), default=_json_default).encode())
    return _gate_decision(code, out, err)


def _status_argv(session: str | None, run: str | None, workspace: Any, store: str | None) -> list[str]:
    argv = [find_pev_bin(), "gate", "status"]
    if session is not None:
        argv += ["--session", session]
    if run is not None:
        argv += ["--run", run]
    if workspace is not None:
        argv += ["--workspace", os.fspath(workspace)]
    if store is not None:
        argv += ["--store", store]
    return argv


def _status_result(code: int, out: str, err: str) -> RunResult | None:
    if out.strip() and code in (0, 1, 3, 4):
        return RunResult.from_dict(json.loads(out))
    if "no run" in err.lower() or "no such" in err.lower():
        return None
    raise PevCommandError(err.strip() or f"pev gate status exited {code}", exit_code=code, stderr=err)


def gate_status(
    *,
    session: str | None = None,
    run: str | None = None,
    workspace: os.PathLike[str] | str | None = None,
    store: str | None = None,
) -> RunResult | None:
    """The verdict on a session's run (or a run's) now, as ``pev gate status``."""
    proc = subprocess.run(_status_argv(session, run, workspace, store), capture_output=True, stdin=subprocess.DEVNULL)
    return _status_result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


async def agate_status(
    *,
    session: str | None = None,
    run: str | None = None,
    workspace: os.PathLike[str] | str | None = None,
    store: str | None = None,
) -> RunResult | None:
    """``gate_status`` for asyncio."""
    code, out, err = await _communicate(_status_argv(session, run, workspace, store), None)
    return _status_result(code, out, err)


# ---- MCP -----------------------------------------------------------------------------------


def mcp_command(
    workspace: os.PathLike[str] | str | None = None, *, store: str | None = None
) -> list[str]:
    """The command line of pev's MCP server over stdio (for an MCP client's configuration)."""
    argv = [find_pev_bin(), "mcp"]
    if workspace is not None:
        argv += ["--workspace", os.fspath(workspace)]
    if store is not None:
        argv += ["--store", store]
    return argv


def mcp_server(
    workspace: os.PathLike[str] | str | None = None, *, store: str | None = None
) -> dict[str, Any]:
    """A stdio MCP server entry (``{"type": "stdio", "command", "args"}``), the shape Claude Code,
    the Claude Agent SDK and most MCP clients take."""
    command, *args = mcp_command(workspace, store=store)
    return {"type": "stdio", "command": command, "args": args}


def serve_mcp(workspace: os.PathLike[str] | str | None = None, *, store: str | None = None) -> int:
    """Serves MCP on this process's stdin/stdout until the client closes them."""
    return subprocess.run(mcp_command(workspace, store=store)).returncode


async def _communicate(argv: Sequence[str], stdin: bytes | None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
