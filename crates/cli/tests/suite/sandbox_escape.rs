//! The kernel sandbox against real `pev run` plans: every step tries to get out, and each test
//! asserts that the side effect did not happen (and, where it says something, what refused it).
//!
//! The tests that need the full sandbox (Landlock, seccomp and bubblewrap) skip with the reason
//! when this machine cannot give it (`pev doctor --json` says why); `.ci/run` installs
//! bubblewrap so that in CI none of them skip.

use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::run_support::{Outcome, Ws, process_alive_with, unique_marker};
use super::support::{pev, run};

const VICTIM: &str = "outside original\n";

/// Whether `pev` gets the full sandbox here; prints why not when it does not.
fn full_sandbox() -> bool {
    let r = run(&mut pev(), &["doctor", "--json"]);
    let report: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    let enforced = &report["sandbox"]["enforced"];
    if enforced["level"] == "full" {
        return true;
    }
    eprintln!(
        "skipped: this machine cannot enforce the full sandbox (needs Landlock, seccomp and a \
         working bubblewrap): {}",
        enforced["gaps"]
    );
    false
}

/// Steps running `commands` with `on_fail: continue` and a short timeout.
fn shell_steps(commands: &[(&str, String)]) -> Vec<Value> {
    commands
        .iter()
        .map(|(id, command)| {
            json!({"id": id, "tool": "shell.exec", "args": {"command": command, "timeout_s": 10},
                   "on_fail": "continue"})
        })
        .collect()
}

fn run_plan(ws: &Ws, steps: Vec<Value>, policy: Option<&str>) -> Outcome {
    let steps = Value::Array(steps);
    let plan = json!({"goal": "Try to get out", "steps": steps});
    let mut extra = vec!["--jobs", "1", "--yes"];
    let path = ws.root.path().join("policy.yaml");
    if let Some(policy) = policy {
        std::fs::write(&path, policy).expect("policy");
        extra.extend(["--policy", path.to_str().expect("utf-8")]);
    }
    ws.run(&plan, &extra)
}

/// The stderr a step's command printed.
fn stderr_of(out: &Outcome, step: &str) -> String {
    out.first("tool.finished", step)
        .and_then(|e| e["output"]["stderr"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Everything the run's steps printed, for "the secret did not leak" checks.
fn all_output(out: &Outcome) -> String {
    out.of("tool.finished").iter().map(|e| e["output"].to_string()).collect::<Vec<_>>().join("\n")
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn writes_outside_the_workspace_are_refused_by_every_route() {
    if !full_sandbox() {
        return;
    }
    writes_outside_are_refused(None);
}

/// The same routes with pev's own namespaces in bubblewrap's place (CI installs bubblewrap, so
/// without this the namespaces' side of them would go untried there; on a machine without
/// bubblewrap a command could `chmod` a file outside while the run said `full`).
#[test]
fn writes_outside_the_workspace_are_refused_by_every_route_without_bubblewrap() {
    let root = tempfile::tempdir().expect("dir");
    let path = path_without_bwrap(root.path());
    let doctor =
        run(pev().env("PATH", &path).env_remove("PEV_SANDBOX_NAMESPACES"), &["doctor", "--json"]);
    let enforced = &doctor.json()["sandbox"]["enforced"];
    if enforced["level"] != "full" {
        eprintln!("skipped: no full sandbox without bubblewrap here: {}", enforced["gaps"]);
        return;
    }
    assert!(enforced["mechanisms"].to_string().contains("namespaces"), "{enforced}");
    writes_outside_are_refused(Some(&path));
}

/// Every route out, each a step; with `path`, pev runs with that `PATH` (one without bwrap).
fn writes_outside_are_refused(path: Option<&str>) {
    let ws = Ws::new();
    // Outside, and not under /tmp (which is an empty tmpfs inside bubblewrap): the read-only
    // root and Landlock must be what refuses.
    let holder =
        tempfile::Builder::new().prefix("pev-escape-").tempdir_in("/var/tmp").expect("dir");
    let out_dir = holder.path().to_path_buf();
    let victim = out_dir.join("victim.txt");
    std::fs::write(&victim, VICTIM).expect("victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    symlink(&out_dir, ws.path().join("dirlink")).expect("symlink");
    symlink(&victim, ws.path().join("filelink")).expect("symlink");
    let o = out_dir.display().to_string();
    let steps = shell_steps(&[
        ("create", format!("echo x > {o}/new.txt")),
        ("append", format!("echo x >> {o}/victim.txt")),
        ("truncate", format!(": > {o}/victim.txt")),
        ("mkdir", format!("mkdir {o}/newdir")),
        ("via-dir-link", "echo x > dirlink/via-dir.txt".into()),
        ("via-file-link", "echo x >> filelink".into()),
        ("new-dir-link", format!("ln -s {o} steplink && echo x > steplink/via-new.txt")),
        ("new-file-link", format!("ln -s {o}/victim.txt stepflink && echo x >> stepflink")),
        ("proc-root", format!("echo x > /proc/self/root{o}/proc-root.txt")),
        ("proc-cwd", format!("echo x > /proc/self/cwd/../../../..{o}/proc-cwd.txt")),
        ("hard-link", format!("ln {o}/victim.txt hard && echo x >> hard")),
        ("rename-in", format!("mv {o}/victim.txt moved-in.txt")),
        ("rename-out", format!("echo y > local.txt && mv local.txt {o}/moved-out.txt")),
        ("remove", format!("rm -f {o}/victim.txt")),
        ("chmod", format!("chmod 777 {o}/victim.txt")),
        ("touch", format!("touch -d 2001-01-01 {o}/victim.txt")),
    ]);
    let mtime = std::fs::metadata(&victim).expect("meta").modified().expect("mtime");
    let out = match path {
        None => run_plan(&ws, steps, None),
        Some(path) => {
            let plan = ws.plan_file(&json!({"goal": "Try to get out", "steps": steps}));
            let plan = plan.to_str().expect("utf-8").to_owned();
            let args = ["run", &plan, "--workspace", &ws.arg(), "--json", "--jobs", "1", "--yes"];
            let mut cmd = pev();
            cmd.env("PATH", path).env_remove("PEV_SANDBOX_NAMESPACES");
            Outcome::from(run(&mut cmd, &args))
        }
    };
    assert!([0, 1, 3].contains(&out.code), "{}", out.stderr);
    assert_eq!(entries(&out_dir), vec!["victim.txt"], "something was created or removed outside");
    assert_eq!(std::fs::read_to_string(&victim).expect("victim"), VICTIM);
    let mode = std::fs::metadata(&victim).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "chmod reached the outside file");
    let now = std::fs::metadata(&victim).expect("meta").modified().expect("mtime");
    assert_eq!(now, mtime, "touch reached the outside file");
    // The refusal is the kernel's, and the command saw it.
    let stderr = stderr_of(&out, "create");
    assert!(
        ["Read-only file system", "Permission denied"].iter().any(|m| stderr.contains(m)),
        "{stderr}"
    );
    // Every shell.exec result names the sandbox it ran in.
    assert_eq!(
        out.first("tool.finished", "create").map(|e| e["output"]["sandbox"].clone()),
        Some(json!("full"))
    );
}

#[test]
fn the_journal_cannot_be_changed_and_show_still_tells_the_truth() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let steps = shell_steps(&[
        ("append", "echo x >> .pev/pev.db".into()),
        (
            "sql",
            "python3 -c \"import sqlite3; c = sqlite3.connect('.pev/pev.db'); \
             c.execute('delete from events'); c.commit()\""
                .into(),
        ),
        ("new-file", "touch .pev/planted".into()),
        ("symlink", "ln -s /tmp .pev/planted-link".into()),
        ("chmod", "chmod 000 .pev".into()),
        ("remove", "rm -rf .pev".into()),
        ("rename", "mv .pev .pev-old".into()),
        ("replace", "mkdir fake && mv fake .pev || mv -T fake .pev".into()),
        ("truncate", ": > .pev/pev.db".into()),
        ("last", "echo still here".into()),
    ]);
    let out = run_plan(&ws, steps, None);
    let run_id = out.run_id();
    let journal = ws.path().join(".pev");
    assert!(journal.join("pev.db").is_file());
    assert!(!journal.join("planted").exists() && !journal.join("planted-link").exists());
    assert!(!ws.path().join(".pev-old").exists());
    let mode = std::fs::metadata(&journal).expect("meta").permissions().mode() & 0o777;
    assert_ne!(mode, 0, "chmod reached .pev");
    // `pev show` reads the journal pev wrote: every step, and an intact chain.
    let show = ws.pev(&["show", &run_id]);
    assert_eq!(show.code, 0, "{show:?}");
    assert!(show.stdout.contains("journal: intact"), "{}", show.stdout);
    assert!(show.stdout.contains("still here"), "{}", show.stdout);
    let result = ws.show_json(&run_id);
    assert_eq!(result["steps"].as_array().map(Vec::len), Some(10));
    let stderr = stderr_of(&out, "append");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
}

#[test]
fn a_journal_changed_outside_pev_is_reported_by_show() {
    let ws = Ws::new();
    let out = run_plan(&ws, shell_steps(&[("one", "echo one".into())]), Some("sandbox: off\n"));
    let run_id = out.run_id();
    let db = ws.path().join(".pev/pev.db");
    let status = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import sqlite3; c = sqlite3.connect('{}'); \
             c.execute(\"update events set body = replace(body, 'one', 'two')\"); c.commit()",
            db.display()
        ))
        .status()
        .expect("python3");
    assert!(status.success());
    let show = ws.pev(&["show", &run_id]);
    assert_eq!(show.code, 1, "{show:?}");
    assert!(show.stdout.contains("CHANGED OUTSIDE PEV"), "{}", show.stdout);
    let json = ws.pev(&["show", &run_id, "--format", "json"]);
    assert_eq!(json.code, 1);
    assert!(json.json()["warnings"][0].as_str().is_some_and(|w| w.contains("CHANGED OUTSIDE PEV")));
}

#[test]
fn secrets_stay_hidden_from_commands() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let home = ws.root.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect("mkdir");
    std::fs::write(home.join(".ssh/id_ed25519"), "canary-ssh-key\n").expect("key");
    let canary = format!("canary-api-key-{}", unique_marker());
    let h = home.display().to_string();
    let steps = shell_steps(&[
        ("ssh", format!("cat {h}/.ssh/id_ed25519; ls -a {h}/.ssh")),
        ("env", "env".into()),
        (
            "environ",
            "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep canary || true".into(),
        ),
    ]);
    let plan = json!({"goal": "Try to read secrets", "steps": steps});
    let path = ws.plan_file(&plan);
    let r = run(
        pev().env("HOME", &home).env("ANTHROPIC_API_KEY", &canary),
        &["run", path.to_str().expect("utf-8"), "--workspace", &ws.arg(), "--json", "--yes"],
    );
    let out = Outcome::from(r);
    let text = all_output(&out);
    assert!(!text.contains("canary-ssh-key"), "{text}");
    assert!(!text.contains(&canary), "the API key leaked: {text}");
    assert!(!out.stdout.contains(&canary));
}

#[test]
fn the_network_is_closed_unless_the_policy_opens_it() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let tcp = TcpListener::bind("127.0.0.1:0").expect("tcp");
    tcp.set_nonblocking(true).expect("nonblocking");
    let tcp_port = tcp.local_addr().expect("addr").port();
    let udp = UdpSocket::bind("127.0.0.1:0").expect("udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let udp_port = udp.local_addr().expect("addr").port();
    let py = |code: &str| format!("python3 -c \"{code}\" 2>&1 | tail -1");
    let commands = vec![
        (
            "tcp-loopback",
            py(&format!(
                "import socket; socket.create_connection(('127.0.0.1', {tcp_port}), timeout=2); print('CONNECTED')"
            )),
        ),
        (
            "udp",
            py(&format!(
                "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {udp_port})); print('SENT')"
            )),
        ),
    ];
    // With the port opened by the policy, a loopback connection works.
    let out = run_plan(&ws, shell_steps(&commands), None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(tcp.accept().is_err(), "a loopback TCP connection got through");
    let mut buf = [0u8; 8];
    assert!(udp.recv_from(&mut buf).is_err(), "a UDP datagram got through");
    // (A datagram "sent" inside a private network namespace goes nowhere: the receiver above
    // is the check for UDP.)
    assert!(!all_output(&out).contains("CONNECTED"), "{}", all_output(&out));

    let policy = format!("sandbox_ports: [{tcp_port}]\n");
    let opened = shell_steps(&[(
        "tcp-opened",
        py(&format!(
            "import socket; socket.create_connection(('127.0.0.1', {tcp_port}), timeout=2); print('CONNECTED')"
        )),
    )]);
    let out = run_plan(&ws, opened, Some(&policy));
    assert!(all_output(&out).contains("CONNECTED"), "{}", all_output(&out));
}

/// `pev run` of a plan that connects to a non-loopback address, inside a network namespace this
/// test makes (with `unshare`, an address added to its `lo` and a listener on it, so nothing
/// leaves the machine). Returns what the listener saw: `ACCEPTED` or `NONE`.
fn connect_in_netns(ws: &Ws, policy: &str) -> Option<String> {
    let root = nix_is_root();
    let unshare = if root { "unshare --net" } else { "unshare --net --map-root-user" };
    let plan = json!({"goal": "Reach a host", "steps": [{"id": "connect", "tool": "shell.exec",
        "args": {"command": "python3 -c \"import socket; socket.create_connection(('10.77.77.1', 9000), timeout=2)\""},
        "on_fail": "continue"}]});
    let plan_path = ws.plan_file(&plan);
    let policy_path = ws.root.path().join("netns-policy.yaml");
    std::fs::write(&policy_path, policy).expect("policy");
    let listener = ws.root.path().join("listener.out");
    let _ = std::fs::remove_file(&listener);
    let stop = ws.root.path().join("listener.stop");
    let _ = std::fs::remove_file(&stop);
    // The listener waits for a connection until `pev run` has ended (the stop file), then takes
    // one last look: a connection the step made is in the listen queue by then (its handshake
    // was done before the step ended), so it is still seen. 6 s at most, as before.
    let script = format!(
        "ip link set lo up && ip addr add 10.77.77.1/32 dev lo || exit 97\n\
         python3 -c \"\nimport os, socket, time\ns = socket.socket(); s.bind(('10.77.77.1', 9000)); s.listen(); s.settimeout(0.05)\nend = time.time() + 6\ngot = False\nwhile not got and time.time() < end:\n    last = os.path.exists('{stop}')\n    try:\n        s.accept(); got = True\n    except OSError:\n        if last: break\nprint('ACCEPTED' if got else 'NONE')\n\" > {listener} &\n\
         sleep 0.3\n\
         {pev} run {plan} --workspace {ws} --policy {policy} --json --yes >/dev/null 2>&1\n\
         touch {stop}\n\
         wait",
        listener = listener.display(),
        stop = stop.display(),
        pev = env!("CARGO_BIN_EXE_pev"),
        plan = plan_path.display(),
        ws = ws.arg(),
        policy = policy_path.display(),
    );
    let status = Command::new("sh")
        .args(["-c", &format!("{unshare} sh -c '{}'", script.replace('\'', "'\\''"))])
        .status()
        .ok()?;
    if !status.success() {
        eprintln!("skipped: cannot make a network namespace here ({unshare} exited {status})");
        return None;
    }
    Some(std::fs::read_to_string(&listener).unwrap_or_default().trim().to_owned())
}

fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

#[test]
fn a_non_loopback_address_is_unreachable() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    // The control: without the sandbox the same step reaches the listener.
    let Some(unconfined) = connect_in_netns(&ws, "sandbox: off\n") else { return };
    assert_eq!(unconfined, "ACCEPTED", "the test setup cannot reach its own listener");
    let confined = connect_in_netns(&ws, "sandbox: auto\n");
    assert_eq!(confined.as_deref(), Some("NONE"), "a confined command reached 10.77.77.1");
}

#[test]
fn a_server_started_by_one_step_serves_the_next_and_ends_with_the_run() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let port = TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
    let marker = unique_marker();
    // The served directory is named after the marker, so the server's command line carries it.
    ws.file(&format!("{marker}/index.html"), "served by the background server\n");
    let steps = vec![
        json!({"id": "start", "tool": "shell.exec", "args": {"command":
            format!("python3 -m http.server {port} --bind 127.0.0.1 -d {marker} >/dev/null 2>&1 & \
                     for i in $(seq 50); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\" 2>/dev/null && break; sleep 0.1; done")}}),
        json!({"id": "use", "tool": "shell.exec", "depends_on": ["start"], "args": {"command":
            format!("python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/index.html').read().decode())\"")},
            "assertions": [{"type": "output_contains", "pattern": "served by the background server"}]}),
    ];
    let out = run_plan(&ws, steps, Some(&format!("sandbox_ports: [{port}]\n")));
    assert_eq!(out.status(), "success", "{}", out.stderr);
    assert!(!wait_gone(&marker, Duration::from_secs(3)), "the server outlived the run");
}

/// Whether a process with `marker` in its command line is still alive after `limit`.
fn wait_gone(marker: &str, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !process_alive_with(marker) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    process_alive_with(marker)
}

#[test]
fn a_timeout_kills_setsid_and_double_forked_descendants() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let marker = unique_marker();
    let command = format!(
        "setsid sh -c 'sleep 2; echo escaped > setsid.txt' {marker} & \
         (setsid sh -c 'sleep 2; echo escaped > double.txt' {marker} &) ; sleep 30"
    );
    let steps = vec![json!({"id": "escape", "tool": "shell.exec",
        "args": {"command": command, "timeout_s": 1}, "on_fail": "continue"})];
    let started = Instant::now();
    let out = run_plan(&ws, steps, None);
    assert!(started.elapsed() < Duration::from_secs(15), "pev waited for the escapees");
    assert_eq!(
        out.first("tool.finished", "escape").map(|e| e["output"]["timed_out"].clone()),
        Some(json!(true))
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ws.path().join("setsid.txt").exists(), "a setsid child survived the timeout");
    assert!(!ws.path().join("double.txt").exists(), "a double-forked child survived the timeout");
    assert!(!process_alive_with(&marker));
}

#[test]
fn background_processes_do_not_outlive_the_run() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let steps = shell_steps(&[(
        "leave",
        "setsid sh -c 'sleep 2; echo late > late.txt' & echo left".into(),
    )]);
    let out = run_plan(&ws, steps, None);
    assert_eq!(out.status(), "success", "{}", out.stderr);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ws.path().join("late.txt").exists(), "a background process outlived the run");
}

#[test]
fn a_fork_storm_is_ended_at_the_timeout_and_pev_stays_responsive() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    // A fractional sleep unique to this test marks every process of the storm.
    let marker = format!("61.{}", unique_marker().chars().take(8).collect::<String>());
    let command = format!("for i in $(seq 300); do (sleep {marker} &) ; done; sleep {marker}");
    let steps = vec![json!({"id": "storm", "tool": "shell.exec",
        "args": {"command": command, "timeout_s": 2}, "on_fail": "continue"})];
    let started = Instant::now();
    let out = run_plan(&ws, steps, None);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    assert!(
        !wait_gone(&format!("sleep {marker}"), Duration::from_secs(2)),
        "the storm outlived its timeout"
    );
}

#[test]
fn a_file_over_the_size_limit_is_cut_and_the_step_fails() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let steps = shell_steps(&[("big", "head -c 200000 /dev/zero > big.bin".into())]);
    let out = run_plan(&ws, steps, Some("sandbox_max_file_bytes: 100000\n"));
    assert_eq!(out.step_status("big"), "failed");
    let size = std::fs::metadata(ws.path().join("big.bin")).map(|m| m.len()).unwrap_or(0);
    assert!(size <= 100_000, "{size}");
}

#[test]
fn commands_have_no_new_privileges_no_capabilities_and_cannot_signal_or_trace_outside() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let marker = unique_marker();
    let mut sentinel = Command::new("sh")
        .args(["-c", &format!("exec sleep 300 {marker}"), "sentinel"])
        .stdin(Stdio::null())
        .spawn()
        .or_else(|_| Command::new("sleep").arg("300").spawn())
        .expect("sentinel");
    let pid = sentinel.id();
    let steps = shell_steps(&[
        ("status", "grep -E '^(NoNewPrivs|CapEff)' /proc/self/status".into()),
        ("kill", format!("kill -9 {pid}; pkill -9 -x pev; echo done")),
        (
            "ptrace",
            format!(
                "python3 -c \"import ctypes; libc = ctypes.CDLL(None); \
                 print('PTRACE', libc.ptrace(16, {pid}, 0, 0))\" 2>&1 | tail -1"
            ),
        ),
        (
            "environ",
            format!("cat /proc/{pid}/environ >/dev/null 2>&1 && echo READABLE || echo refused"),
        ),
    ]);
    let out = run_plan(&ws, steps, None);
    let alive = sentinel.try_wait().expect("try_wait").is_none();
    let _ = sentinel.kill();
    let _ = sentinel.wait();
    assert!(alive, "a command killed a process outside the sandbox");
    let status = out
        .first("tool.finished", "status")
        .map(|e| e["output"]["stdout"].to_string())
        .unwrap_or_default();
    assert!(status.contains("NoNewPrivs:\\t1"), "{status}");
    assert!(status.contains("CapEff:\\t0000000000000000"), "{status}");
    let ptrace = out
        .first("tool.finished", "ptrace")
        .map(|e| e["output"]["stdout"].to_string())
        .unwrap_or_default();
    assert!(ptrace.contains("PTRACE -1"), "{ptrace}");
    let environ = out
        .first("tool.finished", "environ")
        .map(|e| e["output"]["stdout"].to_string())
        .unwrap_or_default();
    assert!(environ.contains("refused"), "{environ}");
    // pev itself survived the pkill: the run finished and printed its result.
    assert!(out.events.iter().any(|e| e["event"] == "run.finished"));
}

/// `pev` started with the Landlock system calls failing, as on a kernel without Landlock.
fn pev_without_landlock(ws: &Ws, plan: &Value, policy: &str) -> Outcome {
    let path = ws.plan_file(plan);
    let policy_path = ws.root.path().join("policy.yaml");
    std::fs::write(&policy_path, policy).expect("policy");
    let bin = env!("CARGO_BIN_EXE_pev");
    let mut cmd = assert_cmd::Command::new(bin);
    cmd.args(["__sandbox", "without-landlock", "--", bin]);
    let r = run(
        &mut cmd,
        &[
            "run",
            path.to_str().expect("utf-8"),
            "--workspace",
            &ws.arg(),
            "--json",
            "--yes",
            "--policy",
            policy_path.to_str().expect("utf-8"),
        ],
    );
    Outcome::from(r)
}

#[test]
fn require_refuses_to_run_a_command_without_landlock_and_says_why() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write a marker", "steps": [
        {"id": "mark", "tool": "shell.exec", "args": {"command": "echo ran > marker.txt"}}]});
    let out = pev_without_landlock(&ws, &plan, "sandbox: require\n");
    assert_eq!(out.step_status("mark"), "failed", "{}", out.stderr);
    let error = out.step_error("mark");
    assert!(error.contains("sandbox = \"require\""), "{error}");
    assert!(error.contains("Landlock is not available"), "{error}");
    assert!(!ws.path().join("marker.txt").exists(), "the command ran");
    let started = out.of("run.started");
    assert_eq!(started.first().map(|e| e["sandbox"]["mode"].clone()), Some(json!("require")));
}

#[test]
fn auto_without_landlock_runs_and_warns_that_the_sandbox_is_weaker() {
    let ws = Ws::new();
    let plan = json!({"goal": "Write a marker", "steps": [
        {"id": "mark", "tool": "shell.exec", "args": {"command": "echo ran > marker.txt"}}]});
    let out = pev_without_landlock(&ws, &plan, "sandbox: auto\n");
    assert_eq!(out.step_status("mark"), "done", "{}", out.stderr);
    let warnings = out.result()["warnings"].to_string();
    assert!(warnings.contains("Landlock is not available"), "{warnings}");
    // Honest work in a weaker sandbox is still a success; the warning says what was missing.
    assert_eq!(out.status(), "success");
}

#[test]
fn off_is_stated_in_the_run_and_by_show() {
    let ws = Ws::new();
    let out = run_plan(&ws, shell_steps(&[("one", "echo one".into())]), Some("sandbox: off\n"));
    assert_eq!(out.status(), "success", "{}", out.stderr);
    assert_eq!(
        out.of("run.started").first().map(|e| e["sandbox"]["mode"].clone()),
        Some(json!("off"))
    );
    assert_eq!(
        out.first("tool.finished", "one").map(|e| e["output"]["sandbox"].clone()),
        Some(json!("off"))
    );
    let show = ws.pev(&["show", &out.run_id()]);
    assert!(show.stdout.contains("sandbox: off"), "{}", show.stdout);
}

#[test]
fn a_command_cannot_loosen_the_next_run_through_the_workspace_pev_toml() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    let marker = ws.outside().join("hook-ran.txt");
    // A first run's command writes the workspace's pev.toml: sandbox off, and a hook.
    let toml = format!(
        "sandbox = \"off\"\n[hooks]\npre_tool_use = \"echo escaped > {} ; echo '{{}}'\"\n",
        marker.display()
    );
    let write = shell_steps(&[(
        "plant",
        format!("printf '%s' '{}' > pev.toml", toml.replace('\'', "'\\''")),
    )]);
    let out = run_plan(&ws, write, None);
    assert_eq!(out.status(), "success", "{}", out.stderr);
    assert!(ws.path().join("pev.toml").exists());
    // The next run stays confined, and the planted hook runs inside the sandbox.
    let next = shell_steps(&[(
        "try",
        format!("echo x > {}/escaped.txt; echo done", ws.outside().display()),
    )]);
    let out = run_plan(&ws, next, None);
    let started = out.of("run.started");
    assert_eq!(
        started.first().map(|e| e["sandbox"]["level"].clone()),
        Some(json!("full")),
        "{}",
        out.stderr
    );
    assert!(!ws.outside().join("escaped.txt").exists(), "the planted `sandbox = off` took effect");
    assert!(!marker.exists(), "the planted hook ran outside the sandbox");
}

#[test]
fn host_sockets_ipc_namespaces_and_vsock_are_out_of_reach() {
    if !full_sandbox() {
        return;
    }
    let ws = Ws::new();
    // A unix socket a host service listens on, outside the workspace.
    let sock_path = ws.outside().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock_path).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let py = |code: &str| format!("python3 -c \"{code}\" 2>&1 | tail -1");
    let steps = shell_steps(&[
        (
            "unix",
            py(&format!(
                "import socket; s = socket.socket(socket.AF_UNIX); s.connect('{}'); print('CONNECTED')",
                sock_path.display()
            )),
        ),
        ("userns", "unshare --user --map-root-user true && echo ESCAPED || echo refused".into()),
        (
            "clone-newuser",
            py(
                "import os, ctypes; libc = ctypes.CDLL(None); r = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0); print('ESCAPED' if r >= 0 else 'refused'); r == 0 and os._exit(0)",
            ),
        ),
        ("vsock", py("import socket; socket.socket(40, socket.SOCK_STREAM); print('ESCAPED')")),
        (
            "journal-read",
            "ls -A .pev; cat .pev/pev.db > /dev/null 2>&1 && echo READABLE || echo refused".into(),
        ),
    ]);
    let out = run_plan(&ws, steps, None);
    std::thread::sleep(Duration::from_millis(200));
    assert!(listener.accept().is_err(), "a command connected to a host unix socket");
    let text = all_output(&out);
    assert!(
        !text.contains("CONNECTED") && !text.contains("ESCAPED") && !text.contains("READABLE"),
        "{text}"
    );
}

/// A PATH with everything of this one but `bwrap` (symlinks in a temp dir): pev then gets the
/// Landlock and seccomp sandbox without bubblewrap.
pub(crate) fn path_without_bwrap(dir: &Path) -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    for entry in
        std::env::split_paths(&path).filter_map(|d| std::fs::read_dir(d).ok()).flatten().flatten()
    {
        let name = entry.file_name();
        if name != "bwrap" && !dir.join(&name).exists() {
            let _ = symlink(entry.path(), dir.join(&name));
        }
    }
    dir.display().to_string()
}

#[test]
fn without_bubblewrap_landlock_still_refuses_writes_signals_and_outliving_a_timeout() {
    let ws = Ws::new();
    let bin = ws.root.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let path = path_without_bwrap(&bin);
    let holder =
        tempfile::Builder::new().prefix("pev-escape-").tempdir_in("/var/tmp").expect("dir");
    let o = holder.path().display().to_string();
    let marker = unique_marker();
    let steps = vec![
        json!({"id": "write", "tool": "shell.exec", "args": {"command": format!("echo x > {o}/new.txt")}, "on_fail": "continue"}),
        json!({"id": "kill", "tool": "shell.exec", "args": {"command": "pkill -9 -x pev; echo done"}, "on_fail": "continue"}),
        json!({"id": "escape", "tool": "shell.exec", "on_fail": "continue", "args": {"timeout_s": 1,
            "command": format!("(setsid sh -c 'sleep 2; echo escaped > late.txt' {marker} &) ; sleep 30")}}),
    ];
    let plan = json!({"goal": "Try to get out", "steps": steps});
    let plan_path = ws.plan_file(&plan);
    let r = run(
        // Neither bubblewrap nor pev's own namespaces: Landlock and seccomp alone.
        pev().env("PATH", &path).env("PEV_SANDBOX_NAMESPACES", "off"),
        &[
            "run",
            plan_path.to_str().expect("utf-8"),
            "--workspace",
            &ws.arg(),
            "--json",
            "--yes",
            "--jobs",
            "1",
        ],
    );
    let out = Outcome::from(r);
    let level = out.of("run.started").first().map(|e| e["sandbox"]["level"].clone());
    if level != Some(json!("partial")) {
        eprintln!("skipped: Landlock and seccomp are not both available here ({level:?})");
        return;
    }
    assert!(entries(holder.path()).is_empty(), "a write outside got through");
    assert!(out.events.iter().any(|e| e["event"] == "run.finished"), "pev was killed");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!ws.path().join("late.txt").exists(), "a setsid child outlived the timeout");
    assert!(!process_alive_with(&marker));
    // The run says what it did not get.
    let warnings = out.result()["warnings"].to_string();
    assert!(warnings.contains("bubblewrap is not available"), "{warnings}");
}
