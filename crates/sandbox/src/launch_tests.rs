//! Issue 33: what a command may not read, may not change and may write, as `launch_in` computes
//! it into the helper's [`Spec`], and the Landlock read roots that leave the hidden paths out.
//! (The escape tests run these against the kernel; these hold the computation itself, so the
//! crate's own tests judge its mutants.)

use std::path::{Path, PathBuf};

use crate::confine::readable_roots;
use crate::{HELPER_ARG, Probe, Sandbox, Settings, Spec};

fn landlock_only() -> Probe {
    Probe { landlock_abi: Some(3), seccomp: true, ..Probe::default() }
}

/// The spec `launch_in` hands the helper (the argument after `supervise`).
fn spec_of(sandbox: &Sandbox, ws: &Path, write_root: &Path) -> Spec {
    // A TMPDIR of the caller's is replaced by the run's own.
    let env =
        vec![("TMPDIR".to_owned(), "/elsewhere".to_owned()), ("A".to_owned(), "1".to_owned())];
    let launch = sandbox.launch_in(ws, write_root, vec!["true".into()], env).unwrap();
    let args: Vec<String> =
        launch.command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let at = args.iter().position(|a| a == "supervise").unwrap();
    assert_eq!(args[at - 1], HELPER_ARG);
    serde_json::from_str(&args[at + 1]).unwrap()
}

/// Rule: a hidden path stays hidden wherever the workspace is, unless it holds the workspace
/// (hiding it would hide the work); the journal's directories are read-only only inside a
/// writable root; frozen files only inside one; the writable roots are the write root and the
/// run's TMPDIR, which the command's environment names.
#[test]
fn launch_computes_what_is_hidden_read_only_frozen_and_writable() {
    let top = tempfile::tempdir().unwrap();
    let ws = top.path().join("ws");
    let sub = ws.join("sub");
    for dir in [ws.join(".pev"), sub.clone(), ws.join("journal"), top.path().join("secret")] {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let mut sandbox =
        Sandbox::with_probe(Settings::default(), Some(PathBuf::from("/bin/true")), landlock_only());
    sandbox.hide(top.path().join("secret"));
    sandbox.hide(elsewhere.path().to_path_buf());
    sandbox.hide(top.path().to_path_buf()); // holds the workspace
    sandbox.protect(ws.join("journal"));
    sandbox.protect(elsewhere.path().to_path_buf()); // outside every writable root
    sandbox.freeze(vec![ws.join("test_a.py"), elsewhere.path().join("test_b.py")]);
    let tmp = sandbox.tmp().unwrap().to_path_buf();

    let spec = spec_of(&sandbox, &ws, &ws);
    assert!(spec.hidden.contains(&top.path().join("secret")), "{:?}", spec.hidden);
    assert!(spec.hidden.contains(&elsewhere.path().to_path_buf()), "{:?}", spec.hidden);
    assert!(!spec.hidden.contains(&top.path().to_path_buf()), "{:?}", spec.hidden);
    assert_eq!(spec.writable, [ws.clone(), tmp.clone()]);
    assert_eq!(spec.read_only, [ws.join(".pev"), ws.join("journal")]);
    assert_eq!(spec.frozen, [ws.join("test_a.py")]);
    let tmpdir: Vec<&(String, String)> = spec.env.iter().filter(|(k, _)| k == "TMPDIR").collect();
    assert_eq!(tmpdir, [&("TMPDIR".to_owned(), tmp.display().to_string())]);
    assert!(spec.env.contains(&("A".to_owned(), "1".to_owned())), "{:?}", spec.env);
    assert!(spec.layers.landlock && spec.layers.seccomp && !spec.layers.bubblewrap);
    assert!(!spec.layers.namespaces, "Landlock alone: pev's namespaces were not found");
    assert!(!spec.layers.strict, "auto is not strict");
    // Where the probe found pev's own namespaces (and no bubblewrap), the helper makes them.
    let with_namespaces = Probe { namespaces: true, ..landlock_only() };
    let namespaced =
        Sandbox::with_probe(Settings::default(), Some(PathBuf::from("/bin/true")), with_namespaces);
    let spec = spec_of(&namespaced, &ws, &ws);
    assert!(spec.layers.namespaces && !spec.layers.bubblewrap, "{:?}", spec.layers);

    // Writes confined to a sub-directory: the journal beside it is no writable root's.
    let spec = spec_of(&sandbox, &ws, &sub);
    assert_eq!(spec.writable, [sub, tmp]);
    assert!(spec.read_only.is_empty(), "{:?}", spec.read_only);
    assert!(spec.frozen.is_empty(), "{:?}", spec.frozen);
    assert_eq!(spec.cwd, ws);
}

/// Rule (Landlock alone): read access is granted beneath every sibling along a hidden path,
/// never beneath the hidden path or a directory holding it; with nothing hidden, `/`.
#[test]
fn landlock_reads_everything_but_the_hidden_paths() {
    assert_eq!(readable_roots(&[]), [PathBuf::from("/")]);
    let top = tempfile::tempdir().unwrap();
    let t = top.path();
    for dir in ["home/.ssh", "home/work", "other"] {
        std::fs::create_dir_all(t.join(dir)).unwrap();
    }
    std::fs::write(t.join("home/.netrc"), "x").unwrap();
    let hidden = [t.join("home/.ssh"), t.join("home/.netrc")];
    let roots = readable_roots(&hidden);
    for granted in [t.join("home/work"), t.join("other")] {
        assert!(roots.contains(&granted), "{granted:?} not in {roots:?}");
    }
    for held in [t.join("home/.ssh"), t.join("home/.netrc"), t.join("home"), t.to_path_buf()] {
        assert!(!roots.iter().any(|r| held.starts_with(r)), "{held:?} readable via {roots:?}");
    }
    // A hidden path that is itself a root of the walk grants nothing.
    assert!(readable_roots(&[PathBuf::from("/")]).is_empty());
}

/// Rule (Landlock alone): every directory holding a hidden path stays listable, names only, so
/// `ls ~` still works while `~/.ssh` is unreadable; each ancestor once, nearest first, up to `/`.
#[test]
fn the_directories_holding_a_hidden_path_stay_listable() {
    use crate::confine::hidden_ancestors;
    let hidden = [PathBuf::from("/home/u/.ssh"), PathBuf::from("/home/u/.aws/credentials")];
    let want: Vec<PathBuf> =
        ["/home/u", "/home", "/", "/home/u/.aws"].iter().map(PathBuf::from).collect();
    assert_eq!(hidden_ancestors(&hidden), want);
    assert!(hidden_ancestors(&[]).is_empty());
}

/// Rule: `sandbox = "require"` refuses a command unless the full sandbox is enforced, and runs
/// it when it is; `off` is a sandbox whose mode says so and that confines nothing.
#[test]
fn require_refuses_less_than_the_full_sandbox_and_off_says_it_is_off() {
    let ws = tempfile::tempdir().unwrap();
    let require = Settings { mode: crate::Mode::Require, ..Settings::default() };
    let partial =
        Sandbox::with_probe(require.clone(), Some(PathBuf::from("/bin/true")), landlock_only());
    let refused = partial.launch_in(ws.path(), ws.path(), vec!["true".into()], vec![]);
    let Err(why) = refused else { panic!("less than the full sandbox ran a command") };
    let why = why.0;
    assert!(why.contains("cannot enforce the full sandbox"), "{why}");
    let full = Probe {
        bubblewrap: Some(crate::probe::Bubblewrap {
            path: "/usr/bin/bwrap".into(),
            version: "0.8.0".into(),
        }),
        user_namespaces: true,
        ..landlock_only()
    };
    let sandbox = Sandbox::with_probe(require, Some(PathBuf::from("/bin/true")), full);
    assert!(sandbox.launch_in(ws.path(), ws.path(), vec!["true".into()], vec![]).is_ok());

    let off = Sandbox::off();
    assert_eq!(off.settings().mode, crate::Mode::Off);
    assert!(off.is_off());
}
