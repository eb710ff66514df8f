//! The sandbox helper on its own, for embedders whose binary does not call
//! `pev_sandbox::helper_main` (and for this crate's tests): `pev-sandbox-helper __sandbox <stage> …`.

fn main() {
    let code = pev_sandbox::helper_main().unwrap_or_else(|| {
        let mut err = std::io::stderr();
        let _ = std::io::Write::write_all(
            &mut err,
            b"pev-sandbox-helper: this is pev's sandbox helper; it is started by pev, not by hand\n",
        );
        2
    });
    std::process::exit(code);
}
