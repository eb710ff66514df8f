//! The journal key through the binary (issue 28): `pev run` creates it (0600) on first use and
//! reuses it; a key file others can read is refused naming the file; `pev show` of a run whose
//! options were rewritten with plain SQL exits 1 naming the row; `pev doctor` shows the key's
//! file and id. Every command here gets its own key file in a temp dir, never the home's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::run_support::Ws;
use super::support::{Run, pev, run};

/// `pev ARGS --workspace WS` with the key at `key`.
fn pev_keyed(ws: &Ws, key: &Path, args: &[&str]) -> Run {
    let arg = ws.arg();
    let mut all = args.to_vec();
    all.extend(["--workspace", arg.as_str()]);
    run(pev().env("PEV_JOURNAL_KEY_FILE", key), &all)
}

fn run_plan(ws: &Ws, key: &Path) -> Run {
    let plan = json!({"goal": "read it", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "a.txt"}}
    ]});
    let plan = ws.plan_file(&plan).to_string_lossy().into_owned();
    pev_keyed(ws, key, &["run", &plan, "--json"])
}

fn setup() -> (Ws, PathBuf) {
    let ws = Ws::new();
    ws.file("a.txt", "hello\n");
    let key = ws.outside().join("keys").join("journal.key");
    (ws, key)
}

#[test]
fn a_run_creates_a_private_key_and_the_next_one_reuses_it() {
    let (ws, key) = setup();
    let first = run_plan(&ws, &key);
    assert_eq!(first.code, 0, "{first:?}");
    let meta = std::fs::metadata(&key).expect("the run created the key");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 32);
    let bytes = std::fs::read(&key).expect("key");
    let second = run_plan(&ws, &key);
    assert_eq!(second.code, 0, "{second:?}");
    assert_eq!(std::fs::read(&key).expect("key"), bytes, "the same key, not a new one");
    let show = pev_keyed(&ws, &key, &["show", "last"]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(show.stdout.contains("intact ("), "{}", show.stdout);
    // Read with another key, the run says so and `show` fails.
    let other = ws.outside().join("other.key");
    std::fs::write(&other, [9u8; 32]).expect("write");
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let show = pev_keyed(&ws, &other, &["show", "last"]);
    assert_eq!(show.code, 1, "{show:?}");
    assert!(show.stdout.contains("another journal key"), "{}", show.stdout);
}

#[test]
fn a_key_file_others_can_read_is_refused_naming_it() {
    let (ws, key) = setup();
    assert_eq!(run_plan(&ws, &key).code, 0);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let refused = run_plan(&ws, &key);
    assert_ne!(refused.code, 0, "{refused:?}");
    let text = format!("{}{}", refused.stdout, refused.stderr);
    assert!(text.contains(&key.display().to_string()) && text.contains("0640"), "{text}");
    let doctor = pev_keyed(&ws, &key, &["doctor"]);
    assert_eq!(doctor.code, 1, "{doctor:?}");
    assert!(doctor.stdout.contains("0640"), "{}", doctor.stdout);
}

#[test]
fn show_names_the_row_a_command_rewrote() {
    let (ws, key) = setup();
    let out = run_plan(&ws, &key);
    assert_eq!(out.code, 0, "{out:?}");
    let db = ws.path().join(".pev").join("pev.db");
    // What a command with write access to `.pev/` could do to open the network on resume (as
    // a command would: python's sqlite3, no pev involved).
    let sql = "UPDATE runs SET options = json_set(options, '$.network', 'open')";
    let status = std::process::Command::new("python3")
        .args(["-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()"])
        .arg(&db)
        .arg(sql)
        .status()
        .expect("python3 runs");
    assert!(status.success());
    let show = pev_keyed(&ws, &key, &["show", "last"]);
    assert_eq!(show.code, 1, "{show:?}");
    assert!(show.stdout.contains("CHANGED OUTSIDE PEV"), "{}", show.stdout);
    assert!(show.stdout.contains("runs row (run "), "{}", show.stdout);
}

#[test]
fn doctor_shows_the_key_file_and_id() {
    let (ws, key) = setup();
    let none = pev_keyed(&ws, &key, &["doctor"]);
    assert!(none.stdout.contains("Journal key"), "{}", none.stdout);
    assert!(none.stdout.contains("none: no journal key at"), "{}", none.stdout);
    assert!(!key.exists(), "doctor creates no key");
    assert_eq!(run_plan(&ws, &key).code, 0);
    let doctor = pev_keyed(&ws, &key, &["doctor", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&doctor.stdout).expect("json");
    let id = report["journal_key"]["id"].as_str().expect("an id");
    assert_eq!(id.len(), 16);
    assert_eq!(report["journal_key"]["file"], key.display().to_string());
}
