"""The in-process linter: every input form, policies, typed results and exceptions."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

import pev

from pev_test_support import EXAMPLES, LINT_FIXTURES, cli_json, run_cli

PLAN = {
    "goal": "Refund an order",
    "steps": [
        {"id": "look", "tool": "db.query_ro", "parameters": {"query": "SELECT * FROM orders"}},
        {
            "id": "pay",
            "tool": "payments.refund",
            "depends_on": ["look"],
            "parameters": {"amount": 5000, "api_key": "sk-live-abcdefghijklmnop1234"},
        },
    ],
}
POLICY = {
    "allow_tools": ["db.query_ro", "payments.refund"],
    "bounds": {"payments.refund.amount": [0, 1000]},
}


def strip_locations(result: dict) -> dict:
    out = json.loads(json.dumps(result))
    for finding in out["errors"] + out["warnings"]:
        finding.pop("line", None)
        finding.pop("column", None)
    return out


def test_every_input_form_gives_the_same_findings(tmp_path: Path) -> None:
    from pydantic import BaseModel, ConfigDict

    class Plan(BaseModel):
        model_config = ConfigDict(extra="allow")
        goal: str
        steps: list[dict]

    json_file = tmp_path / "plan.json"
    json_file.write_text(json.dumps(PLAN, indent=2))
    yaml_text = yaml.safe_dump(PLAN, sort_keys=False)
    policy = pev.Policy.from_dict(POLICY)
    results = {
        "dict": pev.lint(PLAN, policy),
        "pydantic": pev.lint(Plan(**PLAN), policy),
        "json text": pev.lint(json.dumps(PLAN), policy),
        "yaml text": pev.lint(yaml_text, policy),
        "bytes": pev.lint(json.dumps(PLAN).encode(), policy),
        "path": pev.lint(json_file, policy),
        "lint_file": pev.lint_file(json_file, policy),
        "policy dict": pev.lint(PLAN, POLICY),
    }
    expected = strip_locations(results["dict"].to_dict())
    assert {f.code for f in results["dict"].errors} >= {"BOUND_VIOLATION", "RAW_SECRET"}
    for name, result in results.items():
        assert strip_locations(result.to_dict()) == expected, name
    # Text and files carry lines; a dict does not (there is no text of the user's to point at).
    assert all(f.line is None for f in results["dict"].findings)
    assert all(f.line is not None for f in results["path"].findings)
    assert all(f.line is not None for f in results["yaml text"].findings)


def test_typed_result() -> None:
    result = pev.lint(PLAN, POLICY)
    assert result.status is pev.Status.ERROR and result.status == "error"
    assert not result.ok
    bound = next(f for f in result.errors if f.code == "BOUND_VIOLATION")
    assert bound.step == 1 and bound.step_id == "pay"
    assert bound.severity in tuple(pev.Severity)
    assert bound.path.startswith("/steps/1/")
    assert bound.level == "error"
    assert result.has("RAW_SECRET") and not result.has("LOOP_DETECTED")
    assert 0 < result.risk_score <= 1
    feedback = result.feedback()
    assert 'BOUND_VIOLATION in step "pay"' in feedback and "Fix:" in feedback
    with pytest.raises(pev.PlanRejected) as info:
        result.raise_for_status()
    assert info.value.result is result
    ok = pev.lint({"goal": "read", "steps": [{"id": "a", "tool": "file.read", "parameters": {"path": "x"}}]})
    assert ok.ok and ok.raise_for_status() is ok


def test_schema_mismatch_is_a_result_and_bad_syntax_raises() -> None:
    result = pev.lint({"goal": "x", "steps": [{"id": "a", "depends_on": "not-a-list"}]})
    assert [f.code for f in result.errors] == ["SCHEMA_INVALID"]
    assert result.errors[0].path == "/steps/0/depends_on"
    with pytest.raises(pev.PlanSchemaError) as schema_info:
        pev.parse_plan({"goal": "x", "steps": [{"id": "a", "depends_on": "not-a-list"}]})
    assert schema_info.value.issues[0].pointer == "/steps/0/depends_on"
    with pytest.raises(pev.PlanSyntaxError) as info:
        pev.lint('{"goal": "x",\n  "steps": [}')
    assert isinstance(info.value, ValueError)
    assert (info.value.format, info.value.line) == ("JSON", 2)
    assert info.value.column > 0


def test_a_bare_filename_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="pathlib.Path"):
        pev.lint("plan.json")
    with pytest.raises(TypeError):
        pev.lint(42)


def test_parse_plan_resolves_aliases() -> None:
    plan = pev.parse_plan({"objective": "g", "steps": [{"step_id": "a", "tool": "file.read", "args": {"path": "p"}, "dependencies": []}]})
    assert plan["goal"] == "g"
    assert plan["steps"][0]["id"] == "a"
    assert plan["steps"][0]["parameters"] == {"path": "p"}


@pytest.mark.parametrize(
    ("policy", "kind"),
    [
        ({"allow_tool": ["x"]}, "yaml"),
        ({"deny_tokens_regex": ["ok", "(unclosed"]}, "invalid_regex"),
        ({"bounds": {"t.a": [5, 1]}}, "invalid_bound"),
        ({"fail_risk_threshold": 3}, "invalid_value"),
        ({"severity": {"NOT_A_CODE": "off"}}, "unknown_severity_code"),
        ({"rego": ["missing.rego"]}, "rego"),
    ],
)
def test_policy_errors_are_typed(policy: dict, kind: str) -> None:
    with pytest.raises(pev.PolicyError) as info:
        pev.Policy.from_dict(policy)
    assert info.value.kind == kind
    assert isinstance(info.value, ValueError)


def test_policy_error_names_the_key_and_index() -> None:
    with pytest.raises(pev.PolicyError, match="allow_tool"):
        pev.Policy.from_dict({"allow_tool": ["x"]})
    with pytest.raises(pev.PolicyError, match=r"deny_tokens_regex\[1\]"):
        pev.Policy.from_dict({"deny_tokens_regex": ["ok", "(unclosed"]})
    with pytest.raises(pev.PolicyError) as info:
        pev.Policy.load("/nonexistent/policy.yaml")
    assert info.value.kind == "io" and info.value.path == "/nonexistent/policy.yaml"
    with pytest.raises(pev.PolicyError) as rego_info:
        pev.Policy.load(LINT_FIXTURES / "rego" / "broken.policy.yaml")
    assert rego_info.value.kind == "rego"


def test_policy_forms_agree(tmp_path: Path) -> None:
    path = EXAMPLES / "lint" / "policy.yaml"
    loaded = pev.Policy.load(path)
    from_yaml = pev.Policy.from_yaml(path.read_text(), base_dir=path.parent)
    from_dict = pev.Policy.from_dict(yaml.safe_load(path.read_text()), base_dir=path.parent)
    plan = Path(EXAMPLES / "lint" / "refund.yaml")
    results = [pev.lint(plan, p).to_dict() for p in (loaded, from_yaml, from_dict, path)]
    assert all(r == results[0] for r in results)
    assert loaded.to_dict() == from_dict.to_dict()
    assert loaded.fail_risk_threshold == loaded.to_dict()["fail_risk_threshold"]


def test_policy_notes_and_inline_rego() -> None:
    policy = pev.Policy.from_dict({"risk_weights": {"tool_write": 0.5}})
    assert any("tool_write" in note for note in policy.notes)
    rego = (
        "package pev\n"
        "violations[v] { some i; input.steps[i].tool == \"shell.exec\"; "
        "v := {\"step\": i, \"code\": \"NO_SHELL\", \"msg\": \"no shell\"} }\n"
    )
    with_rego = pev.Policy.from_dict({}, rego=[("inline.rego", rego)])
    plan = {"goal": "g", "steps": [{"id": "a", "tool": "shell.exec", "parameters": {"command": "ls"}, "acceptance_criteria": ["listed"]}]}
    assert pev.lint(plan, with_rego).has("POLICY_VIOLATION")
    assert not pev.lint(plan).has("POLICY_VIOLATION")


def test_fail_risk_overrides_the_threshold() -> None:
    plan = {"goal": "g", "steps": [{"id": "a", "tool": "not.a.known.tool", "parameters": {}}]}
    base = pev.lint(plan)
    assert base.status == "warn" and base.risk_score > 0
    assert pev.lint(plan, fail_risk=base.risk_score).status == "error"


def test_one_policy_from_many_threads_gives_identical_results() -> None:
    policy = pev.Policy.load(EXAMPLES / "lint" / "policy.yaml")
    plan = Path(EXAMPLES / "lint" / "refund.yaml").read_text()
    expected = pev.lint(plan, policy).to_dict()
    seen: list[dict] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(20):
            out = pev.lint(plan, policy).to_dict()
            with lock:
                seen.append(out)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 160 and all(s == expected for s in seen)


def test_explain_and_codes_match_the_cli(pev_bin: str) -> None:
    listed = run_cli(pev_bin, "lint", "--explain", "all").stdout
    assert "\n".join(str(c) for c in pev.codes()) == listed
    info = pev.explain("raw_secret")
    assert info.code == "RAW_SECRET" and info.level == "error"
    assert str(info) == run_cli(pev_bin, "lint", "--explain", "RAW_SECRET").stdout
    with pytest.raises(pev.UnknownCodeError):
        pev.explain("NOPE")


@pytest.mark.parametrize("kind", ["plan", "lint", "policy", "result"])
def test_schemas_match_the_cli(pev_bin: str, kind: str) -> None:
    assert pev.schema(kind) == cli_json(pev_bin, "schema", kind)


def test_results_validate_against_the_lint_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = pev.schema("lint")
    for plan in (PLAN, {"goal": "x", "steps": []}, Path(EXAMPLES / "lint" / "refund.yaml")):
        jsonschema.validate(pev.lint(plan, POLICY).to_dict(), schema)


def test_version_is_the_binarys(pev_bin: str) -> None:
    out = run_cli(pev_bin, "--version").stdout
    assert pev.__version__ in out.split()
