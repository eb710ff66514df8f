//! Issue 28: without bubblewrap, pev's helper makes its own namespaces where the kernel lets an
//! unprivileged process (user namespaces): a command cannot reach a host unix socket (here a
//! server's in `/tmp`, as tmux's and ssh-agent's are), cannot see the journal in `.pev/`,
//! cannot change the mode or times of a file outside the workspace (every mount is read-only
//! but the writable roots, as under bubblewrap), and still writes its workspace and its
//! `TMPDIR`. Where user namespaces cannot be made the run says `partial`, and this test says it
//! was skipped.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use serde_json::json;

use super::run_support::{Outcome, Ws};
use super::sandbox_escape::path_without_bwrap;
use super::support::{pev, run};

#[test]
fn without_bubblewrap_host_sockets_and_the_journal_are_out_of_reach() {
    let ws = Ws::new();
    let bin = ws.root.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let path = path_without_bwrap(&bin);
    // A host service listening on a unix socket outside the workspace.
    let service = tempfile::tempdir().expect("tmp");
    let socket = service.path().join("service.sock");
    let listener = UnixListener::bind(&socket).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let connect = format!(
        "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}')\" \
         && echo connected",
        socket.display()
    );
    // A file of the user's outside the workspace (not under /tmp, which is a fresh tmpfs):
    // Landlock refuses writing it, but not changing its mode or times; the read-only mounts do.
    let holder =
        tempfile::Builder::new().prefix("pev-escape-").tempdir_in("/var/tmp").expect("dir");
    let victim = holder.path().join("victim.txt");
    std::fs::write(&victim, "outside\n").expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let stamp =
        |p: &std::path::Path| std::fs::metadata(p).expect("meta").modified().expect("mtime");
    let mtime = stamp(&victim);
    let v = victim.display();
    let steps = vec![
        json!({"id": "socket", "tool": "shell.exec", "on_fail": "continue",
               "parameters": {"command": connect}}),
        json!({"id": "metadata", "tool": "shell.exec", "on_fail": "continue",
               "parameters": {"command": format!("chmod 777 {v}; touch -d 2001-01-01 {v}; echo tried")}}),
        json!({"id": "journal", "tool": "shell.exec", "on_fail": "continue",
               "parameters": {"command": "ls -A .pev; test -e .pev/pev.db && echo SEEN; echo x > .pev/planted"}}),
        json!({"id": "work", "tool": "shell.exec",
               "parameters": {"command": "echo ok > out.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\""}}),
    ];
    let plan = ws.plan_file(&json!({"goal": "Reach out", "steps": steps}));
    let out = Outcome::from(run(
        pev().env("PATH", &path).env_remove("PEV_SANDBOX_NAMESPACES"),
        &["run", plan.to_str().expect("utf-8"), "--workspace", &ws.arg(), "--json", "--yes"],
    ));
    let started = &out.of("run.started")[0]["sandbox"];
    // The kernel's own answer, independent of pev's probe: may unprivileged processes make
    // user namespaces here (and Landlock and seccomp apply)?
    let doctor = run(pev().env("PATH", &path), &["doctor", "--json"]);
    let probe = &doctor.json()["sandbox"]["probe"];
    if probe["user_namespaces"] != true
        || probe["seccomp"] != true
        || probe["landlock_abi"].is_null()
    {
        eprintln!("skipped: user namespaces, Landlock or seccomp are not available here ({probe})");
        return;
    }
    // The kernel may still refuse (a container's seccomp or AppArmor policy): the probe then
    // says why, in its notes, and the run is partial. A refusal it does not explain is a bug.
    if probe["namespaces"] != true && probe["notes"].to_string().contains("pev's namespaces: ") {
        eprintln!("skipped: this kernel refused pev's namespaces ({probe})");
        return;
    }
    let mechanisms = started["mechanisms"].to_string();
    assert!(mechanisms.contains("namespaces"), "{started}\n{probe}");
    assert_eq!(started["level"], "full", "{started}");
    assert_eq!(started["journal"], "hidden from commands", "{started}");
    std::thread::sleep(Duration::from_millis(100));
    assert!(listener.accept().is_err(), "the command reached the host socket");
    let socket_out = out.step("socket")["output"].to_string();
    assert!(!socket_out.contains("connected"), "{socket_out}");
    let journal_out = out.step("journal")["output"]["stdout"].to_string();
    assert!(!journal_out.contains("SEEN") && !journal_out.contains("pev.db"), "{journal_out}");
    assert!(!ws.path().join(".pev/planted").exists());
    assert_eq!(
        std::fs::metadata(&victim).expect("meta").permissions().mode() & 0o777,
        0o644,
        "chmod reached a file outside the workspace: {}",
        out.step("metadata")["output"]
    );
    assert_eq!(stamp(&victim), mtime, "touch reached a file outside the workspace");
    let refused = out.step("metadata")["output"]["stderr"].to_string();
    assert!(refused.contains("Read-only file system"), "{refused}");
    assert_eq!(out.step_status("work"), "done", "{}", out.result());
    assert_eq!(ws.read("out.txt"), "ok\n");
    assert_eq!(out.step("work")["output"]["stdout"], "t\n");
    let gaps = started["gaps"].to_string();
    assert!(gaps.contains("bubblewrap is not installed"), "{gaps}");
}
