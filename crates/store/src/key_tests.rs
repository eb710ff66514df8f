use std::os::unix::fs::PermissionsExt;

use super::*;

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
}

#[test]
fn the_key_file_is_the_variable_then_xdg_then_home() {
    let all = [(KEY_FILE_ENV, "/k/key"), ("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")];
    assert_eq!(key_file(&env(&all)).unwrap(), PathBuf::from("/k/key"));
    assert_eq!(key_file(&env(&all[1..])).unwrap(), PathBuf::from("/x/pev/journal.key"));
    // A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
    let relative = [("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")];
    assert_eq!(key_file(&env(&relative)).unwrap(), PathBuf::from("/h/.config/pev/journal.key"));
    assert!(key_file(&env(&[])).is_err());
}

#[test]
fn a_key_is_created_private_once_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cfg").join("pev").join("journal.key");
    assert!(matches!(load(&file, CreateKey::No).unwrap(), Keying::Unkeyed { .. }));
    assert!(!file.exists(), "a reader creates nothing");
    let first = load(&file, CreateKey::Yes).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.len(), 32);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir_mode = std::fs::metadata(file.parent().unwrap()).unwrap().permissions().mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    let again = load(&file, CreateKey::Yes).unwrap();
    assert_eq!(first.key().unwrap().id(), again.key().unwrap().id());
    assert_eq!(first.key().unwrap().id().len(), 16);
    // Nothing is left behind but the key.
    let names: Vec<_> = std::fs::read_dir(file.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn racing_writers_end_with_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.key");
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| load(&file, CreateKey::Yes).unwrap().key().unwrap().id().to_owned())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
}

#[test]
fn a_bad_key_file_is_an_error_naming_it_never_a_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.key");
    std::fs::write(&file, [7u8; 32]).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = load(&file, CreateKey::Yes).unwrap_err().to_string();
    assert!(e.contains(&file.display().to_string()) && e.contains("0640"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(load(&file, CreateKey::Yes).is_ok());
    std::fs::write(&file, [7u8; 31]).unwrap();
    let e = load(&file, CreateKey::Yes).unwrap_err().to_string();
    assert!(e.contains("31 bytes"), "{e}");
    assert_eq!(std::fs::read(&file).unwrap().len(), 31, "the bad file is left alone");
}

#[test]
fn no_place_for_a_key_is_an_unkeyed_journal_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o500)).unwrap();
    let file = ro.join("pev").join("journal.key");
    let found = load(&file, CreateKey::Yes).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o700)).unwrap();
    // root writes anywhere: then a key is made, which is as good.
    if let Keying::Unkeyed { why } = found {
        assert!(why.contains("no journal key") && why.contains("cannot create"), "{why}");
    }
}

#[test]
fn the_debug_form_shows_no_secret() {
    let key = JournalKey::new([0xab; 32], PathBuf::from("/k"));
    let shown = format!("{key:?}");
    assert!(!shown.contains("abab") && !shown.contains("171"), "{shown}");
}
