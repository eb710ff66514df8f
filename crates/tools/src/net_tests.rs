//! Unit tests of the host allow-list.

use super::*;

fn hosts(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn loopback_forms_are_recognised() {
    for host in
        ["localhost", "LOCALHOST.", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "::ffff:127.0.0.1"]
    {
        assert!(is_loopback(host), "{host}");
    }
    for host in ["example.com", "10.0.0.1", "0.0.0.0", "localhost.evil.com", "::2", ""] {
        assert!(!is_loopback(host), "{host}");
    }
}

#[test]
fn exact_entries_match_case_insensitively() {
    let allow = hosts(&["API.example.com"]);
    assert!(host_allowed("api.example.com", &allow));
    assert!(host_allowed("api.example.com.", &allow));
    assert!(!host_allowed("example.com", &allow));
    assert!(!host_allowed("evil-api.example.com", &allow));
}

#[test]
fn wildcard_entries_match_subdomains_only() {
    let allow = hosts(&["*.example.com"]);
    assert!(host_allowed("a.example.com", &allow));
    assert!(host_allowed("a.b.example.com", &allow));
    assert!(!host_allowed("example.com", &allow));
    assert!(!host_allowed("badexample.com", &allow));
}

#[test]
fn nothing_but_loopback_without_a_policy() {
    assert!(host_allowed("127.0.0.1", &[]));
    assert!(!host_allowed("example.com", &[]));
}

#[test]
fn ipv6_entries_match_with_or_without_brackets() {
    let allow = hosts(&["[2001:db8::1]"]);
    assert!(host_allowed("2001:db8::1", &allow));
    assert!(host_allowed("[2001:db8::1]", &allow));
}
