//! `pev agent --max-usd`: a ceiling, not a target (issue 5, "Done means"). The scripts state
//! each turn's tokens and the models have built-in prices, so cost accrues exactly; the run must
//! stop cleanly (`partial`, `budget_exhausted`) when the next call's worst case does not fit, and
//! never spend more than the budget.
//!
//! Fixture: `tests/fixtures/agent/budget/` (the honest two-step footer plan with heavier turns;
//! the planner is the cheap model there so that its long prompt's worst case fits).

use super::agent_support::{
    Scenario, assert_no_dark_green, assert_one_run_finished, assert_stream_shape, cost, reason,
};
use super::run_support::run_level;

const GOAL: &str = "Add a footer to the page and style it";

/// Where the budget bites, with the scripts' tokens at the built-in prices: the planner (haiku
/// 4.5) spends $0.0027; step 1's executor turns (sonnet 4.5) $0.009 + $0.009 + $0.036 and its
/// judge (haiku) $0.0014, $0.0581 in all. Step 1's last turn (2000 output tokens) fits only from
/// about $0.060, and step 2's first call needs about $0.013 (its prompt's worst-case input plus
/// the least clamped output), which $0.065 - $0.0581 cannot pay. So step 1 finishes and the run
/// stops before step 2, with margins of about $0.005 either way for prompt growth.
const BUDGET: f64 = 0.065;

#[test]
fn max_usd_stops_the_run_before_a_call_it_cannot_afford_and_never_overspends() {
    let s = Scenario::new("budget");
    let out = s.agent(GOAL, &["--max-usd", &BUDGET.to_string()]);
    assert_eq!(out.code, 3, "{}\n{}", out.stderr, out.stdout);
    assert_eq!(out.status(), "partial");
    assert!(out.reasons().contains(&run_level("budget_exhausted")), "{:?}", out.reasons());
    let why = reason(&out, "budget_exhausted")["message"].as_str().unwrap_or_default();
    assert!(why.contains("the executor call to claude-sonnet-4-5 needs up to $"), "{why}");
    assert!(why.contains(&format!("left of ${BUDGET:.4}")), "{why}");
    assert!(out.codes().contains(&"steps_not_run".to_owned()), "{:?}", out.codes());
    assert_stream_shape(&out, 0, false);
    assert_one_run_finished(&out);
    assert_no_dark_green(&out);

    // The ceiling held: what was spent is at most the budget, and exactly what the scripts'
    // turns cost (so no refused call was paid for).
    let spent = cost(&out);
    assert!(spent <= BUDGET, "spent ${spent} of ${BUDGET}");
    assert!((spent - 0.0581).abs() < 1e-9, "{spent}");
    assert_eq!(out.result()["usage"]["llm_calls"], 5, "1 planner + 3 executor + 1 judge");

    // Step 1 is done and proved; step 2 started, was refused its first model call and is left
    // pending (not failed: it can run with more budget); nothing of it ran.
    assert_eq!(out.step_status("add-footer"), "done");
    assert_eq!(out.step_status("style-footer"), "pending");
    let stopped = out.step("style-footer")["error"].as_str().unwrap_or_default().to_owned();
    assert!(stopped.starts_with("stopped: the budget ran out"), "{stopped}");
    let finished = out.first("step.finished", "style-footer").expect("style-footer finished");
    assert_eq!(finished["status"], "pending", "{finished}");
    assert!(out.of("tool.called").iter().all(|e| e["step"] == "add-footer"));
    assert!(s.read("index.html").contains("<footer>Made with pev</footer>"));
    assert_eq!(s.read("style.css"), Scenario::original("budget", "style.css"));
}

#[test]
fn a_budget_too_small_for_the_plan_stops_before_any_run_is_journaled() {
    let s = Scenario::new("budget");
    let out = s.agent(GOAL, &["--max-usd", "0.001"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stderr, out.stdout);
    // No run events: only the error event that answers --json.
    assert_eq!(out.events.len(), 1, "{}", out.stdout);
    assert_eq!(out.events[0]["event"], "error", "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "the budget ran out before a plan was written: the planner call to \
             claude-haiku-4-5 needs up to $"
        ),
        "{}",
        out.stderr
    );
    let runs = s.pev(&["runs", "--json"]);
    assert_eq!(runs.code, 2, "{runs:?}");
    assert!(runs.stderr.contains("no run has been journaled there"), "{runs:?}");
    assert_eq!(s.read("index.html"), Scenario::original("budget", "index.html"));
}

/// A model server on the OpenAI wire that bills every request the moment it arrives, as much as
/// the request allows (its input, at 4 bytes a token, and all of its `max_tokens`), at $0.50
/// per million tokens; it answers with a `file_read` tool call, so a loop-mode run goes on until
/// its budget stops it. The requests it is told to hold are answered only after 5 s: a kill
/// lands while that call is in flight, after the provider billed it.
struct Biller {
    port: u16,
    billed: std::sync::Arc<std::sync::Mutex<f64>>,
    hold: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<u64>>>,
    arrived: std::sync::mpsc::Receiver<u64>,
}

impl Biller {
    fn start() -> Biller {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let billed = std::sync::Arc::new(std::sync::Mutex::new(0.0));
        let hold = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
        let (tell, arrived) = std::sync::mpsc::channel();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (b, h) = (std::sync::Arc::clone(&billed), std::sync::Arc::clone(&hold));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (b, h, tell, count) = (b.clone(), h.clone(), tell.clone(), count.clone());
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let request: serde_json::Value =
                        serde_json::from_slice(&body).unwrap_or_default();
                    let max = ["max_completion_tokens", "max_tokens"]
                        .iter()
                        .find_map(|k| request[*k].as_u64())
                        .unwrap_or(4096);
                    let input = (body.len() as u64).div_ceil(4);
                    *b.lock().unwrap() += (input + max) as f64 * 0.5 / 1e6;
                    let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    let _ = tell.send(n);
                    if h.lock().unwrap().contains(&n) {
                        std::thread::sleep(std::time::Duration::from_secs(5));
                    }
                    let answer = serde_json::json!({
                        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0,
                        "model": "mock-model",
                        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                            "role": "assistant", "content": null,
                            "tool_calls": [{"id": format!("call_{n}"), "type": "function",
                                "function": {"name": "file_read", "arguments": "{\"path\": \"a.txt\"}"}}]}}],
                        "usage": {"prompt_tokens": input, "completion_tokens": max, "total_tokens": input + max},
                    })
                    .to_string();
                    let mut out = stream;
                    let _ = write!(
                        out,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                });
            }
        });
        Biller { port, billed, hold, arrived }
    }

    fn billed(&self) -> f64 {
        *self.billed.lock().unwrap()
    }
}

/// Issue 31: `--max-usd` holds over any number of kills and resumes, the kills landing while a
/// call is in flight (billed by the provider, never answered to pev). Each of three sessions is
/// killed (SIGKILL) during its second model call; the fourth runs until the budget stops it.
/// What the provider billed over all four sessions is at most the ceiling. Before, a call cut
/// off by a kill was nowhere in the journal, so each kill let the run spend one call more than
/// its ceiling.
#[test]
fn max_usd_holds_over_three_kills_during_model_calls() {
    const MAX_USD: f64 = 0.05;
    let biller = Biller::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    std::fs::write(ws.join("a.txt"), "alpha\n").expect("a.txt");
    std::fs::write(
        ws.join("pev.toml"),
        format!(
            "[roles.executor]\nprovider = \"openai\"\nmodel = \"mock-model\"\nbase_url = \"http://127.0.0.1:{}/v1\"\n\n\
             [prices.\"mock-model\"]\ninput_per_mtok = 0.5\noutput_per_mtok = 0.5\n",
            biller.port
        ),
    )
    .expect("pev.toml");
    let ws_arg = ws.to_str().expect("utf-8").to_owned();
    let spawn = |args: &[&str]| {
        std::process::Command::new(super::run_support::pev_path())
            .args(args)
            .env_clear()
            .env("PATH", super::support::path())
            .env("HOME", dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn pev")
    };
    let max = MAX_USD.to_string();
    let start: Vec<&str> = vec![
        "agent",
        "Read a.txt",
        "--mode",
        "loop",
        "--max-usd",
        &max,
        "--workspace",
        &ws_arg,
        "--json",
    ];
    let resume: Vec<&str> = vec!["resume", "last", "--workspace", &ws_arg, "--json"];
    let mut seen = 0u64;
    for session in 0..3 {
        // This session's second request is held: the kill lands while it is in flight.
        biller.hold.lock().unwrap().insert(seen + 2);
        let mut child = spawn(if session == 0 { &start } else { &resume });
        loop {
            let n = biller
                .arrived
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("session {session}: no model call came"));
            seen = n;
            if biller.hold.lock().unwrap().contains(&n) {
                break;
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
    }
    let last = spawn(&resume).wait_with_output().expect("the last session");
    let stderr = String::from_utf8_lossy(&last.stderr);
    let stdout = String::from_utf8_lossy(&last.stdout);
    // Nothing was done (the model only read), so the run fails, stopped by its budget.
    assert_eq!(last.status.code(), Some(1), "{stderr}\n{stdout}");
    let shown = super::support::run(
        &mut super::agent_support::pev_clean(),
        &["show", "last", "--workspace", &ws_arg, "--format", "json"],
    );
    let result: serde_json::Value = serde_json::from_str(&shown.stdout).expect("the result");
    assert_eq!(result["status"], "failed", "{result}");
    let codes: Vec<&str> = result["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["code"].as_str())
        .collect();
    assert!(codes.contains(&"budget_exhausted"), "{codes:?}");
    let billed = biller.billed();
    assert!(billed <= MAX_USD, "the provider billed ${billed:.4}, over the ${MAX_USD} ceiling");
    assert!(billed > MAX_USD * 0.5, "the run barely spent (${billed:.4}): nothing was tested");
    assert!(stderr.contains("model call(s) were in flight when the run was stopped"), "{stderr}");
}
