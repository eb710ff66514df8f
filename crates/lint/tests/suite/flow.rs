//! SENSITIVE_DATA_EXPOSURE: taint from sensitive sources through references (directly, through
//! other steps, around cycles) into external sinks; plan-lint's own documentation example, which
//! plan-lint itself passes; and the flows that must not count.

use pev_protocol::LintCode::SensitiveDataExposure;
use serde_json::{Value, json};

use super::support::{findings, found, lint_default, lint_with};

fn exposures(plan: &str, policy: &str) -> Vec<(Option<usize>, String, String)> {
    let result = lint_with(plan, policy);
    findings(&result, SensitiveDataExposure)
        .iter()
        .map(|f| (f.step, f.path.clone(), f.msg.clone()))
        .collect()
}

/// A plan from `(id, tool, parameters)` triples.
fn plan(steps: &[(&str, &str, Value)]) -> String {
    let steps: Vec<Value> = steps
        .iter()
        .map(|(id, tool, params)| json!({"id": id, "tool": tool, "parameters": params}))
        .collect();
    json!({"goal": "g", "steps": steps}).to_string()
}

#[test]
fn plan_lint_documentation_example_is_an_exposure() {
    // plan-lint's "complete example" (docs/documentation/plan-structure.md): a balance and an
    // e-mail address read from the database and mailed out. plan-lint passes it.
    let p = r#"{
      "goal": "Send monthly account statement to user",
      "steps": [
        {"id": "step1", "tool": "db.query_ro",
         "parameters": {"query": "SELECT balance, email FROM accounts WHERE user_id = $1",
                        "args": ["user-123"]}},
        {"id": "step2", "tool": "notify.email",
         "parameters": {"to": "{{step1.result.email}}", "subject": "Your Monthly Statement",
                        "body": "Your current balance is ${{step1.result.balance}}"},
         "depends_on": ["step1"]}
      ],
      "context": {"user_id": "user-123", "month": "January 2025"},
      "meta": {"planner": "gpt-4o", "created_at": "2025-01-01T00:00:00Z"}
    }"#;
    let got = exposures(p, "");
    let paths: Vec<_> = got.iter().map(|f| (f.0, f.1.as_str())).collect();
    assert_eq!(paths, [(Some(1), "/steps/1/parameters/to"), (Some(1), "/steps/1/parameters/body")]);
    let msg = &got[0].2;
    assert!(msg.contains("`notify.email`"), "{msg}");
    assert!(msg.contains("{{step1.result.email}}"), "{msg}");
    assert!(msg.contains("sensitive source step 'step1' (`db.query_ro`)"), "{msg}");
    assert!(!msg.contains("via"), "a direct flow has no chain: {msg}");
    assert!(got[1].2.contains("{{step1.result.balance}}"), "{}", got[1].2);
}

#[test]
fn taint_flows_through_intermediate_steps() {
    let p = plan(&[
        ("read", "file.read", json!({"path": "customers.csv"})),
        ("sum", "text.summarize", json!({"text": "{{read.result.content}}"})),
        ("fmt", "text.format", json!({"parts": ["a", "${sum.result.summary}"]})),
        (
            "post",
            "http.request",
            json!({"url": "https://x", "body": {"text": "${fmt.result.text}"}}),
        ),
    ]);
    let got = exposures(&p, "");
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!((got[0].0, got[0].1.as_str()), (Some(3), "/steps/3/parameters/body/text"));
    let msg = &got[0].2;
    assert!(msg.contains("`http.request`") && msg.contains("${fmt.result.text}"), "{msg}");
    assert!(msg.contains("step 'read' (`file.read`), via 'sum' → 'fmt'"), "{msg}");
}

#[test]
fn a_long_chain_is_elided_in_the_message() {
    let mut steps = vec![("s0".to_owned(), "db.query", json!({"query": "SELECT 1"}))];
    for i in 1..=10 {
        steps.push((format!("s{i}"), "text.copy", json!({"x": format!("${{s{}.result}}", i - 1)})));
    }
    steps.push(("out".to_owned(), "payments.send", json!({"memo": "${s10.result}"})));
    let steps: Vec<(&str, &str, Value)> =
        steps.iter().map(|(id, t, p)| (id.as_str(), *t, p.clone())).collect();
    let got = exposures(&plan(&steps), "");
    assert_eq!(got.len(), 1);
    let msg = &got[0].2;
    assert!(
        msg.contains("step 's0'") && msg.contains("… (10 steps) → 's7' → 's8' → 's9' → 's10'"),
        "{msg}"
    );
}

#[test]
fn one_finding_per_tainted_reference_and_only_for_tainted_ones() {
    let p = plan(&[
        ("q", "sql.query", json!({"sql": "SELECT * FROM t"})),
        ("ls", "file.list", json!({"path": "."})),
        (
            "n",
            "notify.slack",
            json!({"text": "${q.result.rows} and ${ls.result.entries} and ${q.result.count}"}),
        ),
    ]);
    let got = exposures(&p, "");
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got[0].2.contains("${q.result.rows}") && got[1].2.contains("${q.result.count}"));
    assert!(got.iter().all(|f| f.1 == "/steps/2/parameters/text"));
}

#[test]
fn cycles_end_and_still_carry_taint() {
    // a and b read each other (a cycle LOOP_DETECTED reports); taint from the source still
    // reaches the sink, and the pass terminates.
    let p = plan(&[
        ("src", "db.query", json!({"query": "SELECT 1"})),
        ("a", "text.join", json!({"x": "${b.result}", "y": "${src.result}"})),
        ("b", "text.join", json!({"x": "${a.result}"})),
        ("sink", "email.send", json!({"body": "${b.result}"})),
    ]);
    assert_eq!(
        found(&lint_default(&p), SensitiveDataExposure),
        [(Some(3), "/steps/3/parameters/body".to_owned())]
    );
}

#[test]
fn policy_sources_and_sinks_replace_the_defaults() {
    let p = plan(&[
        ("crm", "crm.lookup", json!({"id": 1})),
        ("db", "db.query", json!({"query": "SELECT 1"})),
        ("post", "slack.post", json!({"text": "${crm.result.phone}"})),
        ("mail", "notify.email", json!({"body": "${db.result}"})),
    ]);
    let policy = "sensitive_sources: ['crm.*']\nexternal_sinks: ['slack.*']\n";
    let got = exposures(&p, policy);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].1, "/steps/2/parameters/text");
    assert!(got[0].2.contains("`slack.post`") && got[0].2.contains("'crm' (`crm.lookup`)"));
}

#[test]
fn an_approved_sink_is_the_reviewed_route() {
    let p = json!({"goal": "g", "steps": [
        {"id": "q", "tool": "db.query", "parameters": {"query": "SELECT 1"}},
        {"id": "n", "tool": "notify.email", "requires_approval": true,
         "parameters": {"body": "${q.result}"}},
        {"id": "p", "tool": "payments.send", "parameters": {"memo": "${q.result}"}},
    ]})
    .to_string();
    assert_eq!(
        found(&lint_default(&p), SensitiveDataExposure),
        [(Some(2), "/steps/2/parameters/memo".to_owned())]
    );
    let got = exposures(&p, "approve_tools: ['payments.*']\n");
    assert_eq!(got, []);
}

#[test]
fn flows_that_are_not_exposures() {
    let p = plan(&[
        ("q", "db.query", json!({"query": "SELECT 1"})),
        ("ls", "file.list", json!({"path": "."})),
        // A sink reading an untainted step.
        ("n1", "notify.slack", json!({"text": "${ls.result.entries}"})),
        // Sensitive data written to a file: not an external sink.
        ("w", "file.write", json!({"path": "out.txt", "content": "${q.result.rows}"})),
        // A sink with only literal parameters, ordered after the source but reading nothing.
        ("n2", "http.request", json!({"url": "https://x", "body": "done"})),
    ]);
    let mut doc: Value = serde_json::from_str(&p).unwrap();
    doc["steps"][4]["depends_on"] = json!(["q", "w"]);
    assert_eq!(found(&lint_default(&doc.to_string()), SensitiveDataExposure), []);
}
