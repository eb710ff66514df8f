//! Hooks: commands from `pev.toml`'s `[hooks]` that pev runs at four points of a run, so a
//! project can guard, annotate or veto what an agent does without changing pev.
//!
//! - `pre_tool_use`: right before each tool call, a tool step's or an executor's through the
//!   gate (after approval). A refusal means the call is not made: a tool step fails with `hook
//!   denied: <reason>`; an executor's model gets that as an error result and may go on.
//! - `post_tool_use`: right after each call. Its context becomes a tool step's evidence, or is
//!   added to the output the executor's model sees (`hook_context`). A refusal cannot undo the
//!   call, but the call counts as failed: the tool step's attempt fails, the model gets an error.
//! - `step_finished`: when a step that ran settles (done, failed; not a step waiting for
//!   approval, stopped by the budget or skipped without running). Its context becomes evidence;
//!   a refusal is evidence and a warning.
//! - `stop`: the agent's final answer, for the loop driver ([`Hooks::stop`]); a refusal blocks it.
//!
//! A step reused from the cache, or a call settled after a crash, makes no new call: no tool hook
//! runs for it.
//!
//! Each command runs with `sh -c` in the workspace, with the environment `shell.exec` gets (the
//! fixed allow-list and the policy's names, `HOME` = the workspace, and `PEV_HOOK` = the hook's
//! name) and its file's timeout (5 s by default). It reads the event as one JSON object on
//! stdin ([`HookEvent`]) and answers on stdout with `{"decision": "allow"|"deny"|"block",
//! "reason"?: str, "context"?: str}`; an empty stdout is "allow". Unknown keys are an error, so
//! a typo such as `"decison": "deny"` cannot quietly allow.
//!
//! Several commands of one hook run in order; the first that does not allow decides and the rest
//! do not run; the contexts of those that ran add up.
//!
//! Hooks fail closed where they guard: a command that cannot start, exits non-zero, times out or
//! answers something that is not the JSON above denies a `pre_tool_use` and blocks a `stop`, with
//! a reason naming the command and what went wrong. For `post_tool_use` and `step_finished`,
//! which guard nothing that has not happened already, a failure is a warning. In a run every
//! failure is journaled as a `warning` event and every denial as evidence of the step (`stop`'s
//! are the loop driver's to journal).
//!
//! The event reaches the command's stdin through a private temporary file: `run_command` gives
//! its processes no stdin, and an environment variable could not carry a large write's content.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pev_providers::config::{HookCommand, HooksConfig, Source};
use pev_tools::{CommandSpec, Program, ToolContext, run_command};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where in a run a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    PreToolUse,
    PostToolUse,
    StepFinished,
    Stop,
}

impl HookKind {
    /// The name used in `pev.toml`, in the event and in `PEV_HOOK`.
    pub fn name(self) -> &'static str {
        match self {
            Self::PreToolUse => "pre_tool_use",
            Self::PostToolUse => "post_tool_use",
            Self::StepFinished => "step_finished",
            Self::Stop => "stop",
        }
    }

    /// A hook that guards: when it fails, what it guards does not happen.
    fn fails_closed(self) -> bool {
        matches!(self, Self::PreToolUse | Self::Stop)
    }
}

impl fmt::Display for HookKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a hook command reads on stdin. `step`, `tool` and `arguments` are always present (`null`
/// where they do not apply); the rest only for the hooks they belong to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookEvent {
    pub hook: HookKind,
    pub run_id: String,
    pub step: Option<String>,
    pub tool: Option<String>,
    pub arguments: Option<Value>,
    /// `post_tool_use`: the call's output (`null` when it failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// `post_tool_use`: the call's error; `step_finished`: the step's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// `step_finished`: the step's status (`done`, `failed`, `skipped`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `stop`: the answer the agent wants to end with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_answer: Option<String>,
}

impl HookEvent {
    fn new(hook: HookKind, run_id: &str) -> Self {
        Self {
            hook,
            run_id: run_id.to_owned(),
            step: None,
            tool: None,
            arguments: None,
            output: None,
            error: None,
            status: None,
            final_answer: None,
        }
    }

    /// Before `tool` is called with `arguments` for `step`.
    pub fn pre_tool_use(run_id: &str, step: &str, tool: &str, arguments: &Value) -> Self {
        Self {
            step: Some(step.to_owned()),
            tool: Some(tool.to_owned()),
            arguments: Some(arguments.clone()),
            ..Self::new(HookKind::PreToolUse, run_id)
        }
    }

    /// After the call: its output, or its error (then `output` is `null`).
    pub fn post_tool_use(
        run_id: &str,
        step: &str,
        (tool, arguments): (&str, &Value),
        result: &Result<Value, String>,
    ) -> Self {
        Self {
            step: Some(step.to_owned()),
            tool: Some(tool.to_owned()),
            arguments: Some(arguments.clone()),
            output: Some(result.as_ref().ok().cloned().unwrap_or(Value::Null)),
            error: result.as_ref().err().cloned(),
            ..Self::new(HookKind::PostToolUse, run_id)
        }
    }

    /// A step reached `status` (`tool` is `None` for an instruction step).
    pub fn step_finished(
        run_id: &str,
        step: &str,
        tool: Option<&str>,
        (status, error): (&str, Option<&str>),
    ) -> Self {
        Self {
            step: Some(step.to_owned()),
            tool: tool.map(str::to_owned),
            status: Some(status.to_owned()),
            error: error.map(str::to_owned),
            ..Self::new(HookKind::StepFinished, run_id)
        }
    }

    /// The agent wants to stop with `final_answer`.
    pub fn stop(run_id: &str, final_answer: &str) -> Self {
        Self { final_answer: Some(final_answer.to_owned()), ..Self::new(HookKind::Stop, run_id) }
    }
}

/// A hook's verdict. `deny` and `block` both refuse; the words differ only for readability
/// (`deny` a call, `block` a stop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    #[default]
    Allow,
    Deny,
    Block,
}

/// What the hooks of one event decided, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookDecision {
    pub decision: Decision,
    /// Why, when not allowed: the hook's own reason, or which command failed and how.
    pub reason: Option<String>,
    /// What the commands added (each command's context, in order, a blank line between).
    pub context: Option<String>,
    /// Each command that failed: `<hook> hook `<command>` failed: <why>`. For `pre_tool_use` and
    /// `stop` the first failure is also the decision; for the others these are only warnings.
    pub failures: Vec<String>,
}

impl HookDecision {
    pub fn allowed(&self) -> bool {
        self.decision == Decision::Allow
    }

    /// The reason to show for a refusal (a refusal without one says which hook refused).
    pub fn reason_or_default(&self, kind: HookKind) -> String {
        self.reason.clone().unwrap_or_else(|| format!("the {kind} hook gave no reason"))
    }
}

/// A command's answer as written on stdout.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    #[serde(default)]
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    context: Option<String>,
}

/// The configured hooks of a run and the context their commands run in.
#[derive(Debug)]
pub struct Hooks {
    config: HooksConfig,
    /// The run's context: the workspace's hooks run confined by its sandbox.
    ctx: Arc<ToolContext>,
    /// The same without the sandbox, for the user's own hooks.
    unconfined: Arc<ToolContext>,
}

/// How much of a failing command's stderr or stdout a failure message quotes.
const QUOTE_CHARS: usize = 300;

impl Hooks {
    /// Hooks from `pev.toml` ([`pev_providers::config::Config::hooks`]), run in `ctx`'s workspace
    /// under its policy.
    pub fn new(config: HooksConfig, ctx: Arc<ToolContext>) -> Self {
        let unconfined = Arc::new(ToolContext {
            sandbox: Arc::new(pev_tools::Sandbox::off()),
            ..(*ctx).clone()
        });
        Self { config, ctx, unconfined }
    }

    /// Whether any command is configured for `kind`.
    pub fn has(&self, kind: HookKind) -> bool {
        !self.commands(kind).is_empty()
    }

    fn commands(&self, kind: HookKind) -> &[HookCommand] {
        match kind {
            HookKind::PreToolUse => &self.config.pre_tool_use,
            HookKind::PostToolUse => &self.config.post_tool_use,
            HookKind::StepFinished => &self.config.step_finished,
            HookKind::Stop => &self.config.stop,
        }
    }

    /// Runs the commands of `event.hook` in order (see the module comment for what decides).
    pub async fn run(&self, event: &HookEvent) -> HookDecision {
        let kind = event.hook;
        let mut out = HookDecision::default();
        let commands = self.commands(kind);
        if commands.is_empty() {
            return out;
        }
        let input = match serde_json::to_vec(event) {
            Ok(input) => input,
            Err(e) => {
                // Cannot happen for these types; still, a guard that cannot ask refuses.
                let message = format!("the {kind} event cannot be written as JSON: {e}");
                if kind.fails_closed() {
                    return failed(out, kind, message);
                }
                out.failures.push(message);
                return out;
            }
        };
        let mut contexts = Vec::new();
        for command in commands {
            match self.run_one(kind, command, &input).await {
                Ok(answer) => {
                    if let Some(context) = answer.context.filter(|c| !c.trim().is_empty()) {
                        contexts.push(context);
                    }
                    if answer.decision != Decision::Allow {
                        out.decision = answer.decision;
                        out.reason = answer.reason.filter(|r| !r.trim().is_empty());
                        break;
                    }
                }
                Err(why) => {
                    let message =
                        format!("{kind} hook `{}` failed: {why}", quote(&command.command));
                    if kind.fails_closed() {
                        out = failed(out, kind, message);
                        break;
                    }
                    out.failures.push(message);
                }
            }
        }
        if !contexts.is_empty() {
            out.context = Some(contexts.join("\n\n"));
        }
        out
    }

    /// The `stop` hooks on the agent's final answer: anything but an explicit allow from every
    /// command (a failure, a timeout, garbage) blocks.
    pub async fn stop(&self, run_id: &str, final_answer: &str) -> HookDecision {
        self.run(&HookEvent::stop(run_id, final_answer)).await
    }

    /// One command: the event on stdin, its answer from stdout.
    async fn run_one(
        &self,
        kind: HookKind,
        command: &HookCommand,
        input: &[u8],
    ) -> Result<Answer, String> {
        // A hook from the user's own pev.toml is the user's command and runs outside the
        // sandbox (often a script under ~/.config, which the sandbox hides); one from the
        // workspace's file came with the code, or was written by a command of an earlier run,
        // and runs confined like any command.
        let ctx = match command.source {
            Source::User(_) | Source::Env(_) | Source::Default => &self.unconfined,
            Source::Workspace(_) => &self.ctx,
        };
        let dir = ctx.sandbox.tmp().map_or_else(std::env::temp_dir, std::path::Path::to_path_buf);
        let file =
            EventFile::write(&dir, input).map_err(|e| format!("cannot pass it the event: {e}"))?;
        // `sh -c 'exec sh -c "$1" <"$2"' pev-hook CMD FILE`: the command line is passed as an
        // argument, so no quoting of it is needed.
        let program = Program::Argv(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "exec /bin/sh -c \"$1\" <\"$2\"".to_owned(),
            "pev-hook".to_owned(),
            command.command.clone(),
            file.path.display().to_string(),
        ]);
        let env = BTreeMap::from([("PEV_HOOK".to_owned(), kind.name().to_owned())]);
        let spec = CommandSpec { program, timeout: command.timeout, env };
        let output = run_command(ctx, &spec).await.map_err(|e| e.to_string())?;
        drop(file);
        if output.timed_out {
            return Err(format!("timed out after {} ms", command.timeout.as_millis()));
        }
        if !output.succeeded() {
            let how = match (output.exit_code, output.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "ended abnormally".to_owned(),
            };
            let stderr = output.stderr.trim();
            return Err(if stderr.is_empty() { how } else { format!("{how}: {}", quote(stderr)) });
        }
        let stdout = output.stdout.trim();
        if stdout.is_empty() {
            return Ok(Answer::default());
        }
        // An object only: serde would also read a struct from an array (`["deny"]`).
        let answer = match serde_json::from_str::<Value>(stdout) {
            Ok(value @ Value::Object(_)) => {
                serde_json::from_value(value).map_err(|e| e.to_string())
            }
            Ok(_) => Err("it is not a JSON object".to_owned()),
            Err(e) => Err(e.to_string()),
        };
        answer.map_err(|e| {
            format!(
                "answered `{}`, which is not {{\"decision\": \"allow\"|\"deny\"|\"block\", \
                 \"reason\"?, \"context\"?}}: {e}",
                quote(stdout)
            )
        })
    }
}

/// `out` refused because of `message` (a failure of a guarding hook).
fn failed(mut out: HookDecision, kind: HookKind, message: String) -> HookDecision {
    out.decision = if kind == HookKind::Stop { Decision::Block } else { Decision::Deny };
    out.reason = Some(message.clone());
    out.failures.push(message);
    out
}

/// `text` on one line, cut to [`QUOTE_CHARS`] characters.
fn quote(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= QUOTE_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(QUOTE_CHARS).collect();
    cut.push('…');
    cut
}

/// The event in a file only this user can read, removed when dropped.
struct EventFile {
    path: PathBuf,
}

impl EventFile {
    fn write(dir: &std::path::Path, content: &[u8]) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let mut tries = 0;
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("pev-hook-{}-{n}.json", std::process::id());
            let path = dir.join(name);
            // A file left by an earlier process with the same id is skipped, never reused.
            let opened =
                std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
            match opened {
                Ok(mut file) => {
                    let guard = Self { path };
                    file.write_all(content)?;
                    return Ok(guard);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 16 => {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for EventFile {
    fn drop(&mut self) {
        // Gone already is fine; a leftover file in the temp dir is harmless.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
