//! Helpers for the tests of `pev run`, `resume`, `runs`, `show` and `approve`: a temp workspace
//! with a directory beside it that is outside the sandbox, running a plan with `--json` and
//! reading its events and result, and a hand-rolled HTTP server on 127.0.0.1 for
//! `http.request`, `http_status` and `socket_open`.
//!
//! The workspace is `<tmp>/ws` and plans are written to `<tmp>` itself, so a plan file never
//! shows up in a `file.list` of the workspace and `<tmp>/outside` is a real place a sandbox
//! escape could reach.

#![allow(dead_code)] // each suite module uses a subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tempfile::TempDir;

use super::support::{Run, pev, run};

/// A temp dir holding the workspace `ws/` and a directory `outside/` beside it.
pub struct Ws {
    pub root: TempDir,
}

impl Ws {
    pub fn new() -> Ws {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(root.path().join("ws")).expect("mkdir ws");
        std::fs::create_dir(root.path().join("outside")).expect("mkdir outside");
        Ws { root }
    }

    /// The workspace directory.
    pub fn path(&self) -> PathBuf {
        self.root.path().join("ws")
    }

    /// A directory that is not inside the workspace.
    pub fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    /// The workspace as a string argument.
    pub fn arg(&self) -> String {
        self.path().to_string_lossy().into_owned()
    }

    /// Writes `content` to `rel` inside the workspace (parents created).
    pub fn file(&self, rel: &str, content: &str) {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir -p");
        }
        std::fs::write(path, content).expect("write workspace file");
    }

    /// The text of `rel` inside the workspace.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// Writes the plan beside the workspace and returns its path.
    pub fn plan_file(&self, plan: &Value) -> PathBuf {
        let path = self.root.path().join("plan.json");
        let text = serde_json::to_string_pretty(plan).expect("plan serialises");
        std::fs::write(&path, text).expect("write plan");
        path
    }

    /// `pev run PLAN --workspace WS --json EXTRA...`.
    pub fn run(&self, plan: &Value, extra: &[&str]) -> Outcome {
        let plan = self.plan_file(plan);
        let plan = plan.to_string_lossy().into_owned();
        let ws = self.arg();
        let mut args = vec!["run", plan.as_str(), "--workspace", ws.as_str(), "--json"];
        args.extend_from_slice(extra);
        Outcome::from(run(&mut pev(), &args))
    }

    /// `pev ARGS --workspace WS` (for runs, show, approve; resume with `--json` parses as
    /// [`Outcome::from`]).
    pub fn pev(&self, args: &[&str]) -> Run {
        let ws = self.arg();
        let mut all = args.to_vec();
        all.extend(["--workspace", ws.as_str()]);
        run(&mut pev(), &all)
    }

    /// `pev resume RUN --workspace WS --json EXTRA...`.
    pub fn resume(&self, run_id: &str, extra: &[&str]) -> Outcome {
        let mut args = vec!["resume", run_id, "--json"];
        args.extend_from_slice(extra);
        Outcome::from(self.pev(&args))
    }

    /// The journal's result of a run (`pev show RUN --format json`).
    pub fn show_json(&self, run_id: &str) -> Value {
        let r = self.pev(&["show", run_id, "--format", "json"]);
        assert_eq!(r.code, 0, "{r:?}");
        r.json()
    }
}

/// What `pev run --json` (or `pev resume --json`) produced.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub events: Vec<Value>,
}

impl From<Run> for Outcome {
    fn from(r: Run) -> Outcome {
        let events = parse_events(&r.stdout);
        Outcome { code: r.code, stdout: r.stdout, stderr: r.stderr, events }
    }
}

/// Every line of `stdout` as a JSON object (the test fails on any other line).
pub fn parse_events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
            assert!(v.is_object(), "not an object: {line}");
            v
        })
        .collect()
}

impl Outcome {
    /// The `result` of the last event, which must be `run.finished`.
    pub fn result(&self) -> &Value {
        let last = self.events.last().unwrap_or_else(|| panic!("no events: {self:?}"));
        assert_eq!(last["event"], "run.finished", "last event: {last}\n{}", self.stderr);
        &last["result"]
    }

    pub fn run_id(&self) -> String {
        self.events.first().and_then(|e| e["run_id"].as_str()).expect("run_id").to_owned()
    }

    pub fn status(&self) -> &str {
        self.result()["status"].as_str().expect("status")
    }

    /// `(code, step)` of each reason, in order.
    pub fn reasons(&self) -> Vec<(String, Option<String>)> {
        reasons(self.result())
    }

    /// The reason codes, in order.
    pub fn codes(&self) -> Vec<String> {
        self.reasons().into_iter().map(|(c, _)| c).collect()
    }

    /// The step result with id `id`.
    pub fn step(&self, id: &str) -> &Value {
        let steps = self.result()["steps"].as_array().expect("steps");
        steps
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no step {id} in {}", self.result()))
    }

    pub fn step_status(&self, id: &str) -> &str {
        self.step(id)["status"].as_str().expect("step status")
    }

    /// The error of the last `step.finished` event of `id` (empty when it has none).
    pub fn step_error(&self, id: &str) -> String {
        let finished = self.of("step.finished");
        let last = finished
            .iter()
            .rev()
            .find(|e| e["step"] == id)
            .unwrap_or_else(|| panic!("no step.finished for {id}: {:?}", self.events));
        last["error"].as_str().unwrap_or_default().to_owned()
    }

    /// The events named `kind`.
    pub fn of(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == kind).collect()
    }

    /// The first event named `kind` about step `id`.
    pub fn first(&self, kind: &str, id: &str) -> Option<&Value> {
        self.events.iter().find(|e| e["event"] == kind && e["step"] == id)
    }

    /// The `at` of the first event named `kind` about step `id`.
    pub fn at(&self, kind: &str, id: &str) -> String {
        let e = self.first(kind, id).unwrap_or_else(|| panic!("no {kind} for {id}"));
        e["at"].as_str().expect("at").to_owned()
    }

    /// The assertion results of step `id` as `(type, passed, detail)`.
    pub fn assertions(&self, id: &str) -> Vec<(String, bool, String)> {
        let list = self.step(id)["assertions"].as_array().cloned().unwrap_or_default();
        list.iter()
            .map(|a| {
                (
                    a["type"].as_str().unwrap_or_default().to_owned(),
                    a["passed"].as_bool().expect("passed"),
                    a["detail"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }
}

/// `(code, step)` of each reason of a run result, in order.
pub fn reasons(result: &Value) -> Vec<(String, Option<String>)> {
    let list = result["reasons"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|r| {
            (r["code"].as_str().expect("code").to_owned(), r["step"].as_str().map(str::to_owned))
        })
        .collect()
}

/// `(code, Some(step))` for a step reason, to compare against [`Outcome::reasons`].
pub fn at_step(code: &str, step: &str) -> (String, Option<String>) {
    (code.to_owned(), Some(step.to_owned()))
}

/// `(code, None)` for a run-level reason.
pub fn run_level(code: &str) -> (String, Option<String>) {
    (code.to_owned(), None)
}

/// A string no other test (or earlier run) uses, for process markers.
pub fn unique_marker() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}{}{n}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.subsec_micros())
    )
}

/// Whether a live process has `needle` in its command line (read from /proc).
pub fn process_alive_with(needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else { return false };
    entries.flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| {
            s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'))
        });
        text.contains(needle) && !zombie
    })
}

/// One request the test server received.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// The size of the test server's `/big` body: more than the 1 MiB output cap.
pub const BIG_BODY: usize = 1_100_000;

/// A tiny HTTP/1.1 server on 127.0.0.1: `/missing` answers 404, `/echo` answers 200 with the
/// request body, `/big` 200 with [`BIG_BODY`] bytes, anything else 200 with
/// `hello from the test server`. Every response has the
/// header `x-test: yes` and closes the connection.
pub struct HttpServer {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl HttpServer {
    pub fn start() -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        // Detached: the thread ends with the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        HttpServer { port, requests }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn received(&self) -> Vec<Request> {
        self.requests.lock().expect("lock").clone()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Request>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    // A bare connect (socket_open) sends nothing: EOF here is fine.
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    let (status, reply) = match path.as_str() {
        "/missing" => ("404 Not Found", "not here".to_owned()),
        "/echo" => ("200 OK", body.clone()),
        "/big" => ("200 OK", "b".repeat(BIG_BODY)),
        _ => ("200 OK", "hello from the test server".to_owned()),
    };
    log.lock().expect("lock").push(Request { method, path, headers, body });
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\ncontent-type: text/plain\r\nx-test: yes\r\n\
         connection: close\r\n\r\n{reply}",
        reply.len()
    );
    let _ = writer.write_all(response.as_bytes());
    let _ = writer.flush();
}

/// Whether `path` exists without following a final symlink.
pub fn exists_no_follow(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// The `pev` binary's path (for commands run outside assert_cmd: under `script`, or spawned).
pub fn pev_path() -> PathBuf {
    assert_cmd::cargo::cargo_bin!("pev").to_path_buf()
}

/// `pev ARGS` spawned with stdout piped (stderr to a null sink), environment as in
/// [`super::support::pev`].
pub fn spawn_pev(args: &[&str]) -> std::process::Child {
    std::process::Command::new(pev_path())
        .args(args)
        .env_remove("PEV_MAX_INPUT_BYTES")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn pev")
}

/// Sends SIGINT to `pid` (as Ctrl-C would), through kill(1).
pub fn interrupt(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -INT {pid}");
}
