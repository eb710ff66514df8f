//! How pending writes become statements: grouped by table and shape in the records' order, and
//! folded where one statement cannot hold a key twice. (Sending them is the conformance suite's,
//! on a server: `tests/suite/batched.rs`.)

use std::sync::OnceLock;

use super::{COPY_ROWS, Fold, GROUP_ROWS, Pending, SameKey, Shape, Update, plan};
use crate::db::Param;

static PLAIN: Shape = Shape {
    table: "calls",
    columns: &["id", "status"],
    key: &[0],
    tail: "",
    same_key: SameKey::Fails,
    one: OnceLock::new(),
};
static UPSERT: Shape = Shape {
    table: "states",
    columns: &["id", "v"],
    key: &[0],
    tail: "ON CONFLICT (id) DO UPDATE SET v = excluded.v",
    same_key: SameKey::KeepLast,
    one: OnceLock::new(),
};
static FIRST: Shape = Shape {
    table: "blobs",
    columns: &["id", "v"],
    key: &[0],
    tail: "ON CONFLICT (id) DO NOTHING",
    same_key: SameKey::KeepFirst,
    one: OnceLock::new(),
};

fn script(p: &Pending) -> Vec<String> {
    plan(&p.items)
        .iter()
        .map(|s| {
            let mut sql = String::new();
            s.write(&mut sql);
            sql
        })
        .collect()
}

fn row(p: &mut Pending, shape: &'static Shape, id: &str, v: &str) {
    p.row(shape, &[Param::Text(id), Param::Text(v)], format!("write {id}")).unwrap();
}

fn end(p: &mut Pending, id: &str, status: &str) {
    let whole = [Param::Text(id), Param::Text(status)];
    let update = Update {
        table: "calls",
        sql: "UPDATE calls SET status = ?2 WHERE id = ?1",
        params: &[Param::Text(id), Param::Text(status)],
        must_change: Some(format!("{id} never started")),
        fold: Some(Fold { shape: &PLAIN, row: &whole }),
    };
    p.statement(update, format!("end {id}")).unwrap();
}

#[test]
fn rows_of_a_table_go_in_one_statement_in_their_order_tables_as_they_first_come() {
    let mut p = Pending::default();
    row(&mut p, &PLAIN, "c1", "started");
    row(&mut p, &UPSERT, "s1", "a");
    row(&mut p, &PLAIN, "c2", "started");
    row(&mut p, &UPSERT, "s2", "b");
    assert_eq!(
        script(&p),
        [
            "INSERT INTO calls (id, status) VALUES (E'c1', E'started'), (E'c2', E'started')",
            "INSERT INTO states (id, v) VALUES (E's1', E'a'), (E's2', E'b') \
             ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        ]
    );
    assert_eq!(PLAIN.sql(2), "INSERT INTO calls (id, status) VALUES (?1, ?2), (?3, ?4)");
}

#[test]
fn an_end_whose_start_waits_in_the_statement_becomes_its_values_and_another_is_an_update() {
    let mut p = Pending::default();
    row(&mut p, &PLAIN, "c1", "started");
    end(&mut p, "c1", "finished");
    row(&mut p, &PLAIN, "c2", "started");
    // Its start was sent earlier: an update, between the rows before and after it.
    end(&mut p, "c0", "failed");
    row(&mut p, &PLAIN, "c3", "started");
    end(&mut p, "c2", "finished");
    assert_eq!(
        script(&p),
        [
            "INSERT INTO calls (id, status) VALUES (E'c1', E'finished'), (E'c2', E'started')",
            "UPDATE calls SET status = E'failed' WHERE id = E'c0'",
            "INSERT INTO calls (id, status) VALUES (E'c3', E'started')",
            "UPDATE calls SET status = E'finished' WHERE id = E'c2'",
        ]
    );
}

#[test]
fn a_repeated_key_keeps_the_last_upsert_the_first_do_nothing_and_both_plain_inserts() {
    let mut p = Pending::default();
    row(&mut p, &UPSERT, "s1", "running");
    row(&mut p, &UPSERT, "s2", "running");
    row(&mut p, &UPSERT, "s1", "done");
    row(&mut p, &FIRST, "b1", "first");
    row(&mut p, &FIRST, "b1", "second");
    row(&mut p, &PLAIN, "c1", "started");
    row(&mut p, &PLAIN, "c1", "started");
    assert_eq!(
        script(&p),
        [
            "INSERT INTO states (id, v) VALUES (E's1', E'done'), (E's2', E'running') \
             ON CONFLICT (id) DO UPDATE SET v = excluded.v",
            "INSERT INTO blobs (id, v) VALUES (E'b1', E'first') ON CONFLICT (id) DO NOTHING",
            // Fails on the server, as the second of two inserts would.
            "INSERT INTO calls (id, status) VALUES (E'c1', E'started'), (E'c1', E'started')",
        ]
    );
}

#[test]
fn a_long_run_of_plain_rows_is_copied_in_every_group_rows_and_a_short_one_inserted() {
    let mut p = Pending::default();
    let n = 2 * GROUP_ROWS + 3;
    for i in 0..n {
        row(&mut p, &PLAIN, &format!("c{i}"), "started");
    }
    let statements = script(&p);
    let rows: Vec<usize> = statements
        .iter()
        .map(|s| match s.strip_prefix("COPY calls (id, status) FROM STDIN\n") {
            Some(data) => data.lines().count(),
            None => s.matches("(E'c").count(),
        })
        .collect();
    assert_eq!(rows, [GROUP_ROWS, GROUP_ROWS, 3]);
    assert!(statements[2].starts_with("INSERT INTO calls"), "{}", statements[2]);
    // Each row once, in order.
    let all = statements.join("\n");
    let mut at = 0;
    for i in 0..n {
        let copied = all[at..].find(&format!("\nc{i}\tstarted\n"));
        let inserted = all[at..].find(&format!("(E'c{i}', E'started')"));
        at += copied.or(inserted).unwrap() + 1;
    }
    // What runs alone, after a failure, is each record's own statement.
    assert_eq!(p.items[0].alone(), "INSERT INTO calls (id, status) VALUES (E'c0', E'started')");
}

#[test]
fn copied_text_escapes_what_the_format_reads_and_nul_becomes_u_fffd() {
    let mut p = Pending::default();
    for i in 0..COPY_ROWS {
        let v = if i == 0 { "tab\tnl\ncr\rbs\\nul\0end" } else { "plain" };
        row(&mut p, &PLAIN, &format!("c{i}"), v);
    }
    p.row(&PLAIN, &[Param::Int(-7), Param::Null], "null".into()).unwrap();
    p.row(&PLAIN, &[Param::Bool(true), Param::Bytes(&[0, 0xff])], "bytes".into()).unwrap();
    let statements = script(&p);
    let lines: Vec<&str> = statements[0].lines().collect();
    assert_eq!(lines[1], "c0\ttab\\tnl\\ncr\\rbs\\\\nul\u{FFFD}end");
    assert_eq!(lines[COPY_ROWS + 1], "-7\t\\N");
    assert_eq!(lines[COPY_ROWS + 2], "t\t\\\\x00ff");
    assert!(p.row(&PLAIN, &[Param::Unsigned(u64::MAX), Param::Null], "big".into()).is_err());
}
