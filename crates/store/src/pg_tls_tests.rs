use std::path::PathBuf;

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn every_libpq_mode_parses_and_nothing_else_does() {
    for (text, mode) in [
        ("disable", SslMode::Disable),
        ("allow", SslMode::Allow),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ] {
        assert_eq!(SslMode::parse(text), Ok(mode));
        assert_eq!(mode.name(), text);
    }
    for bad in ["", "Require", "verify_full", "on"] {
        let e = SslMode::parse(bad).unwrap_err();
        assert!(e.contains("verify-full"), "{e}");
    }
}

#[test]
fn a_url_loses_its_tls_parameters_and_keeps_the_rest() {
    let (rest, asked) = split(
        "postgres://u@db:5432/j?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20dir%2Fca.pem&sslnegotiation=postgres",
        &no_env,
    )
    .unwrap();
    assert_eq!(rest, "postgres://u@db:5432/j?application_name=x&sslnegotiation=postgres");
    assert_eq!(asked.mode, Some(SslMode::VerifyFull));
    assert_eq!(asked.root, Some(RootCert::File(PathBuf::from("/etc/ca dir/ca.pem"))));
    let (rest, asked) = split("postgresql://db/j?sslmode=require", &no_env).unwrap();
    assert_eq!(rest, "postgresql://db/j");
    assert_eq!(asked, Asked { mode: Some(SslMode::Require), root: None });
    let (rest, asked) = split("postgres://db/j", &no_env).unwrap();
    assert_eq!((rest.as_str(), asked), ("postgres://db/j", Asked::default()));
}

#[test]
fn a_key_value_string_loses_its_tls_parameters_quoted_or_not() {
    let (rest, asked) =
        split("host=db sslmode = verify-ca  sslrootcert='/a b/it\\'s.pem' dbname=j", &no_env)
            .unwrap();
    assert_eq!(rest.split_whitespace().collect::<Vec<_>>(), ["host=db", "dbname=j"]);
    assert_eq!(asked.mode, Some(SslMode::VerifyCa));
    assert_eq!(asked.root, Some(RootCert::File(PathBuf::from("/a b/it's.pem"))));
    // What cannot be read is left for the client's parser to report.
    let (rest, asked) = split("host=db sslmode='unterminated", &no_env).unwrap();
    assert_eq!((rest.as_str(), asked), ("host=db sslmode='unterminated", Asked::default()));
}

#[test]
fn the_environment_fills_in_what_the_string_leaves_out() {
    let env = |name: &str| match name {
        "PGSSLMODE" => Some("verify-full".to_owned()),
        "PGSSLROOTCERT" => Some("system".to_owned()),
        _ => None,
    };
    let (_, asked) = split("postgres://db/j", &env).unwrap();
    assert_eq!(asked, Asked { mode: Some(SslMode::VerifyFull), root: Some(RootCert::System) });
    let (_, asked) = split("postgres://db/j?sslmode=disable", &env).unwrap();
    assert_eq!(asked.mode, Some(SslMode::Disable));
    let bad = |name: &str| (name == "PGSSLMODE").then(|| "tls".to_owned());
    let e = split("postgres://db/j", &bad).unwrap_err();
    assert!(e.starts_with("PGSSLMODE: "), "{e}");
}

#[test]
fn tls_parameters_pev_does_not_implement_are_refused_by_name() {
    for key in ["sslcert", "sslkey", "sslcrl", "ssl_min_protocol_version"] {
        let e = split(&format!("postgres://db/j?{key}=x"), &no_env).unwrap_err();
        assert!(e.contains(key) && e.contains("remove it"), "{e}");
        let e = split(&format!("host=db {key}=x"), &no_env).unwrap_err();
        assert!(e.contains(key), "{e}");
    }
}

#[test]
fn hosts_are_loopback_only_when_they_are() {
    for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.3.2.1", "::1", "[::1]"] {
        assert_eq!(Reach::of_host(host), Reach::Loopback, "{host}");
    }
    for host in ["db.internal", "10.0.0.5", "192.168.1.2", "::2", "localhost.example.com"] {
        assert_eq!(Reach::of_host(host), Reach::Remote, "{host}");
    }
    assert!(Reach::Socket < Reach::Loopback && Reach::Loopback < Reach::Remote);
}

/// One row of the decision table: the mode and root asked, the reach, and the outcome (an
/// error by the start of its message).
type Case = (Option<SslMode>, Option<RootCert>, Reach, Result<Tls, &'static str>);

fn asked(mode: Option<SslMode>, root: Option<RootCert>) -> Asked {
    Asked { mode, root }
}

fn ca() -> RootCert {
    RootCert::File(PathBuf::from("/ca.pem"))
}

#[test]
fn the_decision_table() {
    use Reach::{Loopback, Remote, Socket};
    use SslMode::*;
    let off = Ok(Tls::Off);
    let cases: Vec<Case> = vec![
        // No sslmode: prefer on this machine, TLS required to any other.
        (None, None, Socket, off.clone()),
        (None, None, Loopback, Ok(Tls::Offered(Verify::Nothing))),
        (None, None, Remote, Ok(Tls::Required(Verify::Nothing))),
        (None, Some(ca()), Remote, Ok(Tls::Required(Verify::Chain(ca())))),
        (
            None,
            Some(RootCert::System),
            Remote,
            Ok(Tls::Required(Verify::ChainAndHost(RootCert::System))),
        ),
        // disable is the one way to cleartext off this machine.
        (Some(Disable), None, Remote, off.clone()),
        (Some(Disable), Some(ca()), Loopback, off.clone()),
        (Some(Allow), None, Loopback, Ok(Tls::Offered(Verify::Nothing))),
        (Some(Prefer), None, Remote, Ok(Tls::Required(Verify::Nothing))),
        (Some(Allow), None, Remote, Ok(Tls::Required(Verify::Nothing))),
        (Some(Require), None, Loopback, Ok(Tls::Required(Verify::Nothing))),
        (Some(Require), None, Remote, Ok(Tls::Required(Verify::Nothing))),
        // A root certificate makes require verify the chain, as libpq does.
        (Some(Require), Some(ca()), Remote, Ok(Tls::Required(Verify::Chain(ca())))),
        (Some(Prefer), Some(ca()), Loopback, Ok(Tls::Offered(Verify::Chain(ca())))),
        (Some(VerifyCa), Some(ca()), Loopback, Ok(Tls::Required(Verify::Chain(ca())))),
        (Some(VerifyFull), Some(ca()), Remote, Ok(Tls::Required(Verify::ChainAndHost(ca())))),
        (
            Some(VerifyFull),
            Some(RootCert::System),
            Remote,
            Ok(Tls::Required(Verify::ChainAndHost(RootCert::System))),
        ),
        // A unix socket never carries TLS, whatever the mode (libpq's rule).
        (Some(VerifyFull), Some(ca()), Socket, off.clone()),
        // Refused: a verifying mode without a CA, a weak mode with the system's CAs.
        (Some(VerifyCa), None, Remote, Err("sslmode=verify-ca needs the CA")),
        (Some(VerifyFull), None, Loopback, Err("sslmode=verify-full needs the CA")),
        (
            Some(Require),
            Some(RootCert::System),
            Remote,
            Err("sslmode=require may not be used with sslrootcert=system"),
        ),
        (Some(VerifyCa), Some(RootCert::System), Remote, Err("sslmode=verify-ca may not be used")),
    ];
    for (mode, root, reach, want) in cases {
        let got = decide(&asked(mode, root.clone()), reach, None);
        match (got, want) {
            (Ok(d), Ok(tls)) => {
                assert_eq!(d.tls, tls, "{mode:?} {root:?} {reach:?}");
                assert_eq!((d.asked, d.reach), (mode, reach));
            }
            (Err(e), Err(start)) => assert!(e.starts_with(start), "{mode:?} {root:?}: {e}"),
            (got, want) => panic!("{mode:?} {root:?} {reach:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn the_default_root_certificate_counts_as_libpq_counts_it() {
    let default = Some(PathBuf::from("/home/u/.postgresql/root.crt"));
    let file = RootCert::File(PathBuf::from("/home/u/.postgresql/root.crt"));
    let d = decide(&asked(Some(SslMode::VerifyFull), None), Reach::Remote, default.clone());
    assert_eq!(d.unwrap().tls, Tls::Required(Verify::ChainAndHost(file.clone())));
    let d = decide(&asked(Some(SslMode::Require), None), Reach::Remote, default.clone());
    assert_eq!(d.unwrap().tls, Tls::Required(Verify::Chain(file)));
    // One named in the string wins over it.
    let d = decide(&asked(Some(SslMode::VerifyCa), Some(ca())), Reach::Remote, default);
    assert_eq!(d.unwrap().tls, Tls::Required(Verify::Chain(ca())));
}

#[test]
fn a_refusal_names_the_host_the_mode_and_the_way_out() {
    let d = decide(&Asked::default(), Reach::Remote, None).unwrap();
    let e =
        explain(&d, "db.internal", "error performing TLS handshake: server does not support TLS");
    assert!(e.starts_with("db.internal offers no TLS"), "{e}");
    assert!(e.contains("no sslmode") && e.contains("sslmode=disable"), "{e}");
    let d = decide(&asked(Some(SslMode::Require), None), Reach::Loopback, None).unwrap();
    let e = explain(&d, "localhost", "error performing TLS handshake: server does not support TLS");
    assert!(e.contains("sslmode=require needs it"), "{e}");
    let d = decide(&asked(Some(SslMode::VerifyFull), Some(ca())), Reach::Remote, None).unwrap();
    let e = explain(
        &d,
        "db",
        "error performing TLS handshake: invalid peer certificate: UnknownIssuer",
    );
    assert!(e.contains("TLS to db failed (sslmode=verify-full)"), "{e}");
    assert!(e.contains("UnknownIssuer") && e.contains("sslrootcert=/ca.pem"), "{e}");
}
