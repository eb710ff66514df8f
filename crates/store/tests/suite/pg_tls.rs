//! TLS to a Postgres journal and the pooler check, against the servers
//! `scripts/with-postgres.sh` starts: a PostgreSQL serving TLS with a certificate a CA made for
//! the run signed (for `localhost` and 127.0.0.1), and a PgBouncer without TLS in front of the
//! plain server, one database pooled per transaction and one per session. The refusal of
//! cleartext to another machine is checked against a listener of the test's own on this
//! machine's non-loopback address, which records what pev sends it.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, UdpSocket};

use pev_store::{Location, Store};

use super::create;

fn tls_server(what: &str) -> Option<(String, String, String)> {
    let url = pev_test_support::server_extra("PEV_TEST_POSTGRES_TLS", what)?;
    let ca = pev_test_support::server_extra("PEV_TEST_POSTGRES_CA", what)?;
    let other = pev_test_support::server_extra("PEV_TEST_POSTGRES_OTHER_CA", what)?;
    Some((url, ca, other))
}

/// The error opening `url` gives, as a person reads it.
fn refusal(url: &str) -> String {
    match Location::parse(url) {
        Err(e) => e,
        Ok(at) => Store::open(&at).expect_err("the journal should not open").to_string(),
    }
}

/// Whether the sessions this process has open on the server behind `url` use TLS: read on
/// the server's side, through a connection of the test's own (TLS or not, as the server
/// takes it).
fn sessions_use_tls(url: &str) -> Vec<bool> {
    let mut admin = postgres::Client::connect(url, postgres::NoTls).expect("an admin connection");
    let me = format!("pev {}@%", std::process::id());
    admin
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name LIKE $1",
            &[&me],
        )
        .expect("pg_stat_ssl")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn verify_full_with_the_ca_connects_over_tls() {
    let Some((url, ca, _)) = tls_server("verify-full with the CA") else { return };
    let at = Location::parse(&format!("{url}?sslmode=verify-full&sslrootcert={ca}")).unwrap();
    assert!(at.to_string().contains("sslmode=verify-full"), "{at}");
    let store = Store::open(&at).unwrap();
    create(&store, "20260101-000000-aaaaaa", "2026-01-01T00:00:00Z");
    assert_eq!(store.list_runs().unwrap().len(), 1);
    let seen = sessions_use_tls(&format!("{url}?sslmode=disable"));
    assert!(!seen.is_empty() && seen.iter().all(|ssl| *ssl), "{seen:?}");
}

#[test]
fn verify_full_without_the_ca_is_refused_naming_the_cause() {
    let Some((url, _, other)) = tls_server("verify-full without the CA") else { return };
    let e = refusal(&format!("{url}?sslmode=verify-full"));
    assert!(e.contains("sslmode=verify-full needs the CA") && e.contains("sslrootcert"), "{e}");
    // A CA that did not sign the server's certificate, and this machine's CAs.
    for root in [other.as_str(), "system"] {
        let e = refusal(&format!("{url}?sslmode=verify-full&sslrootcert={root}"));
        assert!(e.contains("TLS to localhost failed (sslmode=verify-full)"), "{e}");
        assert!(e.contains("UnknownIssuer"), "{e}");
    }
}

#[test]
fn verify_ca_checks_the_chain_and_verify_full_the_name_too() {
    let Some((url, ca, other)) = tls_server("verify-ca") else { return };
    // TCP to 127.0.0.1, TLS to a name the certificate does not carry.
    let renamed = url.replace("@localhost:", "@db.invalid:");
    assert_ne!(renamed, url);
    let kv = |mode: &str, root: &str| {
        format!("{renamed}?hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={root}")
    };
    Store::open(Location::parse(&kv("verify-ca", &ca)).unwrap()).unwrap();
    let e = refusal(&kv("verify-full", &ca));
    assert!(e.contains("TLS to db.invalid failed") && e.contains("not valid for name"), "{e}");
    assert!(e.contains("name db.invalid in its subjectAltName"), "{e}");
    let e = refusal(&kv("verify-ca", &other));
    assert!(e.contains("UnknownIssuer"), "{e}");
    // require with a CA is verify-ca, as in libpq.
    let e = refusal(&kv("require", &other));
    assert!(e.contains("UnknownIssuer"), "{e}");
}

#[test]
fn require_without_a_ca_takes_any_certificate_but_needs_tls() {
    let Some((url, _, _)) = tls_server("require") else { return };
    Store::open(Location::parse(&format!("{url}?sslmode=require")).unwrap()).unwrap();
    let Some(bouncer) = pev_test_support::server_extra("PEV_TEST_PGBOUNCER_SESSION", "require")
    else {
        return;
    };
    // The PgBouncer serves no TLS.
    let e = refusal(&format!("{bouncer}?sslmode=require"));
    assert!(e.contains("127.0.0.1 offers no TLS, and sslmode=require needs it"), "{e}");
}

#[test]
fn a_loopback_host_without_sslmode_takes_tls_when_offered_and_goes_without_when_not() {
    let Some((url, _, _)) = tls_server("prefer on loopback") else { return };
    let _open = Store::open(Location::parse(&url).unwrap()).unwrap();
    let seen = sessions_use_tls(&format!("{url}?sslmode=disable"));
    assert!(!seen.is_empty() && seen.iter().all(|ssl| *ssl), "{seen:?}");
    let Some(bouncer) = pev_test_support::server_extra("PEV_TEST_PGBOUNCER_SESSION", "prefer")
    else {
        return;
    };
    let store = Store::open(Location::parse(&bouncer).unwrap()).unwrap();
    store.list_runs().unwrap();
}

/// This machine's address on its way out (no packet is sent), if it has one that is not
/// loopback.
fn outward_address() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// A server on `ip` that answers a TLS request with "no" and hands back the first message of
/// each of `connections` connections.
fn no_tls_server(ip: IpAddr, connections: usize) -> (u16, std::thread::JoinHandle<Vec<Vec<u8>>>) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let mut firsts = Vec::new();
        for _ in 0..connections {
            let (mut conn, _) = listener.accept().unwrap();
            let mut head = [0u8; 8];
            conn.read_exact(&mut head).unwrap();
            firsts.push(head.to_vec());
            // 80877103 is an SSLRequest: answer "no TLS here", then see what comes.
            if head[4..] == 80_877_103u32.to_be_bytes() {
                conn.write_all(b"N").unwrap();
                let mut rest = Vec::new();
                let _ = conn.read_to_end(&mut rest);
                firsts.push(rest);
            }
        }
        firsts
    });
    (port, thread)
}

#[test]
fn a_host_that_is_not_this_machine_gets_no_cleartext_unless_the_url_says_disable() {
    let Some(ip) = outward_address() else {
        eprintln!(
            "no non-loopback address on this machine: the cleartext refusal is unit-tested only"
        );
        return;
    };
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    let (port, server) = no_tls_server(ip, 2);
    let e = refusal(&format!("postgres://pev@{host}:{port}/journal"));
    assert!(e.contains(&format!("{} offers no TLS", ip)) || e.contains("offers no TLS"), "{e}");
    assert!(e.contains("sslmode=disable") && e.contains("no sslmode"), "{e}");
    // sslmode=prefer does not fall back to cleartext to another machine either.
    let e = refusal(&format!("postgres://pev@{host}:{port}/journal?sslmode=prefer"));
    assert!(e.contains("offers no TLS") && e.contains("sslmode=prefer"), "{e}");
    let firsts = server.join().unwrap();
    // Each time: a TLS request, and after the "no", nothing (the connection closed).
    assert_eq!(firsts.len(), 4, "{firsts:?}");
    for pair in firsts.chunks(2) {
        assert_eq!(pair[0][4..], 80_877_103u32.to_be_bytes());
        assert!(pair[1].is_empty(), "sent after the refusal: {:?}", pair[1]);
    }
    // With sslmode=disable the startup message (protocol 3.0) goes first, in cleartext.
    let (port, server) = no_tls_server(ip, 1);
    let _ = refusal(&format!("postgres://pev@{host}:{port}/journal?sslmode=disable"));
    let firsts = server.join().unwrap();
    assert_eq!(firsts[0][4..], 196_608u32.to_be_bytes(), "{firsts:?}");
}

#[test]
fn a_pooler_in_transaction_mode_is_refused() {
    let Some(url) = pev_test_support::server_extra("PEV_TEST_PGBOUNCER_TX", "the pooler check")
    else {
        return;
    };
    let e = refusal(&url);
    assert!(e.contains("several server sessions") && e.contains("transaction mode"), "{e}");
    assert!(e.contains("session mode"), "{e}");
}

#[test]
fn a_pooler_in_session_mode_is_accepted_and_leases_hold() {
    let Some(url) =
        pev_test_support::server_extra("PEV_TEST_PGBOUNCER_SESSION", "the session pooler")
    else {
        return;
    };
    let at = Location::parse(&url).unwrap();
    let store = Store::open(&at).unwrap();
    let run = format!("20260101-000000-{:06x}", std::process::id() & 0xff_ffff);
    create(&store, &run, "2026-01-01T00:00:00Z");
    let lease = at.lease(&run).unwrap();
    // A second process's view: another Location (its own writer and session).
    let other = Location::parse(&url).unwrap();
    assert!(matches!(other.lease(&run), Err(pev_store::LeaseError::Held { .. })));
    drop(lease);
    other.lease(&run).unwrap();
}
