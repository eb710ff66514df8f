//! Opening files: creation, the pragmas, and the refusals (not SQLite, not pev's, too new).

use pev_store::StoreError;
use rusqlite::Connection;

use super::{create, db};

#[test]
fn open_creates_the_directory_and_a_wal_journal() {
    let db = db();
    assert!(!db.path.exists());
    let store = crate::suite::open_store(&db.path).unwrap();
    assert!(db.path.exists());
    assert_eq!(store.location().file(), Some(db.path.as_path()));
    assert_eq!(store.integrity_check().unwrap(), "ok");
    let conn = Connection::open(&db.path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 5);
    // Reopening a current journal is a no-op, and the Journal opens it too.
    drop(store);
    let store = crate::suite::open_store(&db.path).unwrap();
    create(&store, "r1", "2026-01-01T00:00:00.000Z");
    crate::suite::start_journal(&db.path).unwrap().close().unwrap();
    assert_eq!(store.list_runs().unwrap().len(), 1);
}

#[test]
fn open_existing_refuses_a_missing_file_and_creates_nothing() {
    let db = db();
    let err = crate::suite::open_existing(&db.path).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("cannot open journal {}: no such file", db.path.display())));
    assert!(!db.path.parent().unwrap().exists());
    crate::suite::open_store(&db.path).unwrap();
    crate::suite::open_existing(&db.path).unwrap();
}

#[test]
fn a_file_that_is_not_sqlite_is_an_error() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    std::fs::write(&db.path, "this is not a database, just text that goes on for a while ....")
        .unwrap();
    let err = crate::suite::open_store(&db.path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(msg.starts_with(&format!("cannot open journal {}: ", db.path.display())), "{msg}");
    assert!(msg.contains("not a database"), "{msg}");
    let err = crate::suite::start_journal(&db.path).unwrap_err();
    assert!(err.to_string().contains("not a database"), "{err}");
    // Random bytes as well (a header-sized prefix of binary junk).
    let junk: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&db.path, junk).unwrap();
    assert!(crate::suite::open_store(&db.path).is_err());
}

#[test]
fn a_newer_schema_version_is_refused() {
    let db = db();
    crate::suite::open_store(&db.path).unwrap();
    Connection::open(&db.path).unwrap().execute_batch("PRAGMA user_version = 99").unwrap();
    let err = crate::suite::open_store(&db.path).unwrap_err();
    assert!(matches!(err, StoreError::TooNew { found: 99, known: 5, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("schema version is 99") && msg.contains("use a newer pev"), "{msg}");
    assert!(msg.contains(&db.path.display().to_string()), "{msg}");
    assert!(matches!(crate::suite::start_journal(&db.path), Err(StoreError::TooNew { .. })));
}

#[test]
fn another_programs_sqlite_database_is_refused() {
    let db = db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    Connection::open(&db.path).unwrap().execute_batch("CREATE TABLE notes (body TEXT)").unwrap();
    let err = crate::suite::open_store(&db.path).unwrap_err();
    assert!(matches!(err, StoreError::NotAJournal { .. }), "{err:?}");
    assert!(err.to_string().contains("not a pev journal"), "{err}");
    // And it was left alone: no pev tables were added.
    let conn = Connection::open(&db.path).unwrap();
    let n: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);

    let other = super::db();
    std::fs::create_dir_all(other.path.parent().unwrap()).unwrap();
    Connection::open(&other.path).unwrap().execute_batch("PRAGMA application_id = 42").unwrap();
    let err = crate::suite::open_store(&other.path).unwrap_err();
    assert!(err.to_string().contains("application id is 0x2a"), "{err}");
}
