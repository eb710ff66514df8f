//! Where a run's policy comes from, how far it is trusted, and how it travels with the run.
//!
//! A `--policy` file outside the workspace is the user's and applies as written. One inside the
//! workspace could have been written by a command of an earlier run, so it may only narrow the
//! default policy (`pev_lint::narrow`): what it would widen is ignored, and the run says so and
//! from which file. The policy a run starts with (its document and Rego sources, after that
//! narrowing) is journaled in the run's options, so that every child run and every resume is
//! linted and confined by the same policy, never by the default one. A resume reads it back;
//! when the journal cannot vouch for the options (no keyed chain), the stored policy is itself
//! narrowed, as a workspace file would be.

use std::io::Write;
use std::path::{Path, PathBuf};

use pev_lint::CompiledPolicy;
use pev_lint::policy::RegoSource;
use pev_protocol::Policy;
use pev_protocol::policy::SandboxMode;
use serde_json::{Value, json};

use crate::shared::exit::{EXIT_BAD_INPUT, Fail};

/// The policy of a new run: `path` (or the default), narrowed when it lies inside `workspace`.
/// `floor` is the sandbox mode of the user's own `pev.toml` (a workspace policy cannot go below
/// it). What was ignored is said on `err`.
pub(crate) fn load(
    path: Option<&Path>,
    workspace: &Path,
    floor: Option<SandboxMode>,
    err: &mut dyn Write,
) -> Result<CompiledPolicy, Fail> {
    let Some(path) = path else { return Ok(CompiledPolicy::default()) };
    let policy = CompiledPolicy::load(path).map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    for note in &policy.notes {
        let _ = writeln!(err, "pev: note: {note}");
    }
    if !inside(path, workspace) {
        return Ok(policy);
    }
    let (policy, ignored) = narrowed(policy, floor)?;
    if !ignored.is_empty() {
        let _ = writeln!(
            err,
            "pev: note: {} is inside the workspace, where a command could have written it, so it \
             can only tighten the policy; ignored: {}. To allow these, pass a policy file from \
             outside the workspace.",
            path.display(),
            ignored.join("; ")
        );
    }
    Ok(policy)
}

/// `policy` without what would widen the default one, recompiled; and what was dropped.
fn narrowed(
    policy: CompiledPolicy,
    floor: Option<SandboxMode>,
) -> Result<(CompiledPolicy, Vec<String>), Fail> {
    let (document, ignored) =
        pev_lint::narrow::narrow(policy.policy.clone(), floor.unwrap_or(SandboxMode::Auto));
    if ignored.is_empty() {
        return Ok((policy, ignored));
    }
    let compiled = CompiledPolicy::from_parts(document, &source_path(&policy), policy.rego)
        .map_err(|e| Fail(EXIT_BAD_INPUT, e.to_string()))?;
    Ok((compiled, ignored))
}

/// `path` lies in `workspace`, as written or resolved: a symlink inside the workspace (which a
/// command could have planted) counts as inside wherever it points, and so does a link from
/// outside into it.
fn inside(path: &Path, workspace: &Path) -> bool {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let lexical = |p: &Path| -> PathBuf {
        let mut out = PathBuf::new();
        for part in absolute(p).components() {
            match part {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let resolved = |p: &Path| p.canonicalize().unwrap_or_else(|_| lexical(p));
    let roots = [lexical(workspace), resolved(workspace)];
    let (written, real) = (lexical(path), resolved(path));
    roots.iter().any(|root| written.starts_with(root) || real.starts_with(root))
}

/// The file a compiled policy was read from, as its messages name it.
fn source_path(policy: &CompiledPolicy) -> PathBuf {
    policy.rego.first().map_or_else(|| PathBuf::from("<policy>"), |r| r.path.clone())
}

/// The run options' `policy` entry: the document and the Rego sources the run is linted by.
pub(crate) fn to_options(policy: &CompiledPolicy) -> Value {
    let rego: Vec<Value> = policy
        .rego
        .iter()
        .map(|r| json!({"path": r.path.display().to_string(), "source": r.source}))
        .collect();
    json!({"document": policy.policy, "rego": rego})
}

/// The policy a run was started with, from its options; `verified` when the journal's keyed
/// chain vouches for them, else narrowed as a workspace file. A run from before the policy was
/// journaled gets the default policy with its stored approvals and hosts (as it ran).
pub(crate) fn from_options(
    options: &Value,
    verified: bool,
    floor: Option<SandboxMode>,
) -> Result<(CompiledPolicy, Vec<String>), Fail> {
    let Some(stored) = options.get("policy") else {
        let strings = |key: &str| -> Vec<String> {
            options.get(key).and_then(Value::as_array).map_or_else(Vec::new, |items| {
                items.iter().filter_map(Value::as_str).map(str::to_owned).collect()
            })
        };
        let document = Policy {
            approve_tools: strings("approve_tools"),
            allow_hosts: strings("allow_hosts"),
            ..Policy::default()
        };
        let policy = compile(document, Vec::new())?;
        return if verified { Ok((policy, Vec::new())) } else { narrowed(policy, floor) };
    };
    let document: Policy = serde_json::from_value(stored["document"].clone()).map_err(|e| {
        Fail(EXIT_BAD_INPUT, format!("the run's stored policy cannot be read back: {e}"))
    })?;
    let rego = stored["rego"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|r| {
                    Some(RegoSource {
                        path: PathBuf::from(r["path"].as_str()?),
                        source: r["source"].as_str()?.to_owned(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let policy = compile(document, rego)?;
    if verified { Ok((policy, Vec::new())) } else { narrowed(policy, floor) }
}

fn compile(document: Policy, rego: Vec<RegoSource>) -> Result<CompiledPolicy, Fail> {
    CompiledPolicy::from_parts(document, Path::new("<the run's policy>"), rego)
        .map_err(|e| Fail(EXIT_BAD_INPUT, format!("the run's stored policy: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("policy.yaml");
        std::fs::write(&path, text).expect("write");
        path
    }

    const WIDE: &str = "sandbox: off\nsandbox_network: open\ndeny_tools: [http.request]\n";

    #[test]
    fn a_policy_inside_the_workspace_only_tightens_and_says_so() {
        let ws = tempfile::tempdir().expect("ws");
        let path = write(ws.path(), WIDE);
        let mut err = Vec::new();
        let policy = load(Some(&path), ws.path(), None, &mut err).expect("loads");
        assert_eq!(policy.policy.sandbox, None);
        assert_eq!(policy.policy.sandbox_network, None);
        assert_eq!(policy.policy.deny_tools, ["http.request"]);
        let err = String::from_utf8(err).expect("utf-8");
        assert!(
            err.contains("is inside the workspace")
                && err.contains("sandbox: off")
                && err.contains("sandbox_network: open")
                && err.contains(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn a_policy_outside_the_workspace_applies_as_written() {
        let ws = tempfile::tempdir().expect("ws");
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let path = write(elsewhere.path(), WIDE);
        let mut err = Vec::new();
        let policy = load(Some(&path), ws.path(), None, &mut err).expect("loads");
        assert_eq!(policy.policy.sandbox, Some(SandboxMode::Off));
        assert!(err.is_empty());
        // …and a symlink in the workspace to it is still the file inside (what a command could
        // have replaced).
        let link = ws.path().join("link.yaml");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        let via =
            load(Some(&ws.path().join("./link.yaml")), ws.path(), None, &mut err).expect("loads");
        assert_eq!(via.policy.sandbox, None);
        assert!(String::from_utf8_lossy(&err).contains("is inside the workspace"));
    }

    #[test]
    fn the_stored_policy_comes_back_whole_when_verified_and_narrowed_when_not() {
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let path = write(elsewhere.path(), WIDE);
        let policy =
            load(Some(&path), Path::new("/nonexistent-ws"), None, &mut Vec::new()).expect("loads");
        let options = json!({"policy": to_options(&policy)});
        let (back, ignored) = from_options(&options, true, None).expect("back");
        assert_eq!(back.policy, policy.policy);
        assert!(ignored.is_empty());
        let (back, ignored) = from_options(&options, false, None).expect("back");
        assert_eq!(back.policy.sandbox, None);
        assert_eq!(back.policy.deny_tools, ["http.request"]);
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        // A run from before the policy was journaled keeps its approvals and hosts when the
        // journal vouches for them; otherwise only its approvals (hosts would widen).
        let old = json!({"approve_tools": ["file.write"], "allow_hosts": ["h"]});
        let (back, _) = from_options(&old, true, None).expect("old");
        assert_eq!(back.policy.approve_tools, ["file.write"]);
        assert_eq!(back.policy.allow_hosts, ["h"]);
        let (back, ignored) = from_options(&old, false, None).expect("old");
        assert_eq!(back.policy.approve_tools, ["file.write"]);
        assert!(back.policy.allow_hosts.is_empty());
        assert_eq!(ignored.len(), 1, "{ignored:?}");
    }
}
