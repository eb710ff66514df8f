//! Fuzz target: any bytes that are UTF-8 go through `parse_plan` (format sniffed, as the CLI does
//! for a file without a telling extension, and then the other format too) and, when they parse,
//! through `lint` under the default policy and under a policy that turns on every policy-driven
//! check. A panic, an overflow or a hang anywhere on that path is a bug. For JSON it is also a
//! differential target: `parse_plan` (which deserialises valid plans directly) and the staged
//! `parse_document` + `from_value` path must agree on the plan and the issues set aside.

#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use pev_lint::{CompiledPolicy, LintOptions, lint};
use pev_protocol::parse::{Format, from_value, parse_document, parse_plan};

const BUSY_POLICY: &str = r#"
allow_tools: ["file.*", "shell.exec", "db.*", "sql.query_ro", "notify.*", "payments.transfer"]
deny_tools: ["file.delete"]
approve_tools: ["payments.*"]
readonly_tools: ["reports.query"]
bounds:
  payments.transfer.amount: [0.01, 1000]
  shell.exec.timeout_s: [1, 60]
  calc.add.nested.depth: [0, 3]
deny_tokens_regex: ["AWS_SECRET", "(?i)password\\s*=", "^sk-[a-z0-9]{8,}$", "[0-9]{13,16}"]
max_steps: 8
risk_weights: {raw_secret: 0.5, tool_deny: 0.3}
fail_risk_threshold: 0.6
severity: {unknown_tool: error, unverified_effect: "off"}
"#;

/// Both policies, compiled once; the busy one is skipped if it ever stops compiling, since the
/// target is about plans, not policies.
static POLICIES: LazyLock<Vec<CompiledPolicy>> = LazyLock::new(|| {
    let path = Path::new("fuzz-policy.yaml");
    let mut policies = vec![CompiledPolicy::default()];
    if let Ok(doc) = CompiledPolicy::parse(BUSY_POLICY, path) {
        if let Ok(busy) = CompiledPolicy::from_parts(doc, path, Vec::new()) {
            policies.push(busy);
        }
    }
    policies
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let sniffed = Format::sniff(text);
    let other = match sniffed {
        Format::Json => Format::Yaml,
        Format::Yaml => Format::Json,
    };
    for format in [sniffed, other] {
        let parsed = parse_plan(text, format);
        if format == Format::Json {
            let staged = parse_document(text, format).and_then(from_value);
            match (&parsed, &staged) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.plan, b.plan, "direct and staged JSON parses disagree");
                    assert_eq!(a.issues, b.issues, "direct and staged JSON parses disagree");
                }
                (Err(_), Err(_)) => {}
                _ => panic!("one JSON parse path accepted what the other refused"),
            }
        }
        if let Ok(parsed) = parsed {
            for policy in POLICIES.iter() {
                let result = lint(&parsed, policy, LintOptions::default());
                // The contract's cheapest invariants, so a wrong result is a crash too.
                assert!((0.0..=1.0).contains(&result.risk_score));
                for finding in result.errors.iter().chain(&result.warnings) {
                    assert!(finding.step.is_none_or(|i| i < parsed.plan.steps.len()));
                }
            }
        }
    }
});
