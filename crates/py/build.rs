//! With the `bundle` feature (python/pyproject.toml turns it on for every wheel), builds the pev
//! binaries, `pev` and its sandbox helper `pev-sandbox` (crates/cli; release, or the profile
//! `PEV_BUNDLE_PROFILE` names; the workspace's own Cargo.lock), and copies them to python/pev_harness.data/scripts, which maturin packs as the
//! wheel's scripts: pip puts them on PATH. The helper must be a real executable beside `pev`
//! (the sandbox re-executes it), so a console-script shim cannot stand in for it.
//!
//! The nested cargo gets a target directory of its own (`PEV_BUNDLE_TARGET_DIR`, else `bundle`
//! under this crate's target directory), so it never waits on the lock of the build that runs it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const BINARIES: [&str; 2] = ["pev", "pev-sandbox"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PEV_BUNDLE_TARGET_DIR");
    println!("cargo:rerun-if-env-changed=PEV_BUNDLE_PROFILE");
    if env::var_os("CARGO_FEATURE_BUNDLE").is_none() {
        return;
    }
    if let Err(message) = bundle() {
        println!("cargo:error=cannot bundle the pev binaries: {message}");
        std::process::exit(1);
    }
}

fn bundle() -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let root = manifest.join("../..");
    let root = root.canonicalize().map_err(|e| format!("{}: {e}", root.display()))?;
    for watched in ["Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    // Every crate but this one, whose target directory holds the nested build.
    let crates = std::fs::read_dir(root.join("crates")).map_err(|e| format!("crates/: {e}"))?;
    for entry in crates.flatten() {
        if entry.file_name() != "py" {
            println!("cargo:rerun-if-changed={}", entry.path().display());
        }
    }
    let target_dir = match env::var_os("PEV_BUNDLE_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => match env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => PathBuf::from(dir).join("bundle"),
            None => manifest.join("target/bundle"),
        },
    };
    // `release` for a wheel to ship; CI sets `dev` to reuse the binaries `cargo test` built.
    let profile = env::var("PEV_BUNDLE_PROFILE").unwrap_or_else(|_| "release".to_owned());
    let profile_dir = if profile == "dev" { "debug" } else { profile.as_str() };
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target = env::var("TARGET").map_err(|e| e.to_string())?;
    let host = env::var("HOST").map_err(|e| e.to_string())?;
    let mut command = Command::new(cargo);
    command
        .current_dir(&root)
        .args(["build", "--locked", "-p", "pev", "--bins", "--profile", &profile])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        // The outer build's flags are for a Python extension, not for these executables.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    let built = if target == host {
        target_dir.join(profile_dir)
    } else {
        command.args(["--target", &target]);
        target_dir.join(&target).join(profile_dir)
    };
    let status = command.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("`cargo build --profile {profile} -p pev` failed ({status})"));
    }
    let scripts = root.join("python/pev_harness.data/scripts");
    std::fs::create_dir_all(&scripts).map_err(|e| format!("{}: {e}", scripts.display()))?;
    for name in BINARIES {
        copy(&built.join(name), &scripts.join(name))?;
    }
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    // Replace rather than overwrite in place: a running `pev` keeps its old inode.
    let staging = to.with_extension("tmp");
    std::fs::copy(from, &staging)
        .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
    // The wheel carries no symbol tables (6 of pev's 36 MB); without `strip` on the build machine
    // the binaries go in as built.
    let stripped = Command::new("strip").arg(&staging).status();
    if !stripped.is_ok_and(|s| s.success()) {
        println!(
            "cargo:warning=`strip` not run on {}: the wheel carries its symbols",
            to.display()
        );
    }
    std::fs::rename(&staging, to).map_err(|e| format!("{}: {e}", to.display()))?;
    println!("cargo:rerun-if-changed={}", to.display());
    Ok(())
}
