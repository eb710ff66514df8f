//! SQL_WRITE_IN_READONLY and SQL_INJECTION: keyword tokens rather than substrings (plan-lint
//! finds "CREATE" in "created_at"), references spliced into SQL, and classic payloads in literal
//! text, with the near-misses that must stay quiet.

use pev_protocol::LintCode::{SqlInjection, SqlWriteInReadonly};
use serde_json::{Value, json};

use super::support::{findings, found, lint_default, lint_with};

/// A plan whose first step `src` is a db.query, then `(tool, parameters)` as step `s1`.
fn plan(tool: &str, params: Value) -> String {
    let mut doc = json!({"goal": "g", "steps": [
        {"id": "src", "tool": "db.query", "parameters": {"query": "SELECT id, sql FROM jobs"}},
        {"id": "s1", "tool": tool, "depends_on": ["src"]},
    ]});
    doc["steps"][1]["parameters"] = params;
    doc.to_string()
}

fn ro(query: &str) -> String {
    plan("db.query_ro", json!({ "query": query }))
}

/// The messages of the findings with `code` at step 1's `pointer`.
fn msgs_at(plan: &str, policy: &str, code: pev_protocol::LintCode, pointer: &str) -> Vec<String> {
    let result = lint_with(plan, policy);
    let all = findings(&result, code);
    assert!(all.iter().all(|f| f.path == pointer && f.step == Some(1)), "{all:#?}");
    all.iter().map(|f| f.msg.clone()).collect()
}

#[test]
fn write_keywords_in_a_readonly_query() {
    for (query, keyword) in [
        ("DELETE FROM users WHERE id = 1", "DELETE"),
        ("insert into t values (1)", "INSERT"),
        ("UPDATE t SET a = 1", "UPDATE"),
        ("drop table x", "DROP"),
        ("SELECT 1; TRUNCATE t", "TRUNCATE"),
        ("REPLACE INTO t VALUES (1)", "REPLACE"),
        ("CREATE TABLE t (created_at int)", "CREATE"),
        ("SELECT * INTO backup FROM users", "SELECT … INTO"),
        ("SELECT * FROM t INTO OUTFILE '/tmp/x'", "SELECT … INTO"),
        ("EXPLAIN ANALYZE DELETE FROM t", "DELETE"),
        ("GRANT ALL ON t TO bob", "GRANT"),
        ("CALL refresh()", "CALL"),
        ("ATTACH DATABASE 'x.db' AS x", "ATTACH"),
        ("VACUUM", "VACUUM"),
        ("COPY t TO '/tmp/t.csv'", "COPY"),
    ] {
        let msgs = msgs_at(&ro(query), "", SqlWriteInReadonly, "/steps/1/parameters/query");
        assert_eq!(msgs.len(), 1, "{query}: {msgs:?}");
        assert!(msgs[0].contains(&format!("({keyword})")), "{query}: {}", msgs[0]);
        assert!(msgs[0].contains("`db.query_ro`"), "{}", msgs[0]);
    }
}

#[test]
fn every_write_keyword_of_a_statement_is_named_once() {
    let q = "WITH d AS (DELETE FROM t RETURNING *) INSERT INTO u SELECT * FROM d; DELETE FROM v";
    let msgs = msgs_at(&ro(q), "", SqlWriteInReadonly, "/steps/1/parameters/query");
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("(DELETE, INSERT)"), "{}", msgs[0]);
}

#[test]
fn sql_query_ro_statement_array_and_policy_readonly_tools() {
    let p = plan("sql.query_ro", json!({"statement": ["SELECT 1", "alter table t add c int"]}));
    assert_eq!(
        found(&lint_default(&p), SqlWriteInReadonly),
        [(Some(1), "/steps/1/parameters/statement/1".to_owned())]
    );
    let p = plan("warehouse.read", json!({"sql": "MERGE INTO t USING s ON t.id = s.id"}));
    assert_eq!(found(&lint_default(&p), SqlWriteInReadonly), []);
    let msgs = msgs_at(
        &p,
        "readonly_tools: ['warehouse.*']\n",
        SqlWriteInReadonly,
        "/steps/1/parameters/sql",
    );
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("`warehouse.read`") && msgs[0].contains("(MERGE)"), "{}", msgs[0]);
}

#[test]
fn readonly_near_misses() {
    for query in [
        "SELECT created_at, updated_by, deleted FROM t",
        "SELECT 'DROP TABLE x' AS s",
        "SELECT * FROM t -- delete later",
        "/* update this */ SELECT 1",
        "SELECT * FROM t FOR UPDATE",
        "SELECT * FROM t FOR NO KEY UPDATE SKIP LOCKED",
        "SELECT replace(name, 'a', 'b') FROM t",
        "SELECT \"delete\", `insert`, [update] FROM t",
        "SELECT t.update, t.create FROM t",
        "SELECT $$DROP TABLE x$$, $tag$ delete $tag$",
        "SELECT * FROM t WHERE note = 'it''s a DELETE'",
        "SELECT * FROM t WHERE id = ${src.result.id}",
        "SELECT x::text FROM t WHERE a = :update_id",
    ] {
        let result = lint_default(&ro(query));
        assert_eq!(found(&result, SqlWriteInReadonly), [], "{query}");
    }
    // A write in a read-write tool is that tool's business.
    let p = plan("db.query", json!({"query": "DELETE FROM t WHERE id = $1", "args": [1]}));
    assert_eq!(found(&lint_default(&p), SqlWriteInReadonly), []);
}

#[test]
fn reference_spliced_into_sql_text() {
    let p = plan("db.query", json!({"query": "SELECT * FROM users WHERE id = ${src.result.id}"}));
    let msgs = msgs_at(&p, "", SqlInjection, "/steps/1/parameters/query");
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("${src.result.id} is spliced into SQL text"), "{}", msgs[0]);
    // Inside quotes it is still injection: the value can close the quote.
    let p = plan(
        "sql.exec",
        json!({"sql": ["SELECT 1", "DELETE FROM t WHERE n = '{{src.result.name}}'"]}),
    );
    assert_eq!(
        found(&lint_default(&p), SqlInjection),
        [(Some(1), "/steps/1/parameters/sql/1".to_owned())]
    );
}

#[test]
fn a_whole_query_from_another_step_is_injection() {
    let p = plan("db.query", json!({"query": "{{src.result.sql}}"}));
    let msgs = msgs_at(&p, "", SqlInjection, "/steps/1/parameters/query");
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("whole SQL statement is {{src.result.sql}}"), "{}", msgs[0]);
}

#[test]
fn sql_in_a_non_sql_tool_is_recognised() {
    let p = plan("analytics.run", json!({"query": "SELECT * FROM t WHERE id = ${src.result.id}"}));
    assert_eq!(
        found(&lint_default(&p), SqlInjection),
        [(Some(1), "/steps/1/parameters/query".to_owned())]
    );
    // A search query that starts with an SQL verb is not SQL.
    let p = plan("search.web", json!({"query": "update on ${src.result.id} weather"}));
    assert_eq!(found(&lint_default(&p), SqlInjection), []);
}

#[test]
fn classic_payloads_in_literal_text() {
    for (query, what) in [
        ("SELECT * FROM users WHERE name = 'admin' OR '1'='1'", "always-true comparison"),
        ("SELECT * FROM users WHERE name = 'admin' OR '1'='1", "always-true comparison"),
        ("SELECT * FROM users WHERE name = '' or 1=1--'", "always-true comparison"),
        ("SELECT * FROM users WHERE name = 'x' AND 1=1", "always-true comparison"),
        ("SELECT * FROM t WHERE name = 'x'; DROP TABLE users; --", "`;` and another statement"),
        ("SELECT name FROM t WHERE id = '1' UNION SELECT password FROM users--", "UNION SELECT"),
        ("SELECT name FROM t WHERE id = '1' UNION ALL SELECT pw FROM u WHERE 'a", "UNION SELECT"),
        ("SELECT * FROM users WHERE user = 'admin'--' AND pw = 'x'", "`--` comment"),
    ] {
        let msgs = msgs_at(
            &plan("db.query", json!({ "query": query })),
            "",
            SqlInjection,
            "/steps/1/parameters/query",
        );
        assert_eq!(msgs.len(), 1, "{query}: {msgs:?}");
        assert!(
            msgs[0].contains("injection payload") && msgs[0].contains(what),
            "{query}: {}",
            msgs[0]
        );
    }
}

#[test]
fn injection_near_misses() {
    for params in [
        json!({"query": "SELECT * FROM users WHERE name = 'bob'"}),
        json!({"query": "SELECT * FROM users WHERE id = $1", "args": ["${src.result.id}"]}),
        json!({"query": "SELECT * FROM t WHERE a = ? AND b = :name", "params": {"name": "{{src.result.n}}"}}),
        json!({"query": "SELECT 'a' AS k UNION SELECT 'b'"}),
        json!({"query": "SELECT * FROM t WHERE status = 'active' -- only active rows\nAND x = 1"}),
        json!({"query": "SELECT * FROM t WHERE 1=1 AND x = $1"}),
        json!({"query": "SELECT 'O''Brien', \"it's\" FROM t WHERE a = 'x' OR b = 'y'"}),
        json!({"query": "SELECT * FROM t WHERE n = 'a;b' OR m = 2"}),
    ] {
        let result = lint_default(&plan("db.query", params.clone()));
        assert_eq!(found(&result, SqlInjection), [], "{params}");
    }
}

#[test]
fn plan_lint_docs_fixed_query_passes_and_its_payload_does_not() {
    // plan-lint's SQL injection page: the parameterised query is fine, the payload it describes
    // (`admin' OR '1'='1` concatenated into the text) is caught without any policy regex.
    let fixed = plan(
        "db.query",
        json!({"query": "SELECT * FROM users WHERE username = ?", "params": ["admin"]}),
    );
    assert!(!lint_default(&fixed).has(SqlInjection));
    let bad = plan(
        "db.query",
        json!({"query": "SELECT * FROM users WHERE username = 'admin' OR '1'='1'"}),
    );
    assert!(lint_default(&bad).has(SqlInjection));
}
