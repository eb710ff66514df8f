//! RAW_SECRET: built-in detectors, secret-named keys and deny_tokens_regex, found where they
//! nest and reported once per value and detector, never echoing the secret; and the near-misses
//! that plan-lint's "any 32 alphanumerics" rule flags and pev must not.

use pev_protocol::LintCode::RawSecret;
use serde_json::{Value, json};

use super::support::{findings, found, lint_default, lint_with};

/// A plan with one step per `(tool, parameters)`, ids s0, s1, ….
fn plan(steps: &[(&str, Value)]) -> String {
    let steps: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, (tool, params))| json!({"id": format!("s{i}"), "tool": tool, "parameters": params}))
        .collect();
    json!({"goal": "g", "steps": steps}).to_string()
}

/// Lints under the default policy and returns the RAW_SECRET `(step, path, msg)` triples.
fn secrets(plan: &str) -> Vec<(Option<usize>, String, String)> {
    let result = lint_default(plan);
    findings(&result, RawSecret).iter().map(|f| (f.step, f.path.clone(), f.msg.clone())).collect()
}

fn one(plan: &str) -> (Option<usize>, String, String) {
    let mut all = secrets(plan);
    assert_eq!(all.len(), 1, "expected one RAW_SECRET, got {all:#?}");
    all.remove(0)
}

const AWS_ID: &str = "AKIAZ7XQ2M4N8P1R5T6V";
const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const GHP: &str = "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5";

#[test]
fn aws_access_key_id_in_a_nested_header_names_the_exact_value() {
    let p = plan(&[("http.request", json!({"headers": {"X-Custom": AWS_ID}}))]);
    let (step, path, msg) = one(&p);
    assert_eq!(step, Some(0));
    assert_eq!(path, "/steps/0/parameters/headers/X-Custom");
    assert!(msg.contains("AWS access key id"), "{msg}");
    assert!(msg.contains("`AKIA…`") && msg.contains("20 chars"), "{msg}");
    assert!(!msg.contains(AWS_ID), "the message echoes the key: {msg}");
}

#[test]
fn secrets_are_found_however_deeply_they_nest() {
    let p = plan(&[
        ("http.request", json!({"url": "https://x"})),
        ("http.request", json!({"body": {"a": [{"b": {"c": ["x", GHP]}}]}})),
    ]);
    let (step, path, msg) = one(&p);
    assert_eq!((step, path.as_str()), (Some(1), "/steps/1/parameters/body/a/0/b/c/1"));
    assert!(msg.contains("API token") && msg.contains("`ghp_…`"), "{msg}");
}

#[test]
fn pem_private_key_in_context_is_a_plan_level_finding() {
    let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n-----END RSA PRIVATE KEY-----";
    let p = json!({"goal": "g", "context": {"deploy": {"pem": key}}, "steps": []}).to_string();
    let (step, path, msg) = one(&p);
    assert_eq!((step, path.as_str()), (None, "/context/deploy/pem"));
    assert!(msg.contains("PEM private key block"), "{msg}");
    assert!(!msg.contains("MIIE"), "{msg}");
}

#[test]
fn jwt_in_a_step_description() {
    let p = json!({"goal": "g", "steps": [
        {"id": "a", "description": format!("call the API with token {JWT} and report")}
    ]})
    .to_string();
    let (step, path, msg) = one(&p);
    assert_eq!((step, path.as_str()), (Some(0), "/steps/0/description"));
    assert!(msg.contains("JSON Web Token") && msg.contains("`eyJh…`"), "{msg}");
}

#[test]
fn bearer_token_in_authorization_is_reported_once() {
    // The Authorization key is secret-named too; the bearer detector explains the value, so
    // there is one finding, not two.
    let p = plan(&[(
        "http.request",
        json!({"headers": {"Authorization": "Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0"}}),
    )]);
    let (_, path, msg) = one(&p);
    assert_eq!(path, "/steps/0/parameters/headers/Authorization");
    assert!(msg.contains("bearer token") && msg.contains("32 chars"), "{msg}");
    assert!(!msg.contains("9f8e"), "a bearer token has no public prefix: {msg}");
}

#[test]
fn a_jwt_used_as_a_bearer_token_is_one_finding() {
    let p =
        plan(&[("http.request", json!({"headers": {"Authorization": format!("Bearer {JWT}")}}))]);
    let (_, _, msg) = one(&p);
    assert!(msg.contains("JSON Web Token"), "{msg}");
}

#[test]
fn well_known_token_prefixes() {
    let tokens = [
        "xoxb-2048123456-aB3dE5fG7hI9",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        GHP,
    ];
    for token in tokens {
        let p = plan(&[("notify.slack", json!({"text": format!("use {token} now")}))]);
        let (_, path, msg) = one(&p);
        assert_eq!(path, "/steps/0/parameters/text", "{token}");
        assert!(msg.contains("API token"), "{token}: {msg}");
        assert!(!msg.contains(token), "{msg}");
    }
}

#[test]
fn aws_secret_access_key_assignment_in_text() {
    let text = "export aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ9bKz2Lm1";
    let p = plan(&[("shell.exec", json!({"command": text}))]);
    let (_, path, msg) = one(&p);
    assert_eq!(path, "/steps/0/parameters/command");
    assert!(msg.contains("AWS secret access key") && msg.contains("40 chars"), "{msg}");
    assert!(!msg.contains("wJal"), "{msg}");
}

#[test]
fn password_assignments_in_text() {
    for text in [
        "connect with password=hunter2022 to the db",
        "mysql -u root --password Tr0ub4dor&3x",
        r#"login {"passwd": "s3cr3t!pw"}"#,
        "DB_PWD: 'p4ss w0rd!'",
    ] {
        let p = json!({"goal": "g", "steps": [{"id": "a", "description": text}]}).to_string();
        let (_, path, msg) = one(&p);
        assert_eq!(path, "/steps/0/description", "{text}");
        assert!(msg.contains("password assignment"), "{text}: {msg}");
    }
}

#[test]
fn password_in_a_connection_url() {
    let p = plan(&[("db.query", json!({"dsn": "postgres://admin:Sup3rS3cret@db:5432/app"}))]);
    let (_, path, msg) = one(&p);
    assert_eq!(path, "/steps/0/parameters/dsn");
    assert!(msg.contains("password in a URL"), "{msg}");
    assert!(!msg.contains("Sup3r"), "{msg}");
}

#[test]
fn secret_named_keys_with_literal_values() {
    let p = plan(&[(
        "http.request",
        json!({
            "db_password": "s3cr3t-pass",
            "apiKey": "live-9f8e7d6c",
            "headers": {"X-Auth-Token": "tok_2b7c9d1e"},
            "oauth": {"client_secret": "cs.88aa77bb66"},
            "credentials": "user:pa55word",
        }),
    )]);
    let all = secrets(&p);
    let paths: Vec<&str> = all.iter().map(|f| f.1.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/steps/0/parameters/db_password",
            "/steps/0/parameters/apiKey",
            "/steps/0/parameters/headers/X-Auth-Token",
            "/steps/0/parameters/oauth/client_secret",
            "/steps/0/parameters/credentials",
        ]
    );
    assert!(all[0].2.contains("secret-named key `db_password`"), "{}", all[0].2);
    assert!(all[0].2.contains("11 chars") && !all[0].2.contains("s3cr"), "{}", all[0].2);
}

#[test]
fn secret_named_key_in_context_and_unknown_field() {
    let p = json!({
        "goal": "g",
        "context": {"api_key": "live-9f8e7d6c5b4a"},
        "steps": [{"id": "a", "tool": "http.request", "paramters": {"token": "abc123def456"}}],
    })
    .to_string();
    let all = found(&lint_default(&p), RawSecret);
    assert_eq!(
        all,
        [(None, "/context/api_key".to_owned()), (Some(0), "/steps/0/paramters/token".to_owned())]
    );
}

#[test]
fn assertion_command_is_scanned() {
    let p = json!({"goal": "g", "steps": [{"id": "a", "tool": "file.write",
    "parameters": {"path": "x", "content": "y"},
    "assertions": [
        {"type": "file_exists", "path": "x"},
        {"type": "command_succeeds", "command": format!("curl -H 'Authorization: Bearer {GHP}' x")},
    ]}]})
    .to_string();
    let (_, path, _) = one(&p);
    assert_eq!(path, "/steps/0/assertions/1/command");
}

#[test]
fn deny_tokens_regex_is_reported_per_value_and_pattern_once() {
    let policy = "deny_tokens_regex:\n  - 'INTERNAL-[0-9]{4}'\n  - 'acme\\.corp'\n";
    let p = plan(&[(
        "notify.slack",
        json!({"text": "tickets INTERNAL-1234 and INTERNAL-5678", "to": ["ops@acme.corp"]}),
    )]);
    let result = lint_with(&p, policy);
    let all = findings(&result, RawSecret);
    let got: Vec<(&str, &str)> = all.iter().map(|f| (f.path.as_str(), f.msg.as_str())).collect();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0].0, "/steps/0/parameters/text");
    assert!(got[0].1.contains("deny_tokens_regex `INTERNAL-[0-9]{4}`"), "{}", got[0].1);
    assert!(got[0].1.contains("13-char match at offset 8"), "{}", got[0].1);
    assert!(!got[0].1.contains("INTERNAL-1234"), "{}", got[0].1);
    assert_eq!(got[1].0, "/steps/0/parameters/to/0");
    assert!(got[1].1.contains(r"`acme\.corp`"), "{}", got[1].1);
}

#[test]
fn one_deny_pattern_reports_each_value_it_matches() {
    let policy = "deny_tokens_regex: ['sekrit']\n";
    let p = plan(&[("notify.slack", json!({"a": "sekrit", "b": "x sekrit y sekrit"}))]);
    let all = found(&lint_with(&p, policy), RawSecret);
    assert_eq!(
        all,
        [
            (Some(0), "/steps/0/parameters/a".to_owned()),
            (Some(0), "/steps/0/parameters/b".to_owned())
        ]
    );
}

#[test]
fn distinct_secrets_in_one_value_are_each_reported() {
    let text = format!("key {AWS_ID} and password=hunter2022");
    let p = json!({"goal": "g", "steps": [{"id": "a", "description": text}]}).to_string();
    let all = secrets(&p);
    let names: Vec<bool> = vec![
        all.iter().any(|f| f.2.contains("AWS access key id")),
        all.iter().any(|f| f.2.contains("password assignment")),
    ];
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(names, [true, true]);
}

#[test]
fn near_misses_are_not_secrets() {
    let p = json!({
        "goal": "Summarise 32 long identifiers without leaking anything",
        "context": {"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
        "steps": [
            {"id": "vault", "tool": "vault.read", "parameters": {"path": "db"}},
            {"id": "creds", "tool": "vault.read", "parameters": {"path": "db"}},
            {"id": "s", "tool": "llm.complete", "depends_on": ["vault", "creds"],
             "description": "check digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08; \
                             password: required; use $(pwd) and pwd=/home/user; grep for \
                             -----BEGIN RSA PRIVATE KEY----- in the repo",
             "parameters": {
                "request_id": "123e4567-e89b-12d3-a456-426614174000",
                "class": "AbstractSingletonProxyFactoryBeanManager",
                "commit": "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
                "max_tokens": 100,
                "token_count": "1234567890",
                "next_page_token": "CAEQAhoMCgoIARIGCIDkyR0",
                "password": "${vault.result.pw}",
                "db_password": "{{creds.result.pw}}",
                "key_id": "AKIA1234567890",
                "token": "GITHUB_TOKEN",
                "secret": "REDACTED",
                "passwd": "$DB_PASS",
                "api_key": "<your api key>",
                "auth_token": "********",
                "client_secret": "changeme",
                "private_key": "/run/secrets/deploy_key",
                "access_token": "vault:secret/data/gh#token",
                "pkg": "sk-learn-style-hyphenated-name",
                "headers": {"Authorization": "Bearer ${vault.result.token}"},
                "dsn": "postgres://app:${creds.result.pw}@db/app",
                "short": {"password": "abc"},
                "prose": {"secret": "the one from the vault"},
             }},
        ],
    })
    .to_string();
    assert_eq!(secrets(&p), vec![]);
}

#[test]
fn plan_lint_args_spelling_reports_the_canonical_pointer() {
    // plan-lint writes `args`; pev reads it as `parameters` and points there, as every
    // other check does.
    let p = json!({"goal": "g", "steps": [
        {"id": "a", "tool": "http.request", "args": {"headers": {"X-Api-Key": AWS_ID}}}
    ]})
    .to_string();
    let (_, path, msg) = one(&p);
    assert_eq!(path, "/steps/0/parameters/headers/X-Api-Key");
    assert!(msg.contains("AWS access key id"), "{msg}");
}

#[test]
fn yaml_plan_with_a_password_in_a_nested_list() {
    let p = "goal: g\nsteps:\n  - id: a\n    tool: db.connect\n    parameters:\n      hosts:\n        - {host: db1, password: Zq9-x7Lm2p}\n";
    let (step, path, msg) = one(p);
    assert_eq!((step, path.as_str()), (Some(0), "/steps/0/parameters/hosts/0/password"));
    assert!(msg.contains("secret-named key `password`") && msg.contains("10 chars"), "{msg}");
}
