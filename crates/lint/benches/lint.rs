//! In-process benchmark of parsing and linting generated plans of 1,000 and 10,000 steps, under
//! the benchmark policy (`bench/policy.yaml`: glob allow list, dotted-tool bounds, 8 regexes).
//!
//! The plans are built here, in memory, with the same shape as `bench/gen_plan.py` writes (a
//! chain in which every step depends on and reads the previous one and reads the step eight
//! back, over six tools), so the figures can be compared with the whole-process ones of
//! `bench/lint.sh`. Three measurements per size tell where the time goes: parsing alone, linting
//! an already parsed plan, and both. Run: `cargo bench -p pev-lint --features bench --bench lint`.

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pev_lint::{CompiledPolicy, LintOptions, lint};
use pev_protocol::parse::{Format, parse_plan};
use serde_json::{Value, json};

const POLICY: &str = include_str!("../../../bench/policy.yaml");
const TOOLS: [&str; 6] =
    ["db.query_ro", "file.read", "file.write", "shell.exec", "payments.transfer", "notify.email"];
const BACK: usize = 8;

fn step_id(i: usize) -> String {
    format!("step-{i:06}")
}

/// One step, as `bench/gen_plan.py` writes it.
fn make_step(i: usize) -> Value {
    let tool = TOOLS[i % TOOLS.len()];
    let prev = i.checked_sub(1).map(step_id);
    let back =
        i.checked_sub(BACK).map_or("none".to_owned(), |b| format!("{{{{{}.result}}}}", step_id(b)));
    let r = |path: &str| {
        prev.as_ref().map_or("start".to_owned(), |p| format!("${{{p}.result.{path}}}"))
    };
    let mut step = json!({"id": step_id(i), "title": format!("{tool} #{i}"), "tool": tool});
    let (args, extra) = match tool {
        "db.query_ro" => (
            json!({"query": "SELECT id, total, created_at FROM orders WHERE customer_id = $1 AND total > $2",
                   "params": [r("message_id"), 10], "limit": 100, "trace": back}),
            None,
        ),
        "file.read" => (
            json!({"path": format!("data/orders-{i}.csv"), "offset": r("rows.0.offset"), "limit": 4096}),
            None,
        ),
        "file.write" => {
            let path = format!("out/report-{i}.txt");
            (
                json!({"path": path, "content": format!("Report {i}: {} (from {back})", r("content"))}),
                Some((
                    "assertions",
                    json!([{"type": "file_exists", "path": path},
                    {"type": "file_contains", "path": path, "pattern": format!("Report {i}:")}]),
                )),
            )
        }
        "shell.exec" => (
            json!({"command": format!("wc -l out/report-{}.txt", i.saturating_sub(1)), "timeout_s": 30,
                   "env": {"REPORT_SHA": r("sha256"), "TRACE": back}}),
            Some(("assertions", json!([{"type": "exit_code_eq", "code": 0}]))),
        ),
        "payments.transfer" => {
            let amount = if (i / TOOLS.len()) % 166 == 165 { 5000 } else { 10 + (i * 37) % 990 };
            (
                json!({"to": format!("ACC-{i:06}"), "amount": amount, "currency": "EUR",
                       "memo": format!("batch {} {back}", r("stdout"))}),
                Some(("acceptance_criteria", json!(["The bank confirms the transfer"]))),
            )
        }
        _ => (
            json!({"to": "ops@example.com", "subject": format!("Transfer {} done", i.saturating_sub(1)),
                   "body": format!("Transfer {} is done; trace {back}", r("id"))}),
            None,
        ),
    };
    if let Some(obj) = step.as_object_mut() {
        obj.insert("args".into(), args);
        if let Some((key, value)) = extra {
            obj.insert(key.into(), value);
        }
        if let Some(p) = prev {
            obj.insert("depends_on".into(), json!([p]));
        }
    }
    step
}

fn plan_text(n: usize) -> String {
    let steps: Vec<Value> = (0..n).map(make_step).collect();
    json!({"goal": format!("Process {n} orders end to end (benchmark plan)"), "steps": steps})
        .to_string()
}

fn bench(c: &mut Criterion) {
    let path = Path::new("bench/policy.yaml");
    let policy = match CompiledPolicy::parse(POLICY, path)
        .and_then(|doc| CompiledPolicy::from_parts(doc, path, Vec::new()))
    {
        Ok(policy) => policy,
        Err(e) => panic!("the benchmark policy must load: {e}"),
    };
    let mut group = c.benchmark_group("lint");
    group.sample_size(20);
    for n in [1_000, 10_000] {
        let text = plan_text(n);
        let Ok(parsed) = parse_plan(&text, Format::Json) else {
            panic!("the generated {n}-step plan must parse")
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("parse", n), &text, |b, text| {
            b.iter(|| parse_plan(black_box(text), Format::Json).map(|p| p.plan.steps.len()))
        });
        group.bench_with_input(BenchmarkId::new("lint", n), &parsed, |b, parsed| {
            b.iter(|| lint(black_box(parsed), &policy, LintOptions::default()))
        });
        group.bench_with_input(BenchmarkId::new("parse+lint", n), &text, |b, text| {
            b.iter(|| {
                parse_plan(black_box(text), Format::Json)
                    .map(|parsed| lint(&parsed, &policy, LintOptions::default()).risk_score)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
