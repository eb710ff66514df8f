//! Tests of the cache's pieces: the key (stable where it must be, changing where it must),
//! the checks that decide whether an entry is still valid, what calls teach the trace, how an
//! entry is built and stored.

use std::collections::HashMap;

use pev_lint::policy::Glob;
use pev_protocol::Step;
use pev_protocol::tool::Effect;
use serde_json::{Value, json};

use super::*;
use crate::cache::files::{check_files, check_tools, listing_sha};
use crate::cache::trace::{Entry, FileRead, FileWrite, ListingRead, Trace};
use crate::call::StepMutation;
use crate::call::{Before, Call};
use crate::digest::sha256_hex;
use crate::state::slot::Slot;
use crate::state::step::StepReport;
use crate::step::cache::build_entry;
use pev_tools::Workspace;

fn step(value: Value) -> Step {
    serde_json::from_value(value).unwrap()
}

fn write_step() -> Step {
    step(json!({"id": "w", "tool": "file.write", "parameters": {"path": "a.txt", "content": "x"}}))
}

fn no_inputs() -> HashMap<String, Value> {
    HashMap::new()
}

fn tool_key(step: &Step, args: &Value) -> String {
    key(step, &seen_inputs(step, Some(args), &no_inputs())).unwrap()
}

struct Ws {
    _dir: tempfile::TempDir,
    ws: Workspace,
}

impl Ws {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        Self { _dir: dir, ws }
    }

    fn write(&self, path: &str, content: &str) {
        let full = self.ws.root().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    }
}

fn sha(text: &str) -> Option<String> {
    Some(sha256_hex(text.as_bytes()))
}

fn entry(reads: Vec<FileRead>, writes: Vec<FileWrite>, tools: &[&str]) -> Entry {
    Entry {
        key: "k".repeat(64),
        run_id: "run-1".to_owned(),
        step_id: "w".to_owned(),
        output: Some(json!({"bytes": 1})),
        evidence: vec!["file.write changed a.txt: 0 -> 1 bytes, +1 -0 lines".to_owned()],
        assertions: Vec::new(),
        reads,
        writes,
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        goal_action: true,
        created_at: "2026-01-01T00:00:00Z".to_owned(),
    }
}

fn file_read(path: &str, sha256: Option<String>) -> FileRead {
    FileRead { path: path.to_owned(), sha256, listing: None }
}

#[test]
fn canonical_sorts_keys_at_every_level() {
    let a = json!({"b": 1, "a": {"y": [2, {"d": 1, "c": 2}], "x": "s"}});
    assert_eq!(canonical(&a), r#"{"a":{"x":"s","y":[2,{"c":2,"d":1}]},"b":1}"#);
}

#[test]
fn the_key_does_not_depend_on_field_order() {
    let one = step(json!({"id": "w", "tool": "file.write",
        "parameters": {"path": "a.txt", "content": "x"}}));
    let two = step(json!({"parameters": {"content": "x", "path": "a.txt"},
        "tool": "file.write", "id": "w"}));
    let args_one = json!({"path": "a.txt", "content": "x"});
    let args_two = json!({"content": "x", "path": "a.txt"});
    let k = tool_key(&one, &args_one);
    assert_eq!(k.len(), 64);
    assert_eq!(k, tool_key(&two, &args_two));
    assert_eq!(k, tool_key(&one, &args_one), "the same step and inputs give the same key");
}

#[test]
fn the_key_changes_with_the_definition_and_the_arguments() {
    let args = json!({"path": "a.txt", "content": "x"});
    let base = tool_key(&write_step(), &args);
    let described = step(json!({"id": "w", "tool": "file.write", "description": "new",
        "parameters": {"path": "a.txt", "content": "x"}}));
    assert_ne!(base, tool_key(&described, &args), "a changed description is a new step");
    let renamed = step(json!({"id": "w2", "tool": "file.write",
        "parameters": {"path": "a.txt", "content": "x"}}));
    assert_ne!(base, tool_key(&renamed, &args));
    assert_ne!(base, tool_key(&write_step(), &json!({"path": "a.txt", "content": "y"})));
}

#[test]
fn a_tool_step_sees_its_arguments_and_the_outputs_its_assertions_name() {
    let s = step(json!({"id": "t", "tool": "test.echo", "parameters": {"key": "${a.result.v}"},
        "assertions": [{"type": "exit_code_eq", "code": 0, "step": "b"}]}));
    let args = json!({"key": "1"});
    let inputs = |a: i64, b: i64| {
        HashMap::from([
            ("a".to_owned(), json!({"v": "1", "other": a})),
            ("b".to_owned(), json!({"exit_code": b})),
        ])
    };
    let k = |i: &HashMap<String, Value>| key(&s, &seen_inputs(&s, Some(&args), i)).unwrap();
    // `a` reaches the step only through the resolved arguments: its other fields do not count.
    assert_eq!(k(&inputs(1, 0)), k(&inputs(2, 0)));
    // `b`'s output decides an assertion's result.
    assert_ne!(k(&inputs(1, 0)), k(&inputs(1, 1)));
}

#[test]
fn an_instruction_step_sees_all_its_inputs_in_any_order() {
    let s = step(json!({"id": "i", "description": "do it", "depends_on": ["a", "b"]}));
    let mut first = HashMap::new();
    first.insert("a".to_owned(), json!({"summary": "A"}));
    first.insert("b".to_owned(), json!({"summary": "B"}));
    let mut second = HashMap::new();
    second.insert("b".to_owned(), json!({"summary": "B"}));
    second.insert("a".to_owned(), json!({"summary": "A"}));
    let k = |i: &HashMap<String, Value>| key(&s, &seen_inputs(&s, None, i)).unwrap();
    assert_eq!(k(&first), k(&second));
    second.insert("a".to_owned(), json!({"summary": "A, differently"}));
    assert_ne!(k(&first), k(&second));
}

#[test]
fn never_cached_names_approval_effects_and_outside_assertions() {
    let approval = step(json!({"id": "s", "tool": "file.write", "requires_approval": true}));
    assert!(never_cached(&approval, Some(Effect::Write)).unwrap().contains("approval"));
    let exec = step(json!({"id": "s", "tool": "shell.exec"}));
    assert!(never_cached(&exec, Some(Effect::Exec)).unwrap().contains("Exec effect"));
    assert!(never_cached(&exec, Some(Effect::Network)).unwrap().contains("Network effect"));
    let outside = step(json!({"id": "s", "description": "x",
        "assertions": [{"type": "command_succeeds", "command": "true"}]}));
    assert_eq!(
        never_cached(&outside, None).unwrap(),
        "its command_succeeds assertion looks outside the workspace"
    );
    assert_eq!(never_cached(&write_step(), Some(Effect::Write)), None);
}

#[test]
fn an_entry_is_valid_while_its_reads_and_writes_hold() {
    let w = Ws::new();
    w.write("in.txt", "input");
    w.write("a.txt", "x");
    let e = entry(
        vec![file_read("in.txt", sha("input")), file_read("gone.txt", None)],
        vec![FileWrite { path: "a.txt".to_owned(), sha256_after: sha("x") }],
        &["file.write"],
    );
    assert_eq!(check_files(&w.ws, &e), Ok(()));

    w.write("in.txt", "input, edited");
    assert_eq!(check_files(&w.ws, &e), Err("in.txt changed since run run-1".to_owned()));
    w.write("in.txt", "input");

    w.write("gone.txt", "now here");
    assert_eq!(check_files(&w.ws, &e), Err("gone.txt changed since run run-1".to_owned()));
    std::fs::remove_file(w.ws.root().join("gone.txt")).unwrap();

    w.write("a.txt", "reverted");
    assert_eq!(check_files(&w.ws, &e), Err("a.txt is no longer as run run-1 left it".to_owned()));
    std::fs::remove_file(w.ws.root().join("a.txt")).unwrap();
    assert!(check_files(&w.ws, &e).is_err(), "a deleted write is not in place");
}

#[test]
fn a_listing_read_changes_when_an_entry_is_added() {
    let w = Ws::new();
    w.write("src/a.rs", "fn a() {}");
    let listing = ListingRead { recursive: true, glob: None };
    let before = listing_sha(&w.ws, "src", &listing).unwrap();
    assert!(before.is_some());
    let e = entry(
        vec![FileRead { path: "src".to_owned(), sha256: before, listing: Some(listing) }],
        Vec::new(),
        &["file.list"],
    );
    assert_eq!(check_files(&w.ws, &e), Ok(()));
    w.write("src/b.rs", "fn b() {}");
    assert_eq!(check_files(&w.ws, &e), Err("src changed since run run-1".to_owned()));
    assert_eq!(
        listing_sha(&w.ws, "missing", &ListingRead { recursive: false, glob: None }),
        Ok(None)
    );
}

#[test]
fn tools_that_need_approval_or_are_refused_now_invalidate() {
    let e = entry(Vec::new(), Vec::new(), &["file.read", "file.patch"]);
    assert_eq!(check_tools(&e, &[], &[]), Ok(()));
    assert_eq!(
        check_tools(&e, &[Glob::new("file.p*")], &[]),
        Err("file.patch needs approval now (approve_tools `file.p*`)".to_owned())
    );
    let allowed = vec!["file.read".to_owned()];
    assert_eq!(
        check_tools(&e, &[], &allowed),
        Err("the policy does not allow file.patch now".to_owned())
    );
}

#[test]
fn entries_round_trip_and_a_foreign_or_broken_file_misses() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join(".pev").join("cache");
    let e = entry(vec![file_read("in.txt", sha("input"))], Vec::new(), &["file.read"]);
    store(&cache, &e).unwrap();
    assert_eq!(load(&cache, &e.key), Some(e.clone()));
    let names: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![format!("{}.json", e.key)], "no temporary file is left");

    // An entry stored under another key's name is not that key's.
    let other = "0".repeat(64);
    std::fs::copy(cache.join(format!("{}.json", e.key)), cache.join(format!("{other}.json")))
        .unwrap();
    assert_eq!(load(&cache, &other), None);
    std::fs::write(cache.join(format!("{}.json", e.key)), "{ not json").unwrap();
    assert_eq!(load(&cache, &e.key), None);
    assert_eq!(load(&cache, "absent"), None);
}

#[test]
fn the_reuse_note_names_the_run_the_key_and_the_files() {
    let mut e = entry(
        vec![file_read("a", None), file_read("b", None)],
        vec![FileWrite { path: "c".to_owned(), sha256_after: None }],
        &[],
    );
    e.key = "abcdef0123456789".repeat(4);
    assert_eq!(
        reuse_note(&e),
        "reused the verified result of run run-1 (cache key abcdef012345): definition, inputs \
         and the 2 files it read are unchanged, and the 1 file it changed is as it left it"
    );
    e.reads.truncate(1);
    e.writes.clear();
    assert_eq!(
        reuse_note(&e),
        "reused the verified result of run run-1 (cache key abcdef012345): definition, inputs \
         and the 1 file it read are unchanged"
    );
}

fn call<'a>(s: &'a Step, tool: &'a str, effect: Effect, args: &'a Value) -> Call<'a> {
    let target =
        if effect == Effect::Write { args.get("path").and_then(Value::as_str) } else { None };
    Call { step: s, tool, effect, args, watched: &[], target }
}

fn no_before() -> Before {
    Before { hashes: HashMap::new(), contents: HashMap::new(), inventory: None, lock: None }
}

#[test]
fn calls_teach_the_trace_what_was_read_or_why_not_to_cache() {
    let w = Ws::new();
    w.write("in.txt", "input");
    let s = write_step();
    let mut trace = Trace::default();

    // file.read: the hash the tool reported for what it read.
    let args = json!({"path": "in.txt"});
    let out = Ok(json!({"content": "input", "sha256": "feed"}));
    observe(&w.ws, &mut trace, &call(&s, "file.read", Effect::Read, &args), &no_before(), &out);
    // A failed read of an absent file: recorded as absent.
    let absent = json!({"path": "nope.txt"});
    let failed = Err("not found".to_owned());
    observe(
        &w.ws,
        &mut trace,
        &call(&s, "file.read", Effect::Read, &absent),
        &no_before(),
        &failed,
    );
    // A write: the state it found.
    let write = json!({"path": "in.txt", "content": "y"});
    let mut before = no_before();
    before.hashes.insert("in.txt".to_owned(), sha("input"));
    observe(
        &w.ws,
        &mut trace,
        &call(&s, "file.write", Effect::Write, &write),
        &before,
        &Ok(json!({})),
    );
    assert_eq!(
        trace.reads,
        vec![file_read("in.txt", Some("feed".to_owned())), file_read("nope.txt", None)],
        "the first read of a path is what the step found"
    );
    assert_eq!(trace.tools, vec!["file.read".to_owned(), "file.write".to_owned()]);
    assert_eq!(trace.uncacheable, None);

    let exec = json!({"command": "ls"});
    observe(&w.ws, &mut trace, &call(&s, "shell.exec", Effect::Exec, &exec), &no_before(), &out);
    assert_eq!(
        trace.uncacheable.as_deref(),
        Some("it called shell.exec, whose effects pev cannot check afterwards")
    );

    let mut trace = Trace::default();
    let pathless = json!({"key": "k"});
    observe(
        &w.ws,
        &mut trace,
        &call(&s, "test.count", Effect::Write, &pathless),
        &no_before(),
        &out,
    );
    assert!(trace.uncacheable.unwrap().contains("without a `path`"));

    let mut trace = Trace::default();
    observe(&w.ws, &mut trace, &call(&s, "test.echo", Effect::Read, &args), &no_before(), &out);
    assert_eq!(
        trace.uncacheable.as_deref(),
        Some("it called test.echo, whose reads pev cannot track")
    );
}

fn report_with(mutated: &[&str], reads: Vec<FileRead>) -> StepReport {
    let slot = Slot { output: Some(json!({"ok": true})), goal_action: true, ..Slot::default() };
    StepReport {
        idx: 0,
        slot,
        mutations: mutated
            .iter()
            .map(|p| StepMutation {
                step: "w".to_owned(),
                mutation: pev_verify::mutation(p, None, Some(b"x")),
            })
            .collect(),
        tool_calls: 1,
        warnings: Vec::new(),
        cancelled: false,
        budget_exhausted: None,
        cache: Trace { reads, tools: vec!["file.write".to_owned()], ..Trace::default() },
        restored_mutations: 0,
        already_counted: Vec::new(),
        earlier_mutations: Vec::new(),
    }
}

#[test]
fn an_entry_checks_a_file_the_step_read_then_changed_as_a_write() {
    let w = Ws::new();
    w.write("a.txt", "after");
    w.write("style.css", "body {}");
    w.write("other.txt", "o");
    let s = step(json!({"id": "w", "tool": "file.write",
        "assertions": [{"type": "file_contains", "path": "./style.css", "pattern": "body"},
                       {"type": "content_changed", "path": "a.txt"}]}));
    let reads = vec![file_read("./a.txt", sha("before")), file_read("other.txt", sha("o"))];
    let report = report_with(&["a.txt"], reads);
    let e = build_entry(&w.ws, "k".repeat(64), "run-9", &s, &report).unwrap();
    assert_eq!(e.writes, vec![FileWrite { path: "a.txt".to_owned(), sha256_after: sha("after") }]);
    assert_eq!(
        e.reads,
        vec![file_read("other.txt", sha("o")), file_read("style.css", sha("body {}"))],
        "a.txt is checked as a write; the assertion's file as the step left it"
    );
    assert!(e.goal_action);
    assert_eq!(e.tools, vec!["file.write".to_owned()]);
    assert_eq!(check_files(&w.ws, &e), Ok(()));
}
