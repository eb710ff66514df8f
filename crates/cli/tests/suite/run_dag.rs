//! The scheduler through `pev run`: independent steps overlap in time up to `--jobs`, a
//! dependent step never starts before its dependencies finished, `on_fail: abort` starts nothing
//! new while `continue` lets independent branches go on, `retry` honours `max_attempts`, and
//! references are resolved from earlier outputs (type-preserving, embedded, and failing clearly).

use serde_json::json;

use super::run_support::{Outcome, Ws, at_step, run_level};

/// The `seq` of the first event named `kind` about step `id`.
fn seq(out: &Outcome, kind: &str, id: &str) -> u64 {
    let e = out.first(kind, id).unwrap_or_else(|| panic!("no {kind} for {id}"));
    e["seq"].as_u64().expect("seq")
}

#[test]
fn independent_steps_overlap_and_a_join_waits_for_all_of_them() {
    let ws = Ws::new();
    let part = |i: u32| {
        json!({"id": format!("part-{i}"), "tool": "shell.exec",
               "parameters": {"argv": ["sleep", "0.3"]},
               "assertions": [{"type": "exit_code_eq", "code": 0}]})
    };
    let plan = json!({"goal": "Build four parts and join them", "steps": [
        part(1), part(2), part(3), part(4),
        {"id": "join", "tool": "file.write",
         "depends_on": ["part-1", "part-2", "part-3", "part-4"],
         "parameters": {"path": "joined.txt", "content": "joined\n"},
         "assertions": [{"type": "file_exists", "path": "joined.txt"}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "4"]);
    assert_eq!(out.code, 0, "{out:?}");
    let parts = ["part-1", "part-2", "part-3", "part-4"];
    // `at` is RFC 3339 UTC with milliseconds: ordered as strings.
    let last_start = parts.iter().map(|p| out.at("step.started", p)).max().expect("starts");
    let first_end = parts.iter().map(|p| out.at("step.finished", p)).min().expect("ends");
    assert!(last_start < first_end, "all four run at once: {last_start} vs {first_end}");
    let last_end = parts.iter().map(|p| out.at("step.finished", p)).max().expect("ends");
    assert!(out.at("step.started", "join") >= last_end, "join starts after every part");
    for p in parts {
        assert!(seq(&out, "step.started", "join") > seq(&out, "step.finished", p), "{p}");
    }
    let took = out.result()["duration_ms"].as_u64().expect("duration");
    assert!(took < 1000, "four 0.3 s sleeps in parallel took {took} ms");
}

/// Six independent steps patch one file (spelled two ways), each its own line, four at a time. A patch reads the
/// file and writes it back: two at once both read the old content and the second write undid the
/// first's change (a lost update: 4 runs in 15 of a two-step plan lost one, and failed their
/// final re-check). One writer of a file at a time: every change is kept, every run succeeds.
#[test]
fn independent_steps_that_patch_one_file_keep_every_change() {
    let keys = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let steps: Vec<serde_json::Value> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            // One file, spelled two ways.
            let path = if i % 2 == 0 { "./config.txt" } else { "config.txt" };
            json!({"id": format!("set-{k}"), "tool": "file.patch",
                   "parameters": {"path": path,
                                  "edits": [{"old": format!("{k} = 1"), "new": format!("{k} = 2")}]},
                   "assertions": [{"type": "file_contains", "path": "config.txt",
                                   "pattern": format!("{k} = 2")}]})
        })
        .collect();
    let plan = json!({"goal": "Set every key of config.txt to 2", "steps": steps});
    for round in 0..4 {
        let ws = Ws::new();
        let config: String = keys.iter().map(|k| format!("{k} = 1\n")).collect();
        ws.file("config.txt", &config);
        let out = ws.run(&plan, &["--jobs", "4"]);
        let now = ws.read("config.txt");
        assert_eq!(out.code, 0, "round {round}: {now}\n{out:?}");
        assert_eq!(now, config.replace(" = 1", " = 2"), "round {round}: a change was lost");
    }
}

#[test]
fn jobs_1_runs_one_step_at_a_time() {
    let ws = Ws::new();
    let nap = |id: &str| {
        json!({"id": id, "tool": "shell.exec", "parameters": {"argv": ["sleep", "0.1"]},
               "assertions": [{"type": "exit_code_eq", "code": 0}]})
    };
    let plan = json!({"goal": "Nap three times", "steps": [nap("a"), nap("b"), nap("c")]});
    let out = ws.run(&plan, &["--jobs", "1"]);
    assert_eq!(out.code, 0, "{out:?}");
    let mut spans: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .map(|id| (out.at("step.started", id), out.at("step.finished", id)))
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "no overlap with --jobs 1: {spans:?}");
    }
}

#[test]
fn a_chain_never_overlaps_even_with_many_jobs() {
    let ws = Ws::new();
    let plan = json!({"goal": "Run a chain", "steps": [
        {"id": "first", "tool": "shell.exec", "parameters": {"argv": ["sleep", "0.2"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "second", "tool": "shell.exec", "depends_on": ["first"],
         "parameters": {"argv": ["sleep", "0.1"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        // A reference is a dependency too.
        {"id": "third", "tool": "shell.exec",
         "parameters": {"argv": ["echo", "${second.result.stdout}"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "8"]);
    assert_eq!(out.code, 0, "{out:?}");
    for (before, after) in [("first", "second"), ("second", "third")] {
        assert!(
            out.at("step.started", after) >= out.at("step.finished", before),
            "{after} started before {before} finished"
        );
        assert!(seq(&out, "step.started", after) > seq(&out, "step.finished", before));
    }
}

#[test]
fn on_fail_abort_starts_nothing_new_but_lets_running_steps_finish() {
    let ws = Ws::new();
    let plan = json!({"goal": "Prepare the release", "steps": [
        {"id": "fails", "tool": "file.read", "parameters": {"path": "missing.txt"}},
        {"id": "running", "tool": "shell.exec", "parameters": {"argv": ["sleep", "0.3"]},
         "assertions": [{"type": "exit_code_eq", "code": 0}]},
        {"id": "independent", "tool": "file.write",
         "parameters": {"path": "independent.txt", "content": "x"},
         "assertions": [{"type": "file_exists", "path": "independent.txt"}]},
        {"id": "dependent", "tool": "file.write", "depends_on": ["running"],
         "parameters": {"path": "dependent.txt", "content": "x"},
         "assertions": [{"type": "file_exists", "path": "dependent.txt"}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "2"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.status(), "failed");
    assert_eq!(out.step_status("fails"), "failed");
    assert_eq!(out.step_status("running"), "done", "a running step finishes");
    for id in ["independent", "dependent"] {
        assert_eq!(out.step_status(id), "pending", "{id}");
        assert!(out.first("step.started", id).is_none(), "{id} must not start");
        assert!(!ws.path().join(format!("{id}.txt")).exists(), "{id}");
    }
    assert_eq!(
        out.reasons(),
        vec![at_step("step_failed", "fails"), run_level("steps_not_run")],
        "the sleep is an exec effect, so goal actions ran"
    );
}

#[test]
fn on_fail_continue_lets_independent_branches_run_and_skips_dependents() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write the outputs", "steps": [
        {"id": "bad", "tool": "file.read", "on_fail": "continue",
         "parameters": {"path": "missing.txt"}},
        {"id": "child", "tool": "file.write", "depends_on": ["bad"],
         "parameters": {"path": "child.txt", "content": "x"},
         "assertions": [{"type": "file_exists", "path": "child.txt"}]},
        {"id": "grandchild", "tool": "file.read", "depends_on": ["child"],
         "parameters": {"path": "child.txt"}},
        {"id": "other", "tool": "file.write", "parameters": {"path": "other.txt", "content": "y"},
         "assertions": [{"type": "file_exists", "path": "other.txt"}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "1"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.status(), "partial");
    assert_eq!(out.step_status("bad"), "failed");
    assert_eq!(out.step_status("child"), "skipped");
    assert_eq!(out.step_status("grandchild"), "skipped");
    assert_eq!(out.step_status("other"), "done");
    assert_eq!(ws.read("other.txt"), "y");
    assert!(!ws.path().join("child.txt").exists());
    assert!(out.step_error("child").contains("bad"), "{}", out.step_error("child"));
    // Skipped steps are not themselves a reason.
    assert_eq!(out.reasons(), vec![at_step("step_failed", "bad")]);
}

#[test]
fn retry_runs_a_failing_step_again_up_to_max_attempts() {
    let ws = Ws::new();
    let counting =
        "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; test $n -ge 3";
    let flaky = |max: u32| {
        json!({"goal": "Run the flaky check", "steps": [
            {"id": "flaky", "tool": "shell.exec", "on_fail": "retry", "max_attempts": max,
             "parameters": {"argv": ["sh", "-c", counting]},
             "assertions": [{"type": "exit_code_eq", "code": 0}]}
        ]})
    };
    let out = ws.run(&flaky(3), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.step("flaky")["attempts"], 3);
    let attempts: Vec<u64> =
        out.of("step.started").iter().map(|e| e["attempt"].as_u64().expect("attempt")).collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    assert_eq!(ws.read("count"), "3\n");

    std::fs::remove_file(ws.path().join("count")).expect("reset the counter");
    let out = ws.run(&flaky(2), &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(out.step_status("flaky"), "failed");
    assert_eq!(out.step("flaky")["attempts"], 2);
    assert_eq!(ws.read("count"), "2\n", "exactly two attempts ran");
    assert_eq!(out.reasons(), vec![at_step("assertion_failed", "flaky")]);
}

#[test]
fn references_keep_their_json_type_or_are_embedded_as_text() {
    let ws = Ws::new();
    ws.file("three.txt", "a\nb\nc\n");
    ws.file("lines.txt", "1\n2\n3\n4\n5\n");
    // `{{…}}` and `${…}`, embedded: numbers, strings and an object become text.
    let content = "lines={{meta.result.total_lines}} first=${list.result.entries.0.path} \
                   head=${head.result.content}entry=${list.result.entries.0}";
    let plan = json!({"goal": "Write the summary", "steps": [
        {"id": "meta", "tool": "file.read", "parameters": {"path": "three.txt"}},
        {"id": "list", "tool": "file.list", "parameters": {"path": ".", "glob": "three.*"}},
        {"id": "head", "tool": "file.read",
         "parameters": {"path": "lines.txt", "limit": "${meta.result.total_lines}"}},
        {"id": "summary", "tool": "file.write", "depends_on": ["head"],
         "parameters": {"path": "summary.txt", "content": content},
         "assertions": [{"type": "file_exists", "path": "summary.txt"}]}
    ]});
    let out = ws.run(&plan, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    // A string that is exactly one reference takes the value with its type: a number here.
    let called = out.first("tool.called", "head").expect("tool.called").clone();
    assert_eq!(called["arguments"], json!({"path": "lines.txt", "limit": 3}));
    assert_eq!(out.step("head")["output"]["content"], "1\n2\n3\n");
    assert_eq!(
        ws.read("summary.txt"),
        "lines=3 first=three.txt head=1\n2\n3\n\
         entry={\"path\":\"three.txt\",\"kind\":\"file\",\"bytes\":6}"
    );
}

#[test]
fn a_reference_to_a_missing_path_fails_the_step_with_an_error_naming_it() {
    let ws = Ws::new();
    ws.file("a.txt", "hello\n");
    let plan = json!({"goal": "Copy the file", "steps": [
        {"id": "read", "tool": "file.read", "parameters": {"path": "a.txt"}},
        {"id": "missing-key", "tool": "file.write", "on_fail": "continue",
         "parameters": {"path": "copy.txt", "content": "${read.result.contents}"},
         "assertions": [{"type": "file_exists", "path": "copy.txt"}]},
        {"id": "out-of-range", "tool": "file.write", "on_fail": "continue",
         "parameters": {"path": "copy2.txt", "content": "x${read.result.content.7}"},
         "assertions": [{"type": "file_exists", "path": "copy2.txt"}]}
    ]});
    let out = ws.run(&plan, &["--jobs", "1"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.step_status("missing-key"), "failed");
    let error = out.step_error("missing-key");
    for needle in ["${read.result.contents}", "contents", "/parameters/content", "content"] {
        assert!(error.contains(needle), "{error:?} lacks {needle:?}");
    }
    assert!(error.contains("sha256"), "it lists the keys that exist: {error}");
    assert_eq!(out.step_status("out-of-range"), "failed");
    let error = out.step_error("out-of-range");
    assert!(error.contains("${read.result.content.7}"), "{error}");
    // Never replaced by an empty string: nothing was written, no tool was called.
    assert!(!ws.path().join("copy.txt").exists());
    assert!(!ws.path().join("copy2.txt").exists());
    assert!(out.first("tool.called", "missing-key").is_none());
    assert_eq!(
        out.reasons(),
        vec![
            at_step("step_failed", "missing-key"),
            at_step("step_failed", "out-of-range"),
            run_level("no_effects")
        ]
    );
}
