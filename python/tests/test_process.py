"""Through the bundled binary: where it is, `python -m pev`, runs, verify, the gate, MCP."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest

import pev

from pev_test_support import EXAMPLES, REPO, has_subcommand, run_cli

HOOKS = REPO / "crates" / "cli" / "tests" / "fixtures" / "hooks"


def test_the_binary_and_its_helper_are_installed_side_by_side(pev_bin: str) -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    if "PEV_BIN" not in os.environ:
        assert Path(pev_bin) == scripts / "pev"
    assert (Path(pev_bin).parent / "pev-sandbox").is_file()
    assert shutil.which("pev", path=str(scripts)) is not None or "PEV_BIN" in os.environ


def test_python_dash_m_pev_is_the_binary(pev_bin: str) -> None:
    out = subprocess.run([sys.executable, "-m", "pev", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout == run_cli(pev_bin, "--version").stdout
    bad = subprocess.run([sys.executable, "-m", "pev", "lint", "/nonexistent.json"], capture_output=True, text=True)
    assert bad.returncode == 2 and "nonexistent" in bad.stderr


def test_pev_bin_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PEV_BIN", str(tmp_path / "missing"))
    with pytest.raises(pev.PevBinaryNotFound):
        pev.find_pev_bin()


def _site(tmp_path: Path, example: str = "dark-green") -> Path:
    site = tmp_path / "site"
    shutil.copytree(EXAMPLES / example / "site", site)
    return site


def test_run_the_readme_example_to_success_with_events(tmp_path: Path) -> None:
    site = _site(tmp_path)
    events: list[dict] = []
    result = pev.run(EXAMPLES / "dark-green" / "plan.json", workspace=site, on_event=events.append)
    assert result.status == pev.RunStatus.SUCCESS and result.ok, result.reasons
    assert [s.status for s in result.steps] == ["done", "done", "done"]
    assert "#013220" in (site / "style.css").read_text()
    names = [e["event"] for e in events]
    assert names[0] == "run.started" and names[-1] == "run.finished"
    assert "step.finished" in names
    sandbox = events[0]["sandbox"]
    if shutil.which("bwrap"):
        # With bubblewrap installed, the wheel's binary and its helper give the full sandbox.
        assert sandbox["level"] == "full" and any(m.startswith("bubblewrap") for m in sandbox["mechanisms"]), sandbox
    else:
        assert sandbox["level"], sandbox


def test_arun_and_a_failing_assertion(tmp_path: Path) -> None:
    site = _site(tmp_path, "failing-assertion")
    events: list[dict] = []
    result = asyncio.run(pev.arun(EXAMPLES / "failing-assertion" / "plan.json", workspace=site, on_event=events.append))
    assert result.status != pev.RunStatus.SUCCESS
    assert "assertion_failed" in [r.code for r in result.reasons]
    assert events and events[-1]["event"] == "run.finished"


def test_run_from_a_dict_and_bad_input(tmp_path: Path) -> None:
    site = _site(tmp_path)
    plan = json.loads((EXAMPLES / "dark-green" / "plan.json").read_text())
    assert pev.run(plan, workspace=site).ok
    with pytest.raises(pev.PevCommandError) as info:
        pev.run("{not json", workspace=site)
    assert info.value.exit_code == 2 and info.value.message


def test_gate_on_recorded_payloads(tmp_path: Path) -> None:
    payload = json.loads((HOOKS / "claude_stop.json").read_text())
    payload["cwd"] = str(tmp_path)
    # Refusals without a run are counted per session in the machine's temporary directory, so
    # the recorded session id would carry its count from one test run to the next: a fresh one.
    payload["session_id"] = f"{payload['session_id']}-{uuid.uuid4()}"
    decision = pev.gate(payload, workspace=tmp_path)
    # No pev run in this workspace and no plan required: the stop is allowed.
    assert decision.decision == "allow" and decision.allowed
    required = pev.gate(payload, workspace=tmp_path, require_plan=True)
    assert required.decision == "block" and required.reason
    assert required.as_hook_json()["decision"] == "block"
    # Refusals in a row are counted per session (the next would let the client go): the async
    # variant is asked for another session.
    other = {**payload, "session_id": payload["session_id"] + "-async"}
    async_required = asyncio.run(pev.agate(other, workspace=tmp_path, require_plan=True))
    assert async_required.decision == "block", async_required


def test_gate_decision_shapes() -> None:
    stop = pev.GateDecision.from_output('{"continue": false, "stopReason": "r", "systemMessage": "m"}')
    assert stop.decision == "stop" and stop.as_claude_hook_output() == {"continue_": False, "stopReason": "r", "systemMessage": "m"}
    assert pev.GateDecision.from_output("").decision == "allow"


def test_gate_status_of_a_client_session(tmp_path: Path) -> None:
    # `pev gate status` answers for a run a client made through `pev mcp`: drive the real server
    # over stdio as Claude Code would, with a plan whose one step is done and verified.
    plan = {
        "objective": "Create hello.txt containing hi",
        "steps": [{"id": "write", "title": "Write hello.txt",
                   "assertions": [{"type": "file_contains", "path": "hello.txt", "pattern": "hi"}]}],
    }
    call = lambda i, name, args: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}}  # noqa: E731
    env = {**os.environ, "PEV_SESSION_ID": "py-session-1"}
    server = subprocess.Popen(pev.mcp_command(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert server.stdin is not None and server.stdout is not None

    def ask(request: dict) -> dict:
        server.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        if "id" not in request:
            return {}
        while True:
            reply = json.loads(server.stdout.readline())  # type: ignore[union-attr]
            if reply.get("id") == request["id"]:
                return reply

    try:
        ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert ask(call(2, "plan_create", plan))["result"]["isError"] is False
        # The client writes the file after the plan is made, then marks the step done.
        (tmp_path / "hello.txt").write_text("hi\n")
        done = ask(call(3, "step_update", {"id": "write", "status": "done", "evidence": "wrote hello.txt"}))
        assert done["result"]["isError"] is False, done
    finally:
        server.stdin.close()
        server.wait(timeout=60)

    status = pev.gate_status(session="py-session-1", workspace=tmp_path)
    assert status is not None and status.ok and status.status == "success", status
    again = asyncio.run(pev.agate_status(run=status.run_id, workspace=tmp_path))
    assert again is not None and again.run_id == status.run_id
    # A run `pev run` made is no client's: the binary says so, and so does the exception.
    site = _site(tmp_path / "other")
    result = pev.run(EXAMPLES / "dark-green" / "plan.json", workspace=site)
    with pytest.raises(pev.PevCommandError, match="not a pev mcp run"):
        pev.gate_status(run=result.run_id, workspace=site)


def test_mcp_server_lists_plan_tools(tmp_path: Path) -> None:
    argv = pev.mcp_command(tmp_path)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = subprocess.run(argv, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True, text=True, timeout=60)
    replies = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    tools = next(r for r in replies if r.get("id") == 2)["result"]["tools"]
    assert {"plan_create", "lint_plan"} <= {t["name"] for t in tools}


@pytest.fixture
def check_available(pev_bin: str) -> None:
    if not has_subcommand(pev_bin, "check"):
        pytest.skip("this pev has no `pev check` yet (notes/issue30_cli_request.md): pev.verify needs it")


def test_verify_outside_a_run(tmp_path: Path, check_available: None) -> None:
    (tmp_path / "style.css").write_text("body { background: #013220; }\n")
    result = pev.verify(
        [
            {"type": "file_exists", "path": "style.css"},
            {"type": "file_contains", "path": "style.css", "pattern": "#013220"},
            {"type": "command_succeeds", "command": "test -f style.css"},
            {"type": "file_contains", "path": "../outside", "pattern": "x"},
        ],
        workspace=tmp_path,
    )
    assert [r.passed for r in result.results] == [True, True, True, False]
    assert not result.passed
    assert asyncio.run(pev.averify({"type": "file_exists", "path": "style.css"}, workspace=tmp_path)).passed
    with pytest.raises(pev.PevCommandError):
        pev.verify({"type": "no_such_assertion"}, workspace=tmp_path)
