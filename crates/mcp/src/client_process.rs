//! Which client process a hook or a server belongs to.
//!
//! Claude Code starts a plugin's MCP server without telling it the session id, and two sessions
//! can work in one workspace at once; a single pin file per workspace then hands one session's
//! id to the other's server, and their plans cross. What the two processes of one session do
//! share is their client: Claude Code (or Codex) spawns `pev mcp` and runs `pev gate` (through a
//! shell) as its own children. So the SessionStart hook pins its session under the key of its
//! client process, and a server reads the pin of its own client: the nearest ancestor that is
//! not a shell or a launcher, named by pid and start time (a pid alone can be reused).

use std::path::{Path, PathBuf};

/// Processes between a client and pev that are not the client: shells and launchers.
const WRAPPERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox", "env", "timeout", "nohup",
    "stdbuf", "nice", "ionice", "setsid", "chrt", "taskset", "script", "sudo", "doas", "pev",
];

/// How far up the tree the client is looked for.
const MAX_HOPS: usize = 16;

/// The key of this process's client: `PID-STARTTIME` of the nearest ancestor that is not a
/// shell or launcher; `None` without `/proc` or when only init is above.
pub fn client_key() -> Option<String> {
    let mut pid = u32::try_from(nix::unistd::getppid().as_raw()).ok()?;
    for _ in 0..MAX_HOPS {
        if pid <= 1 {
            return None;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let parsed = parse_stat(&stat)?;
        if !WRAPPERS.contains(&parsed.comm.as_str()) {
            return Some(format!("{pid}-{}", parsed.start));
        }
        pid = parsed.ppid;
    }
    None
}

/// The pin file of the client `key` beside the journal `db`.
pub fn pin_path(db: &Path, key: &str) -> PathBuf {
    let dir = db.parent().unwrap_or_else(|| Path::new("."));
    dir.join("sessions").join(format!("client-{key}.json"))
}

/// The fields of `/proc/PID/stat` pev needs.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    comm: String,
    ppid: u32,
    start: u64,
}

/// `pid (comm) state ppid … starttime …`; `comm` may hold spaces and parentheses, so it ends
/// at the last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After comm: state (3), ppid (4), … starttime (22): indexes 0, 1, … 19.
    let ppid = rest.get(1)?.parse().ok()?;
    let start = rest.get(19)?.parse().ok()?;
    Some(Stat { comm, ppid, start })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_with_odd_names() {
        let line = "4242 (my (odd) client) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 \
                    9 0 123456 1000 100 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat { comm: "my (odd) client".into(), ppid: 17, start: 123_456 })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S"), None);
    }

    #[test]
    fn the_client_is_the_nearest_ancestor_that_is_not_a_shell() {
        let key = client_key().expect("a client");
        let (pid, start) = key.split_once('-').expect("PID-START");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("alive");
        let client = parse_stat(&stat).expect("stat");
        assert_eq!(client.start.to_string(), start);
        assert!(!WRAPPERS.contains(&client.comm.as_str()), "{client:?}");
        // Every process between this one and the client is a wrapper.
        let mut at = std::process::id();
        loop {
            let me =
                parse_stat(&std::fs::read_to_string(format!("/proc/{at}/stat")).expect("stat"))
                    .expect("stat");
            if me.ppid.to_string() == pid {
                break;
            }
            let parent = std::fs::read_to_string(format!("/proc/{}/stat", me.ppid)).expect("stat");
            let parent = parse_stat(&parent).expect("stat");
            assert!(WRAPPERS.contains(&parent.comm.as_str()), "{parent:?}");
            at = me.ppid;
        }
    }
}
