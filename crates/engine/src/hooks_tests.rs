//! Unit tests of hooks: each decision, the failure modes (non-zero exit, timeout, garbage or
//! misspelt JSON) failing closed for guards and open with a warning otherwise, several commands
//! in order, and exactly what a command reads on stdin and where it runs.

use std::sync::Arc;
use std::time::Duration;

use pev_providers::config::{HookCommand, HooksConfig, Source};
use pev_tools::{ToolContext, Workspace};
use serde_json::{Value, json};
use tempfile::TempDir;

use super::*;

struct Ws {
    dir: TempDir,
    ctx: Arc<ToolContext>,
}

impl Ws {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Arc::new(ToolContext::new(Workspace::open(dir.path()).unwrap()));
        Self { dir, ctx }
    }

    /// Hooks with `commands` for `kind`, each with the default timeout.
    fn hooks(&self, kind: HookKind, commands: &[&str]) -> Hooks {
        self.hooks_with(kind, commands, HooksConfig::DEFAULT_TIMEOUT)
    }

    fn hooks_with(&self, kind: HookKind, commands: &[&str], timeout: Duration) -> Hooks {
        let list: Vec<HookCommand> = commands
            .iter()
            .map(|c| HookCommand { command: (*c).to_owned(), timeout, source: Source::Default })
            .collect();
        let mut config = HooksConfig::default();
        match kind {
            HookKind::PreToolUse => config.pre_tool_use = list,
            HookKind::PostToolUse => config.post_tool_use = list,
            HookKind::StepFinished => config.step_finished = list,
            HookKind::Stop => config.stop = list,
        }
        Hooks::new(config, Arc::clone(&self.ctx))
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap()
    }
}

fn pre() -> HookEvent {
    HookEvent::pre_tool_use("run-1", "write", "file.write", &json!({"path": "a.txt"}))
}

fn post() -> HookEvent {
    let output = Ok(json!({"bytes": 3}));
    HookEvent::post_tool_use("run-1", "write", ("file.write", &json!({"path": "a.txt"})), &output)
}

#[tokio::test]
async fn no_command_allows_without_running_anything() {
    let ws = Ws::new();
    let hooks = Hooks::new(HooksConfig::default(), Arc::clone(&ws.ctx));
    assert!(!hooks.has(HookKind::PreToolUse));
    assert_eq!(hooks.run(&pre()).await, HookDecision::default());
    assert!(hooks.stop("run-1", "done").await.allowed());
}

#[tokio::test]
async fn empty_stdout_allows() {
    let ws = Ws::new();
    let hooks = ws.hooks(HookKind::PreToolUse, &["true"]);
    let decision = hooks.run(&pre()).await;
    assert_eq!(decision, HookDecision::default());
}

#[tokio::test]
async fn allow_with_context_and_deny_with_reason() {
    let ws = Ws::new();
    let allow = ws.hooks(
        HookKind::PostToolUse,
        &[r#"echo '{"decision": "allow", "context": "the file is generated"}'"#],
    );
    let decision = allow.run(&post()).await;
    assert!(decision.allowed());
    assert_eq!(decision.context.as_deref(), Some("the file is generated"));
    assert!(decision.failures.is_empty());

    let deny = ws.hooks(
        HookKind::PreToolUse,
        &[r#"printf '%s\n' '{"decision": "deny", "reason": "a.txt is frozen"}'"#],
    );
    let decision = deny.run(&pre()).await;
    assert_eq!(decision.decision, Decision::Deny);
    assert_eq!(decision.reason.as_deref(), Some("a.txt is frozen"));
    assert!(decision.failures.is_empty(), "a deny is a decision, not a failure");
}

#[tokio::test]
async fn a_deny_without_a_reason_says_which_hook_denied() {
    let ws = Ws::new();
    let hooks = ws.hooks(HookKind::PreToolUse, &[r#"echo '{"decision": "deny"}'"#]);
    let decision = hooks.run(&pre()).await;
    assert_eq!(decision.reason, None);
    assert_eq!(
        decision.reason_or_default(HookKind::PreToolUse),
        "the pre_tool_use hook gave no reason"
    );
}

#[tokio::test]
async fn stop_blocks_and_allows() {
    let ws = Ws::new();
    let block = ws.hooks(
        HookKind::Stop,
        &[r#"echo '{"decision": "block", "reason": "tests were not run"}'"#],
    );
    let decision = block.stop("run-1", "all done").await;
    assert_eq!(decision.decision, Decision::Block);
    assert_eq!(decision.reason.as_deref(), Some("tests were not run"));
    let allow = ws.hooks(HookKind::Stop, &[r#"echo '{"decision": "allow"}'"#]);
    assert!(allow.stop("run-1", "all done").await.allowed());
}

#[tokio::test]
async fn a_non_zero_exit_denies_a_call_and_blocks_a_stop() {
    let ws = Ws::new();
    let command = r#"echo '{"decision": "allow"}'; echo 'guard broke' >&2; exit 3"#;
    let decision = ws.hooks(HookKind::PreToolUse, &[command]).run(&pre()).await;
    assert_eq!(decision.decision, Decision::Deny);
    let reason = decision.reason.clone().unwrap();
    assert!(reason.starts_with("pre_tool_use hook `echo '{\"decision\""), "{reason}");
    assert!(reason.ends_with("failed: exited with code 3: guard broke"), "{reason}");
    assert_eq!(decision.failures, [reason]);

    let decision = ws.hooks(HookKind::Stop, &["exit 1"]).stop("run-1", "done").await;
    assert_eq!(decision.decision, Decision::Block);
    assert_eq!(decision.reason.as_deref(), Some("stop hook `exit 1` failed: exited with code 1"));
}

#[tokio::test]
async fn a_timeout_denies_and_blocks() {
    let ws = Ws::new();
    let short = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let hooks = ws.hooks_with(HookKind::PreToolUse, &["sleep 5"], short);
    let decision = hooks.run(&pre()).await;
    assert!(started.elapsed() < Duration::from_secs(4), "the hook was not cut off");
    assert_eq!(decision.decision, Decision::Deny);
    assert_eq!(
        decision.reason.as_deref(),
        Some("pre_tool_use hook `sleep 5` failed: timed out after 300 ms")
    );
    let hooks = ws.hooks_with(HookKind::Stop, &["sleep 5"], short);
    let decision = hooks.stop("run-1", "done").await;
    assert_eq!(decision.decision, Decision::Block);
    assert_eq!(
        decision.reason.as_deref(),
        Some("stop hook `sleep 5` failed: timed out after 300 ms")
    );
}

#[tokio::test]
async fn garbage_and_misspelt_answers_fail_closed() {
    let ws = Ws::new();
    let cases = [
        ("echo 'not json'", "answered `not json`, which is not"),
        (r#"echo '{"decision": "maybe"}'"#, "unknown variant `maybe`"),
        // A typo must not turn a deny into an allow.
        (r#"echo '{"decison": "deny"}'"#, "unknown field `decison`"),
        (r#"echo '["deny"]'"#, "it is not a JSON object"),
        (r#"echo '{"decision": "deny"} trailing'"#, "trailing characters"),
    ];
    for (command, want) in cases {
        let decision = ws.hooks(HookKind::PreToolUse, &[command]).run(&pre()).await;
        assert_eq!(decision.decision, Decision::Deny, "{command}");
        let reason = decision.reason.unwrap();
        assert!(reason.starts_with("pre_tool_use hook `"), "{command}: {reason}");
        assert!(reason.contains(want), "{command}: {reason}");
        let decision = ws.hooks(HookKind::Stop, &[command]).stop("run-1", "x").await;
        assert_eq!(decision.decision, Decision::Block, "{command}");
    }
}

#[tokio::test]
async fn a_failing_post_or_step_finished_hook_only_warns() {
    let ws = Ws::new();
    let commands = ["exit 4", r#"echo '{"decision": "allow", "context": "second ran"}'"#];
    let decision = ws.hooks(HookKind::PostToolUse, &commands).run(&post()).await;
    assert!(decision.allowed());
    assert_eq!(decision.reason, None);
    assert_eq!(decision.failures, ["post_tool_use hook `exit 4` failed: exited with code 4"]);
    // The failure did not stop the next command.
    assert_eq!(decision.context.as_deref(), Some("second ran"));

    let event = HookEvent::step_finished("run-1", "s", None, ("done", None));
    let decision = ws.hooks(HookKind::StepFinished, &["echo '{'"]).run(&event).await;
    assert!(decision.allowed());
    assert_eq!(decision.failures.len(), 1);
    assert!(decision.failures[0].starts_with("step_finished hook `echo '{'` failed: answered"));
}

#[tokio::test]
async fn commands_run_in_order_until_one_refuses() {
    let ws = Ws::new();
    let commands = [
        r#"echo one >> order.txt; echo '{"context": "first"}'"#,
        r#"echo two >> order.txt; echo '{"decision": "deny", "reason": "second says no", "context": "second"}'"#,
        "echo three >> order.txt",
    ];
    let decision = ws.hooks(HookKind::PreToolUse, &commands).run(&pre()).await;
    assert_eq!(decision.decision, Decision::Deny);
    assert_eq!(decision.reason.as_deref(), Some("second says no"));
    assert_eq!(decision.context.as_deref(), Some("first\n\nsecond"));
    assert_eq!(ws.read("order.txt"), "one\ntwo\n");
}

#[tokio::test]
async fn a_command_reads_the_event_on_stdin_in_the_workspace() {
    let ws = Ws::new();
    let command = "cat > event.json; printf '%s' \"$PEV_HOOK\" > kind.txt; pwd > pwd.txt";

    ws.hooks(HookKind::PreToolUse, &[command]).run(&pre()).await;
    let event: Value = serde_json::from_str(&ws.read("event.json")).unwrap();
    assert_eq!(
        event,
        json!({"hook": "pre_tool_use", "run_id": "run-1", "step": "write", "tool": "file.write",
               "arguments": {"path": "a.txt"}})
    );
    assert_eq!(ws.read("kind.txt"), "pre_tool_use");
    let pwd = std::fs::canonicalize(ws.read("pwd.txt").trim()).unwrap();
    assert_eq!(pwd, std::fs::canonicalize(ws.dir.path()).unwrap());

    let failed = Err("no such file".to_owned());
    let event =
        HookEvent::post_tool_use("run-1", "r", ("file.read", &json!({"path": "x"})), &failed);
    ws.hooks(HookKind::PostToolUse, &[command]).run(&event).await;
    let seen: Value = serde_json::from_str(&ws.read("event.json")).unwrap();
    assert_eq!(
        seen,
        json!({"hook": "post_tool_use", "run_id": "run-1", "step": "r", "tool": "file.read",
               "arguments": {"path": "x"}, "output": null, "error": "no such file"})
    );
    assert_eq!(ws.read("kind.txt"), "post_tool_use");

    ws.hooks(HookKind::PostToolUse, &[command]).run(&post()).await;
    let seen: Value = serde_json::from_str(&ws.read("event.json")).unwrap();
    assert_eq!(seen["output"], json!({"bytes": 3}));
    assert!(seen.get("error").is_none(), "{seen}");

    let event = HookEvent::step_finished("run-1", "think", None, ("failed", Some("it broke")));
    ws.hooks(HookKind::StepFinished, &[command]).run(&event).await;
    let seen: Value = serde_json::from_str(&ws.read("event.json")).unwrap();
    assert_eq!(
        seen,
        json!({"hook": "step_finished", "run_id": "run-1", "step": "think", "tool": null,
               "arguments": null, "error": "it broke", "status": "failed"})
    );

    ws.hooks(HookKind::Stop, &[command]).stop("run-1", "I fixed the bug.").await;
    let seen: Value = serde_json::from_str(&ws.read("event.json")).unwrap();
    assert_eq!(
        seen,
        json!({"hook": "stop", "run_id": "run-1", "step": null, "tool": null, "arguments": null,
               "final_answer": "I fixed the bug."})
    );
    assert_eq!(ws.read("kind.txt"), "stop");
}

#[tokio::test]
async fn a_command_line_is_passed_whole_and_the_event_file_is_removed_after() {
    let ws = Ws::new();
    // Quotes, `$1` and a pipe in the command line reach the shell as written.
    let command = r#"readlink /proc/$$/fd/0 > stdin.txt; set -- 'one arg'; tr -d '\n' | wc -c > count.txt; echo "$1" > arg.txt"#;
    let decision = ws.hooks(HookKind::PreToolUse, &[command]).run(&pre()).await;
    assert!(decision.allowed(), "{decision:?}");
    assert_eq!(ws.read("arg.txt"), "one arg\n");
    let sent = serde_json::to_vec(&pre()).unwrap().len();
    assert_eq!(ws.read("count.txt").trim(), sent.to_string());
    // The event came from a private file outside the workspace, which is gone now.
    let stdin = std::path::PathBuf::from(ws.read("stdin.txt").trim());
    assert!(stdin.starts_with(std::env::temp_dir()), "{}", stdin.display());
    assert!(!stdin.starts_with(ws.dir.path()));
    assert!(!stdin.exists(), "{} is left behind", stdin.display());
}

#[test]
fn quote_keeps_one_line_and_cuts_long_text() {
    assert_eq!(quote("a\n  b\tc"), "a b c");
    let long = "é".repeat(400);
    let cut = quote(&long);
    assert_eq!(cut.chars().count(), QUOTE_CHARS + 1);
    assert!(cut.ends_with('…'));
}
