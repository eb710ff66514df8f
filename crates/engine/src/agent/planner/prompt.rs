//! The planner's prompts: the system prompt (the plan format of CONTRACTS.md §1, the assertion
//! types of §2, the tool catalog, the policy's limits), the first request (goal and workspace),
//! the replan request (what is done, what failed and why), and the feedback a rejected plan gets.
//!
//! The format is written out compactly here rather than left to the JSON Schema alone, because a
//! schema says what is *valid*, not what is *verifiable*: the prompt is where the planner learns
//! that the harness believes assertions, not claims, and that a step which changes something
//! needs evidence the harness can check.

use std::fmt::Write as _;

use pev_lint::CompiledPolicy;
use pev_protocol::{Finding, Plan};
use pev_tools::ToolDefinition;
use serde_json::Value;

use super::history::{DoneStep, Failure};
use super::workspace::WorkspaceSummary;

/// How much of one tool's description the catalog shows.
const MAX_TOOL_DESCRIPTION: usize = 400;
/// How much of one tool's compact input schema the catalog shows.
const MAX_TOOL_SIGNATURE: usize = 600;
/// How much of a done step's output summary a replan shows.
const MAX_DONE_OUTPUT: usize = 1_000;
/// How much of each piece of evidence of a failure a replan shows.
const MAX_EVIDENCE_ITEM: usize = 2_000;
/// How many pieces of evidence a replan shows.
const MAX_EVIDENCE_ITEMS: usize = 12;
/// How much of the failure's error a replan shows.
const MAX_ERROR: usize = 2_000;
/// How much of the previous plan's remaining steps a replan shows.
const MAX_PREVIOUS: usize = 8_000;

/// The assertion types of CONTRACTS.md §2: name, fields, and when it passes.
const ASSERTIONS: &[(&str, &str, &str)] = &[
    ("file_exists", "path", "the file exists"),
    ("file_not_exists", "path", "it does not"),
    (
        "file_contains",
        "path, pattern, regex?",
        "the content contains the text (or matches the regex)",
    ),
    ("file_not_contains", "path, pattern, regex?", "it does not"),
    ("file_size_gt", "path, bytes", "the size in bytes is greater than `bytes`"),
    ("content_changed", "path", "the file's sha256 after the step differs from before it"),
    (
        "output_contains",
        "pattern, regex?, step?",
        "the output of `step` (default: this step) contains the text or matches the regex",
    ),
    (
        "exit_code_eq",
        "code, step?",
        "the process exit code of `step` (default: this step) equals `code`",
    ),
    (
        "command_succeeds",
        "command, timeout_s?",
        "the command, run in the workspace sandbox, exits 0",
    ),
    ("socket_open", "host, port", "a TCP connection succeeds"),
    ("http_status", "url, status?", "the HTTP response status equals `status` (default 200)"),
];

/// The system prompt: the planner's role, the plan format, assertions, tools, policy, rules.
pub(super) fn system_prompt(tools: &[ToolDefinition], policy: &CompiledPolicy) -> String {
    let mut out = String::with_capacity(8 * 1024);
    out.push_str(
        "You are the planner of pev, a harness that runs a plan step by step and verifies every \
         step itself. Write a plan that achieves the person's goal in the workspace described \
         in the request. Nothing anyone claims is believed: each step is checked by the harness \
         against its assertions, and by a skeptical reviewer against its acceptance criteria. \
         A plan that only looks at things and changes nothing cannot succeed when the goal asks \
         for a change.\n\n",
    );
    out.push_str(FORMAT);
    out.push_str("\n## Assertions (checked by the harness)\n\n");
    out.push_str(
        "An assertion is an object with \"type\" and the fields below (`?` = optional). Every \
         type also takes an optional \"recovery\": a hint shown to whoever retries when it \
         fails. Paths are relative to the workspace root and may not leave it.\n",
    );
    for (name, fields, passes) in ASSERTIONS {
        let _ = writeln!(out, "- {name} ({fields}): passes when {passes}");
    }
    out.push_str(
        "\nPrefer assertions to acceptance criteria wherever a result can be checked \
         mechanically: a failing assertion is conclusive, a criterion is only judged. Give every \
         step that changes a file a `content_changed` on it plus a `file_contains` (or \
         `file_not_contains`) for the content it must (or must no longer) have; give every \
         command an `exit_code_eq` or `output_contains`.\n",
    );
    out.push_str("\n## Tools\n\n");
    if tools.is_empty() {
        out.push_str("(no tools are available)\n");
    }
    for tool in tools {
        let _ = writeln!(
            out,
            "- {}({}): {}",
            tool.name,
            cap(&compact_schema(&tool.parameters), MAX_TOOL_SIGNATURE),
            cap(tool.description.trim(), MAX_TOOL_DESCRIPTION),
        );
    }
    out.push_str("\n## Policy\n\n");
    let _ = writeln!(out, "- At most {} steps.", policy.policy.max_steps);
    let list = |names: &[String]| names.join(", ");
    if !policy.policy.allow_tools.is_empty() {
        let _ =
            writeln!(out, "- Only these tools are allowed: {}.", list(&policy.policy.allow_tools));
    }
    if !policy.policy.deny_tools.is_empty() {
        let _ = writeln!(out, "- Never use: {}.", list(&policy.policy.deny_tools));
    }
    if !policy.policy.approve_tools.is_empty() {
        let _ = writeln!(
            out,
            "- Steps using these tools wait for a person's approval: {}.",
            list(&policy.policy.approve_tools)
        );
    }
    out.push_str(RULES);
    out
}

/// The plan format of CONTRACTS.md §1, compactly.
const FORMAT: &str = "## Plan format (JSON)\n\n\
{\"goal\": string, \"steps\": [step, …], \"postconditions\": [postcondition, …], \
\"context\"?: object, \"rollback_strategy\"?: string}\n\n\
A step is an object:\n\
- \"id\" (required): unique within the plan, matching [A-Za-z0-9_.-]+ (letters, digits, `_`, \
`.` and `-` only; for example \"patch-css\").\n\
- \"title\": a short name.\n\
- A step is EITHER a direct tool call: \"tool\" (a name from the tool list below) with \
\"parameters\" (the tool's arguments, exactly as its input schema says); the harness calls the \
tool itself, without a model.\n\
- OR an instruction: no \"tool\"; \"description\" says what to do, and an executor model carries \
it out with the tools below. It sees only this step and the outputs of the steps it depends on, \
so say everything it needs: which files, what change, what must be true afterwards.\n\
- OR a delegation, for a large self-contained part: no \"tool\"; \"delegate\": {\"goal\": string, \
\"scope\"?: the directory it may change, \"mode\"?: \"pev\" or \"loop\", \"budget\"?: {\"max_usd\", \
\"max_tokens\", \"max_turns\"}}. A sub-agent plans and carries it out as a run of its own; the \
step is done only if that run ends success and the step's assertions pass. Delegated steps that \
may run at the same time need scopes that do not overlap.\n\
- \"depends_on\": ids of the steps that must finish first. Steps with no dependency between them \
may run in parallel.\n\
- \"acceptance_criteria\": measurable statements a reviewer can check against the files \
(\"site/style.css sets the body background to #006400\"), never wishes (\"looks good\").\n\
- \"assertions\": evidence the harness checks itself (see below).\n\
- Optional: \"on_fail\" (\"abort\" default, \"continue\", \"retry\", \"replan\"), \
\"max_attempts\", \"requires_approval\", \"complexity\" (\"low\", \"medium\", \"high\"), \
\"expected_outputs\" (paths).\n\n\
References: a string in \"parameters\" may contain `${step_id.result.a.b}`, replaced by that \
field of an earlier step's output; a string that is exactly one reference takes the value with \
its JSON type. Only refer to steps that are in depends_on (directly or through their own \
dependencies), and never to a missing field.\n\n\
A postcondition is what must hold when the whole plan is done: {\"description\": string, \
\"assertions\": [assertion, …]}. Give each postcondition assertions wherever possible; a bare \
description can only be judged.\n";

/// What every plan must respect.
const RULES: &str = "\n## Rules\n\n\
- Use only the tools listed above, with the arguments their schemas name.\n\
- Keep the plan as small as the goal allows; do not add steps that only re-read files to \
\"verify\": the harness verifies.\n\
- Every step that writes a file or runs a command needs assertions that prove its effect.\n\
- depends_on must name steps of this plan, without cycles.\n";

/// The first request: the goal and the workspace.
pub(super) fn plan_message(goal: &str, workspace: &WorkspaceSummary) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "Goal: {goal}\n\nWorkspace files (path  (size)):\n{}\nWrite the plan.",
        workspace.render()
    );
    out
}

/// The replan request: the goal, the workspace now, the done steps, the failure, and what the
/// previous plan still had to do.
pub(super) fn replan_message(
    goal: &str,
    workspace: &WorkspaceSummary,
    done: &[DoneStep],
    failure: &Failure,
    previous: &Plan,
) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "Goal: {goal}\n\nWorkspace files now (path  (size)):\n{}\n",
        workspace.render()
    );
    out.push_str(
        "This is a REPLAN: part of an earlier plan ran, and one step could not be made to pass.\n\n\
         Steps already done (they are kept and will not run again; their ids are taken, so do \
         not reuse them, but your steps may list them in depends_on and refer to their \
         results):\n",
    );
    if done.is_empty() {
        out.push_str("(none)\n");
    }
    for step in done {
        let _ = writeln!(
            out,
            "- {} \"{}\": output: {}",
            step.id,
            step.title,
            cap(step.output_summary.trim(), MAX_DONE_OUTPUT)
        );
    }
    let _ = writeln!(
        out,
        "\nThe step that failed: {} (after {} attempt{}).\nError: {}",
        failure.step,
        failure.attempts,
        if failure.attempts == 1 { "" } else { "s" },
        cap(failure.error.trim(), MAX_ERROR)
    );
    if !failure.evidence.is_empty() {
        out.push_str("Evidence the harness gathered:\n");
        for item in failure.evidence.iter().take(MAX_EVIDENCE_ITEMS) {
            let _ = writeln!(out, "- {}", cap(item.trim(), MAX_EVIDENCE_ITEM));
        }
        let hidden = failure.evidence.len().saturating_sub(MAX_EVIDENCE_ITEMS);
        if hidden > 0 {
            let _ = writeln!(out, "- … and {hidden} more");
        }
    }
    let remaining: Vec<Value> = previous
        .steps
        .iter()
        .filter(|s| !done.iter().any(|d| d.id == s.id))
        .filter_map(|s| serde_json::to_value(s).ok())
        .collect();
    if !remaining.is_empty() {
        let text = serde_json::to_string(&remaining).unwrap_or_default();
        let _ = writeln!(
            out,
            "\nThe earlier plan's steps that are not done (for reference; do not repeat what \
             failed):\n{}",
            cap(&text, MAX_PREVIOUS)
        );
    }
    out.push_str(
        "\nWrite a plan of the REMAINING steps only: what is still needed to reach the goal, \
         starting from the workspace as it is now. Take a different approach where the failed \
         step's evidence shows the old one cannot work. Its \"goal\" is the same goal.",
    );
    out
}

/// The feedback a rejected plan gets: each finding's code, step, message and fix.
pub(super) fn feedback_message(findings: &[Finding], note: Option<&str>) -> String {
    let mut out = String::from("The plan was rejected by the linter. Fix these problems:\n");
    for finding in findings {
        let _ = write!(out, "- {}", finding.code);
        if let Some(id) = &finding.step_id {
            let _ = write!(out, " in step \"{id}\"");
        }
        if !finding.path.is_empty() {
            let _ = write!(out, " at {}", finding.path);
        }
        let _ = writeln!(out, ": {} Fix: {}", finding.msg.trim(), finding.code.fix());
    }
    if let Some(note) = note {
        let _ = writeln!(out, "{note}");
    }
    out.push_str("\nAnswer with the whole corrected plan as JSON.");
    out
}

/// A tool's input schema as a short signature: `path: string, offset?: integer`.
pub(super) fn compact_schema(schema: &Value) -> String {
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => fields(schema, properties, 0),
        None => type_of(schema, 0),
    }
}

/// The properties of an object schema, required first-class and optional marked with `?`.
fn fields(schema: &Value, properties: &serde_json::Map<String, Value>, depth: u8) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parts: Vec<String> = properties
        .iter()
        .map(|(name, sub)| {
            let mark = if required.contains(&name.as_str()) { "" } else { "?" };
            format!("{name}{mark}: {}", type_of(sub, depth.saturating_add(1)))
        })
        .collect();
    parts.join(", ")
}

/// A sub-schema's type in a word or two; nested objects are shown one level deep.
fn type_of(schema: &Value, depth: u8) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let types: Vec<String> = options
                .iter()
                .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                .map(|o| type_of(o, depth))
                .collect();
            return if types.is_empty() { "null".to_owned() } else { types.join("|") };
        }
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().unwrap_or(reference).to_owned();
    }
    let kinds: Vec<&str> = match schema.get("type") {
        Some(Value::String(kind)) => vec![kind.as_str()],
        Some(Value::Array(kinds)) => {
            kinds.iter().filter_map(Value::as_str).filter(|k| *k != "null").collect()
        }
        _ => Vec::new(),
    };
    let rendered: Vec<String> = kinds
        .iter()
        .map(|kind| match *kind {
            "array" => match schema.get("items") {
                Some(items) => format!("[{}]", type_of(items, depth)),
                None => "array".to_owned(),
            },
            "object" => match schema.get("properties").and_then(Value::as_object) {
                Some(properties) if depth < 2 => {
                    format!("{{{}}}", fields(schema, properties, depth))
                }
                _ => "object".to_owned(),
            },
            other => other.to_owned(),
        })
        .collect();
    if rendered.is_empty() { "any".to_owned() } else { rendered.join("|") }
}

/// At most `max` characters of `text`, with `…` when cut (char-boundary safe).
pub(super) fn cap(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", text.get(..cut).unwrap_or(text)),
        None => text.to_owned(),
    }
}
