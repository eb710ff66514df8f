//! Unit tests of the free functions (the default path, the run id format) and of the thread
//! safety the engine relies on.

use std::path::Path;

use super::*;

#[test]
fn default_path_is_under_dot_pev() {
    assert_eq!(default_path(Path::new("/w")), Path::new("/w/.pev/pev.db"));
}

#[test]
fn run_ids_have_the_documented_shape_and_differ() {
    let a = new_run_id();
    let b = new_run_id();
    assert_eq!(a.len(), "20261121-142233-3fa9c1".len(), "{a}");
    let parts: Vec<&str> = a.split('-').collect();
    assert_eq!(parts.len(), 3, "{a}");
    assert!(parts[0].len() == 8 && parts[0].chars().all(|c| c.is_ascii_digit()), "{a}");
    assert!(parts[1].len() == 6 && parts[1].chars().all(|c| c.is_ascii_digit()), "{a}");
    assert!(parts[2].len() == 6 && parts[2].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    assert!(parts[0].starts_with("20"), "{a}");
    assert_ne!(a, b);
}

/// The engine shares one journal across its worker tasks and moves errors between threads.
#[test]
fn handles_and_errors_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Journal>();
    send_sync::<StoreError>();
    send_sync::<Record>();
    send::<Store>();
}
