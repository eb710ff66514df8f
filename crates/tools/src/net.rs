//! Which hosts the network may reach: loopback always, anything else only when the policy's
//! `allow_hosts` names it. Shared by `http.request` and the verifier's `http_status` and
//! `socket_open`, so a host is allowed or refused the same way everywhere.
//!
//! Matching is on the host as written in the URL, before any DNS lookup: a name is allowed
//! because the policy names it, never because of what it resolves to. `localhost` is the one name
//! treated as loopback.

use std::net::IpAddr;

/// Whether `host` (a name, an IPv4 address, or an IPv6 address with or without brackets) is a
/// loopback host.
pub fn is_loopback(host: &str) -> bool {
    let host = normalise(host);
    if host == "localhost" {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Whether `host` may be reached under `allow_hosts` (exact names, or `*.example.com` for the
/// subdomains of example.com). Case-insensitive; a trailing dot is ignored.
pub fn host_allowed(host: &str, allow_hosts: &[String]) -> bool {
    if is_loopback(host) {
        return true;
    }
    let host = normalise(host);
    allow_hosts.iter().any(|entry| {
        let entry = normalise(entry);
        match entry.strip_prefix("*.") {
            Some(suffix) => {
                host.len() > suffix.len()
                    && host.ends_with(suffix)
                    && host.as_bytes().get(host.len() - suffix.len() - 1) == Some(&b'.')
            }
            None => host == entry,
        }
    })
}

fn normalise(host: &str) -> String {
    let host = host.trim();
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
