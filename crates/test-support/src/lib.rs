//! What several crates' tests share, written once: a PostgreSQL database of a test's own on the
//! server `PEV_TEST_POSTGRES` names (`scripts/with-postgres.sh` starts a throwaway one; `.ci/run`
//! does), created for the test and dropped after it; and the rule for when there is none: the
//! test says so and passes, unless `PEV_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes a
//! missing server a failure; and the two helpers of the small readers of source text the tests
//! use (`structure.rs` reads imports, the store's schema test reads DDL). Only tests depend on
//! this crate.

// Test support: a failure here is a failed test with its message, which is what a test wants.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the test server (a connection URL to a database its role may create
/// databases from).
pub const SERVER_VAR: &str = "PEV_TEST_POSTGRES";
/// The variable that makes a missing server a failure rather than a skip.
pub const REQUIRE_VAR: &str = "PEV_REQUIRE_POSTGRES";

/// The test server's URL, or `None` (saying on stderr that `what` was skipped) when there is
/// none. Panics when there is none and one is required.
pub fn server(what: &str) -> Option<String> {
    match std::env::var(SERVER_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
                "{REQUIRE_VAR}=1 but {SERVER_VAR} is not set"
            );
            eprintln!("no {SERVER_VAR}: {what} skipped (scripts/with-postgres.sh cargo test …)");
            None
        }
    }
}

/// The value of `var`, one of the variables `scripts/with-postgres.sh` exports beside the
/// server (the TLS server's URL, the PgBouncer's), or `None` with a note on stderr when it is
/// not set. Panics when it is not set and a server is required.
pub fn server_extra(var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(value) if !value.is_empty() => Some(value),
        _ => {
            assert!(
                std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
                "{REQUIRE_VAR}=1 but {var} is not set (scripts/with-postgres.sh sets it)"
            );
            eprintln!("no {var}: {what} skipped (scripts/with-postgres.sh cargo test …)");
            None
        }
    }
}

/// A client of the test server's own database (to create and drop others, or to end sessions).
pub fn admin() -> postgres::Client {
    let url = std::env::var(SERVER_VAR).expect("PEV_TEST_POSTGRES");
    postgres::Client::connect(&url, postgres::NoTls).expect("the test server")
}

/// A database created on the test server for one test, dropped (with its sessions) after it.
#[derive(Debug)]
pub struct Database {
    pub url: String,
    pub name: String,
}

impl Database {
    /// A new database with a name no other test of any process uses.
    pub fn create() -> Database {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name =
            format!("pev_t_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        admin().batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
        let base = std::env::var(SERVER_VAR).expect("PEV_TEST_POSTGRES");
        Database { url: with_dbname(&base, &name), name }
    }

    /// A client of this database.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("the test database")
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ =
            admin().batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

/// `url` with its database replaced: `postgresql:///postgres?host=…` or `…/postgres`.
pub fn with_dbname(url: &str, name: &str) -> String {
    let (head, query) = url.split_once('?').map_or((url, None), |(h, q)| (h, Some(q)));
    let slash = head.rfind('/').expect("a database in the URL");
    let mut out = format!("{}/{name}", &head[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// The index of the `close` that matches the `open` at byte `at` of `text` (nested pairs
/// skipped), if it is there: for the small readers of source text the tests use.
pub fn matching(text: &str, at: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.get(at..)?.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(at + i);
            }
        }
    }
    None
}

/// `text` split at every `,` that is not inside an `open`…`close` pair.
pub fn split_top_level(text: &str, open: char, close: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
        } else if c == ',' && depth == 0 {
            out.push(&text[start..i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn pairs_are_matched_and_lists_split_outside_them() {
        let text = "f(a, (b, c), d) + 1";
        assert_eq!(super::matching(text, 1, '(', ')'), Some(14));
        assert_eq!(super::matching("(()", 0, '(', ')'), None);
        assert_eq!(super::split_top_level("a, (b, c), d", '(', ')'), ["a", " (b, c)", " d"]);
        assert_eq!(super::split_top_level("a::{b, c}, d", '{', '}'), ["a::{b, c}", " d"]);
    }

    #[test]
    fn the_database_is_replaced_and_the_query_kept() {
        assert_eq!(
            super::with_dbname("postgresql:///postgres?host=/tmp/s&user=u", "pev_t_1"),
            "postgresql:///pev_t_1?host=/tmp/s&user=u"
        );
        assert_eq!(super::with_dbname("postgres://h:5432/postgres", "x"), "postgres://h:5432/x");
    }
}
