//! Text recordings (`pev_store::recording`, issue 31): a run and its child runs written as
//! JSON lines and read into another journal come back as they were; the text is the same when
//! written again (it diffs well); a newer format is refused by name, and what a newer pev adds
//! within a format is read past.

use pev_protocol::event::EventBody;
use pev_protocol::run::{FileMutation, StepStatus};
use pev_protocol::tool::Effect;
use pev_store::recording::{self, VolatileRule};
use pev_store::{
    ApprovalRecord, ModelCallRecord, MutationRecord, Record, RequestRef, Store, ToolCallEnd,
    ToolCallStart, ToolCallStatus,
};
use serde_json::json;

use super::{db, event, new_run, open_store, step_state};

fn sha(c: char) -> String {
    c.to_string().repeat(64)
}

fn call(run: &str, id: &str, finished: bool) -> (ToolCallStart, Option<ToolCallEnd>) {
    let start = ToolCallStart {
        run_id: run.into(),
        call_id: id.into(),
        step_id: "s0".into(),
        attempt: 1,
        tool: "file.write".into(),
        effect: Effect::Write,
        arguments: json!({"path": "notes/a.txt", "content": "x"}),
        path: Some("notes/a.txt".into()),
        pre_sha256: None,
        intended_sha256: Some(sha('e')),
        started_at: "2026-01-01T00:00:01.000Z".into(),
    };
    let end = finished.then(|| ToolCallEnd {
        run_id: run.into(),
        call_id: id.into(),
        status: ToolCallStatus::Finished,
        output: Some(json!({"created": true})),
        error: None,
        ended_at: "2026-01-01T00:00:02.000Z".into(),
        duration_ms: 3,
    });
    (start, end)
}

/// r1 (every kind of row, blobs text and binary) with a child run r1c, and an unrelated r2.
fn journal() -> (super::Db, Store) {
    let db = db();
    let store = open_store(&db.path).unwrap();
    let mut child = new_run("r1c", "2026-01-01T00:00:05.000Z", 1);
    child.options = json!({"parent": {"run": "r1", "step": "s0"}});
    for run in [
        new_run("r1", "2026-01-01T00:00:00.000Z", 2),
        child,
        new_run("r2", "2026-01-02T00:00:00.000Z", 1),
    ] {
        store.create_run(&run).unwrap();
    }
    let mut records = vec![
        Record::Event(event("r1", 0)),
        Record::Event(pev_protocol::Event {
            seq: 1,
            body: EventBody::Warning { step: None, message: "at 2026-01-01T00:00:01Z".into() },
            ..event("r1", 1)
        }),
        Record::ModelCall(Box::new(ModelCallRecord {
            run_id: "r1".into(),
            role: "executor".into(),
            step_id: Some("s0".into()),
            attempt: Some(1),
            provider: "script".into(),
            request_model: "m".into(),
            started_at: "2026-01-01T00:00:01.000Z".into(),
            request: Some(RequestRef {
                messages: vec![sha('a')],
                system: Some(sha('b')),
                ..RequestRef::default()
            }),
            response_sha256: Some(sha('c')),
            ..ModelCallRecord::default()
        })),
        Record::Blob { sha256: sha('a'), content: br#"{"role":"user","content":"go"}"#.to_vec() },
        Record::Blob { sha256: sha('b'), content: b"system\nprompt".to_vec() },
        Record::Blob { sha256: sha('c'), content: br#"{"content":[]}"#.to_vec() },
        Record::Blob { sha256: sha('d'), content: b"\x00\xffbinary".to_vec() },
        // A blob no row names (another run's) stays out of the recording.
        Record::Blob { sha256: sha('f'), content: b"r2's".to_vec() },
        Record::StepState(step_state("r1", "s0", StepStatus::Done)),
        Record::StepState(step_state("r1", "s1", StepStatus::Pending)),
        Record::Mutation(MutationRecord {
            run_id: "r1".into(),
            step_id: "s0".into(),
            mutation: FileMutation {
                path: "notes/a.txt".into(),
                bytes_before: 7,
                bytes_after: 1,
                lines_added: 1,
                lines_removed: 1,
                no_op: false,
            },
            before_sha256: Some(sha('d')),
            after_sha256: None,
        }),
        Record::Approval(ApprovalRecord {
            run_id: "r1".into(),
            step_id: "s1".into(),
            by: "tester".into(),
            at: "2026-01-01T00:00:04.000Z".into(),
        }),
        Record::PlanVersion {
            run_id: "r1".into(),
            version: 2,
            plan: json!({"goal": "g", "steps": [{"id": "only"}]}),
            reason: "replan".into(),
            created_at: "2026-01-01T00:00:05.000Z".into(),
        },
        Record::Event(event("r1c", 0)),
        Record::Event(event("r2", 0)),
        Record::RunStatus {
            run_id: "r1".into(),
            status: "partial".into(),
            result: None,
            updated_at: "2026-01-01T00:00:06.000Z".into(),
        },
    ];
    for (id, finished) in [("c1", true), ("c2", false)] {
        let (start, end) = call("r1", id, finished);
        records.push(Record::ToolCallStarted(start));
        records.extend(end.map(Record::ToolCallFinished));
    }
    for r in &records {
        store.write(r).unwrap();
    }
    (db, store)
}

fn rules() -> Vec<VolatileRule> {
    vec![VolatileRule { pattern: r"build-[0-9a-f]{8}".into(), with: "build-<id>".into() }]
}

fn text_of(store: &Store, run: &str) -> String {
    let mut out = Vec::new();
    recording::write(store, run, &rules(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn read_into_new(text: &str) -> (super::Db, Store, Result<recording::Read, String>) {
    let db = db();
    let store = open_store(&db.path).unwrap();
    let read = recording::read(&mut text.as_bytes(), "rec.jsonl", &store);
    (db, store, read)
}

#[test]
fn a_run_and_its_children_come_back_as_they_were_and_the_text_is_stable() {
    let (_db, store) = journal();
    let text = text_of(&store, "r1");
    assert!(text.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["format"].as_str(), first["version"].as_u64()),
        (Some("pev-recording"), Some(1))
    );
    assert_eq!(first["volatile"][0]["with"], "build-<id>");

    let (_db2, copy, read) = read_into_new(&text);
    let read = read.unwrap();
    assert_eq!(
        (read.header.run_id.as_str(), read.skipped, read.header.volatile.clone()),
        ("r1", 0, rules())
    );
    for run in ["r1", "r1c"] {
        assert_eq!(copy.load_run(run).unwrap(), store.load_run(run).unwrap(), "{run}");
        assert_eq!(copy.events(run).unwrap(), store.events(run).unwrap(), "{run}");
        assert_eq!(copy.model_calls(run).unwrap(), store.model_calls(run).unwrap(), "{run}");
        assert_eq!(copy.plan_versions(run).unwrap(), store.plan_versions(run).unwrap(), "{run}");
    }
    for c in ['a', 'b', 'c', 'd'] {
        assert_eq!(copy.blob(&sha(c)).unwrap(), store.blob(&sha(c)).unwrap(), "blob {c}");
    }
    assert_eq!(copy.blob(&sha('d')).unwrap().unwrap(), b"\x00\xffbinary");
    // Only the run's tree, and only the blobs its rows name.
    assert!(copy.load_run("r2").is_err());
    assert_eq!(copy.blob(&sha('f')).unwrap(), None);
    assert_eq!(copy.parent_of("r1c").unwrap().as_deref(), Some("r1"));
    // Written again from the copy: the same text, line for line.
    assert_eq!(text_of(&copy, "r1"), text);
}

#[test]
fn a_newer_format_is_refused_by_name_and_a_newer_kind_or_field_is_read_past() {
    let (_db, store) = journal();
    let text = text_of(&store, "r1");
    let newer = text.replacen("\"version\":1", "\"version\":2", 1);
    let (_d, _s, read) = read_into_new(&newer);
    let err = read.unwrap_err();
    assert!(
        err.contains("rec.jsonl:1") && err.contains("format 2") && err.contains("reads format 1"),
        "{err}"
    );

    // A line of a kind this pev does not know, and a field it does not know.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.insert(2, r#"{"sandbox_profile": {"run_id": "r1", "layers": ["bwrap"]}}"#.to_owned());
    let event = lines.iter().position(|l| l.starts_with("{\"event\"")).unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&lines[event]).unwrap();
    value["event"]["added_later"] = json!(true);
    lines[event] = value.to_string();
    let (_d, copy, read) = read_into_new(&(lines.join("\n") + "\n"));
    assert_eq!(read.unwrap().skipped, 1);
    assert_eq!(copy.events("r1").unwrap(), store.events("r1").unwrap());
}

#[test]
fn what_is_not_a_recording_is_named_with_its_line() {
    for (text, want) in [
        ("", "rec.jsonl: empty"),
        ("{\"format\": \"other\"}\n", "rec.jsonl:1: not a pev recording"),
        ("not json\n", "rec.jsonl:1: not a pev recording"),
    ] {
        let (_d, _s, read) = read_into_new(text);
        let err = read.unwrap_err();
        assert!(err.contains(want), "{text:?}: {err}");
    }
    let (_db, store) = journal();
    let text = text_of(&store, "r1");
    let cut = text.lines().take(3).collect::<Vec<_>>().join("\n") + "\n{\"event\": {\"run_id\"";
    let (_d, _s, read) = read_into_new(&cut);
    assert!(read.unwrap_err().starts_with("rec.jsonl:4: not a JSON object"));
    let wrong = text.lines().take(2).collect::<Vec<_>>().join("\n") + "\n{\"event\": 3}\n";
    let (_d, _s, read) = read_into_new(&wrong);
    assert!(read.unwrap_err().starts_with("rec.jsonl:3: "));
}
