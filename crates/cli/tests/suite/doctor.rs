//! `pev doctor`: the role table with each value's source, key variables shown as set/unset and
//! never by value, exit 1 when a role cannot build its client, exit 2 on a bad pev.toml, and
//! `--ping` against a scripted model (offline). Every run has a cleared environment plus exactly
//! the variables the test gives it.

use std::path::Path;

use serde_json::Value;

use super::support::{Run, dir_with, pev, run};

/// A key value that must never appear in any output.
const FAKE_KEY: &str = "sk-ant-FAKE-do-not-print-0123456789";

const WORKSPACE_TOML: &str = r#"
[roles.executor]
model = "claude-sonnet-4-5-20250929"
max_tokens = 8192

[roles.verifier]
provider = "openai"
model = "qwen2.5:7b"
base_url = "http://localhost:11434/v1"

[prices."qwen2.5:7b"]
input_per_mtok = 0.0
output_per_mtok = 0.0
"#;

/// `pev doctor ARGS` in `workspace` with only `vars` in the environment.
fn doctor(workspace: &Path, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = pev();
    cmd.env_clear().current_dir(workspace);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    run(&mut cmd, &all)
}

fn role<'a>(report: &'a Value, name: &str) -> &'a Value {
    let roles = report["roles"].as_array().expect("roles array");
    roles.iter().find(|r| r["role"] == name).unwrap_or_else(|| panic!("no role {name}"))
}

/// The text line of the role table that starts with `role`.
fn table_line<'a>(stdout: &'a str, role: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.trim_start().starts_with(role) && line.contains("http"))
        .unwrap_or_else(|| panic!("no table line for {role} in:\n{stdout}"))
}

#[test]
fn the_role_table_shows_provider_model_url_price_and_sources() {
    let ws = dir_with(&[("pev.toml", WORKSPACE_TOML)]);
    let file = ws.path().join("pev.toml").display().to_string();
    let vars = [("ANTHROPIC_API_KEY", FAKE_KEY), ("PEV_PLANNER_MODEL", "claude-opus-4-6")];
    let out = doctor(ws.path(), &vars, &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);

    let words = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
        words(table_line(&out.stdout, "planner")),
        [
            "planner",
            "anthropic",
            "claude-opus-4-6",
            "https://api.anthropic.com",
            "5",
            "/",
            "25",
            "/",
            "0.5",
            "/",
            "6.25"
        ]
    );
    // A dated id is priced as its model.
    assert!(table_line(&out.stdout, "executor").contains("claude-sonnet-4-5-20250929"));
    assert!(table_line(&out.stdout, "executor").ends_with("3 / 15 / 0.3 / 3.75"));
    let verifier = words(table_line(&out.stdout, "verifier"));
    assert_eq!(verifier[..4], ["verifier", "openai", "qwen2.5:7b", "http://localhost:11434/v1"]);
    assert!(out.stdout.contains(&format!("workspace  {file}  found")), "{}", out.stdout);
    assert!(out.stdout.contains("ANTHROPIC_API_KEY  set    used by: planner, executor"));
    assert!(out.stdout.contains("OPENAI_API_KEY     unset  used by: verifier"));

    let out = doctor(ws.path(), &vars, &["--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.json();
    assert_eq!(report["ok"], true);
    let planner = role(&report, "planner");
    assert_eq!(planner["model"]["source"], "env PEV_PLANNER_MODEL");
    assert_eq!(planner["provider"]["source"], "default");
    assert_eq!(planner["price"]["source"], "built-in");
    assert_eq!(planner["price"]["per_mtok"]["cache_write_per_mtok"], 6.25);
    let executor = role(&report, "executor");
    assert_eq!(executor["model"]["source"], format!("workspace {file}"));
    assert_eq!(executor["max_tokens"]["value"], 8192);
    assert_eq!(executor["price"]["model"], "claude-sonnet-4-5");
    let verifier = role(&report, "verifier");
    assert_eq!(verifier["provider"]["value"], "openai");
    assert_eq!(verifier["base_url"]["value"], "http://localhost:11434/v1");
    assert_eq!(verifier["base_url"]["source"], format!("workspace {file}"));
    assert_eq!(verifier["price"]["source"], format!("workspace {file}"));
    assert_eq!(verifier["price"]["per_mtok"]["input_per_mtok"], 0.0);
    assert_eq!(verifier["ok"], true);
    let providers: Vec<&str> = report["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .filter_map(|p| p["provider"].as_str())
        .collect();
    assert_eq!(providers, ["anthropic", "openai"]);
}

#[test]
fn key_values_are_never_printed() {
    let toml = "[providers.openai]\napi_key_env = \"MY_KEY_VAR\"\n[roles.verifier]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\n";
    let ws = dir_with(&[("pev.toml", toml)]);
    let vars =
        [("ANTHROPIC_API_KEY", FAKE_KEY), ("OPENAI_API_KEY", FAKE_KEY), ("MY_KEY_VAR", FAKE_KEY)];
    for args in [&[][..], &["--json"][..]] {
        let out = doctor(ws.path(), &vars, args);
        assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
        assert!(!out.stdout.contains(FAKE_KEY), "{}", out.stdout);
        assert!(!out.stderr.contains(FAKE_KEY), "{}", out.stderr);
        assert!(!out.stdout.contains("do-not-print"), "{}", out.stdout);
        assert!(out.stdout.contains("MY_KEY_VAR"), "{}", out.stdout);
    }
    let report = doctor(ws.path(), &vars, &["--json"]).json();
    let keys = report["key_vars"].as_array().expect("key_vars");
    let mine = keys.iter().find(|k| k["name"] == "MY_KEY_VAR").expect("MY_KEY_VAR listed");
    assert_eq!(mine["set"], true);
    assert_eq!(mine["roles"], serde_json::json!(["verifier"]));
}

#[test]
fn a_role_without_its_key_fails_with_the_reason() {
    let ws = dir_with(&[("pev.toml", WORKSPACE_TOML)]);
    let out = doctor(ws.path(), &[], &[]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let status = out.stdout.split("Status:").nth(1).expect("a status section");
    let planner = status.lines().find(|l| l.trim_start().starts_with("planner")).expect("planner");
    assert!(
        planner.contains("error:") && planner.contains("ANTHROPIC_API_KEY is not set"),
        "{planner}"
    );
    // The local OpenAI-compatible server needs no key.
    let verifier =
        status.lines().find(|l| l.trim_start().starts_with("verifier")).expect("verifier");
    assert!(verifier.contains("ok"), "{verifier}");

    let report = doctor(ws.path(), &[], &["--json"]).json();
    assert_eq!(report["ok"], false);
    let error = role(&report, "executor")["error"].as_str().expect("an error").to_owned();
    assert!(error.contains("executor") && error.contains("ANTHROPIC_API_KEY"), "{error}");
    assert_eq!(role(&report, "verifier")["error"], Value::Null);
}

#[test]
fn a_bad_pev_toml_is_exit_2_with_file_line_and_column() {
    let ws =
        dir_with(&[("pev.toml", "[roles.planner]\nprovider = \"anthropic\"\nmodle = \"x\"\n")]);
    let file = ws.path().join("pev.toml").display().to_string();
    let out = doctor(ws.path(), &[("ANTHROPIC_API_KEY", FAKE_KEY)], &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains(&format!("{file}:3:1:")), "{}", out.stderr);
    assert!(out.stderr.contains("modle"), "{}", out.stderr);
    assert_eq!(out.stdout, "");

    let ws = dir_with(&[("pev.toml", "[roles.planner]\nmodel = \"x\n")]);
    let file = ws.path().join("pev.toml").display().to_string();
    let out = doctor(ws.path(), &[], &["--json"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains(&format!("{file}:2:")), "{}", out.stderr);
}

#[test]
fn the_user_config_and_its_source_are_shown() {
    let ws = dir_with(&[]);
    let xdg = dir_with(&[]);
    std::fs::create_dir_all(xdg.path().join("pev")).expect("mkdir");
    let user_file = xdg.path().join("pev/pev.toml");
    std::fs::write(&user_file, "[roles.planner]\nmodel = \"claude-opus-4-5\"\n").expect("write");
    let xdg_dir = xdg.path().display().to_string();
    let vars = [("XDG_CONFIG_HOME", xdg_dir.as_str()), ("ANTHROPIC_API_KEY", FAKE_KEY)];
    let report = doctor(ws.path(), &vars, &["--json"]).json();
    let planner = role(&report, "planner");
    assert_eq!(planner["model"]["value"], "claude-opus-4-5");
    assert_eq!(planner["model"]["source"], format!("user {}", user_file.display()));
    let files = report["files"].as_array().expect("files");
    assert_eq!(files.len(), 2);
    assert_eq!(
        (files[0]["scope"].as_str(), files[0]["found"].as_bool()),
        (Some("workspace"), Some(false))
    );
    assert_eq!(
        (files[1]["scope"].as_str(), files[1]["found"].as_bool()),
        (Some("user"), Some(true))
    );
}

#[test]
fn ping_asks_each_role_once_offline_with_a_script() {
    let script = r#"{"turns": [{"content": [{"type": "text", "text": "pong"}]}]}"#;
    let ws = dir_with(&[("model.json", script), ("empty.json", r#"{"turns": []}"#)]);
    let out = doctor(ws.path(), &[("PEV_PROVIDER", "script:model.json")], &["--ping"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let status = out.stdout.split("Status:").nth(1).expect("a status section");
    assert_eq!(status.matches("ok: answered as").count(), 3, "{status}");
    // No ping without --ping.
    let out = doctor(ws.path(), &[("PEV_PROVIDER", "script:model.json")], &[]);
    assert!(!out.stdout.contains("answered"), "{}", out.stdout);

    // A script with no turn left cannot answer: exit 1, the reason per role.
    let vars =
        [("PEV_PROVIDER", "script:model.json"), ("PEV_VERIFIER_PROVIDER", "script:empty.json")];
    let out = doctor(ws.path(), &vars, &["--ping", "--json"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(role(&report, "planner")["ping"]["ok"], true);
    let ping = &role(&report, "verifier")["ping"];
    assert_eq!(ping["ok"], false);
    assert!(ping["error"].as_str().is_some_and(|e| e.contains("empty.json")), "{ping}");
    assert_eq!(
        role(&report, "verifier")["script"],
        ws.path().join("empty.json").display().to_string()
    );
}

#[test]
fn the_sandbox_this_machine_can_enforce_is_reported_from_a_probe() {
    let ws = dir_with(&[]);
    let path = std::env::var("PATH").unwrap_or_default();
    let r = doctor(ws.path(), &[("PATH", &path), ("ANTHROPIC_API_KEY", FAKE_KEY)], &["--json"]);
    let report: Value = serde_json::from_str(&r.stdout).expect("json");
    let sandbox = &report["sandbox"];
    assert_eq!(sandbox["enforced"]["mode"], "auto", "{sandbox}");
    let level = sandbox["enforced"]["level"].as_str().expect("level");
    assert!(["full", "partial", "none"].contains(&level), "{level}");
    // The level follows the probe: Landlock and seccomp and bubblewrap (or pev's own
    // namespaces in its place) make `full`.
    let probe = &sandbox["probe"];
    let full = probe["landlock_abi"].is_number()
        && probe["seccomp"] == true
        && (probe["bubblewrap"].is_object() || probe["namespaces"] == true);
    assert_eq!(level == "full", full, "{sandbox}");
    let text = doctor(ws.path(), &[("PATH", &path), ("ANTHROPIC_API_KEY", FAKE_KEY)], &[]);
    assert!(text.stdout.contains("Sandbox (probed in child processes):"), "{}", text.stdout);
    let mode = text.stdout.lines().find(|l| l.trim_start().starts_with("mode (auto)"));
    let mode = mode.unwrap_or_else(|| panic!("no mode line: {}", text.stdout));
    assert!(mode.split_whitespace().nth(2) == Some(level), "{mode}");
}

#[test]
fn require_in_pev_toml_fails_doctor_when_the_sandbox_is_not_full() {
    let ws = dir_with(&[("pev.toml", "sandbox = \"require\"\n")]);
    // A PATH without bubblewrap, and pev's own namespaces off: at most the partial sandbox.
    let r = doctor(
        ws.path(),
        &[
            ("PATH", "/nonexistent"),
            ("ANTHROPIC_API_KEY", FAKE_KEY),
            ("PEV_SANDBOX_NAMESPACES", "off"),
        ],
        &["--json"],
    );
    let report: Value = serde_json::from_str(&r.stdout).expect("json");
    assert_eq!(report["sandbox"]["enforced"]["mode"], "require");
    assert_ne!(report["sandbox"]["enforced"]["level"], "full");
    assert_eq!(r.code, 1, "{r:?}");
}
