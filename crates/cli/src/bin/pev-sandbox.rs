//! pev's sandbox helper as its own small binary, installed beside `pev`: every confined command
//! starts two helper processes (the supervisor and the restricting stage), and executing this
//! binary instead of the whole of `pev` halves their start-up cost (BENCHMARKS.md). `pev` falls
//! back to re-executing itself when this file is missing.

fn main() {
    let code = pev_sandbox::helper_main().unwrap_or_else(|| {
        let mut err = std::io::stderr();
        let _ = std::io::Write::write_all(
            &mut err,
            b"pev-sandbox: this is pev's sandbox helper; pev starts it, not a person\n",
        );
        2
    });
    std::process::exit(code);
}
