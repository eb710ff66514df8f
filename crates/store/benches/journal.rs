//! Benchmark of the journal writer: how many queued records per second it commits (the engine's
//! steady state, ~5 records per step, all `record` and one `flush` at the end), and how long
//! one `record_durable` takes (one commit with its fsync, what a write step waits for before it
//! touches a file).
//!
//! The journal lives in a temporary directory on the machine's disk (synchronous=FULL, WAL), so
//! the figures include real fsyncs. Run: `cargo bench -p pev-store --features bench --bench journal`.
//!
//! With `PEV_BENCH_POSTGRES` set to a server's URL (a role that may create databases) and
//! `--features postgres`, the same benches run against a fresh Postgres database each:
//! `PEV_PG_FSYNC=on scripts/with-postgres.sh env PEV_BENCH_POSTGRES=… cargo bench -p pev-store
//! --features postgres,bench --bench journal` (bench/journal_backends.sh does it).

// A bench that cannot set up or write has nothing to measure: it stops with the error.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pev_protocol::assertion::AssertionResult;
use pev_protocol::event::{Event, EventBody};
use pev_protocol::run::StepStatus;
use pev_protocol::tool::Effect;
use pev_store::{
    Journal, Location, NewRun, Record, StepState, Store, ToolCallEnd, ToolCallStart, ToolCallStatus,
};
use serde_json::json;

const RUN: &str = "bench-run";
const AT: &str = "2026-01-01T00:00:00.000Z";

/// What holds a bench's journal until the bench ends.
struct Place {
    _dir: Option<tempfile::TempDir>,
}

/// The journal key the benches write with: a file of their own, never the home directory's.
fn keying() -> pev_store::Keying {
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-journal.key");
    pev_store::Keying::from_file(&file, pev_store::CreateKey::Yes).unwrap()
}

/// The backend the benches run on: `sqlite`, or `postgres` with `PEV_BENCH_POSTGRES`.
fn backend() -> &'static str {
    if std::env::var("PEV_BENCH_POSTGRES").is_ok_and(|v| !v.is_empty()) {
        "postgres"
    } else {
        "sqlite"
    }
}

/// A fresh journal (a temporary directory's file, or a new Postgres database).
fn location() -> (Place, Location) {
    #[cfg(feature = "postgres")]
    if let Ok(url) = std::env::var("PEV_BENCH_POSTGRES")
        && !url.is_empty()
    {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let name =
            format!("pev_bench_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let (head, query) = url.split_once('?').unwrap_or((&url, ""));
        let url = format!("{}/{name}?{query}", &head[..head.rfind('/').unwrap()]);
        return (Place { _dir: None }, Location::parse(&url).unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = pev_store::default_path(dir.path());
    (Place { _dir: Some(dir) }, Location::File(path))
}

/// A fresh journal with one run created, and its writer.
fn setup() -> (Place, Journal) {
    let (place, _, journal) = setup_at();
    (place, journal)
}

/// [`setup`], and where the journal is.
fn setup_at() -> (Place, Location, Journal) {
    let (place, at) = location();
    let store = Store::open_keyed(&at, keying()).unwrap();
    store
        .create_run(&NewRun {
            run_id: RUN.into(),
            goal: "bench".into(),
            workspace: "/ws".into(),
            plan: json!({"goal": "bench", "steps": []}),
            options: json!({}),
            created_at: AT.into(),
        })
        .unwrap();
    let journal = Journal::start_keyed(&at, keying()).unwrap();
    (place, at, journal)
}

fn event(seq: u64, body: EventBody) -> Record {
    Record::Event(Event { run_id: RUN.into(), seq, at: AT.into(), body })
}

/// The five records the engine writes for one cheap `file.read` step; `n` makes ids unique.
fn step_records(n: u64) -> [Record; 5] {
    let step = format!("step-{n}");
    let call = format!("call-{n}");
    [
        event(2 * n, EventBody::StepStarted { step: step.clone(), attempt: 1 }),
        Record::ToolCallStarted(ToolCallStart {
            run_id: RUN.into(),
            call_id: call.clone(),
            step_id: step.clone(),
            attempt: 1,
            tool: "file.read".into(),
            effect: Effect::Read,
            arguments: json!({"path": "a.txt"}),
            path: None,
            pre_sha256: None,
            intended_sha256: None,
            started_at: AT.into(),
        }),
        Record::ToolCallFinished(ToolCallEnd {
            run_id: RUN.into(),
            call_id: call,
            status: ToolCallStatus::Finished,
            output: Some(json!({"content": "hello world\n", "bytes": 12})),
            error: None,
            ended_at: AT.into(),
            duration_ms: 0,
        }),
        Record::StepState(StepState {
            run_id: RUN.into(),
            step_id: step.clone(),
            status: StepStatus::Done,
            attempts: 1,
            output: Some(json!({"content": "hello world\n", "bytes": 12})),
            error: None,
            started_at: Some(AT.into()),
            ended_at: Some(AT.into()),
            assertions: vec![AssertionResult {
                kind: "file_exists".into(),
                passed: true,
                detail: "a.txt exists".into(),
            }],
            evidence: vec!["read 12 bytes".into()],
        }),
        event(
            2 * n + 1,
            EventBody::StepFinished {
                step,
                status: StepStatus::Done,
                attempts: 1,
                error: None,
                cached: false,
            },
        ),
    ]
}

fn queued(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("journal/queued/{}", backend()));
    group.sample_size(10);
    for steps in [1_000u64, 10_000] {
        group.throughput(Throughput::Elements(steps * 5));
        group.bench_with_input(BenchmarkId::new("records", steps * 5), &steps, |b, &steps| {
            let (_dir, journal) = setup();
            let mut next = 0u64;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Building the records is the engine's cost, not the journal's.
                    let recs: Vec<[Record; 5]> = (next..next + steps).map(step_records).collect();
                    next += steps;
                    let start = Instant::now();
                    for five in recs {
                        for rec in five {
                            journal.record(rec).unwrap();
                        }
                    }
                    journal.flush().unwrap();
                    total += start.elapsed();
                }
                total
            });
        });
    }
    group.finish();
}

fn durable(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("journal/durable/{}", backend()));
    group.sample_size(20);
    group.bench_function("record_durable", |b| {
        let (_dir, journal) = setup();
        let mut seq = 0u64;
        b.iter(|| {
            seq += 1;
            let rec = event(seq, EventBody::StepStarted { step: "s".into(), attempt: 1 });
            journal.record_durable(black_box(rec)).unwrap();
        });
    });
    group.finish();
}

/// Checking one run's journal (`Store::integrity`, what `pev show` and resume do): a run of
/// 1,000 cheap steps (2,000 events, 1,000 tool calls and step states).
fn integrity(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("journal/integrity/{}", backend()));
    group.sample_size(20);
    let (_dir, at, journal) = setup_at();
    for n in 0..1_000 {
        for rec in step_records(n) {
            journal.record(rec).unwrap();
        }
    }
    journal.flush().unwrap();
    let store = Store::open_keyed(&at, keying()).unwrap();
    group.throughput(Throughput::Elements(5_000));
    group.bench_function("run_of_1000_steps", |b| {
        b.iter(|| {
            let found = store.integrity(black_box(RUN)).unwrap();
            assert!(!found.is_broken(), "{found:?}");
        });
    });
    group.finish();
}

criterion_group!(benches, queued, durable, integrity);
criterion_main!(benches);
