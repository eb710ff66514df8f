//! What several crates' tests share, written once: a PostgreSQL database of a test's own on the
//! server `PEV_TEST_POSTGRES` names (`scripts/with-postgres.sh` starts a throwaway one; `.ci/run`
//! does), created for the test and dropped after it; and the rule for when there is none: the
//! test says so and passes, unless `PEV_REQUIRE_POSTGRES=1` (set by `.ci/run`), which makes a
//! missing server a failure; and the two helpers of the small readers of source text the tests
//! use (`structure.rs` reads imports, the store's schema test reads DDL). [`check_skips`] holds
//! a suite to the rule: its server tests, re-run without a server, pass and say they skipped.
//! Only tests depend on this crate.

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

/// Which tests of a test binary need the test server, for [`check_skips`].
#[derive(Debug, Clone, Copy)]
pub struct ServerTests<'a> {
    /// The suite's directory (`tests/suite`): every file in it that reaches for a server
    /// (`server(`, `server_extra(`, `Database::create`, `admin()`, the variable by name) must be
    /// one of `modules`.
    pub suite: &'a std::path::Path,
    /// The suite modules (`conformance`) whose tests need a server.
    pub modules: &'a [&'a str],
    /// libtest filters for those tests (`suite::conformance::postgres::`).
    pub filters: &'a [&'a str],
    /// Tests the filters match that need no server (they run, and must pass, without one).
    pub local: &'a [&'a str],
    /// The test calling [`check_skips`] (left out of the re-run).
    pub this_test: &'a str,
}

/// The README's `cargo test` on a machine without PostgreSQL: re-runs this test binary's
/// server tests with every `PEV_TEST_*` variable and `PEV_REQUIRE_POSTGRES` removed, and checks
/// that each passes, and that each one not in `local` said it was skipped. Also checks that
/// every suite file that reaches for a server is one of `modules`, so a new server test is
/// checked too.
pub fn check_skips(tests: &ServerTests<'_>) {
    let reaching = [
        "pev_test_support::server",
        "server_extra(",
        "Database::create",
        "pev_test_support::admin",
        SERVER_VAR,
    ];
    let mut files: Vec<_> = std::fs::read_dir(tests.suite)
        .expect("the suite directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let module = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if reaching.iter().any(|r| text.contains(r)) {
            assert!(
                tests.modules.contains(&module),
                "{} reaches for the test server but is not checked for skipping: add `{module}` \
                 (and a filter for its server tests) to the ServerTests of its suite",
                path.display()
            );
        }
    }
    let exe = std::env::current_exe().expect("this test binary");
    // One pipe for both streams: a test's note (stderr) lands after its name (stdout).
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c").arg("exec \"$0\" \"$@\" 2>&1").arg(&exe).args(tests.filters);
    cmd.args(["--skip", tests.this_test, "--test-threads=1", "--nocapture"]);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("PEV_TEST_") || name == REQUIRE_VAR {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().expect("re-run of this test binary");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "without a server, a server test failed:\n{text}");
    let ran = test_outputs(&text);
    assert!(!ran.is_empty(), "the filters {:?} matched no test:\n{text}", tests.filters);
    for (name, said) in &ran {
        let local = tests.local.iter().any(|l| name.ends_with(l));
        assert!(
            local || said.contains("skipped"),
            "{name} passed without a server and without saying it skipped: it must skip \
             (pev_test_support::server) or be listed as local:\n{said}"
        );
    }
    for l in tests.local {
        assert!(ran.iter().any(|(n, _)| n.ends_with(l)), "no local test `{l}` ran:\n{text}");
    }
}

/// Each test's name and what it printed, from libtest's `--nocapture --test-threads=1` output.
fn test_outputs(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("test ")
            && let Some((name, said)) = rest.split_once(" ... ")
        {
            out.push((name.to_owned(), said.to_owned()));
        } else if line.starts_with("test result:") {
            break;
        } else if let Some((_, said)) = out.last_mut() {
            said.push('\n');
            said.push_str(line);
        }
    }
    for (_, said) in &mut out {
        *said = said.trim().to_owned();
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
    fn each_tests_output_is_read_from_libtests_lines() {
        let text = "\nrunning 2 tests\ntest a::b ... no X: skipped (…)\nok\ntest a::c ... ok\n\n\
                    test result: ok. 2 passed\n";
        let got = super::test_outputs(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, "a::b");
        assert!(got[0].1.contains("skipped"));
        assert_eq!(got[1], ("a::c".to_owned(), "ok".to_owned()));
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
