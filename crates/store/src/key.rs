//! The journal key: 32 random bytes that MAC the journal's rows (see `chain.rs`), kept where no
//! command of a run can write or read them.
//!
//! Where: `PEV_JOURNAL_KEY_FILE` when set; else `$XDG_CONFIG_HOME/pev/journal.key` (an absolute
//! `XDG_CONFIG_HOME` only, as the XDG spec says); else `$HOME/.config/pev/journal.key`. pev's
//! sandbox hides `~/.config` from commands under bubblewrap, and no workspace root is under it.
//!
//! A writer creates the key on first use: mode 0600 in a 0700 directory, written to a temporary
//! file and published with a hard link, which never replaces an existing file, so two processes
//! racing on first use both end with the one key that won. A key file that exists but cannot be
//! read, is not 32 bytes, or can be read by group or others is an error naming the file, never a
//! silent new key. When no key can be created at all (a read-only or missing home), the journal
//! is written unkeyed, and what it writes reads as "not verifiable: no journal key".
//!
//! The key's id (the first 8 bytes of HMAC(key, "pev journal key id"), in hex) is stored in
//! each run's row, so a journal written with another key says so instead of reading as forged
//! row by row.

use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::error::StoreError;

/// The environment variable naming the key file.
pub const KEY_FILE_ENV: &str = "PEV_JOURNAL_KEY_FILE";

/// The key's length in bytes.
const KEY_LEN: usize = 32;

pub(crate) type HmacSha256 = Hmac<Sha256>;

/// A loaded journal key. Its bytes are never shown (`Debug` prints the id and the file).
#[derive(Clone)]
pub struct JournalKey {
    secret: [u8; KEY_LEN],
    id: String,
    file: PathBuf,
}

impl fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JournalKey(id {}, {})", self.id, self.file.display())
    }
}

impl JournalKey {
    fn new(secret: [u8; KEY_LEN], file: PathBuf) -> JournalKey {
        let mut mac = hmac_of(&secret);
        mac.update(b"pev journal key id");
        let digest = mac.finalize().into_bytes();
        let id = hex(digest.get(..8).unwrap_or_default());
        JournalKey { secret, id, file }
    }

    /// The key's id: 16 hex digits, safe to show and to store.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file the key was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// A fresh HMAC-SHA256 under this key.
    pub(crate) fn mac(&self) -> HmacSha256 {
        hmac_of(&self.secret)
    }
}

fn hmac_of(secret: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length: this cannot fail.
    match <HmacSha256 as KeyInit>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of every length"),
    }
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// What a journal's rows are MACed with: a key, or none (and why).
#[derive(Debug, Clone)]
pub enum Keying {
    Keyed(Arc<JournalKey>),
    /// No key: rows are written without MACs and read as not verifiable.
    Unkeyed {
        why: String,
    },
}

impl Keying {
    /// The key, if there is one.
    pub fn key(&self) -> Option<&JournalKey> {
        match self {
            Keying::Keyed(k) => Some(k),
            Keying::Unkeyed { .. } => None,
        }
    }

    /// One line for people: where the key is and its id, or why there is none.
    pub fn describe(&self) -> String {
        match self {
            Keying::Keyed(k) => format!("{} (id {})", k.file.display(), k.id),
            Keying::Unkeyed { why } => format!("none: {why}"),
        }
    }

    /// The key of `file` (the test's and the bench's way in: no environment is read).
    pub fn from_file(file: &Path, create: CreateKey) -> Result<Keying, StoreError> {
        load(file, create)
    }
}

/// Whether loading may create a missing key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateKey {
    /// A writer: create it on first use.
    Yes,
    /// A reader or `pev doctor`: a missing key is no key.
    No,
}

/// Where the key file is, from the environment (`get` reads a variable); `Err` says why there
/// is no place for one.
pub fn key_file(get: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, String> {
    let var = |name: &str| get(name).filter(|v| !v.is_empty());
    if let Some(file) = var(KEY_FILE_ENV) {
        return Ok(PathBuf::from(file));
    }
    if let Some(xdg) = var("XDG_CONFIG_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Ok(xdg.join("pev").join("journal.key"));
    }
    match var("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".config").join("pev").join("journal.key")),
        None => Err(format!("no {KEY_FILE_ENV}, XDG_CONFIG_HOME or HOME to keep it in")),
    }
}

/// The key the environment names (see the module's documentation).
pub fn load_key(create: CreateKey) -> Result<Keying, StoreError> {
    let env = |name: &str| std::env::var(name).ok();
    match key_file(&env) {
        Ok(file) => load(&file, create),
        Err(why) => Ok(Keying::Unkeyed { why: format!("no journal key ({why})") }),
    }
}

fn key_err(file: &Path, problem: impl Into<String>) -> StoreError {
    StoreError::Key { file: file.to_path_buf(), problem: problem.into() }
}

fn load(file: &Path, create: CreateKey) -> Result<Keying, StoreError> {
    match std::fs::metadata(file) {
        Ok(_) => read_key(file).map(|k| Keying::Keyed(Arc::new(k))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match create {
            CreateKey::No => Ok(Keying::Unkeyed {
                why: format!("no journal key at {} (a run creates it)", file.display()),
            }),
            CreateKey::Yes => match create_key(file) {
                Ok(()) => read_key(file).map(|k| Keying::Keyed(Arc::new(k))),
                Err(e) => Ok(Keying::Unkeyed {
                    why: format!("no journal key: cannot create {}: {e}", file.display()),
                }),
            },
        },
        Err(e) => Err(key_err(file, format!("cannot look at it: {e}"))),
    }
}

/// Reads and checks an existing key file.
fn read_key(file: &Path) -> Result<JournalKey, StoreError> {
    let mut f =
        std::fs::File::open(file).map_err(|e| key_err(file, format!("cannot read: {e}")))?;
    let meta = f.metadata().map_err(|e| key_err(file, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(key_err(file, "is not a file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(key_err(
                file,
                format!(
                    "its mode is {mode:04o}: group or others may read it, so it may be known \
                     outside; `chmod 600` it if it never left your hands, or remove it (runs \
                     journaled with it will then read as written with another key)"
                ),
            ));
        }
    }
    let mut bytes = Vec::with_capacity(KEY_LEN + 1);
    Read::by_ref(&mut f)
        .take(KEY_LEN as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| key_err(file, format!("cannot read: {e}")))?;
    let secret: [u8; KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
        key_err(file, format!("holds {} bytes, not {KEY_LEN}: it is not a journal key", meta.len()))
    })?;
    Ok(JournalKey::new(secret, file.to_path_buf()))
}

/// Creates a new key at `file` unless one appears there first (then that one stays).
fn create_key(file: &Path) -> std::io::Result<()> {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let mut secret = [0u8; KEY_LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
    let tmp = dir.join(format!(
        ".journal.key.{}.{}",
        std::process::id(),
        hex(&secret[..4]) // a name two racing processes cannot share
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = (|| {
        let mut f = options.open(&tmp)?;
        f.write_all(&secret)?;
        f.sync_all()
    })();
    // The link publishes the whole file at once and fails if a key is already there.
    let published = written.and_then(|()| match std::fs::hard_link(&tmp, file) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = std::fs::remove_file(&tmp);
    published?;
    if let Ok(d) = std::fs::File::open(dir) {
        // The directory entry survives a crash too (best effort: not every file system can).
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
