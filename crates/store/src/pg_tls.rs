//! TLS to a Postgres journal, as libpq reads `sslmode` and `sslrootcert`, with one rule of
//! pev's own: a journal is never sent in cleartext to another machine unless the connection
//! string says `sslmode=disable`.
//!
//! The parameters come from the connection string (URL query or `key=value` form), else from
//! `PGSSLMODE` and `PGSSLROOTCERT`; they are taken out of the string before the client parses
//! it (it knows only `disable`, `prefer` and `require`, and no root certificate). [`decide`] is
//! the whole table:
//!
//! | `sslmode`           | unix socket | loopback host            | any other host            |
//! |---------------------|-------------|--------------------------|---------------------------|
//! | `disable`           | cleartext   | cleartext                | cleartext                 |
//! | none, `allow`, `prefer` | cleartext | TLS if offered, else cleartext | TLS required      |
//! | `require`           | cleartext   | TLS required             | TLS required              |
//! | `verify-ca`         | cleartext   | TLS, chain verified      | TLS, chain verified       |
//! | `verify-full`       | cleartext   | TLS, chain and host name | TLS, chain and host name  |
//!
//! As in libpq: a unix socket never carries TLS (the server offers none there); a root
//! certificate (`sslrootcert`, else `~/.postgresql/root.crt` when it exists) makes `prefer` and
//! `require` verify the chain (`verify-ca`); `verify-ca` and `verify-full` without one are
//! refused; `sslrootcert=system` is this machine's trusted CAs and makes the default
//! `verify-full`, a weaker mode with it being refused. Loopback is `localhost`, 127.0.0.0/8 and
//! `::1`. The rustls side is `pg_tls_conn.rs`.

use std::path::PathBuf;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub(crate) fn parse(value: &str) -> Result<SslMode, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                ));
            }
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// Where the CAs a server's certificate is checked against come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// This machine's trusted CAs (`sslrootcert=system`).
    System,
}

impl RootCert {
    fn parse(value: &str) -> RootCert {
        if value == "system" { RootCert::System } else { RootCert::File(PathBuf::from(value)) }
    }
}

impl std::fmt::Display for RootCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootCert::File(p) => write!(f, "sslrootcert={}", p.display()),
            RootCert::System => f.write_str("sslrootcert=system (this machine's trusted CAs)"),
        }
    }
}

/// What the connection string and the environment ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) mode: Option<SslMode>,
    pub(crate) root: Option<RootCert>,
}

/// How far the hosts of a connection string are: the farthest of them counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reach {
    /// Unix sockets only.
    Socket,
    /// `localhost`, 127.0.0.0/8, `::1` (and sockets).
    Loopback,
    /// Anything else.
    Remote,
}

impl Reach {
    /// How far a TCP host (a name or an address) is.
    pub(crate) fn of_host(host: &str) -> Reach {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        if loopback { Reach::Loopback } else { Reach::Remote }
    }
}

/// What is checked of a server's certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Nothing: encryption against a passive listener only.
    Nothing,
    /// The chain up to one of these CAs, not the host name (`verify-ca`).
    Chain(RootCert),
    /// The chain and that the certificate names the host (`verify-full`).
    ChainAndHost(RootCert),
}

/// What a connection does about TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tls {
    /// Cleartext (`disable`, or a unix socket).
    Off,
    /// TLS when the server offers it, else cleartext (loopback hosts only).
    Offered(Verify),
    /// TLS or no connection.
    Required(Verify),
}

/// The decision and how it came about, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) tls: Tls,
    /// The mode asked for (`None`: the string and the environment named none).
    pub(crate) asked: Option<SslMode>,
    pub(crate) reach: Reach,
}

impl Decision {
    /// The mode as a person would write it for this decision: what was asked, or what pev
    /// chose and why.
    pub(crate) fn mode_shown(&self) -> String {
        match self.asked {
            Some(m) => format!("sslmode={}", m.name()),
            None => match &self.tls {
                Tls::Required(Verify::ChainAndHost(RootCert::System)) => {
                    "sslmode=verify-full (sslrootcert=system's default)".to_owned()
                }
                Tls::Required(_) => {
                    "no sslmode: TLS is required to a host that is not this machine".to_owned()
                }
                _ => "no sslmode (prefer)".to_owned(),
            },
        }
    }
}

/// The TLS of a connection to hosts as far as `reach`, given what was asked and the root
/// certificate file libpq would use by default (`~/.postgresql/root.crt`, when it exists).
pub(crate) fn decide(
    asked: &Asked,
    reach: Reach,
    default_root: Option<PathBuf>,
) -> Result<Decision, String> {
    let explicit_root = asked.root.clone();
    let root = explicit_root.clone().or_else(|| default_root.map(RootCert::File));
    let system = explicit_root == Some(RootCert::System);
    let mode = match asked.mode {
        Some(mode) => mode,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if system && mode != SslMode::VerifyFull && mode != SslMode::Disable {
        return Err(format!(
            "sslmode={} may not be used with sslrootcert=system (as in libpq): use \
             sslmode=verify-full, or name a CA file in sslrootcert",
            mode.name()
        ));
    }
    // A root certificate makes the weaker modes verify the chain, as libpq does.
    let chain = |root: &Option<RootCert>| root.clone().map_or(Verify::Nothing, Verify::Chain);
    let needs_root = |full: bool| match &root {
        Some(r) if full => Ok(Verify::ChainAndHost(r.clone())),
        Some(r) => Ok(Verify::Chain(r.clone())),
        None => Err(format!(
            "sslmode={} needs the CA that signed the server's certificate: name its PEM file \
             with sslrootcert=PATH in the connection string (or PGSSLROOTCERT), put it at \
             ~/.postgresql/root.crt, or say sslrootcert=system for this machine's trusted CAs",
            mode.name()
        )),
    };
    let tls = match (mode, reach) {
        (SslMode::Disable, _) | (_, Reach::Socket) => Tls::Off,
        (SslMode::Allow | SslMode::Prefer, Reach::Loopback) => Tls::Offered(chain(&root)),
        (SslMode::Allow | SslMode::Prefer | SslMode::Require, _) => Tls::Required(chain(&root)),
        (SslMode::VerifyCa, _) => Tls::Required(needs_root(false)?),
        (SslMode::VerifyFull, _) => Tls::Required(needs_root(true)?),
    };
    Ok(Decision { tls, asked: asked.mode, reach })
}

/// The TLS parameters pev reads itself; every other `ssl…` one but `sslnegotiation` (which the
/// client knows) is refused rather than ignored.
const READ_HERE: [&str; 2] = ["sslmode", "sslrootcert"];

/// `value` without its `sslmode` and `sslrootcert`, and what they asked (completed from
/// `PGSSLMODE` and `PGSSLROOTCERT`).
pub(crate) fn split(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Asked), String> {
    let (rest, found) = if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        split_url(value)
    } else {
        split_key_values(value)
    };
    let mut asked = Asked::default();
    for (key, v) in found {
        match key.as_str() {
            "sslmode" => asked.mode = Some(SslMode::parse(&v)?),
            "sslrootcert" => asked.root = Some(RootCert::parse(&v)),
            other => {
                return Err(format!(
                    "the connection parameter {other} is not supported by pev (client \
                     certificates, revocation lists and TLS version bounds are not implemented); \
                     remove it"
                ));
            }
        }
    }
    if asked.mode.is_none()
        && let Some(v) = env("PGSSLMODE")
    {
        asked.mode = Some(SslMode::parse(&v).map_err(|e| format!("PGSSLMODE: {e}"))?);
    }
    if asked.root.is_none() {
        asked.root = env("PGSSLROOTCERT").map(|v| RootCert::parse(&v));
    }
    Ok((rest, asked))
}

/// Whether pev takes a parameter out of the string (its own, or an `ssl…` one it refuses).
fn taken(key: &str) -> bool {
    READ_HERE.contains(&key) || (key.starts_with("ssl") && key != "sslnegotiation")
}

/// A URL's query without the parameters pev takes; anything it cannot read stays as it was
/// (the client's parser reports it).
fn split_url(value: &str) -> (String, Vec<(String, String)>) {
    let Some((head, query)) = value.split_once('?') else {
        return (value.to_owned(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut found = Vec::new();
    for pair in query.split('&') {
        let decoded = pair.split_once('=').and_then(|(k, v)| Some((decode(k)?, decode(v)?)));
        match decoded {
            Some((k, v)) if taken(&k) => found.push((k, v)),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() { head.to_owned() } else { format!("{head}?{}", kept.join("&")) };
    (rest, found)
}

/// Percent-decoding as the client's URL parser does it; `None` when it is not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A `key=value …` string without the parameters pev takes (values may be single-quoted, `\`
/// escapes); a string it cannot read stays as it was.
fn split_key_values(value: &str) -> (String, Vec<(String, String)>) {
    let mut rest = String::with_capacity(value.len());
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = value.char_indices().collect();
    let at = |i: usize| chars.get(i).map_or(value.len(), |&(b, _)| b);
    let mut i = 0;
    let mut copied = 0;
    loop {
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        let start = i;
        while chars.get(i).is_some_and(|&(_, c)| !c.is_whitespace() && c != '=') {
            i += 1;
        }
        if i == start {
            break;
        }
        let key = &value[at(start)..at(i)];
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i).map(|&(_, c)| c) != Some('=') {
            return (value.to_owned(), Vec::new());
        }
        i += 1;
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        let quoted = chars.get(i).map(|&(_, c)| c) == Some('\'');
        if quoted {
            i += 1;
        }
        let mut v = String::new();
        loop {
            match chars.get(i).map(|&(_, c)| c) {
                None if quoted => return (value.to_owned(), Vec::new()),
                None => break,
                Some('\'') if quoted => {
                    i += 1;
                    break;
                }
                Some(c) if c.is_whitespace() && !quoted => break,
                Some('\\') => {
                    if let Some(&(_, next)) = chars.get(i + 1) {
                        v.push(next);
                    }
                    i += 2;
                }
                Some(c) => {
                    v.push(c);
                    i += 1;
                }
            }
        }
        if taken(key) {
            rest.push_str(&value[copied..at(start)]);
            copied = at(i.min(chars.len()));
            found.push((key.to_owned(), v));
        }
    }
    rest.push_str(&value[copied..]);
    (rest, found)
}

/// Says what went wrong in a TLS handshake or negotiation, with the host, the mode and what to
/// do; `cause` is the client's message.
pub(crate) fn explain(decision: &Decision, host: &str, cause: &str) -> String {
    let mode = decision.mode_shown();
    let no_tls = cause.contains("server does not support TLS");
    if no_tls && matches!(decision.asked, None | Some(SslMode::Allow | SslMode::Prefer)) {
        return format!(
            "{host} offers no TLS, and pev does not send a journal in cleartext to a host that \
             is not this machine ({mode}); turn on ssl in the server (or its pooler), or say \
             sslmode=disable in the connection string to allow cleartext (a private network, a \
             VPN, an SSH tunnel to localhost)"
        );
    }
    if no_tls {
        return format!(
            "{host} offers no TLS, and {mode} needs it; turn on ssl in the server (or its \
             pooler), or connect through a unix socket or an SSH tunnel with sslmode=disable"
        );
    }
    let what = match &decision.tls {
        Tls::Required(Verify::ChainAndHost(root)) | Tls::Offered(Verify::ChainAndHost(root)) => {
            format!(
                "the server's certificate must be signed by a CA of {root} and name {host} in \
                 its subjectAltName"
            )
        }
        Tls::Required(Verify::Chain(root)) | Tls::Offered(Verify::Chain(root)) => {
            format!("the server's certificate must be signed by a CA of {root}")
        }
        _ => "no certificate is checked in this mode".to_owned(),
    };
    format!("TLS to {host} failed ({mode}): {cause}; {what}")
}

#[cfg(test)]
#[path = "pg_tls_tests.rs"]
mod tests;
