//! `pev agent` end to end through the real Anthropic client (issue 5, "Done means": the
//! scenarios against a local mock HTTP server speaking the Anthropic API). The binary runs with a
//! clean environment and a key; the workspace's pev.toml points all three roles, each with its own
//! model, at a server on 127.0.0.1 that answers `POST /v1/messages` as the test scripts it and
//! records what pev sent.
//!
//! Scenarios: an honest model (success; the headers, the tool_use/tool_result pairing and the
//! cache breakpoints on the wire); a lazy model that stops after two of three edits (never
//! success, the missing file named in the reasons); a rate limit with `retry-after: 1` on the
//! executor's first call (waited out, then success); a model that only looks and claims the
//! change (partial, `no_effects`).

// `cfg(test)` puts the helpers under clippy.toml's allow-*-in-tests, as the tests are.
#[cfg(test)]
mod mock;
#[cfg(test)]
mod support;

#[cfg(test)]
mod otlp;

#[cfg(test)]
mod crash_resume;

#[cfg(test)]
mod scenarios {
    use std::time::Duration;

    use serde_json::{Value, json};

    use crate::agent_http::mock::{EXECUTOR_MODEL, MockModel, Reply, Request, Role};
    use crate::agent_http::support::{KEY, Ws, plan_reply, tool_results, tool_use_ids, verdict};

    pub(crate) const DARK_GREEN: &str = "Change the site background to dark green";
    pub(crate) const STYLE: &str = "body {\n  background: #ffffff;\n  color: #222222;\n}\n";
    pub(crate) const INDEX: &str = "<!DOCTYPE html>\n<html><head><link rel=\"stylesheet\" \
                         href=\"style.css\"></head><body><h1>Hi</h1></body></html>\n";

    fn dark_green_plan() -> Value {
        json!({
            "goal": DARK_GREEN,
            "steps": [{
                "id": "patch-css",
                "title": "Set the body background",
                "description": "In style.css, change the body background to #013220.",
                "acceptance_criteria": ["the body rule's background is #013220"],
                "assertions": [
                    {"type": "content_changed", "path": "style.css"},
                    {"type": "file_contains", "path": "style.css", "pattern": "#013220"}
                ]
            }],
            "postconditions": [{
                "description": "The background is dark green",
                "assertions": [
                    {"type": "file_contains", "path": "style.css", "pattern": "background: #013220;"}
                ]
            }]
        })
    }

    /// The honest executor: reads both files in one turn, patches, then sums up.
    fn honest_executor(r: &Request) -> Reply {
        match r.turn() {
            0 => Reply::tool_uses(
                EXECUTOR_MODEL,
                &[
                    ("toolu_read_css", "file_read", json!({"path": "style.css"})),
                    ("toolu_read_html", "file_read", json!({"path": "index.html"})),
                ],
            ),
            1 => Reply::tool_uses(
                EXECUTOR_MODEL,
                &[(
                    "toolu_patch",
                    "file_patch",
                    json!({"path": "style.css", "edits": [
                        {"old": "background: #ffffff;", "new": "background: #013220;"}
                    ]}),
                )],
            ),
            _ => Reply::text(EXECUTOR_MODEL, "Changed the body background to #013220."),
        }
    }

    pub(crate) fn honest(r: &Request) -> Reply {
        match r.role {
            Role::Planner => plan_reply(&dark_green_plan()),
            Role::Executor => honest_executor(r),
            _ => verdict(true, 0.92, "style.css now sets background: #013220"),
        }
    }

    #[test]
    fn an_honest_model_succeeds_over_http_with_the_key_version_and_paired_tool_results() {
        let mock = MockModel::start(honest);
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
        let out = ws.agent(DARK_GREEN, &[]);

        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.status(), "success");
        assert_eq!(out.codes(), Vec::<&str>::new());
        assert_eq!(out.result()["goal_actions_executed"], true);
        assert!(ws.read("style.css").contains("background: #013220;"));
        let step = out.step("patch-css");
        assert_eq!(step["status"], "done");
        assert_eq!(step["attempts"], 1);
        let evidence = step["evidence"].to_string();
        assert!(evidence.contains("judge: passed (confidence 0.92)"), "{evidence}");

        // Every call went to /v1/messages with the key and the API version.
        let all = mock.requests();
        assert_eq!(all.len(), 5, "1 planner + 3 executor + 1 verifier: {all:#?}");
        for r in &all {
            assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/messages"));
            assert_eq!(r.header("x-api-key"), Some(KEY));
            assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(r.header("content-type"), Some("application/json"));
            assert!(r.body["max_tokens"].as_u64().is_some_and(|n| n > 0), "{}", r.body);
            assert!(r.body.get("stream").is_none(), "whole responses, not streams");
        }
        assert_eq!(mock.of(Role::Planner).len(), 1);
        assert_eq!(mock.of(Role::Verifier).len(), 1);
        let exec = mock.of(Role::Executor);
        assert_eq!(exec.len(), 3);

        // The first executor call: the step's scope, the tools, and the cache breakpoints on the
        // system prompt and on the last tool only.
        let first = &exec[0].body;
        assert_eq!(exec[0].step().as_deref(), Some("patch-css"));
        assert!(exec[0].system().contains("#013220"), "the description is in the prompt");
        assert_eq!(first["system"][0]["cache_control"], json!({"type": "ephemeral"}));
        let tools = first["tools"].as_array().expect("tools");
        assert!(tools.iter().any(|t| t["name"] == "file_patch"), "{tools:?}");
        // What the real API accepts as a tool name: `^[a-zA-Z0-9_-]{1,64}$`.
        for tool in tools {
            let name = tool["name"].as_str().unwrap_or_default();
            let valid = (1..=64).contains(&name.len())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            assert!(valid, "the request offers the invalid tool name {name:?}");
        }
        let (last, rest) = tools.split_last().expect("at least one tool");
        assert_eq!(last["cache_control"], json!({"type": "ephemeral"}));
        assert!(rest.iter().all(|t| t.get("cache_control").is_none()), "one breakpoint");
        assert_eq!(first["tool_choice"], json!({"type": "auto"}));

        // The second call carries the model's two tool_use blocks and, in the next user message,
        // one tool_result per id, in order, with the file's text.
        let second = exec[1].messages();
        assert_eq!(second.len(), 3, "{second:#?}");
        assert_eq!(second[1]["role"], "assistant");
        assert_eq!(tool_use_ids(&second[1]), ["toolu_read_css", "toolu_read_html"]);
        assert_eq!(second[2]["role"], "user");
        let results = tool_results(&second[2]);
        let ids: Vec<&str> = results.iter().map(|(id, _, _)| id.as_str()).collect();
        assert_eq!(ids, ["toolu_read_css", "toolu_read_html"]);
        assert!(results.iter().all(|(_, is_error, _)| !is_error), "{results:?}");
        assert!(results[0].2.contains("background: #ffffff;"), "{}", results[0].2);
        assert!(results[1].2.contains("stylesheet"), "{}", results[1].2);
        // The third call: the whole conversation again plus the patch's result.
        let third = exec[2].messages();
        assert_eq!(third.len(), 5);
        assert_eq!(tool_use_ids(&third[3]), ["toolu_patch"]);
        let patch = tool_results(&third[4]);
        assert_eq!(patch.len(), 1);
        assert_eq!((patch[0].0.as_str(), patch[0].1), ("toolu_patch", false));

        // The judge saw the diff the harness took, not only the executor's claim.
        let judge = &mock.of(Role::Verifier)[0];
        let asked = judge.body["messages"].to_string();
        assert!(asked.contains("+  background: #013220;"), "{asked}");
        assert!(asked.contains("-  background: #ffffff;"), "{asked}");

        let usage = &out.result()["usage"];
        assert_eq!(usage["llm_calls"], 5, "{usage}");
        assert!(usage["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{usage}");
    }

    /// The executor changes the stylesheet with a command (`sed -i`), not a file tool. The judge
    /// is shown the command's change as a diff against the file as it was: one line out, one
    /// in. (A command watches no file, and its change was diffed against nothing, so the judge
    /// saw every line of the file as added, as if the command had written it from scratch.)
    #[test]
    fn the_judge_sees_a_commands_change_as_a_diff_against_the_file_before_it() {
        fn by_command(r: &Request) -> Reply {
            match (r.role, r.turn()) {
                (Role::Planner, _) => plan_reply(&dark_green_plan()),
                (Role::Executor, 0) => Reply::tool_uses(
                    EXECUTOR_MODEL,
                    &[(
                        "toolu_sed",
                        "shell_exec",
                        json!({"command": "sed -i 's/#ffffff/#013220/' style.css"}),
                    )],
                ),
                (Role::Executor, _) => Reply::text(EXECUTOR_MODEL, "Changed it with sed."),
                _ => verdict(true, 0.9, "style.css now sets background: #013220"),
            }
        }
        let mock = MockModel::start(by_command);
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
        let out = ws.agent(DARK_GREEN, &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(ws.read("style.css").contains("background: #013220;"));
        let judge = mock.of(Role::Verifier);
        assert_eq!(judge.len(), 1, "{judge:#?}");
        let asked = judge[0].body["messages"].to_string();
        assert!(asked.contains("+  background: #013220;"), "{asked}");
        assert!(asked.contains("-  background: #ffffff;"), "the line it replaced: {asked}");
        assert!(!asked.contains("+  color: #222222;"), "an unchanged line shown as added: {asked}");
        // One change, listed once (it was listed again as the executor's at the attempt's end).
        assert_eq!(asked.matches("- style.css: 50 -> 50 bytes").count(), 1, "{asked}");
        assert!(!asked.contains("executor changed style.css"), "{asked}");
        let changed = out.result()["file_mutations"].to_string();
        assert_eq!(changed.matches("\"style.css\"").count(), 1, "{changed}");
    }

    /// The three files the rename must touch; the lazy model stops after the first two.
    const RENAME_FILES: [&str; 3] = ["README.md", "docs/guide.md", "src/banner.txt"];

    fn rename_plan() -> Value {
        let assertions: Vec<Value> = RENAME_FILES
            .iter()
            .map(|path| {
                json!({"type": "file_contains", "path": path, "pattern": "Apex",
                       "recovery": format!("replace Acme with Apex in {path}")})
            })
            .collect();
        json!({
            "goal": "Rename the product from Acme to Apex everywhere",
            "steps": [{
                "id": "rename",
                "title": "Rename Acme to Apex",
                "description": "Replace Acme with Apex in README.md, docs/guide.md and src/banner.txt.",
                "assertions": assertions
            }]
        })
    }

    /// Edits README.md and docs/guide.md, then says it is done, on every attempt.
    fn lazy(r: &Request) -> Reply {
        match r.role {
            Role::Planner => plan_reply(&rename_plan()),
            Role::Executor if r.turn() == 0 => Reply::tool_uses(
                EXECUTOR_MODEL,
                &[
                    (
                        "toolu_w1",
                        "file_write",
                        json!({"path": "README.md", "content": "Welcome to Apex.\n"}),
                    ),
                    (
                        "toolu_w2",
                        "file_write",
                        json!({"path": "docs/guide.md", "content": "# Apex guide\n"}),
                    ),
                ],
            ),
            Role::Executor => {
                Reply::text(EXECUTOR_MODEL, "Done: Acme is renamed to Apex everywhere.")
            }
            _ => verdict(true, 0.9, "looks renamed"),
        }
    }

    #[test]
    fn a_lazy_model_that_skips_one_of_three_edits_never_succeeds_and_the_file_is_named() {
        let mock = MockModel::start(lazy);
        let ws = Ws::new(
            &mock.base_url,
            &[
                ("README.md", "Welcome to Acme.\n"),
                ("docs/guide.md", "# Acme guide\n"),
                ("src/banner.txt", "ACME Acme Acme\n"),
            ],
        );
        let out =
            ws.agent("Rename the product from Acme to Apex everywhere", &["--max-replans", "1"]);

        assert_eq!(out.code, 1, "{}", out.stderr);
        assert_eq!(out.status(), "failed");
        // A failed step's writes are not finished goal actions (CONTRACTS §4), but they did
        // change files: the failed assertion is the reason, not `no_effects` ("no effect ran").
        // The retries' identical rewrites are no-op mutations.
        assert_eq!(out.codes()[0], "assertion_failed", "{:?}", out.codes());
        assert!(out.codes()[1..].iter().all(|c| *c == "no_op_mutation"), "{:?}", out.codes());
        // The failed assertion names the edit that was not made, and only that one.
        let failed = &out.result()["reasons"][0];
        assert_eq!(failed["step"], "rename-r1");
        let message = failed["message"].as_str().expect("message");
        assert!(message.contains("'Apex' not found in src/banner.txt"), "{message}");
        assert!(!message.contains("README.md") && !message.contains("docs/guide.md"), "{message}");
        assert_eq!(ws.read("README.md"), "Welcome to Apex.\n");
        assert_eq!(ws.read("src/banner.txt"), "ACME Acme Acme\n");

        // Three attempts of the step, then one replan whose step (renamed, as it reuses a
        // failed id) got three more; each retry was told which assertion failed.
        // The final result holds the last plan version's steps only; the events show both.
        let again = out.step("rename-r1");
        assert_eq!(
            (again["status"].as_str(), again["attempts"].as_u64()),
            (Some("failed"), Some(3))
        );
        assert!(
            out.result()["steps"].as_array().expect("steps").iter().all(|s| s["id"] != "rename")
        );
        let started: Vec<(&str, u64)> = out
            .events
            .iter()
            .filter(|e| e["event"] == "step.started")
            .map(|e| (e["step"].as_str().expect("step"), e["attempt"].as_u64().expect("attempt")))
            .collect();
        assert_eq!(
            started,
            [
                ("rename", 1),
                ("rename", 2),
                ("rename", 3),
                ("rename-r1", 1),
                ("rename-r1", 2),
                ("rename-r1", 3)
            ]
        );
        assert_eq!(mock.of(Role::Planner).len(), 2, "the plan and one replan");
        let exec = mock.of(Role::Executor);
        assert_eq!(exec.len(), 12, "6 attempts of 2 turns");
        let retry =
            exec.iter().find(|r| r.attempt() == Some(2) && r.turn() == 0).expect("attempt 2");
        let system = retry.system();
        assert!(system.contains("Why earlier attempts failed"), "{system}");
        assert!(system.contains("replace Acme with Apex in src/banner.txt"), "the recovery hint");
        // The replan told the planner what failed.
        let replan = mock.of(Role::Planner)[1].body["messages"].to_string();
        assert!(replan.contains("src/banner.txt") && replan.contains("rename"), "{replan}");
        // Tier 1 failed every attempt, so the judge was never asked.
        assert_eq!(mock.of(Role::Verifier).len(), 0);
    }

    #[test]
    fn a_rate_limit_with_retry_after_is_waited_out_and_the_run_succeeds() {
        let mock = MockModel::start(|r: &Request| {
            if r.role == Role::Executor && r.call == 0 {
                return Reply::error(429, "rate_limit_error", "mock: slow down")
                    .with_header("retry-after", "1");
            }
            honest(r)
        });
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
        let out = ws.agent(DARK_GREEN, &[]);

        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.status(), "success");
        assert!(ws.read("style.css").contains("background: #013220;"));
        let exec = mock.of(Role::Executor);
        assert_eq!(exec.len(), 4, "the refused call, its retry, then two more turns");
        // The retry is the same request, sent after the second the server asked for.
        assert_eq!(exec[0].body, exec[1].body);
        assert_eq!(exec[1].turn(), 0);
        let waited = exec[1].at.duration_since(exec[0].at);
        assert!(waited >= Duration::from_millis(990), "retried after {waited:?}");
        assert!(waited < Duration::from_secs(5), "retried after {waited:?}");
        assert_eq!(out.step("patch-css")["attempts"], 1, "a retried call is not a new attempt");
        // The journal keeps the retry with the call it belongs to.
        let store =
            pev_store::Store::open_existing(pev_store::default_path(&ws.path())).expect("journal");
        let run = out.result()["run_id"].as_str().expect("run id").to_owned();
        let calls = store.model_calls(&run).expect("model calls");
        let first = calls.iter().find(|c| c.role == "executor").expect("an executor call");
        assert_eq!(first.retries.len(), 1, "{first:?}");
        assert!(
            first.retries[0].contains("rate") && first.retries[0].contains("retried after"),
            "{first:?}"
        );
        assert!(first.error_type.is_none(), "the call itself succeeded: {first:?}");
        assert!(
            calls.iter().filter(|c| c.role == "executor").skip(1).all(|c| c.retries.is_empty())
        );
    }

    fn look_only_plan() -> Value {
        json!({
            "goal": DARK_GREEN,
            "steps": [{
                "id": "inspect",
                "title": "Look at the stylesheet",
                "description": "Read style.css and index.html and report the body background.",
                "acceptance_criteria": ["the current body background is reported"]
            }]
        })
    }

    /// Reads both files, then claims to have made the change; the judge is fooled too.
    fn discovery_only(r: &Request) -> Reply {
        match r.role {
            Role::Planner => plan_reply(&look_only_plan()),
            Role::Executor if r.turn() == 0 => Reply::tool_uses(
                EXECUTOR_MODEL,
                &[
                    ("toolu_r1", "file_read", json!({"path": "style.css"})),
                    ("toolu_r2", "file_read", json!({"path": "index.html"})),
                ],
            ),
            Role::Executor => Reply::text(
                EXECUTOR_MODEL,
                "The background is now dark green (#013220); the site is done.",
            ),
            _ => verdict(true, 0.9, "the background was reported"),
        }
    }

    #[test]
    fn a_discovery_only_model_is_partial_with_no_effects_whatever_it_claims() {
        let mock = MockModel::start(discovery_only);
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
        let out = ws.agent(DARK_GREEN, &[]);

        assert_eq!(out.code, 3, "{}", out.stderr);
        assert_eq!(out.status(), "partial");
        assert_eq!(out.codes(), ["no_effects"]);
        assert_eq!(out.result()["goal_actions_executed"], false);
        assert_eq!(out.result()["file_mutations"], json!([]));
        assert_eq!(out.step("inspect")["status"], "done");
        assert_eq!(ws.read("style.css"), STYLE);
        assert_eq!(mock.of(Role::Executor).len(), 2);
        assert_eq!(mock.of(Role::Verifier).len(), 1);
        let exec = mock.of(Role::Executor);
        let results = tool_results(&exec[1].messages()[2]);
        assert_eq!(results.len(), 2);
        assert_eq!((results[0].0.as_str(), results[1].0.as_str()), ("toolu_r1", "toolu_r2"));
    }

    /// `pev doctor --ping` against the validating mock: the executor is offered every tool a
    /// run may give it (wire names, loop mode's plan tools too) and makes one tool round trip;
    /// the mock would answer a 400 to anything the API refuses, and doctor would fail.
    #[test]
    fn doctor_ping_offers_the_real_tool_list_and_makes_a_round_trip() {
        let mock = MockModel::start(|r: &Request| match (r.role, r.turn()) {
            (Role::Executor, 0) => Reply::tool_uses(
                EXECUTOR_MODEL,
                &[("toolu_ping", "file_list", json!({"path": "."}))],
            ),
            (Role::Executor, _) => Reply::text(EXECUTOR_MODEL, "ok"),
            _ => Reply::text(r.body["model"].as_str().unwrap_or_default(), "pong"),
        });
        let ws = Ws::new(&mock.base_url, &[]);
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("pev");
        let output = cmd
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ANTHROPIC_API_KEY", KEY)
            .args(["doctor", "--ping", "--workspace"])
            .arg(ws.path())
            .timeout(Duration::from_secs(60))
            .output()
            .expect("pev runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{stdout}");
        assert!(stdout.contains("tools offered, tool round trip ok"), "{stdout}");

        let exec = mock.of(Role::Executor);
        assert_eq!(exec.len(), 2);
        let names: Vec<&str> = exec[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for wanted in ["plan_create", "step_update", "file_read", "file_patch", "shell_exec"] {
            assert!(names.contains(&wanted), "{wanted} not offered: {names:?}");
        }
        assert_eq!(exec[0].body["tool_choice"], json!({"type": "tool", "name": "file_list"}));
        assert_eq!(tool_results(&exec[1].messages()[2])[0].0, "toolu_ping");
        assert_eq!(mock.of(Role::Planner).len(), 1);
        assert_eq!(mock.of(Role::Verifier).len(), 1);
    }

    /// Loop mode over HTTP against the validating mock: plan tools and workspace tools by wire
    /// name, prose before a call, two calls in one turn, a step named by its position, and the
    /// whole conversation (every tool_use answered in the next message, four cache breakpoints
    /// at most) accepted by the API's rules at every one of its calls.
    #[test]
    fn loop_mode_over_http_succeeds_with_requests_the_api_accepts() {
        let mock = MockModel::start(|r: &Request| {
            let model = EXECUTOR_MODEL;
            let call =
                |id: &str, name: &str, input: Value| Reply::tool_uses(model, &[(id, name, input)]);
            match r.turn() {
                0 => call(
                    "toolu_plan",
                    "plan_create",
                    json!({
                        "objective": "A dark green background",
                        "steps": [{"id": "s1", "title": "Patch the body background", "assertions": [
                            {"type": "file_contains", "path": "style.css", "pattern": "#013220"}]}],
                        "postconditions": [{"description": "The background is dark green", "assertions": [
                            {"type": "file_contains", "path": "style.css", "pattern": "background: #013220;"}]}]
                    }),
                ),
                1 => Reply::tool_uses(
                    model,
                    &[
                        ("toolu_start", "step_update", json!({"id": "1", "status": "in_progress"})),
                        ("toolu_read", "file_read", json!({"path": "style.css"})),
                    ],
                ),
                2 => call(
                    "toolu_patch",
                    "file_patch",
                    json!({"path": "style.css", "edits": [
                    {"old": "background: #ffffff;", "new": "background: #013220;"}]}),
                ),
                3 => call(
                    "toolu_done",
                    "step_update",
                    json!({
                    "id": "s1", "status": "done", "evidence": "patched the body rule to #013220"}),
                ),
                4 => call(
                    "toolu_verify",
                    "postcondition_verify",
                    json!({
                    "id": "p1", "evidence": "style.css has background: #013220;"}),
                ),
                _ => Reply::text(model, "The background is now #013220."),
            }
        });
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
        let out = ws.agent(DARK_GREEN, &["--mode", "loop"]);

        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.status(), "success");
        assert!(ws.read("style.css").contains("background: #013220;"));
        let calls = mock.of(Role::Executor);
        assert_eq!(calls.len(), 6);
        for request in &calls {
            let marks = request.body.to_string().matches("cache_control").count();
            assert!((1..=4).contains(&marks), "{marks} breakpoints");
        }
        let results = tool_results(&calls[2].messages()[4]);
        assert_eq!(results.len(), 2);
        assert!(results[0].2.starts_with("Step `s1` is now in progress."), "{results:?}");
    }

    /// A planner that takes the connection and never answers (the mock holds it for 30 s).
    fn hung_planner(r: &Request) -> Reply {
        std::thread::sleep(Duration::from_secs(30));
        Reply::text(r.body["model"].as_str().unwrap_or_default(), "too late")
    }

    /// `--timeout` bounds the run, the call in flight included: against a server that never
    /// answers, the run ends at the limit with a reason that names the role and the model.
    #[test]
    fn timeout_abandons_a_call_to_a_server_that_never_answers() {
        let mock = MockModel::start(hung_planner);
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE)]);
        let started = std::time::Instant::now();
        let out = ws.agent(DARK_GREEN, &["--timeout", "2"]);
        let took = started.elapsed();
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(took < Duration::from_secs(15), "took {took:?}");
        assert!(
            out.stderr.contains(
                "the run's time limit (--timeout) ran out while the planner model \
                 (claude-opus-4-6) was answering"
            ),
            "{}",
            out.stderr
        );
        assert_eq!(mock.of(Role::Planner).len(), 1, "an abandoned call is not retried");
    }

    /// The first Ctrl-C while the planner waits ends the run at once: nothing has run yet.
    #[test]
    fn the_first_ctrl_c_while_planning_stops_the_run() {
        let mock = MockModel::start(hung_planner);
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE)]);
        let out = ws.agent_interrupted(DARK_GREEN, &[], || !mock.of(Role::Planner).is_empty());
        assert_eq!(mock.of(Role::Planner).len(), 1);
        assert_eq!(out.code, Some(130), "{}", out.stderr);
        assert!(
            out.stderr.contains("interrupted while planning; nothing was run"),
            "{}",
            out.stderr
        );
    }

    /// The first Ctrl-C while the planner rewrites the plan (after a step failed) abandons its
    /// call: the run ends at once, `cancelled`, with the result recorded.
    #[test]
    fn the_first_ctrl_c_while_replanning_stops_the_run() {
        let mock = MockModel::start(|r: &Request| match (r.role, r.call) {
            (Role::Planner, 0) => plan_reply(&dark_green_plan()),
            (Role::Planner, _) => hung_planner(r),
            // The executor claims the change without making it: the step fails, a replan follows.
            (Role::Executor, _) => {
                Reply::text(EXECUTOR_MODEL, "Done: the background is dark green.")
            }
            _ => verdict(true, 0.9, "looks right"),
        });
        let ws = Ws::new(&mock.base_url, &[("style.css", STYLE)]);
        let out =
            ws.agent_interrupted(DARK_GREEN, &["--json"], || mock.of(Role::Planner).len() >= 2);
        let (stdout, stderr) = (&out.stdout, &out.stderr);
        assert_ne!(out.code, Some(0), "{stderr}");
        let finished = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "run.finished")
            .unwrap_or_else(|| panic!("no run.finished event\n{stdout}\n{stderr}"));
        let codes: Vec<&str> = finished["result"]["reasons"]
            .as_array()
            .map(|r| r.iter().filter_map(|x| x["code"].as_str()).collect())
            .unwrap_or_default();
        assert!(codes.contains(&"cancelled"), "{codes:?}\n{stderr}");
    }
}
