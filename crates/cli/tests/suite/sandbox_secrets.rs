//! Issue 33: the secrets in `$HOME` stay hidden from commands for the right reason. The old
//! secrets test kept its fake `HOME` under `/tmp`, which bubblewrap empties anyway, so it passed
//! with the `$HOME` filter of `Sandbox::launch_in` inverted (nothing in `$HOME` hidden). Here
//! the workspace, `HOME` and `TMPDIR` are each put under `/tmp` and outside it (`/var/tmp`), under
//! each layer that hides (bubblewrap, pev's own namespaces, Landlock alone), and each case
//! asserts which layer refused: a covered directory is empty under a mount layer ("No such
//! file"), a covered file reads as `/dev/null`; under Landlock alone both are "Permission
//! denied". A layer this machine cannot give is skipped, and the test says so.

use std::path::Path;

use serde_json::{Value, json};

use super::run_support::Outcome;
use super::sandbox_escape::path_without_bwrap;
use super::support::{pev, run};

/// The hiding layers, as `run.started` names their mechanism.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Layer {
    Bubblewrap,
    Namespaces,
    Landlock,
}

/// One place for the workspace, `HOME` and `TMPDIR`: under `/tmp` (the system's temp dir, which
/// bubblewrap replaces with an empty tmpfs) or outside it.
fn base(under_tmp: bool) -> &'static Path {
    Path::new(if under_tmp { "/tmp" } else { "/var/tmp" })
}

fn dir_in(base: &Path, prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir_in(base).expect("temp dir")
}

/// Runs a plan that tries to read `HOME`'s SSH key and `.netrc` under `layer`; `None` when this
/// machine cannot give that layer (said on stderr).
#[allow(clippy::print_stderr)] // the note says why a case did not run
fn attempt(layer: Layer, ws_under_tmp: bool, home_under_tmp: bool) -> Option<(Outcome, String)> {
    let ws = dir_in(base(ws_under_tmp), "pev-secrets-ws-");
    let home = dir_in(base(home_under_tmp), "pev-secrets-home-");
    let tmp = dir_in(base(home_under_tmp), "pev-secrets-tmp-");
    let bin = dir_in(Path::new("/var/tmp"), "pev-secrets-bin-");
    std::fs::create_dir_all(home.path().join(".ssh")).expect("mkdir");
    std::fs::write(home.path().join(".ssh/id_ed25519"), "canary-ssh-key\n").expect("key");
    std::fs::write(home.path().join(".netrc"), "canary-netrc\n").expect("netrc");
    let h = home.path().display();
    let steps = json!([
        {"id": "key", "tool": "shell.exec", "on_fail": "continue",
         "args": {"command": format!("cat {h}/.ssh/id_ed25519; ls -A {h}/.ssh"), "timeout_s": 10}},
        {"id": "netrc", "tool": "shell.exec", "on_fail": "continue",
         "args": {"command": format!("cat {h}/.netrc"), "timeout_s": 10}},
    ]);
    let plan = ws.path().join("plan.json");
    std::fs::write(&plan, json!({"goal": "Try to read secrets", "steps": steps}).to_string())
        .expect("plan");
    let mut cmd = pev();
    cmd.env("HOME", home.path()).env("TMPDIR", tmp.path());
    if layer != Layer::Bubblewrap {
        cmd.env("PATH", path_without_bwrap(bin.path()));
    }
    if layer == Layer::Landlock {
        cmd.env("PEV_SANDBOX_NAMESPACES", "off");
    }
    let ws_arg = ws.path().display().to_string();
    let r = run(
        &mut cmd,
        &["run", plan.to_str().expect("utf-8"), "--workspace", &ws_arg, "--json", "--yes"],
    );
    let out = Outcome::from(r);
    let sandbox = out.of("run.started").first().map(|e| e["sandbox"].clone()).unwrap_or_default();
    let mechanisms = sandbox["mechanisms"].to_string();
    let has = |m: &str| mechanisms.contains(m);
    let got = match layer {
        Layer::Bubblewrap => has("bubblewrap"),
        Layer::Namespaces => has("namespaces") && !has("bubblewrap"),
        Layer::Landlock => has("landlock") && !has("bubblewrap") && !has("namespaces"),
    };
    if !got {
        eprintln!("skipped: {layer:?} is not what this machine gives here ({sandbox})");
        return None;
    }
    Some((out, h.to_string()))
}

fn output_of(out: &Outcome, step: &str) -> (String, String) {
    let o = out.first("tool.finished", step).map(|e| e["output"].clone()).unwrap_or(Value::Null);
    let text = |k: &str| o[k].as_str().unwrap_or_default().to_owned();
    (text("stdout"), text("stderr"))
}

/// Every combination of the workspace and `HOME` (with its `TMPDIR`) under `/tmp` or not.
fn check_layer(layer: Layer) {
    for ws_under_tmp in [true, false] {
        for home_under_tmp in [true, false] {
            let case = format!(
                "{layer:?}, workspace under /tmp: {ws_under_tmp}, HOME and TMPDIR under /tmp: {home_under_tmp}"
            );
            let Some((out, home)) = attempt(layer, ws_under_tmp, home_under_tmp) else { return };
            let (key_out, key_err) = output_of(&out, "key");
            let (netrc_out, netrc_err) = output_of(&out, "netrc");
            for text in [&key_out, &key_err, &netrc_out, &netrc_err] {
                assert!(!text.contains("canary"), "{case}: a secret leaked: {text}");
            }
            let no_key = format!("{home}/.ssh/id_ed25519: No such file");
            match layer {
                // bubblewrap covers `.ssh` with an empty tmpfs (made where `HOME` is, even in
                // its empty `/tmp`) and `.netrc` with `/dev/null`, which Landlock, beneath it,
                // refuses to read.
                Layer::Bubblewrap => {
                    assert!(key_err.contains(&no_key), "{case}: {key_err}");
                    assert_eq!(key_out, "", "{case}: the covered .ssh is not empty");
                    assert!(netrc_err.contains("Permission denied"), "{case}: {netrc_err}");
                }
                // pev's namespaces: a `HOME` under `/tmp` is simply not there (a fresh `/tmp`);
                // outside it, `.ssh` is an empty tmpfs and `.netrc` reads as `/dev/null`.
                Layer::Namespaces if home_under_tmp => {
                    assert!(key_err.contains("cannot access"), "{case}: {key_err}");
                    assert!(netrc_err.contains("No such file"), "{case}: {netrc_err}");
                }
                Layer::Namespaces => {
                    assert!(key_err.contains(&no_key), "{case}: {key_err}");
                    assert!(!key_err.contains("cannot access"), "{case}: .ssh is not covered");
                    assert_eq!(key_out, "", "{case}: the covered .ssh is not empty");
                    assert_eq!((netrc_out.as_str(), netrc_err.as_str()), ("", ""), "{case}");
                }
                // Landlock alone refuses the reads (the names stay listable).
                Layer::Landlock => {
                    assert!(key_err.contains("Permission denied"), "{case}: {key_err}");
                    assert!(netrc_err.contains("Permission denied"), "{case}: {netrc_err}");
                }
            }
        }
    }
}

#[test]
fn home_secrets_are_covered_by_bubblewrap_wherever_home_and_the_workspace_live() {
    check_layer(Layer::Bubblewrap);
}

#[test]
fn home_secrets_are_covered_by_pevs_namespaces_wherever_home_and_the_workspace_live() {
    check_layer(Layer::Namespaces);
}

#[test]
fn home_secrets_are_refused_by_landlock_alone_wherever_home_and_the_workspace_live() {
    check_layer(Layer::Landlock);
}
