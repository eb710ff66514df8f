//! Traces (issue 15): a `pev agent` run against the mock model, with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at an OTLP/HTTP receiver inside the test. The receiver decodes each export with
//! prost (messages declared below with the field numbers of opentelemetry-proto), so pev's
//! hand-written encoder is checked by an independent decoder. Also: `pev export` replays the same
//! trace, and an endpoint that is not there leaves the run's outcome as it was.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::agent_http::mock::MockModel;
use crate::agent_http::scenarios::{DARK_GREEN, INDEX, STYLE, honest};
use crate::agent_http::support::Ws;

/// opentelemetry-proto's messages, as much of them as pev writes.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ExportTraceServiceRequest {
        #[prost(message, repeated, tag = "1")]
        pub resource_spans: Vec<ResourceSpans>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ResourceSpans {
        #[prost(message, optional, tag = "1")]
        pub resource: Option<Resource>,
        #[prost(message, repeated, tag = "2")]
        pub scope_spans: Vec<ScopeSpans>,
        #[prost(string, tag = "3")]
        pub schema_url: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Resource {
        #[prost(message, repeated, tag = "1")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ScopeSpans {
        #[prost(message, optional, tag = "1")]
        pub scope: Option<Scope>,
        #[prost(message, repeated, tag = "2")]
        pub spans: Vec<Span>,
        #[prost(string, tag = "3")]
        pub schema_url: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Scope {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub version: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Span {
        #[prost(bytes = "vec", tag = "1")]
        pub trace_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub span_id: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub parent_span_id: Vec<u8>,
        #[prost(string, tag = "5")]
        pub name: String,
        #[prost(int32, tag = "6")]
        pub kind: i32,
        #[prost(fixed64, tag = "7")]
        pub start_time_unix_nano: u64,
        #[prost(fixed64, tag = "8")]
        pub end_time_unix_nano: u64,
        #[prost(message, repeated, tag = "9")]
        pub attributes: Vec<KeyValue>,
        #[prost(message, repeated, tag = "11")]
        pub events: Vec<Event>,
        #[prost(message, optional, tag = "15")]
        pub status: Option<Status>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Event {
        #[prost(fixed64, tag = "1")]
        pub time_unix_nano: u64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "3")]
        pub attributes: Vec<KeyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Status {
        #[prost(string, tag = "2")]
        pub message: String,
        #[prost(int32, tag = "3")]
        pub code: i32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct KeyValue {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(message, optional, tag = "2")]
        pub value: Option<AnyValue>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AnyValue {
        #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 5")]
        pub value: Option<any_value::Value>,
    }
    pub mod any_value {
        #[derive(Clone, PartialEq, prost::Oneof)]
        pub enum Value {
            #[prost(string, tag = "1")]
            Str(String),
            #[prost(bool, tag = "2")]
            Bool(bool),
            #[prost(int64, tag = "3")]
            Int(i64),
            #[prost(double, tag = "4")]
            Double(f64),
            #[prost(message, tag = "5")]
            Array(super::ArrayValue),
        }
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ArrayValue {
        #[prost(message, repeated, tag = "1")]
        pub values: Vec<AnyValue>,
    }
}

use proto::any_value::Value as Any;

/// An OTLP/HTTP receiver on 127.0.0.1: answers every export 200 and keeps its spans (with the
/// resource's service name and the scope's schema URL).
struct Receiver {
    url: String,
    spans: Arc<Mutex<Vec<(proto::Span, String, String)>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        Receiver { url, spans }
    }

    fn spans(&self) -> Vec<proto::Span> {
        self.spans.lock().expect("lock").iter().map(|(s, _, _)| s.clone()).collect()
    }
}

/// Answers the requests of one connection (keep-alive) until it closes.
fn serve(stream: std::net::TcpStream, kept: &Mutex<Vec<(proto::Span, String, String)>>) {
    use prost::Message as _;
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header line");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').expect("a header");
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
        let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).expect("body");
        assert!(request_line.starts_with("POST /v1/traces "), "{request_line}");
        assert_eq!(headers.get("content-type").map(String::as_str), Some("application/x-protobuf"));
        let request = proto::ExportTraceServiceRequest::decode(body.as_slice())
            .expect("the export decodes as an ExportTraceServiceRequest");
        for rs in request.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                    Any::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for span in ss.spans {
                    kept.lock().expect("lock").push((span, service.clone(), ss.schema_url.clone()));
                }
            }
        }
        let _ = writer.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
        );
    }
}

fn attr<'a>(span: &'a proto::Span, key: &str) -> Option<&'a Any> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text<'a>(span: &'a proto::Span, key: &str) -> Option<&'a str> {
    match attr(span, key)? {
        Any::Str(s) => Some(s),
        _ => None,
    }
}

fn named<'a>(spans: &'a [proto::Span], name: &str) -> Vec<&'a proto::Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [proto::Span], name: &str) -> &'a proto::Span {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "{name} among {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

/// Nanoseconds since the epoch of an event's `at`.
fn nanos(at: &Value) -> u64 {
    pev_protocol::event::epoch_ms(at.as_str().expect("at")).expect("an RFC 3339 time") * 1_000_000
}

#[test]
fn an_agent_run_arrives_as_one_trace_with_the_expected_tree() {
    let mock = MockModel::start(honest);
    let receiver = Receiver::start();
    let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
    let out = ws.agent_with(DARK_GREEN, &[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status(), "success");
    assert!(!out.stderr.contains("traces were not sent"), "{}", out.stderr);

    let spans = receiver.spans();
    let stored = receiver.spans.lock().expect("lock").clone();
    assert!(
        stored.iter().all(|(_, service, schema)| service == "pev" && schema.ends_with("/1.42.0"))
    );
    let trace = &spans[0].trace_id;
    assert_eq!(trace.len(), 16);
    assert!(spans.iter().all(|s| &s.trace_id == trace), "one trace");
    let mut ids: Vec<&Vec<u8>> = spans.iter().map(|s| &s.span_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "each span sent once");

    let root = one(&spans, "invoke_agent pev");
    assert!(root.parent_span_id.is_empty());
    let run_id = out.result()["run_id"].as_str().expect("run id");
    assert_eq!(text(root, "gen_ai.conversation.id"), Some(run_id));
    assert_eq!(text(root, "pev.run.status"), Some("success"));
    for s in &spans {
        if s.span_id != root.span_id {
            assert!(
                spans.iter().any(|p| p.span_id == s.parent_span_id),
                "{}: dangling parent",
                s.name
            );
        }
    }
    let parent = |s: &proto::Span| {
        spans.iter().find(|p| p.span_id == s.parent_span_id).map(|p| p.name.clone())
    };

    let planner = one(&spans, "chat claude-opus-4-6");
    assert_eq!(parent(planner).as_deref(), Some("plan"));
    assert_eq!(planner.kind, 3, "a model call is a CLIENT span");
    assert_eq!(text(planner, "gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(text(planner, "server.address"), Some("127.0.0.1"));
    assert!(matches!(attr(planner, "server.port"), Some(Any::Int(p)) if *p > 0));
    assert!(text(planner, "gen_ai.response.id").is_some_and(|id| id.starts_with("msg_mock_")));

    let executor = named(&spans, "chat claude-sonnet-4-5");
    assert_eq!(executor.len(), 3);
    assert!(executor.iter().all(|c| parent(c).as_deref() == Some("step patch-css")));
    assert!(matches!(attr(executor[0], "gen_ai.usage.input_tokens"), Some(Any::Int(1500))));
    let tools: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool "))
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(tools.len(), 3, "{tools:?}");
    assert!(tools.contains(&"execute_tool file.patch"), "{tools:?}");
    let patch = one(&spans, "execute_tool file.patch");
    assert_eq!(text(patch, "gen_ai.tool.call.id").map(str::is_empty), Some(false));
    assert!(attr(patch, "gen_ai.tool.call.arguments").is_none(), "no content unless opted in");

    let verify = one(&spans, "verify patch-css");
    assert_eq!(parent(verify).as_deref(), Some("step patch-css"));
    let judge = one(&spans, "chat claude-haiku-4-5");
    assert_eq!(parent(judge).as_deref(), Some("verify patch-css"));
    assert!(verify.events.iter().all(|e| e.name == "gen_ai.evaluation.result"));
    let evaluations: Vec<String> = verify
        .events
        .iter()
        .filter_map(|e| e.attributes.iter().find(|kv| kv.key == "gen_ai.evaluation.name"))
        .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Any::Str(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert!(evaluations.contains(&"file_contains".to_owned()), "{evaluations:?}");
    assert!(evaluations.contains(&"pev.judge".to_owned()), "{evaluations:?}");

    // The journal's times: the step span starts at step.started and ends at step.finished.
    let at = |kind: &str| {
        let e =
            out.events.iter().find(|e| e["event"] == kind && e["step"] == "patch-css").expect(kind);
        nanos(&e["at"])
    };
    let step = one(&spans, "step patch-css");
    assert_eq!(step.start_time_unix_nano, at("step.started"));
    assert_eq!(step.end_time_unix_nano, at("step.finished"));

    // Replayed from the journal: the same trace, the same spans.
    let replay = Receiver::start();
    for _ in 0..2 {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("pev");
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["export", "last", "--otlp", &replay.url, "--workspace"])
            .arg(ws.path());
        let output = cmd.output().expect("pev export runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains(&format!("sent run {run_id}")), "{stdout}");
    }
    let replayed = replay.spans();
    assert_eq!(replayed.len(), 2 * spans.len(), "twice the run's spans");
    let key = |s: &proto::Span| {
        (
            s.trace_id.clone(),
            s.span_id.clone(),
            s.name.clone(),
            s.start_time_unix_nano,
            s.end_time_unix_nano,
        )
    };
    let mut live: Vec<_> = spans.iter().map(key).collect();
    let mut again: Vec<_> = replayed[..spans.len()].iter().map(key).collect();
    live.sort();
    again.sort();
    assert_eq!(live, again, "the replay is the trace the run sent");
}

#[test]
fn an_unreachable_endpoint_leaves_the_outcome_unchanged_with_one_warning() {
    let mock = MockModel::start(honest);
    let ws = Ws::new(&mock.base_url, &[("style.css", STYLE), ("index.html", INDEX)]);
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}");
    let out = ws.agent_with(DARK_GREEN, &[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &url)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.status(), "success");
    assert_eq!(out.stderr.matches("traces were not sent").count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("pev export"), "the warning says how to send them later");
}
