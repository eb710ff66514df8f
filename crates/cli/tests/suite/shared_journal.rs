//! Issue 18: a journal in PostgreSQL shared by several `pev` processes (as several machines
//! would share it), against a real server.
//!
//! (`--follow` is also checked on a SQLite journal, which needs no server.)
//!
//! `PEV_TEST_POSTGRES` names the server (`scripts/with-postgres.sh` starts a throwaway one;
//! `.ci/run` does). Each test gets a database of its own. Without the variable the tests say so
//! and pass, unless `PEV_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes that a failure.

use std::path::Path;
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::support::{pev, run};

/// A database of its own on the test server (dropped with it), or a SQLite journal in a
/// directory of its own.
struct Db {
    url: String,
    _server: Option<pev_test_support::Database>,
    _dir: Option<tempfile::TempDir>,
}

/// A SQLite journal in a directory of its own (outside any workspace).
fn local() -> Db {
    let dir = tempfile::tempdir().expect("tmp");
    let url = dir.path().join("journal.db").display().to_string();
    Db { url, _server: None, _dir: Some(dir) }
}

fn admin() -> postgres::Client {
    pev_test_support::admin()
}

fn database() -> Option<Db> {
    pev_test_support::server("the shared-journal test")?;
    let db = pev_test_support::Database::create();
    Some(Db { url: db.url.clone(), _server: Some(db), _dir: None })
}

/// A workspace with `a.txt` (`1`) and the plan below in `plan.json`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("a.txt"), "1").expect("write");
    std::fs::write(dir.path().join("plan.json"), PLAN).expect("write");
    dir
}

/// Writes `b.txt`, sleeps (a window to kill or stop the driver in), then patches `a.txt` and
/// writes `c.txt`. A patch applied twice leaves `122`, a write applied twice is seen in the
/// journal's calls.
const PLAN: &str = r#"{
  "goal": "Write, wait, patch",
  "steps": [
    {"id": "b", "title": "Write b", "tool": "file.write",
     "parameters": {"path": "b.txt", "content": "b"}},
    {"id": "wait", "title": "Wait", "tool": "shell.exec", "depends_on": ["b"],
     "parameters": {"command": "sleep 2"}},
    {"id": "patch", "title": "Patch a", "tool": "file.patch", "depends_on": ["wait"],
     "parameters": {"path": "a.txt", "edits": [{"old": "1", "new": "12"}]},
     "assertions": [{"type": "file_contains", "path": "a.txt", "pattern": "12"}]},
    {"id": "c", "title": "Write c", "tool": "file.write", "depends_on": ["wait"],
     "parameters": {"path": "c.txt", "content": "c"}}
  ]
}"#;

fn pev_cmd(dir: &Path, db: &Db, args: &[&str]) -> StdCommand {
    let mut cmd = StdCommand::new(env!("CARGO_BIN_EXE_pev"));
    cmd.env_remove("PEV_STORE")
        .current_dir(dir)
        .args(args)
        .args(["--store", &db.url])
        .stdin(Stdio::null());
    cmd
}

fn spawn_run(ws: &Path, db: &Db) -> Child {
    pev_cmd(ws, db, &["run", "plan.json", "--yes", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pev run starts")
}

/// `pev runs --json` from `dir`.
fn runs(dir: &Path, db: &Db) -> Vec<Value> {
    let r = run(pev().current_dir(dir), &["runs", "--json", "--store", &db.url]);
    if r.code == 2
        && (r.stderr.contains("holds no pev journal") || r.stderr.contains("no such file"))
    {
        return Vec::new(); // the first run has not created it yet
    }
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// Waits until the only run is past its first step and into `wait`, and returns its id.
fn running(dir: &Path, db: &Db) -> String {
    let start = Instant::now();
    loop {
        let listed = runs(dir, db);
        if let Some(run) = listed.first()
            && run["steps_done"].as_u64() >= Some(1)
        {
            return run["run_id"].as_str().expect("id").to_owned();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the run never got going: {listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `pev resume RUN FLAGS --workspace WS --store DB` from `dir`.
fn resume(dir: &Path, db: &Db, run_id: &str, ws: &Path, flags: &[&str]) -> super::support::Run {
    let ws = ws.display().to_string();
    let mut args = vec!["resume", run_id];
    args.extend_from_slice(flags);
    args.extend(["--workspace", ws.as_str(), "--store", db.url.as_str()]);
    run(pev().current_dir(dir), &args)
}

fn status_of(dir: &Path, db: &Db, run_id: &str) -> Value {
    let r = run(pev().current_dir(dir), &["show", run_id, "--format", "json", "--store", &db.url]);
    assert!(r.code == 0 || r.code == 1, "{r:?}");
    r.json()
}

fn events(db: &Db, run_id: &str) -> i64 {
    let at = pev_store::Location::parse(&db.url).expect("store");
    let store = pev_store::Store::open_existing(&at).expect("journal");
    store.events(run_id).expect("events").len() as i64
}

#[test]
fn eight_runs_share_one_journal_and_a_ninth_place_lists_them() {
    let Some(db) = database() else { return };
    let spaces: Vec<_> = (0..8).map(|_| workspace()).collect();
    let children: Vec<Child> = spaces
        .iter()
        .map(|w| {
            pev_cmd(w.path(), &db, &["run", "plan.json", "--yes", "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("pev run starts")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "run {i}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let elsewhere = tempfile::tempdir().expect("tmp");
    let listed = runs(elsewhere.path(), &db);
    assert_eq!(listed.len(), 8, "{listed:?}");
    assert!(listed.iter().all(|r| r["status"] == "success"), "{listed:?}");
    for w in &spaces {
        assert_eq!(std::fs::read_to_string(w.path().join("a.txt")).expect("a"), "12");
    }
    // Nothing was written to the workspaces' own `.pev/`.
    assert!(spaces.iter().all(|w| !w.path().join(".pev/pev.db").exists()));
}

#[test]
fn a_second_driver_is_refused_while_the_first_lives_and_admitted_once_it_dies() {
    let Some(db) = database() else { return };
    let ws = workspace();
    let mut first = spawn_run(ws.path(), &db);
    let run_id = running(ws.path(), &db);
    let elsewhere = tempfile::tempdir().expect("tmp");
    let second = resume(elsewhere.path(), &db, &run_id, ws.path(), &["--yes"]);
    assert_eq!(second.code, 2, "{second:?}");
    assert!(second.stderr.contains("being run by another pev process on "), "{}", second.stderr);
    first.kill().expect("kill -9");
    first.wait().expect("reaped");
    let again = resume(elsewhere.path(), &db, &run_id, ws.path(), &["--yes"]);
    assert_eq!(again.code, 0, "admitted at once after the first died: {again:?}");
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).expect("a"), "12");
}

#[test]
fn killed_mid_run_and_resumed_from_another_place_applies_every_write_once() {
    let Some(db) = database() else { return };
    let ws = workspace();
    let mut driver = spawn_run(ws.path(), &db);
    let run_id = running(ws.path(), &db);
    driver.kill().expect("kill -9");
    driver.wait().expect("reaped");
    // The workspace moves (another machine would have its own copy).
    let moved = tempfile::tempdir().expect("tmp");
    for name in ["a.txt", "b.txt", "plan.json"] {
        std::fs::copy(ws.path().join(name), moved.path().join(name)).expect("copy");
    }
    let here = tempfile::tempdir().expect("tmp");
    // A workspace that does not hold what the journal says is refused.
    let wrong = tempfile::tempdir().expect("tmp");
    std::fs::write(wrong.path().join("a.txt"), "something else").expect("write");
    let refused = resume(here.path(), &db, &run_id, wrong.path(), &[]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(refused.stderr.contains("b.txt"), "names what differs: {}", refused.stderr);
    let resumed = resume(here.path(), &db, &run_id, moved.path(), &["--yes", "--json"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_eq!(std::fs::read_to_string(moved.path().join("a.txt")).expect("a"), "12");
    assert_eq!(std::fs::read_to_string(moved.path().join("c.txt")).expect("c"), "c");
    let result = status_of(here.path(), &db, &run_id);
    assert_eq!(result["status"], "success", "{result}");
    let mut c = postgres::Client::connect(&db.url, postgres::NoTls).expect("connect");
    let applied: Vec<(String, i64)> = c
        .query(
            "SELECT step_id, count(*) FROM pev.tool_calls WHERE run_id = $1
             AND status IN ('finished', 'recovered') GROUP BY step_id ORDER BY step_id",
            &[&run_id],
        )
        .expect("calls")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (step, n) in &applied {
        assert_eq!(*n, 1, "step {step} applied {n} times: {applied:?}");
    }
}

#[test]
fn a_stopped_driver_whose_session_ended_commits_nothing_more() {
    let Some(db) = database() else { return };
    let ws = workspace();
    let mut stale = spawn_run(ws.path(), &db);
    let run_id = running(ws.path(), &db);
    let pid = stale.id();
    assert!(
        StdCommand::new("kill").args(["-STOP", &pid.to_string()]).status().expect("kill").success()
    );
    // Its sessions end (a network partition, an operator): the lease is free.
    let mut c = admin();
    c.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1",
        &[&format!("pev {pid}@%")],
    )
    .expect("terminate");
    let here = tempfile::tempdir().expect("tmp");
    let start = Instant::now();
    let resumed = loop {
        let r = resume(here.path(), &db, &run_id, ws.path(), &["--yes"]);
        if r.code != 2 || start.elapsed() > Duration::from_secs(10) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(resumed.code, 0, "{resumed:?}");
    let settled = events(&db, &run_id);
    // The old driver wakes up: whatever it does next, the journal does not take it.
    assert!(
        StdCommand::new("kill").args(["-CONT", &pid.to_string()]).status().expect("kill").success()
    );
    let status = stale.wait().expect("reaped");
    assert!(!status.success(), "the stale driver believed it finished: {status}");
    assert_eq!(events(&db, &run_id), settled, "the stale driver committed events");
    assert_eq!(status_of(here.path(), &db, &run_id)["status"], "success");
    assert_eq!(std::fs::read_to_string(ws.path().join("a.txt")).expect("a"), "12");
}

#[test]
fn show_follow_sees_every_event_of_a_run_driven_elsewhere() {
    let Some(db) = database() else { return };
    follow_case(&db);
}

/// The README's `cargo test` on a machine without PostgreSQL (issue 33): every test here, run
/// without `PEV_TEST_POSTGRES`, passes, and each that needs the server says it skipped (the
/// local `--follow` case once panicked dropping a database it never had).
#[test]
fn without_a_server_every_shared_journal_test_skips_and_says_so() {
    let suite = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/suite");
    pev_test_support::check_skips(&pev_test_support::ServerTests {
        suite: &suite,
        modules: &["shared_journal"],
        filters: &["suite::shared_journal::"],
        local: &["show_follow_sees_every_event_of_a_local_run"],
        this_test: "suite::shared_journal::without_a_server_every_shared_journal_test_skips_and_says_so",
    });
}

/// The same on a SQLite journal (a follower on this machine, polling).
#[test]
fn show_follow_sees_every_event_of_a_local_run() {
    follow_case(&local());
}

fn follow_case(db: &Db) {
    let ws = workspace();
    let mut driver = spawn_run(ws.path(), db);
    let run_id = running(ws.path(), db);
    let watcher = tempfile::tempdir().expect("tmp");
    let follower = pev_cmd(watcher.path(), db, &["show", &run_id, "--follow", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("follow");
    assert!(driver.wait().expect("driver").success());
    let out = follower.wait_with_output().expect("the follower ends with the run");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let seen: Vec<Value> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("one event per line"))
        .collect();
    let seqs: Vec<u64> = seen.iter().map(|e| e["seq"].as_u64().expect("seq")).collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "every event, in order, once");
    assert_eq!(seqs.len() as i64, events(db, &run_id));
    assert_eq!(
        seen.last().and_then(|e| e["event"].as_str()),
        Some("run.finished"),
        "{:?}",
        seen.last()
    );
    // Text: one line per event, the last the finish.
    let text =
        run(pev().current_dir(watcher.path()), &["show", &run_id, "--follow", "--store", &db.url]);
    assert_eq!(text.code, 0, "{text:?}");
    assert_eq!(text.stdout.lines().count(), seqs.len(), "{}", text.stdout);
    assert!(
        text.stdout.lines().last().is_some_and(|l| l.contains("run.finished")),
        "{}",
        text.stdout
    );
}

/// A shared journal reached through a unix socket: a command in the full sandbox cannot
/// connect to it (the socket's directory is hidden), while pev itself journals through it. (A
/// closed network does not stop a unix socket: it is a file.)
#[test]
#[allow(clippy::print_stderr)] // the note says why the test did not run
fn a_command_cannot_reach_the_journals_server_through_its_socket() {
    let Some(db) = database() else { return };
    let doctor = run(&mut pev(), &["doctor", "--json"]);
    let report: Value = serde_json::from_str(&doctor.stdout).unwrap_or(Value::Null);
    if report["sandbox"]["enforced"]["level"] != "full" {
        eprintln!("skipped: no full sandbox here: {}", report["sandbox"]["enforced"]["gaps"]);
        return;
    }
    // The server's second socket, outside /tmp and /run (which the sandbox hides whatever
    // the journal): only the journal's own protection keeps a command from it.
    let Some(dir) = std::env::var("PEV_TEST_POSTGRES_SOCKET2").ok().filter(|d| !d.is_empty())
    else {
        eprintln!("skipped: no second socket directory (scripts/with-postgres.sh makes one)");
        return;
    };
    let socket = Path::new(&dir).join(".s.PGSQL.5432");
    let url = db.url.replace(&std::env::var("PEV_TEST_POSTGRES_DIR").expect("dir"), &dir);
    assert_ne!(url, db.url);
    // The test itself can connect: what the command is refused is the sandbox's doing.
    std::os::unix::net::UnixStream::connect(&socket).expect("the socket answers outside");
    let ws = tempfile::tempdir().expect("tmp");
    let probe = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); \
         s.connect('{}'); print('REACH' + 'ED')\" 2>&1 | tail -1",
        socket.display()
    );
    let plan = serde_json::json!({
        "goal": "Reach the journal's server",
        "steps": [{"id": "reach", "tool": "shell.exec", "on_fail": "continue",
                   "args": {"command": probe, "timeout_s": 10}}]
    });
    std::fs::write(ws.path().join("plan.json"), plan.to_string()).expect("write");
    let r = run(
        pev().current_dir(ws.path()),
        &["run", "plan.json", "--yes", "--json", "--store", &url],
    );
    assert!(r.stdout.contains("run.finished"), "{r:?}");
    // The marker is split in the command, so only a connected command prints it whole.
    assert!(!r.stdout.contains("REACHED"), "a command reached the server: {}", r.stdout);
    assert!(r.stdout.contains("No such file") || r.stdout.contains("rror"), "{}", r.stdout);
}

/// `pev gc` on the shared journal deletes an old finished run and the blobs only it used: the
/// collection runs on the session holding gc's own leases, which it does not count as a run
/// being driven elsewhere.
#[test]
fn gc_collects_old_runs_and_their_blobs_on_the_shared_journal() {
    let Some(db) = database() else { return };
    let ws = workspace();
    assert!(spawn_run(ws.path(), &db).wait().expect("run").success());
    let listed = runs(ws.path(), &db);
    let run_id = listed[0]["run_id"].as_str().expect("id").to_owned();
    let r = run(
        pev().current_dir(ws.path()),
        &["gc", "--older-than", "0s", "--json", "--store", &db.url],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let doc: Value = serde_json::from_str(r.stdout.trim()).expect("json");
    assert_eq!(doc["report"]["runs"], serde_json::json!([run_id]), "{doc}");
    assert!(doc["report"]["blobs"].as_u64() > Some(0), "{doc}");
    assert!(doc["report"]["blobs_skipped"].is_null(), "{doc}");
    assert!(runs(ws.path(), &db).is_empty());
}

/// A run's oracle on a shared journal: recorded (its contents as blobs on the server) when the
/// run starts, read back by a resume (off the async runtime: the Postgres client blocks), and a
/// test changed while the run was down is `oracle_changed`, never `success`.
#[test]
fn a_resumed_run_reads_its_oracle_back_from_the_shared_journal() {
    let Some(db) = database() else { return };
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("tests")).expect("mkdir");
    std::fs::write(ws.path().join("tests/test_a.py"), "assert True\n").expect("write");
    let mut driver = spawn_run(ws.path(), &db);
    let run_id = running(ws.path(), &db);
    driver.kill().expect("kill -9");
    driver.wait().expect("reaped");
    std::fs::write(ws.path().join("tests/test_a.py"), "pass\n").expect("tamper");
    let resumed = resume(ws.path(), &db, &run_id, ws.path(), &["--yes"]);
    assert_ne!(resumed.code, 0, "{resumed:?}");
    let result = status_of(ws.path(), &db, &run_id);
    assert_ne!(result["status"], "success", "{result}");
    let codes: Vec<&str> = result["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(|r| r["code"].as_str())
        .collect();
    assert!(codes.contains(&"oracle_changed"), "{codes:?}");
    let diff = result["final_check"]["oracle"]["changed"][0]["diff"].as_str().unwrap_or_default();
    assert!(
        diff.contains("-assert True"),
        "the recorded content came back from the server: {diff}"
    );
}

/// `pev agent` in pev mode (planner, executor, judge) on a shared journal: the engine reads the
/// journal while the run is under way (the replan loop's record, the final sequence number), and
/// those reads run off the async runtime, since the Postgres client blocks (they aborted the
/// process before).
#[test]
fn a_pev_mode_agent_run_finishes_on_the_shared_journal() {
    let Some(db) = database() else { return };
    let ws = tempfile::tempdir().expect("tmp");
    let scenario = super::support::repo_root().join("evals/tests-pev-mode-fix");
    for rel in ["src/__init__.py", "src/calc.py", "tests/__init__.py", "tests/test_calc.py"] {
        let target = ws.path().join(rel);
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        std::fs::copy(scenario.join("workspace").join(rel), &target).expect("copy");
    }
    let script = |role: &str| format!("script:{}", scenario.join(format!("{role}.json")).display());
    let out =
        pev_cmd(ws.path(), &db, &["agent", "Make the failing test in tests/test_calc.py pass"])
            .env("PEV_PLANNER_PROVIDER", script("planner"))
            .env("PEV_EXECUTOR_PROVIDER", script("executor"))
            .env("PEV_VERIFIER_PROVIDER", script("verifier"))
            .env("XDG_CONFIG_HOME", ws.path().join(".config"))
            .output()
            .expect("pev agent runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let run_id = runs(ws.path(), &db)[0]["run_id"].as_str().expect("id").to_owned();
    assert_eq!(status_of(ws.path(), &db, &run_id)["status"], "success");
}
