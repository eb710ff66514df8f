//! Traces (issue 15): a `pev agent` run against the mock model, with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at an OTLP/HTTP receiver inside the test. The receiver decodes each export with a
//! decoder of its own (messages declared below with the field numbers of opentelemetry-proto),
//! so pev's hand-written encoder is checked by an independent decoder. Also: `pev export` replays the same
//! trace, and an endpoint that is not there leaves the run's outcome as it was.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::agent_http::mock::MockModel;
use crate::agent_http::scenarios::{DARK_GREEN, INDEX, STYLE, honest};
use crate::agent_http::support::Ws;

/// opentelemetry-proto's messages, as much of them as pev writes, read by a decoder of the
/// protobuf wire format written here from its specification
/// (<https://protobuf.dev/programming-guides/encoding/>), not from pev-otel's encoder. As a
/// generated decoder does, it skips fields it does not know, keeps the last value of a singular
/// scalar field and appends a repeated one (a singular message given twice is replaced, not
/// merged: pev writes each once); and it refuses what one refuses: a field of a known number in
/// another wire type, a string that is not UTF-8, a varint that overflows 64 bits, a varint or
/// a length past the end.
mod proto {
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct ExportTraceServiceRequest {
        pub resource_spans: Vec<ResourceSpans>, // 1
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct ResourceSpans {
        pub resource: Option<Resource>,   // 1
        pub scope_spans: Vec<ScopeSpans>, // 2
        pub schema_url: String,           // 3
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Resource {
        pub attributes: Vec<KeyValue>, // 1
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct ScopeSpans {
        pub scope: Option<Scope>, // 1
        pub spans: Vec<Span>,     // 2
        pub schema_url: String,   // 3
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Scope {
        pub name: String,    // 1
        pub version: String, // 2
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Span {
        pub trace_id: Vec<u8>,         // 1, bytes
        pub span_id: Vec<u8>,          // 2, bytes
        pub parent_span_id: Vec<u8>,   // 4, bytes
        pub name: String,              // 5
        pub kind: i32,                 // 6, enum
        pub start_time_unix_nano: u64, // 7, fixed64
        pub end_time_unix_nano: u64,   // 8, fixed64
        pub attributes: Vec<KeyValue>, // 9
        pub events: Vec<Event>,        // 11
        pub status: Option<Status>,    // 15
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Event {
        pub time_unix_nano: u64,       // 1, fixed64
        pub name: String,              // 2
        pub attributes: Vec<KeyValue>, // 3
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Status {
        pub message: String, // 2
        pub code: i32,       // 3, enum
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct KeyValue {
        pub key: String,             // 1
        pub value: Option<AnyValue>, // 2
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct AnyValue {
        pub value: Option<any_value::Value>, // oneof, 1 to 5
    }
    pub mod any_value {
        #[derive(Debug, Clone, PartialEq)]
        pub enum Value {
            Str(String),              // 1
            Bool(bool),               // 2
            Int(i64),                 // 3
            Double(f64),              // 4
            Array(super::ArrayValue), // 5
        }
    }
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct ArrayValue {
        pub values: Vec<AnyValue>, // 1
    }

    /// A field's value as the wire carries it.
    #[derive(Clone, Copy)]
    pub enum Wire<'a> {
        Varint(u64),
        I64([u8; 8]),
        Len(&'a [u8]),
        I32,
    }

    type Result<T> = std::result::Result<T, String>;

    fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
        if buf.len() < n {
            return Err(format!("{n} bytes wanted, {} left", buf.len()));
        }
        let (head, rest) = buf.split_at(n);
        *buf = rest;
        Ok(head)
    }

    fn varint(buf: &mut &[u8]) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = take(buf, 1)?[0];
            if shift == 63 && byte > 1 {
                return Err("a varint past 64 bits".to_owned());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("a varint longer than ten bytes".to_owned())
    }

    /// Calls `field` with each field of the message in `buf`, in the order they arrive.
    fn fields<'a>(
        mut buf: &'a [u8],
        mut field: impl FnMut(u64, Wire<'a>) -> Result<()>,
    ) -> Result<()> {
        while !buf.is_empty() {
            let key = varint(&mut buf)?;
            let number = key >> 3;
            if number == 0 {
                return Err("field number 0".to_owned());
            }
            let wire = match key & 7 {
                0 => Wire::Varint(varint(&mut buf)?),
                1 => Wire::I64(take(&mut buf, 8)?.try_into().map_err(|_| "8 bytes")?),
                2 => {
                    let len = usize::try_from(varint(&mut buf)?).map_err(|e| e.to_string())?;
                    Wire::Len(take(&mut buf, len)?)
                }
                5 => {
                    take(&mut buf, 4)?;
                    Wire::I32
                }
                other => return Err(format!("field {number}: wire type {other}")),
            };
            field(number, wire)?;
        }
        Ok(())
    }

    fn wrong(what: &str) -> String {
        format!("a {what} field in another wire type")
    }

    fn string(wire: Wire<'_>) -> Result<String> {
        match wire {
            Wire::Len(b) => String::from_utf8(b.to_vec()).map_err(|e| e.to_string()),
            _ => Err(wrong("string")),
        }
    }

    fn bytes(wire: Wire<'_>) -> Result<Vec<u8>> {
        match wire {
            Wire::Len(b) => Ok(b.to_vec()),
            _ => Err(wrong("bytes")),
        }
    }

    fn fixed64(wire: Wire<'_>) -> Result<u64> {
        match wire {
            Wire::I64(b) => Ok(u64::from_le_bytes(b)),
            _ => Err(wrong("fixed64")),
        }
    }

    fn double(wire: Wire<'_>) -> Result<f64> {
        match wire {
            Wire::I64(b) => Ok(f64::from_le_bytes(b)),
            _ => Err(wrong("double")),
        }
    }

    /// int64 (and int32 and enums, whose negative values are sign-extended to ten bytes).
    fn int64(wire: Wire<'_>) -> Result<i64> {
        match wire {
            Wire::Varint(v) => Ok(i64::from_le_bytes(v.to_le_bytes())),
            _ => Err(wrong("varint")),
        }
    }

    /// As a generated decoder does, the low 32 bits (a negative int32 is written in ten bytes,
    /// sign-extended, but five zero-extended ones are read the same way).
    fn int32(wire: Wire<'_>) -> Result<i32> {
        Ok(i32::from_le_bytes(int64(wire)?.to_le_bytes()[..4].try_into().map_err(|_| "4 bytes")?))
    }

    fn message<T: Decode>(wire: Wire<'_>) -> Result<T> {
        match wire {
            Wire::Len(b) => T::decode(b),
            _ => Err(wrong("message")),
        }
    }

    pub trait Decode: Default {
        /// Takes one field; unknown numbers are skipped.
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()>;

        fn decode(buf: &[u8]) -> Result<Self> {
            let mut message = Self::default();
            fields(buf, |number, wire| message.field(number, wire))?;
            Ok(message)
        }
    }

    impl Decode for ExportTraceServiceRequest {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            if number == 1 {
                self.resource_spans.push(message(wire)?);
            }
            Ok(())
        }
    }

    impl Decode for ResourceSpans {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.resource = Some(message(wire)?),
                2 => self.scope_spans.push(message(wire)?),
                3 => self.schema_url = string(wire)?,
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for Resource {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            if number == 1 {
                self.attributes.push(message(wire)?);
            }
            Ok(())
        }
    }

    impl Decode for ScopeSpans {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.scope = Some(message(wire)?),
                2 => self.spans.push(message(wire)?),
                3 => self.schema_url = string(wire)?,
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for Scope {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.name = string(wire)?,
                2 => self.version = string(wire)?,
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for Span {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.trace_id = bytes(wire)?,
                2 => self.span_id = bytes(wire)?,
                4 => self.parent_span_id = bytes(wire)?,
                5 => self.name = string(wire)?,
                6 => self.kind = int32(wire)?,
                7 => self.start_time_unix_nano = fixed64(wire)?,
                8 => self.end_time_unix_nano = fixed64(wire)?,
                9 => self.attributes.push(message(wire)?),
                11 => self.events.push(message(wire)?),
                15 => self.status = Some(message(wire)?),
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for Event {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.time_unix_nano = fixed64(wire)?,
                2 => self.name = string(wire)?,
                3 => self.attributes.push(message(wire)?),
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for Status {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                2 => self.message = string(wire)?,
                3 => self.code = int32(wire)?,
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for KeyValue {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            match number {
                1 => self.key = string(wire)?,
                2 => self.value = Some(message(wire)?),
                _ => {}
            }
            Ok(())
        }
    }

    impl Decode for AnyValue {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            use any_value::Value;
            self.value = Some(match number {
                1 => Value::Str(string(wire)?),
                2 => Value::Bool(int64(wire)? != 0),
                3 => Value::Int(int64(wire)?),
                4 => Value::Double(double(wire)?),
                5 => Value::Array(message(wire)?),
                _ => return Ok(()),
            });
            Ok(())
        }
    }

    impl Decode for ArrayValue {
        fn field(&mut self, number: u64, wire: Wire<'_>) -> Result<()> {
            if number == 1 {
                self.values.push(message(wire)?);
            }
            Ok(())
        }
    }
}

use proto::any_value::Value as Any;

/// The decoder is as strict as a generated one: what it refuses, and what it skips.
#[test]
fn the_receivers_decoder_refuses_what_a_generated_decoder_refuses() {
    use proto::Decode as _;
    // Span { name: "s" (5), start_time_unix_nano: 1 (7, fixed64) }, then an unknown field 99.
    let mut span = vec![0x2a, 1, b's', 0x39, 1, 0, 0, 0, 0, 0, 0, 0];
    span.extend([0x98, 0x06, 0x07]);
    let decoded = proto::Span::decode(&span).expect("decodes");
    assert_eq!((decoded.name.as_str(), decoded.start_time_unix_nano), ("s", 1));
    // The start time as a varint, not fixed64.
    assert!(proto::Span::decode(&[0x38, 1]).is_err());
    // A name longer than what is left, a name that is not UTF-8, a varint cut off.
    assert!(proto::Span::decode(&[0x2a, 5, b's']).is_err());
    assert!(proto::Span::decode(&[0x2a, 1, 0xff]).is_err());
    assert!(proto::Span::decode(&[0x30, 0x80]).is_err());
    // kind = -1 in ten bytes, sign-extended; and a varint past 64 bits.
    let minus_one = [0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    assert_eq!(proto::Span::decode(&minus_one).map(|s| s.kind), Ok(-1));
    let mut past = minus_one;
    past[10] = 0x02;
    assert!(proto::Span::decode(&past).is_err());
    // A group (wire type 3) and field number 0.
    assert!(proto::Span::decode(&[0x0b]).is_err());
    assert!(proto::Span::decode(&[0x02, 0]).is_err());
}

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
    use proto::Decode as _;
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
        let request = match proto::ExportTraceServiceRequest::decode(&body) {
            Ok(request) => request,
            Err(why) => panic!("the export does not decode as an ExportTraceServiceRequest: {why}"),
        };
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
