//! Sending spans over OTLP/HTTP with protobuf bodies: the settings (the standard `OTEL_*`
//! variables, or the user's `pev.toml [telemetry]`), the client ([`client_for`]), one bounded
//! POST ([`send`]), and the live exporter a run uses ([`Live`], in `live.rs`).
//!
//! Every request has a timeout; what was not sent can be sent later from the journal
//! (`pev export`).

use std::time::Duration;

pub use crate::live::Live;
use crate::map::Options;
use crate::proto::{Resource, export_request};
use crate::span::Span;

/// Where and how spans are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`): an API key, a project.
    pub headers: Vec<(String, String)>,
    /// The most one request may take.
    pub timeout: Duration,
    pub resource: Resource,
    pub options: Options,
}

/// Settings from a `pev.toml` `[telemetry]` table, used when the environment names no endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSettings {
    pub endpoint: Option<String>,
    pub headers: Vec<(String, String)>,
    pub capture_content: Option<bool>,
    pub timeout_ms: Option<u64>,
}

/// The default request timeout (the OTLP exporter specification's 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl OtlpConfig {
    /// Sends to `url`: a base URL gets `/v1/traces` appended, as `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// does; a URL that already ends in `/v1/traces` is used as it is.
    pub fn for_url(url: &str) -> Result<Self, String> {
        Ok(Self {
            endpoint: traces_url(url)?,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            resource: Resource::default(),
            options: Options::default(),
        })
    }

    /// The settings the environment (`vars`) and the file give; `None` when neither names an
    /// endpoint, or `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`. An endpoint or a
    /// setting that makes no sense is an error, naming the variable.
    pub fn from_vars(
        vars: &dyn Fn(&str) -> Option<String>,
        file: &FileSettings,
    ) -> Result<Option<Self>, String> {
        Self::from_vars_to(vars, file, None)
    }

    /// [`OtlpConfig::from_vars`], sending to `url` when given (`pev export --otlp URL`): the
    /// headers, timeout, service and content settings still come from the environment and file.
    pub fn from_vars_to(
        vars: &dyn Fn(&str) -> Option<String>,
        file: &FileSettings,
        url: Option<&str>,
    ) -> Result<Option<Self>, String> {
        let var = |name: &str| vars(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let endpoint = if let Some(url) = url {
            traces_url(url)?
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            check_url(&url).map_err(|e| format!("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {e}"))?;
            url
        } else if let Some(url) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            traces_url(&url).map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}"))?
        } else if let Some(url) = &file.endpoint {
            traces_url(url).map_err(|e| format!("pev.toml [telemetry] endpoint: {e}"))?
        } else {
            return Ok(None);
        };
        for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            if let Some(protocol) = var(name) {
                if protocol != "http/protobuf" {
                    return Err(format!(
                        "{name}={protocol}: pev sends OTLP over HTTP with protobuf bodies \
                         (http/protobuf) only; point it at the collector's HTTP port (4318)"
                    ));
                }
                break;
            }
        }
        let mut headers = file.headers.clone();
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            if let Some(list) = var(name) {
                headers.extend(parse_pairs(&list).map_err(|e| format!("{name}: {e}"))?);
            }
        }
        let timeout_var = ["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"]
            .into_iter()
            .find_map(|name| var(name).map(|v| (name, v)));
        let timeout = match timeout_var {
            Some((name, ms)) => Duration::from_millis(
                ms.parse::<u64>().map_err(|_| format!("{name}: {ms:?} is not milliseconds"))?,
            ),
            None => file.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis),
        };
        let mut resource = Resource::default();
        if let Some(list) = var("OTEL_RESOURCE_ATTRIBUTES") {
            resource.attributes =
                parse_pairs(&list).map_err(|e| format!("OTEL_RESOURCE_ATTRIBUTES: {e}"))?;
            if let Some((_, name)) = resource.attributes.iter().find(|(k, _)| k == "service.name") {
                resource.service_name.clone_from(name);
            }
        }
        if let Some(name) = var("OTEL_SERVICE_NAME") {
            resource.service_name = name;
        }
        let capture = match var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            Some(v) => capture_word(&v).ok_or_else(|| {
                format!(
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: {v:?} is not true, \
                     false, span_only, span_and_event or no_content"
                )
            })?,
            None => file.capture_content.unwrap_or(false),
        };
        let options = Options { capture_content: capture, ..Options::default() };
        Ok(Some(Self {
            endpoint,
            headers,
            timeout: timeout.max(Duration::from_millis(1)),
            resource,
            options,
        }))
    }
}

fn capture_word(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "span_only" | "span_and_event" | "event_only" => Some(true),
        "false" | "0" | "no" | "no_content" => Some(false),
        _ => None,
    }
}

fn check_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        Ok(_) => Err(format!("{url:?} is not an http(s) URL")),
        Err(e) => Err(format!("{url:?} is not a URL: {e}")),
    }
}

/// `base/v1/traces`, unless `url` already ends so.
fn traces_url(url: &str) -> Result<String, String> {
    check_url(url)?;
    let url = url.trim_end_matches('/');
    Ok(if url.ends_with("/v1/traces") { url.to_owned() } else { format!("{url}/v1/traces") })
}

/// `k=v,k2=v2` with percent-encoded values (the OTLP exporter's header and resource format).
fn parse_pairs(list: &str) -> Result<Vec<(String, String)>, String> {
    list.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{:?} is not key=value", pair.trim()))?;
            let key = percent_decode(k.trim());
            if key.is_empty() {
                return Err(format!("{:?} has no key", pair.trim()));
            }
            Ok((key, percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) =
                (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Posts `spans` once. The error says what the endpoint answered (its status and the start of
/// its body) or why it could not be reached.
pub async fn send(
    client: &reqwest::Client,
    config: &OtlpConfig,
    spans: &[Span],
) -> Result<(), String> {
    let body = export_request(&config.resource, spans);
    let mut request = client
        .post(&config.endpoint)
        .timeout(config.timeout)
        .header("content-type", "application/x-protobuf")
        .body(body);
    for (k, v) in &config.headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            format!("no answer within {} ms", config.timeout.as_millis())
        } else {
            error_chain(&e)
        }
    })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let text = response.text().await.unwrap_or_default();
    let text: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    Err(format!(
        "the endpoint answered {status}{}",
        if text.is_empty() { String::new() } else { format!(": {text}") }
    ))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The client for `endpoint`. Only an `https` endpoint gets TLS with the platform's trust
/// store (reading the system's roots costs a few tens of milliseconds of CPU); a plain `http`
/// one, the usual local collector, gets a client that never loads them.
pub fn client_for(endpoint: &str) -> Result<reqwest::Client, String> {
    if endpoint.get(..6).is_some_and(|s| s.eq_ignore_ascii_case("https:")) {
        return pev_tools::build_client();
    }
    // reqwest is built without a default TLS provider: even a client that never speaks TLS is
    // given a configuration, one with no roots.
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("pev/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| error_chain(&e))
}

/// [`send`] from synchronous code, on a runtime of its own.
pub fn send_blocking(config: &OtlpConfig, spans: &[Span]) -> Result<(), String> {
    let client = client_for(&config.endpoint)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(send(&client, config, spans))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(OtlpConfig::from_vars(&vars(&[]), &FileSettings::default()), Ok(None));
        let on = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert_eq!(OtlpConfig::from_vars(&on, &FileSettings::default()), Ok(None));
    }

    #[test]
    fn the_standard_variables_are_read() {
        let env = vars(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318/"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api_key=a%3Db, x-project = pev "),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "ci-agent"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "True"),
        ]);
        let c = OtlpConfig::from_vars(&env, &FileSettings::default()).unwrap().unwrap();
        assert_eq!(c.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(
            c.headers,
            vec![
                ("api_key".to_owned(), "a=b".to_owned()),
                ("x-project".to_owned(), "pev".to_owned())
            ]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.resource.service_name, "ci-agent");
        assert!(c.options.capture_content);
        // The traces endpoint is used as it is.
        let env = vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://h/custom")]);
        let c = OtlpConfig::from_vars(&env, &FileSettings::default()).unwrap().unwrap();
        assert_eq!(c.endpoint, "https://h/custom");
        assert!(!c.options.capture_content, "content is off unless asked for");
    }

    #[test]
    fn the_file_is_used_only_when_the_environment_names_no_endpoint() {
        let file = FileSettings {
            endpoint: Some("http://file:4318".into()),
            capture_content: Some(true),
            ..FileSettings::default()
        };
        let c = OtlpConfig::from_vars(&vars(&[]), &file).unwrap().unwrap();
        assert_eq!(c.endpoint, "http://file:4318/v1/traces");
        assert!(c.options.capture_content);
        let env = vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318")]);
        let c = OtlpConfig::from_vars(&env, &file).unwrap().unwrap();
        assert_eq!(c.endpoint, "http://env:4318/v1/traces");
    }

    #[test]
    fn a_url_given_keeps_the_environments_headers_and_settings() {
        let env = vars(&[
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20k"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"),
        ]);
        let c = OtlpConfig::from_vars_to(&env, &FileSettings::default(), Some("http://h:4318"))
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://h:4318/v1/traces");
        assert_eq!(c.headers, vec![("authorization".to_owned(), "Bearer k".to_owned())]);
        assert_eq!(c.timeout, Duration::from_millis(700));
        let bad = vars(&[("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon")]);
        let err =
            OtlpConfig::from_vars_to(&bad, &FileSettings::default(), Some("http://h")).unwrap_err();
        assert!(err.starts_with("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"), "{err}");
    }

    #[test]
    fn bad_settings_are_errors_naming_the_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")], "OTEL_EXPORTER_OTLP_ENDPOINT"),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://h")], "not an http(s) URL"),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "http/protobuf",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
                ],
                "not milliseconds",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h"),
                    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "maybe"),
                ],
                "CAPTURE_MESSAGE_CONTENT",
            ),
        ];
        for (env, needle) in cases {
            let err = OtlpConfig::from_vars(&vars(env), &FileSettings::default()).unwrap_err();
            assert!(err.contains(needle), "{env:?}: {err}");
        }
    }

    #[test]
    fn an_unreachable_endpoint_is_an_error_not_a_hang() {
        // A port nothing listens on: bound, then released.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut config = OtlpConfig::for_url(&format!("http://127.0.0.1:{port}")).unwrap();
        config.timeout = Duration::from_millis(500);
        let err = send_blocking(&config, &[]).unwrap_err();
        assert!(!err.is_empty());
    }
}
