//! Stage 2 of the helper: restrict this process for good, then become the command.
//!
//! Order matters: resource limits and capabilities first (dropping the bounding set needs
//! `CAP_SETPCAP`), then `no_new_privs`, then Landlock, then seccomp last (so its filter need not
//! allow the Landlock system calls), then `exec`. Everything here is a safe API; nothing needs a
//! `pre_exec` hook, which is why the helper is a re-executed process.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use nix::sys::resource::{Resource, setrlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::spec::{Network, Spec};

/// The newest Landlock ABI pev asks for; older kernels get what they support (best effort),
/// and what they got is reported.
const ABI_WANTED: ABI = ABI::V6;

/// Character devices every command may read and write (a shell needs `/dev/null`).
const DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// What one stage-2 restriction achieved.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    pub landlock_abi: Option<i32>,
    pub landlock_full: bool,
    pub seccomp: bool,
}

/// Apply every layer the spec asks for. An `Err` is a message for the command's stderr.
pub(crate) fn restrict(spec: &Spec) -> Result<Applied, String> {
    let mut applied = Applied::default();
    limits(spec)?;
    drop_capabilities();
    nix::sys::prctl::set_no_new_privs().map_err(|e| format!("no_new_privs: {e}"))?;
    if spec.layers.landlock {
        let (abi, full) = landlock(spec).map_err(|e| format!("landlock: {e}"))?;
        applied.landlock_abi = abi;
        applied.landlock_full = full;
        if spec.layers.strict && abi.is_none() {
            return Err("Landlock is not available on this kernel (sandbox = \"require\")".into());
        }
    }
    if spec.layers.seccomp {
        let ipc = spec.layers.bubblewrap || spec.layers.namespaces;
        seccomp(&spec.network, spec.layers.bubblewrap, ipc).map_err(|e| format!("seccomp: {e}"))?;
        applied.seccomp = true;
    }
    Ok(applied)
}

/// Restrict, then replace this process with the command. Returns only on failure.
pub(crate) fn exec(spec: &Spec) -> String {
    if spec.layers.namespaces
        && let Err(message) = crate::namespaces::enter(spec)
    {
        return format!("pev sandbox: refusing to run the command: {message}");
    }
    if let Err(message) = restrict(spec) {
        return format!("pev sandbox: refusing to run the command: {message}");
    }
    let Some((program, args)) = spec.argv.split_first() else {
        return "pev sandbox: empty command".into();
    };
    let err = Command::new(program)
        .args(args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .exec();
    format!("pev sandbox: cannot start `{program}`: {err}")
}

fn limits(spec: &Spec) -> Result<(), String> {
    let set = |what: Resource, value: u64, name: &str| {
        setrlimit(what, value, value).map_err(|e| format!("{name}: {e}"))
    };
    set(Resource::RLIMIT_FSIZE, spec.limits.file_bytes, "RLIMIT_FSIZE")?;
    set(Resource::RLIMIT_NPROC, spec.limits.processes, "RLIMIT_NPROC")?;
    set(Resource::RLIMIT_CORE, 0, "RLIMIT_CORE")
}

/// Drop every capability, bounding set included, so that even uid 0 gets none back at `exec`.
/// Failures are ignored: a process without `CAP_SETPCAP` has nothing to drop.
fn drop_capabilities() {
    use caps::CapSet;
    for cap in caps::all() {
        let _ = caps::drop(None, CapSet::Bounding, cap);
    }
    for set in [CapSet::Ambient, CapSet::Inheritable, CapSet::Effective, CapSet::Permitted] {
        let _ = caps::clear(None, set);
    }
}

/// The Landlock ruleset: read (and execute) everything but the hidden paths, write only in the
/// writable roots and a few devices; TCP per the network setting; no signals or abstract unix
/// sockets out of the sandbox. Returns the kernel's ABI (`None` when Landlock is unavailable)
/// and whether every requested right is enforced.
fn landlock(spec: &Spec) -> Result<(Option<i32>, bool), landlock::RulesetError> {
    let all = AccessFs::from_all(ABI_WANTED);
    let read = AccessFs::from_read(ABI_WANTED);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
    ruleset = ruleset.handle_access(all)?;
    let net = match &spec.network {
        Network::Open => None,
        // Under bubblewrap a closed network is a private namespace: loopback there is harmless.
        Network::Closed if spec.layers.bubblewrap => None,
        Network::Closed => Some(Vec::new()),
        Network::Ports { ports } => Some(ports.clone()),
    };
    if net.is_some() {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mut created = ruleset.scope(Scope::from_all(ABI_WANTED))?.create()?;
    for path in readable_roots(&spec.hidden) {
        created = add(created, &path, read)?;
    }
    for path in hidden_ancestors(&spec.hidden) {
        created = add(created, &path, AccessFs::ReadDir.into())?;
    }
    for path in &spec.writable {
        created = add(created, path, all)?;
    }
    for device in DEVICES {
        created = add(created, Path::new(device), AccessFs::ReadFile | AccessFs::WriteFile)?;
    }
    for port in net.unwrap_or_default() {
        created =
            created.add_rule(NetPort::new(port, AccessNet::BindTcp | AccessNet::ConnectTcp))?;
    }
    let status = created.restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, kernel_abi } => {
            Some(kernel_abi.unwrap_or(effective_abi as i32))
        }
        _ => None,
    };
    Ok((abi, status.ruleset == RulesetStatus::FullyEnforced))
}

/// Add a path-beneath rule; a path that does not exist (or cannot be opened) is skipped, and a
/// file gets only the rights that apply to files.
fn add(
    created: landlock::RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    let Ok(fd) = PathFd::new(path) else { return Ok(created) };
    let is_dir = fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
    let access = if is_dir { access } else { access & AccessFs::from_file(ABI_WANTED) };
    if access.is_empty() {
        return Ok(created);
    }
    created.add_rule(PathBeneath::new(fd, access))
}

/// The roots to grant read access beneath so that every hidden path stays out: `/` when nothing
/// is hidden, otherwise the siblings along each hidden path, recursively.
pub(crate) fn readable_roots(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    grant(Path::new("/"), hidden, &mut out);
    out
}

fn grant(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    let below: Vec<PathBuf> = hidden.iter().filter(|h| h.starts_with(dir)).cloned().collect();
    if below.is_empty() {
        out.push(dir.to_path_buf());
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        grant(&entry.path(), &below, out);
    }
}

/// Directories that hold a hidden path: they stay listable (names only).
pub(crate) fn hidden_ancestors(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in hidden {
        for ancestor in path.ancestors().skip(1) {
            if !out.iter().any(|p| p == ancestor) {
                out.push(ancestor.to_path_buf());
            }
        }
    }
    out
}

/// Namespace flags of `clone`: a new namespace is a way around the rules (and kernel attack
/// surface with capabilities inside it).
const CLONE_NEW: &[u64] = &[
    0x0000_0080, // CLONE_NEWTIME
    0x0002_0000, // CLONE_NEWNS
    0x0200_0000, // CLONE_NEWCGROUP
    0x0400_0000, // CLONE_NEWUTS
    0x0800_0000, // CLONE_NEWIPC
    0x1000_0000, // CLONE_NEWUSER
    0x2000_0000, // CLONE_NEWPID
    0x4000_0000, // CLONE_NEWNET
];

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

fn cond(
    arg: u8,
    len: SeccompCmpArgLen,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| e.to_string())
}

/// System calls refused with `EPERM`: debugging other processes, kernel and mount
/// administration, new namespaces (`unshare`, `setns`, `clone` with a `CLONE_NEW*` flag), System
/// V and POSIX message IPC when there is no private IPC namespace, and, unless the network is
/// open, sockets Landlock does not filter (UDP, raw, SCTP, and every family but unix, IPv4, IPv6
/// and netlink). `clone3`, whose flags a filter cannot read, fails with `ENOSYS` so that libc
/// falls back to `clone`.
fn seccomp(network: &Network, bubblewrap: bool, private_ipc: bool) -> Result<(), String> {
    use SeccompCmpArgLen::{Dword, Qword};
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut always = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_open_by_handle_at,
        libc::SYS_io_uring_setup,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
    ];
    if !private_ipc {
        always.extend([libc::SYS_shmget, libc::SYS_msgget, libc::SYS_semget, libc::SYS_mq_open]);
    }
    for call in always {
        rules.insert(call, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for flag in CLONE_NEW {
        clone_rules.push(rule(vec![cond(0, Qword, SeccompCmpOp::MaskedEq(*flag), *flag)?])?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // In bubblewrap's private network namespace IP goes nowhere, but other families (vsock to
    // the hypervisor) are not namespaced: they are refused whenever the network is not open.
    let private_net = bubblewrap && *network == Network::Closed;
    if *network != Network::Open {
        let mut socket_rules = Vec::new();
        let ip_families: &[i32] = if private_net { &[] } else { &[libc::AF_INET, libc::AF_INET6] };
        for &family in ip_families {
            let family = family as u64;
            // Any type but SOCK_STREAM (the low 4 bits are the type; flags sit above).
            for kind in [libc::SOCK_DGRAM, libc::SOCK_RAW, libc::SOCK_SEQPACKET] {
                socket_rules.push(rule(vec![
                    cond(0, Dword, SeccompCmpOp::Eq, family)?,
                    cond(1, Dword, SeccompCmpOp::MaskedEq(0xf), kind as u64)?,
                ])?);
            }
            // A stream socket of another protocol than TCP (SCTP, MPTCP) escapes Landlock's
            // TCP rules.
            socket_rules.push(rule(vec![
                cond(0, Dword, SeccompCmpOp::Eq, family)?,
                cond(2, Dword, SeccompCmpOp::Gt, libc::IPPROTO_TCP as u64)?,
            ])?);
        }
        // Families other than unix (1), inet (2), inet6 (10) and netlink (16): vsock to a
        // hypervisor, packet, bluetooth, can, alg, xdp, ….
        socket_rules.push(rule(vec![
            cond(0, Dword, SeccompCmpOp::Ge, 3)?,
            cond(0, Dword, SeccompCmpOp::Le, 9)?,
        ])?);
        socket_rules.push(rule(vec![
            cond(0, Dword, SeccompCmpOp::Ge, 11)?,
            cond(0, Dword, SeccompCmpOp::Le, 15)?,
        ])?);
        socket_rules.push(rule(vec![cond(0, Dword, SeccompCmpOp::Ge, 17)?])?);
        rules.insert(libc::SYS_socket, socket_rules);
    }
    install(rules, libc::EPERM)?;
    let mut enosys = BTreeMap::new();
    enosys.insert(libc::SYS_clone3, Vec::new());
    install(enosys, libc::ENOSYS)
}

/// Compile and apply one filter whose matches fail with `errno`.
fn install(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<(), String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno as u32), arch)
            .map_err(|e| e.to_string())?;
    let program: BpfProgram =
        filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// A filter that makes the Landlock system calls fail with `ENOSYS`, as on a kernel without
/// Landlock: for tests of `require` (`pev __sandbox without-landlock -- …`).
pub(crate) fn deny_landlock() -> Result<(), String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ] {
        rules.insert(call, Vec::new());
    }
    nix::sys::prctl::set_no_new_privs().map_err(|e| e.to_string())?;
    install(rules, libc::ENOSYS)
}
