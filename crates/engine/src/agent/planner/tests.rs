//! Tests of the planner with a scripted model: accepted plans, structured-output and lint
//! retries within one budget of calls, typed errors, replans (the prompt, reserved ids, findings
//! indexed for the returned plan), the prompt's content, and the workspace summary.

use std::path::Path;
use std::sync::Arc;

use pev_lint::CompiledPolicy;
use pev_protocol::{LintCode, Policy};
use pev_providers::script::{FailureKind, ScriptTurn, ScriptedClient};
use pev_providers::{ChatRequest, ProviderError, Role, TokenUsage};
use pev_tools::{Registry, Workspace};
use serde_json::json;

use super::*;
use crate::agent::test_clients::{BROKE_MESSAGE, Broke};
use pev_protocol::StepId;

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

fn tools() -> Vec<ToolDefinition> {
    Registry::builtin().definitions()
}

fn workspace() -> WorkspaceSummary {
    WorkspaceSummary {
        entries: vec![SummaryEntry::File { path: "site/style.css".into(), bytes: 120 }],
        more: 0,
        more_is_lower_bound: false,
    }
}

const GOAL: &str = "Change the site background to dark green";

/// Runs `plan` with a scripted model; returns the result and the client (for its requests).
fn plan_with(
    turns: Vec<ScriptTurn>,
    options: PlannerOptions,
    policy: &CompiledPolicy,
) -> (Result<PlanOutcome, PlanError>, Arc<ScriptedClient>) {
    let client = Arc::new(ScriptedClient::from_turns("plan.json", turns));
    let planner = Planner::new(client.clone(), "planner-model".into(), options);
    let (summary, tools) = (workspace(), tools());
    let ctx = PlanContext { goal: GOAL, workspace: &summary, tools: &tools, policy };
    (block_on(planner.plan(&ctx)), client)
}

fn good_plan() -> String {
    json!({
        "goal": "make it green",
        "steps": [{
            "id": "patch-css",
            "title": "Patch the body rule",
            "tool": "file.patch",
            "parameters": {"path": "site/style.css",
                           "edits": [{"old": "background: white", "new": "background: #006400"}]},
            "assertions": [
                {"type": "content_changed", "path": "site/style.css"},
                {"type": "file_contains", "path": "site/style.css", "pattern": "#006400"}
            ]
        }],
        "postconditions": [{"description": "CSS changed",
                            "assertions": [{"type": "content_changed", "path": "site/style.css"}]}]
    })
    .to_string()
}

fn unknown_dependency_plan() -> String {
    json!({
        "goal": GOAL,
        "steps": [{
            "id": "patch-css",
            "description": "Set the body background to #006400 in site/style.css.",
            "depends_on": ["nope"],
            "acceptance_criteria": ["the body background is #006400"]
        }]
    })
    .to_string()
}

fn cycle_plan() -> String {
    json!({
        "goal": GOAL,
        "steps": [
            {"id": "a", "description": "do a", "depends_on": ["b"], "acceptance_criteria": ["a"]},
            {"id": "b", "description": "do b", "depends_on": ["a"], "acceptance_criteria": ["b"]}
        ]
    })
    .to_string()
}

/// A plan whose only finding is an `UNVERIFIED_EFFECT` warning.
fn unverified_write_plan() -> String {
    json!({
        "goal": GOAL,
        "steps": [{"id": "write", "tool": "file.write",
                   "parameters": {"path": "site/style.css", "content": "body{}"}}]
    })
    .to_string()
}

fn user_text(request: &ChatRequest, index: usize) -> String {
    let message = &request.messages[index];
    assert_eq!(message.role, Role::User, "message {index} is not the user's");
    message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.clone(),
            other => panic!("unexpected block {other:?}"),
        })
        .collect()
}

fn codes(findings: &[Finding]) -> Vec<LintCode> {
    findings.iter().map(|f| f.code).collect()
}

#[test]
fn a_valid_plan_is_accepted_in_one_call_with_the_callers_goal() {
    let usage = TokenUsage { input_tokens: 900, output_tokens: 300, ..TokenUsage::default() };
    let turns = vec![ScriptTurn::text(good_plan()).with_usage(usage)];
    let (result, client) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    let outcome = result.unwrap();
    assert_eq!(outcome.plan.steps.len(), 1);
    assert_eq!(outcome.plan.steps[0].id.as_str(), "patch-css");
    assert_eq!(outcome.plan.steps[0].tool.as_deref(), Some("file.patch"));
    assert_eq!(outcome.plan.goal, GOAL, "the model's restated goal must not replace the person's");
    assert_eq!(outcome.plan.meta, Some(json!({"planner": "planner-model"})));
    assert_eq!((outcome.tries, outcome.model_calls), (1, 1));
    assert_eq!(outcome.usage, usage);
    assert!(outcome.lint_warnings.is_empty(), "{:?}", outcome.lint_warnings);

    let requests = client.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.model, "planner-model");
    assert_eq!(request.max_tokens, 8192);
    assert!(request.tools.is_empty(), "the planner calls no tools");
    let user = user_text(request, 0);
    assert!(user.contains(&format!("Goal: {GOAL}")), "{user}");
    assert!(user.contains("site/style.css  (120 bytes)"), "{user}");
}

#[test]
fn the_system_prompt_explains_the_format_assertions_tools_and_policy() {
    let policy =
        Policy { max_steps: 7, deny_tools: vec!["http.request".into()], ..Policy::default() };
    let policy = CompiledPolicy::from_parts(policy, Path::new("p.yaml"), Vec::new()).unwrap();
    let (result, client) =
        plan_with(vec![ScriptTurn::text(good_plan())], PlannerOptions::default(), &policy);
    result.unwrap();
    let system = client.requests()[0].system.clone().unwrap();
    for needle in [
        "matching [A-Za-z0-9_.-]+ (letters, digits, `_`, `.` and `-` only",
        "EITHER a direct tool call",
        "OR an instruction: no \"tool\"",
        "\"acceptance_criteria\": measurable",
        "${step_id.result.a.b}",
        "\"depends_on\"",
        "A postcondition is",
        "At most 7 steps.",
        "Never use: http.request.",
        // The compact tool catalog, from the tools' own schemas.
        "- file.patch(",
        "edits: [{",
        "replace_all?: boolean",
        "argv?: [string]",
        "- file.read(",
    ] {
        assert!(system.contains(needle), "the system prompt lacks {needle:?}:\n{system}");
    }
    // Every assertion type of the schema is described with its fields.
    let schema = schema_of(SchemaKind::Plan);
    let variants = schema["$defs"]["Assertion"]["oneOf"].as_array().unwrap();
    assert_eq!(variants.len(), 11);
    for variant in variants {
        let name = variant["properties"]["type"]["const"].as_str().unwrap();
        assert!(system.contains(&format!("- {name} (")), "{name} is not described");
    }
    assert!(system.contains("- file_contains (path, pattern, regex?)"), "{system}");
    assert!(system.contains("- exit_code_eq (code, step?)"), "{system}");
}

// The step id pattern appears in the schema that structured output appends; the prompt's own
// words are checked above. This pins the pattern the prompt's wording must agree with.
#[test]
fn the_plan_schema_carries_the_step_id_pattern() {
    let schema = schema_of(SchemaKind::Plan);
    assert_eq!(schema["$defs"]["StepId"]["pattern"], "^[A-Za-z0-9_.\\-]+$");
}

#[test]
fn invalid_json_then_valid_costs_a_call_but_not_a_try() {
    let turns =
        vec![ScriptTurn::text("Here is the plan: {\"goal\": oops"), ScriptTurn::text(good_plan())];
    let (result, client) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    let outcome = result.unwrap();
    assert_eq!((outcome.tries, outcome.model_calls), (1, 2));
    let second = &client.requests()[1];
    let feedback = user_text(second, second.messages.len() - 1);
    assert!(feedback.contains("not a valid plan"), "{feedback}");
}

#[test]
fn a_lint_error_goes_back_with_its_code_step_message_and_fix() {
    let turns = vec![ScriptTurn::text(unknown_dependency_plan()), ScriptTurn::text(good_plan())];
    let (result, client) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    let outcome = result.unwrap();
    assert_eq!((outcome.tries, outcome.model_calls), (2, 2));
    assert_eq!(outcome.plan.steps[0].id.as_str(), "patch-css");

    let requests = client.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1];
    assert_eq!(second.messages.len(), 3, "goal, the rejected plan, the feedback");
    assert_eq!(second.messages[1].role, Role::Assistant);
    let echoed = match &second.messages[1].content[0] {
        ContentBlock::Text { text } => text.clone(),
        other => panic!("unexpected block {other:?}"),
    };
    assert!(echoed.contains("\"nope\""), "the rejected plan is shown back: {echoed}");
    let feedback = user_text(second, 2);
    assert!(
        feedback.contains("- UNKNOWN_DEPENDENCY in step \"patch-css\" at /steps/0/depends_on"),
        "{feedback}"
    );
    assert!(feedback.contains("nope"), "{feedback}");
    assert!(feedback.contains(LintCode::UnknownDependency.fix()), "{feedback}");
}

#[test]
fn out_of_tries_is_a_typed_error_with_the_last_findings() {
    let turns = vec![
        ScriptTurn::text(cycle_plan()),
        ScriptTurn::text(cycle_plan()),
        ScriptTurn::text(cycle_plan()),
        ScriptTurn::text(good_plan()),
    ];
    let (result, client) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    match result {
        Err(PlanError::Invalid { findings, note, tries, model_calls }) => {
            assert_eq!((tries, model_calls), (3, 3));
            assert!(codes(&findings).contains(&LintCode::LoopDetected), "{findings:?}");
            assert_eq!(note, None);
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(client.remaining(), 1, "no fourth call");
    // The third request carries the second refusal, not a pile of all of them.
    assert_eq!(client.requests()[2].messages.len(), 5);
}

#[test]
fn structured_retries_and_lint_retries_share_one_budget_of_calls() {
    let turns = vec![
        ScriptTurn::text("not json at all"),
        ScriptTurn::text(cycle_plan()),
        ScriptTurn::text(good_plan()),
    ];
    let options = PlannerOptions { max_tries: 2, ..PlannerOptions::default() };
    let (result, client) = plan_with(turns, options, &CompiledPolicy::default());
    match result {
        Err(PlanError::Invalid { findings, tries, model_calls, .. }) => {
            assert_eq!((tries, model_calls), (1, 2));
            assert!(codes(&findings).contains(&LintCode::LoopDetected), "{findings:?}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(client.remaining(), 1);
}

#[test]
fn a_last_answer_that_is_not_a_json_plan_is_schema_invalid() {
    let options = PlannerOptions { max_tries: 1, ..PlannerOptions::default() };
    let turns = vec![ScriptTurn::text("I would start by reading the CSS.")];
    let (result, _) = plan_with(turns, options, &CompiledPolicy::default());
    let error = result.unwrap_err();
    match &error {
        PlanError::Invalid { findings, tries, model_calls, .. } => {
            assert_eq!((*tries, *model_calls), (0, 1));
            assert_eq!(codes(findings), vec![LintCode::SchemaInvalid]);
            assert!(findings[0].msg.contains("No JSON object or array"), "{findings:?}");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert!(error.to_string().starts_with("the planner wrote no acceptable plan in 1 model call:"));
}

#[test]
fn lint_warnings_are_kept_with_the_accepted_plan() {
    let turns = vec![ScriptTurn::text(unverified_write_plan())];
    let (result, _) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    let outcome = result.unwrap();
    assert_eq!(codes(&outcome.lint_warnings), vec![LintCode::UnverifiedEffect]);
    assert_eq!(outcome.lint_warnings[0].step, Some(0));
    assert_eq!(outcome.tries, 1);
}

#[test]
fn a_risk_score_at_the_threshold_is_refused_with_a_note() {
    let policy = Policy { fail_risk_threshold: 0.05, ..Policy::default() };
    let policy = CompiledPolicy::from_parts(policy, Path::new("p.yaml"), Vec::new()).unwrap();
    let turns = vec![ScriptTurn::text(unverified_write_plan()), ScriptTurn::text(good_plan())];
    let (result, client) = plan_with(turns, PlannerOptions::default(), &policy);
    assert_eq!(result.unwrap().tries, 2);
    let feedback = user_text(&client.requests()[1], 2);
    assert!(feedback.contains("- UNVERIFIED_EFFECT in step \"write\""), "{feedback}");
    assert!(feedback.contains("risk score 0.05 reaches the policy's limit 0.05"), "{feedback}");
}

#[test]
fn provider_errors_pass_through_typed() {
    let turns = vec![ScriptTurn::failure(FailureKind::Authentication, None)];
    let (result, _) = plan_with(turns, PlannerOptions::default(), &CompiledPolicy::default());
    match result {
        Err(PlanError::Provider(ProviderError::Authentication { status: 401, .. })) => {}
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[test]
fn an_exhausted_budget_is_its_own_error() {
    let planner = Planner::new(Arc::new(Broke), "m".into(), PlannerOptions::default());
    let (summary, tools, policy) = (workspace(), tools(), CompiledPolicy::default());
    let ctx = PlanContext { goal: GOAL, workspace: &summary, tools: &tools, policy: &policy };
    match block_on(planner.plan(&ctx)) {
        Err(PlanError::Budget(message)) => assert_eq!(message, BROKE_MESSAGE),
        other => panic!("expected Budget, got {other:?}"),
    }
}

#[test]
fn the_planners_future_can_move_between_threads() {
    fn assert_send<T: Send>(_: &T) {}
    let planner = Planner::new(Arc::new(Broke), "m".into(), PlannerOptions::default());
    let (summary, tools, policy) = (workspace(), tools(), CompiledPolicy::default());
    let ctx = PlanContext { goal: GOAL, workspace: &summary, tools: &tools, policy: &policy };
    assert_send(&planner.plan(&ctx));
    let failure = failure();
    assert_send(&planner.replan(&ctx, &[], &failure, &Plan::default()));
}

// ---- replans ----

fn previous_plan() -> Plan {
    let text = json!({
        "goal": GOAL,
        "steps": [
            {"id": "read-css", "tool": "file.read", "parameters": {"path": "site/style.css"}},
            {"id": "patch-css", "description": "Set the background.", "depends_on": ["read-css"],
             "acceptance_criteria": ["background is dark green"]}
        ]
    })
    .to_string();
    parse_plan(&text, Format::Json).unwrap().plan
}

fn done() -> Vec<DoneStep> {
    vec![DoneStep {
        id: StepId::new("read-css"),
        title: "Read the stylesheet".into(),
        output_summary: "{\"bytes\": 120, \"content\": \"body { background: white }\"}".into(),
    }]
}

fn failure() -> Failure {
    Failure {
        step: StepId::new("patch-css"),
        error: "assertion failed: file_contains #006400".into(),
        evidence: vec!["site/style.css does not contain \"#006400\"".into()],
        attempts: 3,
    }
}

fn replan_with(turns: Vec<ScriptTurn>) -> (Result<PlanOutcome, PlanError>, Arc<ScriptedClient>) {
    let client = Arc::new(ScriptedClient::from_turns("replan.json", turns));
    let planner = Planner::new(client.clone(), "planner-model".into(), PlannerOptions::default());
    let (summary, tools, policy) = (workspace(), tools(), CompiledPolicy::default());
    let ctx = PlanContext { goal: GOAL, workspace: &summary, tools: &tools, policy: &policy };
    let result = block_on(planner.replan(&ctx, &done(), &failure(), &previous_plan()));
    (result, client)
}

/// Remaining steps that depend on and refer to the done step; the second has no assertion.
fn remaining_plan(first_id: &str) -> String {
    json!({
        "goal": GOAL,
        "steps": [
            {"id": first_id, "tool": "file.write", "depends_on": ["read-css"],
             "parameters": {"path": "site/style.css", "content": "${read-css.result.content}"},
             "assertions": [{"type": "content_changed", "path": "site/style.css"}]},
            {"id": "touch", "tool": "file.write", "depends_on": [first_id],
             "parameters": {"path": "site/done.txt", "content": "ok"}}
        ]
    })
    .to_string()
}

#[test]
fn the_replan_prompt_lists_done_steps_and_the_failure_with_its_evidence() {
    let (result, client) = replan_with(vec![ScriptTurn::text(remaining_plan("rewrite-css"))]);
    let outcome = result.unwrap();
    let ids: Vec<&str> = outcome.plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["rewrite-css", "touch"], "the plan holds the new steps only");
    // Depending on and referring to a done step is fine; the stand-in's findings are dropped and
    // the warning about `touch` is indexed in the returned plan.
    assert_eq!(codes(&outcome.lint_warnings), vec![LintCode::UnverifiedEffect]);
    assert_eq!(outcome.lint_warnings[0].step, Some(1));
    assert_eq!(outcome.lint_warnings[0].step_id.as_deref(), Some("touch"));
    assert!(outcome.lint_warnings[0].path.starts_with("/steps/1"), "{:?}", outcome.lint_warnings);

    let user = user_text(&client.requests()[0], 0);
    for needle in [
        "This is a REPLAN",
        "- read-css \"Read the stylesheet\": output: {\"bytes\": 120",
        "do not reuse them",
        "The step that failed: patch-css (after 3 attempts).",
        "Error: assertion failed: file_contains #006400",
        "- site/style.css does not contain \"#006400\"",
        "REMAINING steps only",
        "site/style.css  (120 bytes)",
    ] {
        assert!(user.contains(needle), "the replan prompt lacks {needle:?}:\n{user}");
    }
    // The earlier plan's unfinished step is shown for reference, the done one only as done.
    assert!(user.contains("\"id\":\"patch-css\""), "{user}");
    assert!(!user.contains("\"id\":\"read-css\""), "{user}");
}

#[test]
fn a_replan_that_reuses_a_done_id_is_refused_with_feedback() {
    let turns = vec![
        ScriptTurn::text(remaining_plan("read-css")),
        ScriptTurn::text(remaining_plan("rewrite-css")),
    ];
    let (result, client) = replan_with(turns);
    let outcome = result.unwrap();
    assert_eq!(outcome.tries, 2);
    assert_eq!(outcome.plan.steps[0].id.as_str(), "rewrite-css");
    let feedback = user_text(&client.requests()[1], 2);
    assert!(
        feedback.contains("- DUPLICATE_STEP_ID in step \"read-css\" at /steps/0/id"),
        "{feedback}"
    );
    assert!(feedback.contains("already done"), "{feedback}");
}

#[test]
fn a_replan_that_depends_on_a_step_that_is_not_done_is_refused() {
    let bad = json!({
        "goal": GOAL,
        "steps": [{"id": "retry-patch", "description": "Patch it again.",
                   "depends_on": ["patch-css"], "acceptance_criteria": ["green"]}]
    })
    .to_string();
    let (result, client) =
        replan_with(vec![ScriptTurn::text(bad), ScriptTurn::text(remaining_plan("w"))]);
    assert_eq!(result.unwrap().tries, 2);
    let feedback = user_text(&client.requests()[1], 2);
    assert!(
        feedback.contains("- UNKNOWN_DEPENDENCY in step \"retry-patch\" at /steps/0/depends_on"),
        "{feedback}"
    );
}

#[test]
fn pointers_shift_between_the_combined_and_the_returned_plan() {
    assert_eq!(shift_pointer("/steps/3/depends_on/0", 2, false), "/steps/1/depends_on/0");
    assert_eq!(shift_pointer("/steps/1/assertions/0", 2, true), "/steps/3/assertions/0");
    assert_eq!(shift_pointer("/steps/1", 2, false), "/steps/1", "below zero stays");
    assert_eq!(shift_pointer("/postconditions/0", 2, false), "/postconditions/0");
    assert_eq!(shift_pointer("", 2, false), "");
}

// ---- the workspace summary ----

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, bytes).unwrap();
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "README.md", b"hello");
    write(root, "site/style.css", &[b'x'; 120]);
    write(root, "site/img/logo.svg", b"<svg/>");
    write(root, ".git/HEAD", b"ref: refs/heads/main");
    write(root, "node_modules/left-pad/index.js", b"module.exports = 1");
    write(root, "crates/a/target/debug/a", b"bin");
    write(root, ".pev/runs/r1.json", b"{}");
    std::fs::create_dir_all(root.join("empty")).unwrap();
    dir
}

#[test]
fn the_summary_lists_files_with_sizes_and_skips_build_and_vcs_dirs() {
    let dir = fixture();
    let ws = Workspace::open(dir.path()).unwrap();
    let summary = WorkspaceSummary::scan(&ws, 200).unwrap();
    assert_eq!(
        summary.render(),
        ".git/  (not listed)\n\
         README.md  (5 bytes)\n\
         crates/a/target/  (not listed)\n\
         empty/  (empty directory)\n\
         node_modules/  (not listed)\n\
         site/img/logo.svg  (6 bytes)\n\
         site/style.css  (120 bytes)\n"
    );
    assert_eq!(summary.more, 0);
}

#[test]
fn the_summary_is_capped_with_a_count_of_what_is_not_shown() {
    let dir = fixture();
    let ws = Workspace::open(dir.path()).unwrap();
    let summary = WorkspaceSummary::scan(&ws, 2).unwrap();
    assert_eq!(summary.render(), ".git/  (not listed)\nREADME.md  (5 bytes)\n… 5 more not shown\n");
    assert_eq!((summary.more, summary.more_is_lower_bound), (5, false));
}

#[test]
fn an_empty_workspace_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::open(dir.path()).unwrap();
    let summary = WorkspaceSummary::scan(&ws, 200).unwrap();
    assert_eq!(summary, WorkspaceSummary::default());
    assert_eq!(summary.render(), "(the workspace is empty)\n");
}

#[test]
fn compact_schemas_show_fields_types_and_optional_marks() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "mode": {"enum": ["a", "b"]},
            "limit": {"type": ["integer", "null"]},
            "edits": {"type": "array", "items": {"type": "object",
                "properties": {"old": {"type": "string"}, "deep": {"type": "object",
                    "properties": {"x": {"type": "string"}}}},
                "required": ["old"]}},
            "either": {"anyOf": [{"type": "string"}, {"type": "null"}]}
        },
        "required": ["path", "edits"]
    });
    assert_eq!(
        prompt::compact_schema(&schema),
        "path: string, mode?: \"a\"|\"b\", limit?: integer, edits: [{old: string, deep?: object}], \
         either?: string"
    );
    assert_eq!(prompt::compact_schema(&json!({})), "any");
}

#[test]
fn cap_cuts_on_char_boundaries() {
    assert_eq!(prompt::cap("héllo", 2), "hé…");
    assert_eq!(prompt::cap("hé", 2), "hé");
    assert_eq!(prompt::cap("", 0), "");
}
