//! The crash test of `pev run` and `pev resume` (issue 3, "Done means"): a plan of 200 steps that
//! write files is killed with SIGKILL at 20 random points across runs, and each run is resumed
//! until a resume finishes. Every run must end `success`, every file must hold exactly what one
//! write and one patch leave, the journal must show exactly one applied call per step (a call the
//! kill interrupted after it took effect recorded as `recovered`, one it interrupted before as
//! `failed` and run again), and `PRAGMA integrity_check` must say `ok`.
//!
//! The plan makes a double application visible in the files themselves: 100 `file.write` steps
//! create `f/NNN.txt` with `v0\n`, and 100 `file.patch` steps, each after its write, replace
//! `v0\n` with `v0\nv1\n`. A write applied again after its patch would undo the patch; a patch
//! applied twice would leave `v0\nv1\nv1\n`. A few more dependencies between files make the DAG
//! more than 100 independent pairs.
//!
//! Kill points (counted in events read) come from a fixed-seed xorshift generator, so they are the
//! same on every run of the test; which calls are in flight at each depends on timing. After
//! every kill the test reads a copy of the journal (the original stays untouched for `pev
//! resume`) and the files, and predicts how each interrupted call must end: `recovered` when the
//! file already holds what the call writes, `failed` ("interrupted before it took effect") when it
//! still holds what was there before. The journal at the end must match those predictions exactly.

#[cfg(test)]
mod killed_runs {
    use std::collections::{BTreeMap, BTreeSet};
    use std::fs::File;
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    use pev_store::{Store, ToolCallStatus};
    use serde_json::{Value, json};

    /// Files in the plan; each has a write step and a patch step.
    const FILES: usize = 100;
    /// SIGKILLs that must land on a running `pev` process, across all runs.
    const KILLS: usize = 20;
    /// Resumes of one run before the test gives up ("a resume that never finishes").
    const MAX_RESUMES: usize = 8;
    const SEED: u64 = 0x2026_1121_0000_0003;
    const V0: &str = "v0\n";
    const V1: &str = "v0\nv1\n";
    const POLICY: &str = "max_steps: 1000\n";

    /// xorshift64: deterministic, no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }

        /// Uniform enough in `lo..=hi`.
        fn between(&mut self, lo: usize, hi: usize) -> usize {
            let span = (hi - lo + 1) as u64;
            lo + (self.next() % span) as usize
        }
    }

    fn write_id(i: usize) -> String {
        format!("w{i:03}")
    }

    fn patch_id(i: usize) -> String {
        format!("p{i:03}")
    }

    fn file(i: usize) -> String {
        format!("f/{i:03}.txt")
    }

    /// The 200-step plan, in the order write, patch, write, patch, …
    fn plan() -> Value {
        let mut steps = Vec::new();
        for i in 0..FILES {
            let mut write = json!({
                "id": write_id(i),
                "tool": "file.write",
                "parameters": {"path": file(i), "content": V0},
                "assertions": [{"type": "file_exists", "path": file(i)}],
            });
            // Every tenth file waits for the patch of the file before it: ten blocks in a row.
            if i > 0 && i % 10 == 0 {
                write["depends_on"] = json!([patch_id(i - 1)]);
            }
            let mut deps = vec![write_id(i)];
            // Some patches also wait for the patch three files back.
            if i >= 3 && i % 7 == 3 {
                deps.push(patch_id(i - 3));
            }
            let patch = json!({
                "id": patch_id(i),
                "tool": "file.patch",
                "parameters": {"path": file(i), "edits": [{"old": V0, "new": V1}]},
                "depends_on": deps,
                "assertions": [{"type": "file_contains", "path": file(i), "pattern": "v1"}],
            });
            steps.push(write);
            steps.push(patch);
        }
        json!({"goal": "Write the files under f/ and add the v1 line to each", "steps": steps})
    }

    /// How one `pev` process ended.
    #[derive(Debug)]
    enum End {
        /// SIGKILLed by the test while it ran.
        Killed,
        /// Exited by itself (before the kill, if one was planned): its code and stdout lines.
        Exited { code: i32, lines: Vec<String> },
    }

    /// One run's temp dir: the workspace, the plan and policy beside it (not in it), and a log
    /// of every process's stderr.
    struct Case {
        _dir: tempfile::TempDir,
        root: PathBuf,
        ws: PathBuf,
        sessions: usize,
    }

    impl Case {
        fn new(plan: &str) -> Self {
            let dir = tempfile::tempdir().expect("temp dir");
            let root = dir.path().to_path_buf();
            let ws = root.join("ws");
            std::fs::create_dir_all(&ws).expect("workspace dir");
            std::fs::write(root.join("plan.json"), plan).expect("write plan");
            std::fs::write(root.join("policy.yaml"), POLICY).expect("write policy");
            Case { _dir: dir, root, ws, sessions: 0 }
        }

        fn db(&self) -> PathBuf {
            self.ws.join(".pev").join("pev.db")
        }

        fn stderr_log(&self, session: usize) -> PathBuf {
            self.root.join(format!("stderr-{session}.txt"))
        }

        fn all_stderr(&self) -> String {
            (0..self.sessions)
                .map(|s| {
                    let text = std::fs::read_to_string(self.stderr_log(s)).unwrap_or_default();
                    format!("--- session {s}:\n{text}")
                })
                .collect()
        }

        /// Runs `pev` with `args`; when `kill_after` is `Some(n)`, SIGKILLs it after reading `n`
        /// lines of its stdout (unless it ended first).
        fn session(&mut self, args: &[&str], kill_after: Option<usize>) -> End {
            let log = File::create(self.stderr_log(self.sessions)).expect("stderr log");
            self.sessions += 1;
            let mut child = Command::new(env!("CARGO_BIN_EXE_pev"))
                .args(args)
                .env_remove("PEV_MAX_INPUT_BYTES")
                .env_remove("NO_COLOR")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .spawn()
                .expect("pev starts");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
            let mut lines = Vec::new();
            let mut line = String::new();
            let mut killed = false;
            loop {
                if kill_after == Some(lines.len()) {
                    // std's Child::kill sends SIGKILL.
                    child.kill().expect("kill pev");
                    killed = true;
                    break;
                }
                line.clear();
                if stdout.read_line(&mut line).expect("read pev's stdout") == 0 {
                    break;
                }
                lines.push(line.trim_end().to_owned());
            }
            let status = child.wait().expect("wait for pev");
            if status.signal() == Some(9) {
                assert!(killed, "pev died of SIGKILL that the test did not send");
                return End::Killed;
            }
            // It exited before the kill reached it: the rest of its output is in the pipe.
            let mut rest = String::new();
            stdout.read_to_string(&mut rest).expect("read the rest of pev's stdout");
            lines.extend(rest.lines().map(str::to_owned));
            let code = status.code().unwrap_or_else(|| panic!("pev ended by {status}"));
            End::Exited { code, lines }
        }

        fn run(&mut self, kill_after: Option<usize>) -> End {
            let (plan, policy) = (self.root.join("plan.json"), self.root.join("policy.yaml"));
            let ws = self.ws.clone();
            let args = ["run", path(&plan), "--policy", path(&policy), "--workspace", path(&ws)];
            self.session(&[&args[..], &["--json", "--jobs", "4"]].concat(), kill_after)
        }

        fn resume(&mut self, kill_after: Option<usize>) -> End {
            let ws = self.ws.clone();
            self.session(&["resume", "last", "--workspace", path(&ws), "--json"], kill_after)
        }

        /// The content of every plan file (`None` while absent).
        fn files(&self) -> Vec<Option<String>> {
            (0..FILES).map(|i| std::fs::read_to_string(self.ws.join(file(i))).ok()).collect()
        }
    }

    fn path(p: &Path) -> &str {
        p.to_str().expect("UTF-8 temp path")
    }

    /// Parses `--json` output: every line one event; returns the `run.finished` result.
    fn finished_result(lines: &[String], log: &str) -> Value {
        let events: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        let last = events.last().unwrap_or_else(|| panic!("no output; stderr:\n{log}"));
        assert_eq!(last["event"], "run.finished", "last event: {last}\nstderr:\n{log}");
        last["result"].clone()
    }

    /// How an interrupted call must end, judged from the files right after the kill.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Expect {
        /// The file already held what the call writes: `recovered`, never applied again.
        Recovered,
        /// The file still held what was there before: `failed`, and the step runs again.
        NotApplied,
    }

    /// Reads a copy of the journal after a kill (so `pev resume` still finds the original
    /// exactly as the kill left it) and records, for every tool call left `started`, how it must
    /// end given the file's content now.
    fn predict(case: &Case, expect: &mut BTreeMap<String, Expect>) {
        let copy = tempfile::tempdir().expect("temp dir");
        let db = copy.path().join("pev.db");
        for suffix in ["", "-wal"] {
            let from = PathBuf::from(format!("{}{suffix}", case.db().display()));
            if from.exists() {
                std::fs::copy(&from, format!("{}{suffix}", db.display())).expect("copy journal");
            }
        }
        let store = Store::open_existing(&db).expect("the killed run's journal opens");
        assert_eq!(store.integrity_check().expect("integrity check"), "ok", "after a kill");
        let run_id = store.resolve_run("last").expect("a run was created before the kill");
        let record = store.load_run(&run_id).expect("load the killed run");
        let files = case.files();
        for call in record.tool_calls.iter().filter(|c| c.status == ToolCallStatus::Started) {
            let i: usize = call.step_id[1..].parse().expect("step id w/pNNN");
            let now = files[i].as_deref();
            let (before, after) =
                if call.tool == "file.write" { (None, V0) } else { (Some(V0), V1) };
            let verdict = if now == Some(after) {
                Expect::Recovered
            } else if now == before {
                Expect::NotApplied
            } else {
                panic!(
                    "{} interrupted with {} holding {now:?}: neither before nor after",
                    call.call_id,
                    file(i)
                );
            };
            if let Some(old) = expect.insert(call.call_id.clone(), verdict) {
                assert_eq!(old, verdict, "{} judged differently after two kills", call.call_id);
            }
        }
    }

    /// Everything a finished run must show: success in its last event, in `pev show` and in the
    /// journal; the files; one applied call per step; the predicted ends of interrupted calls;
    /// an intact journal.
    fn verify(case: &Case, result: &Value, expect: &BTreeMap<String, Expect>, log: &str) {
        assert_eq!(result["status"], "success", "run.finished result: {result}\nstderr:\n{log}");
        for (i, content) in case.files().iter().enumerate() {
            assert_eq!(content.as_deref(), Some(V1), "{} after the run", file(i));
        }

        let show = Command::new(env!("CARGO_BIN_EXE_pev"))
            .args(["show", "last", "--format", "json", "--workspace", path(&case.ws)])
            .output()
            .expect("pev show runs");
        assert_eq!(
            show.status.code(),
            Some(0),
            "pev show: {}",
            String::from_utf8_lossy(&show.stderr)
        );
        let shown: Value = serde_json::from_slice(&show.stdout).expect("pev show prints JSON");
        assert_eq!(shown["status"], "success");
        assert_eq!(shown["run_id"], result["run_id"]);
        let steps = shown["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 2 * FILES);
        for step in steps {
            assert_eq!(step["status"], "done", "step {step}");
        }

        let store = Store::open_existing(case.db()).expect("journal opens");
        assert_eq!(store.integrity_check().expect("integrity check"), "ok");
        let run_id = result["run_id"].as_str().expect("run_id");
        let record = store.load_run(run_id).expect("load run");
        assert_eq!(record.status, "success");
        let mut applied: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut recovered = BTreeSet::new();
        let mut failed = BTreeSet::new();
        for call in &record.tool_calls {
            match call.status {
                ToolCallStatus::Finished | ToolCallStatus::Recovered => {
                    applied.entry(call.step_id.as_str()).or_default().push(&call.call_id);
                }
                ToolCallStatus::Failed => {
                    let error = call.error.as_deref().unwrap_or_default();
                    assert!(
                        error.starts_with("interrupted before it took effect"),
                        "{} failed for another reason: {error}",
                        call.call_id
                    );
                    failed.insert(call.call_id.clone());
                }
                ToolCallStatus::Started => {
                    panic!("{} is still `started` after the run", call.call_id)
                }
            }
            if call.status == ToolCallStatus::Recovered {
                // The tool's own output shape (what the model would have been shown): that it
                // was recovered is the call's status.
                let output = call.output.as_ref().expect("a recovered call's output");
                assert!(output.get("recovered").is_none() && output.get("sha256").is_some());
                recovered.insert(call.call_id.clone());
            }
        }
        for i in 0..FILES {
            for id in [write_id(i), patch_id(i)] {
                let calls = applied.get(id.as_str()).cloned().unwrap_or_default();
                assert_eq!(calls.len(), 1, "step {id}: applied calls {calls:?}");
            }
        }
        assert_eq!(applied.len(), 2 * FILES, "applied calls of unknown steps: {applied:?}");
        let want = |e: Expect| -> BTreeSet<String> {
            expect.iter().filter(|(_, v)| **v == e).map(|(k, _)| k.clone()).collect()
        };
        assert_eq!(recovered, want(Expect::Recovered), "calls recorded `recovered`");
        assert_eq!(failed, want(Expect::NotApplied), "calls recorded `failed` and run again");
        // Every `tool.finished` event marked recovered is a `recovered` row.
        for event in store.events(run_id).expect("events") {
            let body = serde_json::to_value(&event).expect("event JSON");
            if body["event"] == "tool.finished" && body["recovered"] == json!(true) {
                let call_id = body["call_id"].as_str().expect("call_id");
                assert!(
                    recovered.contains(call_id),
                    "event says {call_id} recovered; row does not"
                );
            }
        }
    }

    #[test]
    fn runs_killed_at_random_points_resume_to_success_and_apply_every_write_once() {
        let plan = serde_json::to_string_pretty(&plan()).expect("plan JSON");
        let mut rng = Rng(SEED);

        // An uninterrupted run first: it must succeed, and it says how many events a run prints,
        // the range kill points are drawn from.
        let mut case = Case::new(&plan);
        let End::Exited { code, lines } = case.run(None) else { panic!("not killed") };
        let log = case.all_stderr();
        assert_eq!(code, 0, "uninterrupted run; stderr:\n{log}");
        let result = finished_result(&lines, &log);
        verify(&case, &result, &BTreeMap::new(), &log);
        let events = lines.len();
        assert!(events > 4 * 2 * FILES, "{events} events for {} steps", 2 * FILES);

        let mut kills = 0;
        let mut runs = 0;
        let mut resumes_total = 0;
        let mut recovered_total = 0;
        let mut rerun_total = 0;
        while kills < KILLS {
            runs += 1;
            assert!(runs <= 3 * KILLS, "only {kills} of {runs} runs were killed while running");
            let mut case = Case::new(&plan);
            let mut expect = BTreeMap::new();
            let kill_at = rng.between(1, events - 2);
            let mut end = case.run(Some(kill_at));
            let mut resumes = 0;
            let result = loop {
                match end {
                    End::Killed => {
                        kills += 1;
                        predict(&case, &mut expect);
                    }
                    End::Exited { code, lines } => {
                        let log = case.all_stderr();
                        // The result's last lines say why a run did not succeed.
                        let tail = lines[lines.len().saturating_sub(3)..].join("\n");
                        assert_eq!(
                            code, 0,
                            "run {runs}, after {resumes} resumes; stderr:\n{log}\nstdout's end:\n{tail}"
                        );
                        break finished_result(&lines, &log);
                    }
                }
                resumes += 1;
                assert!(
                    resumes <= MAX_RESUMES,
                    "run {runs}: {MAX_RESUMES} resumes did not finish it; stderr:\n{}",
                    case.all_stderr()
                );
                // One resume in three is killed too, while kills are left to spend.
                let kill =
                    (kills < KILLS && rng.between(0, 2) == 0).then(|| rng.between(1, events / 2));
                end = case.resume(kill);
            };
            resumes_total += resumes;
            recovered_total += expect.values().filter(|e| **e == Expect::Recovered).count();
            rerun_total += expect.values().filter(|e| **e == Expect::NotApplied).count();
            verify(&case, &result, &expect, &case.all_stderr());
        }
        assert_eq!(kills, KILLS);
        // The point of the test is interrupted calls; a seed that never hit one tests nothing.
        assert!(recovered_total > 0, "no kill landed between a write and its journaled end");
        eprintln!(
            "crash test: {KILLS} kills over {runs} runs, {resumes_total} resumes, \
             {recovered_total} interrupted calls recovered, {rerun_total} run again"
        );
    }
}
