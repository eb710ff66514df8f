//! Hidden checks: commands the models never see, run by pev when it decides the verdict, each
//! on its own scratch copy of the final workspace with the pristine oracle and, when it has one,
//! its directory of held-out tests copied in. `success` needs every one to pass; what a failed
//! one printed goes to the result's `final_check.oracle.hidden`, never into a reason (a
//! replanning model reads reasons).

use std::collections::HashMap;
use std::sync::Arc;

use pev_protocol::Assertion;
use pev_protocol::oracle::{HiddenCheck, HiddenResult, OracleChange, OracleFile};
use pev_tools::ToolContext;

use super::pristine::Scratch;

/// The default time a hidden check may take.
const DEFAULT_TIMEOUT_S: u64 = 300;

/// A hidden check ready to run: its copy of the workspace, or why there is none.
#[derive(Debug)]
pub struct Prepared {
    check: HiddenCheck,
    copy: Result<Scratch, String>,
}

/// Makes each check's copy of the final workspace `ws`, with `undone` (the oracle changes no
/// permission covers) undone from the recorded `files` (`pristine` gives their contents) and
/// its held-out tests copied in. Synchronous, so a caller's borrowed journal is not held across
/// the checks' await.
pub fn prepare(
    checks: &[HiddenCheck],
    ws: &pev_tools::Workspace,
    (files, undone): (&[OracleFile], &[OracleChange]),
    pristine: &dyn Fn(&str) -> Option<Vec<u8>>,
) -> Vec<Prepared> {
    checks
        .iter()
        .map(|check| {
            let copy = Scratch::pristine(ws, files, undone, pristine).and_then(|scratch| {
                if let Some(dir) = &check.dir {
                    let from = std::path::Path::new(dir);
                    let at = check.at.clone().unwrap_or_else(|| {
                        from.file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default()
                    });
                    scratch.add_dir(from, &at)?;
                }
                Ok(scratch)
            });
            Prepared { check: check.clone(), copy }
        })
        .collect()
}

/// Runs the prepared checks in the run's sandbox (`ctx`'s policy and sandbox, each in its own
/// copy). A check whose copy could not be made failed, and the problem is said.
pub async fn run(
    prepared: Vec<Prepared>,
    ctx: &ToolContext,
    problems: &mut Vec<String>,
) -> Vec<HiddenResult> {
    let mut out = Vec::new();
    for (i, Prepared { check, copy }) in prepared.into_iter().enumerate() {
        // Named by its `name`, else by its place: never by its command, which a reason would
        // show to a model that could then special-case it.
        let name = check.name.clone().unwrap_or_else(|| format!("hidden check {}", i + 1));
        let scratch = match copy {
            Ok(scratch) => scratch,
            Err(why) => {
                problems.push(format!("the hidden check `{name}` could not run: {why}"));
                out.push(HiddenResult { name, passed: false, detail: why });
                continue;
            }
        };
        let copy = ToolContext {
            workspace: scratch.workspace().clone(),
            policy: ctx.policy.clone(),
            sandbox: Arc::clone(&ctx.sandbox),
        };
        let assertion = Assertion::CommandSucceeds {
            command: check.command.clone(),
            timeout_s: Some(check.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S) as f64),
            repeatable: true,
            recovery: None,
        };
        let (outputs, before) = (HashMap::new(), HashMap::new());
        let env = crate::CheckEnv { ctx: &copy, step: None, outputs: &outputs, before: &before };
        let result = crate::check(&assertion, &env).await;
        drop(scratch);
        out.push(HiddenResult { name, passed: result.passed, detail: result.detail });
    }
    out
}
