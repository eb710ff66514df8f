//! The process tree, read from `/proc`: which processes descend from a given one.

use std::collections::BTreeMap;
use std::fs;

use nix::unistd::Pid;

/// Every live descendant of `root` (children, grandchildren, …), found by parent links in
/// `/proc/<pid>/stat`. Processes that exit during the scan are simply missing.
pub(crate) fn descendants(root: Pid) -> Vec<Pid> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some(ppid) = parent_of(&stat) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![root.as_raw()];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            out.push(Pid::from_raw(child));
            queue.push(child);
        }
    }
    out
}

/// The parent pid from the text of `/proc/<pid>/stat`: the fourth field, counted after the
/// command name (which is in parentheses and may itself contain spaces and parentheses).
pub(crate) fn parent_of(stat: &str) -> Option<i32> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_is_read_after_a_name_with_spaces_and_parentheses() {
        assert_eq!(parent_of("42 (a b) c)) S 7 42 42 0"), Some(7));
        assert_eq!(parent_of("42 (sh) R 1 1"), Some(1));
        assert_eq!(parent_of("garbage"), None);
    }

    #[test]
    fn a_spawned_child_is_a_descendant() -> std::io::Result<()> {
        let mut child = std::process::Command::new("sleep").arg("5").spawn()?;
        let found = descendants(Pid::this());
        let _ = child.kill();
        let _ = child.wait();
        let id = i32::try_from(child.id()).unwrap_or_default();
        assert!(found.contains(&Pid::from_raw(id)), "{found:?} lacks {id}");
        Ok(())
    }
}
