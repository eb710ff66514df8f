//! Spans as an OTLP `ExportTraceServiceRequest` in protobuf (opentelemetry-proto,
//! `collector/trace/v1`), written by hand: the few messages pev sends do not justify a
//! code generator and its build-time dependencies. Field numbers are the proto files'; the
//! integration tests decode the output with an independent decoder (a wire-format reader of
//! their own, `crates/cli/tests/agent_http/otlp.rs`), and
//! `scripts/real-clients/otlp_receiver.py` with the official Python classes.

use crate::span::{Kind, Span, SpanEvent, Status, Value};

/// The resource and scope the spans are reported under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// `service.name` (`OTEL_SERVICE_NAME`, default `pev`).
    pub service_name: String,
    /// More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    pub attributes: Vec<(String, String)>,
}

impl Default for Resource {
    fn default() -> Self {
        Self { service_name: "pev".to_owned(), attributes: Vec::new() }
    }
}

/// The encoded request for `spans`.
pub fn export_request(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    // ResourceSpans { resource = 1; scope_spans = 2; schema_url = 3 }
    let mut res = Vec::new();
    let mut attrs = vec![("service.name".to_owned(), Value::Str(resource.service_name.clone()))];
    attrs.push(("telemetry.sdk.name".to_owned(), Value::Str("pev".to_owned())));
    attrs.push(("telemetry.sdk.language".to_owned(), Value::Str("rust".to_owned())));
    for (k, v) in &resource.attributes {
        if k != "service.name" {
            attrs.push((k.clone(), Value::Str(v.clone())));
        }
    }
    for (k, v) in &attrs {
        message(&mut res, 1, &key_value(k, v));
    }
    let mut scope = Vec::new();
    string(&mut scope, 1, "pev");
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for span in spans {
        message(&mut scope_spans, 2, &encode_span(span));
    }
    string(&mut scope_spans, 3, crate::map::SCHEMA_URL);
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &res);
    message(&mut resource_spans, 2, &scope_spans);
    string(&mut resource_spans, 3, crate::map::SCHEMA_URL);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn nanos(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

fn encode_span(span: &Span) -> Vec<u8> {
    let mut out = Vec::new();
    bytes(&mut out, 1, &span.trace_id);
    bytes(&mut out, 2, &span.span_id);
    if let Some(parent) = &span.parent {
        bytes(&mut out, 4, parent);
    }
    string(&mut out, 5, &span.name);
    let kind = match span.kind {
        Kind::Internal => 1,
        Kind::Client => 3,
    };
    varint_field(&mut out, 6, kind);
    fixed64(&mut out, 7, nanos(span.start_ms));
    fixed64(&mut out, 8, nanos(span.end_ms.max(span.start_ms)));
    for (k, v) in &span.attributes {
        message(&mut out, 9, &key_value(k, v));
    }
    for event in &span.events {
        message(&mut out, 11, &encode_event(event));
    }
    if let Status::Error(text) = &span.status {
        // Status { message = 2; code = 3 } with STATUS_CODE_ERROR = 2.
        let mut status = Vec::new();
        string(&mut status, 2, text);
        varint_field(&mut status, 3, 2);
        message(&mut out, 15, &status);
    }
    out
}

fn encode_event(event: &SpanEvent) -> Vec<u8> {
    let mut out = Vec::new();
    fixed64(&mut out, 1, nanos(event.at_ms));
    string(&mut out, 2, &event.name);
    for (k, v) in &event.attributes {
        message(&mut out, 3, &key_value(k, v));
    }
    out
}

/// KeyValue { key = 1; value = 2 (AnyValue) }
fn key_value(key: &str, value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, key);
    message(&mut out, 2, &any_value(value));
    out
}

/// AnyValue { string_value = 1; bool_value = 2; int_value = 3; double_value = 4;
/// array_value = 5 }
fn any_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        // An empty string is still set: the oneof case must be written.
        Value::Str(s) => {
            tag(&mut out, 1, LEN);
            varint(&mut out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        // The oneof's case is set even for `false` and `0`: an absent case reads as no value.
        Value::Bool(b) => {
            tag(&mut out, 2, VARINT);
            varint(&mut out, u64::from(*b));
        }
        Value::Int(i) => {
            tag(&mut out, 3, VARINT);
            varint(&mut out, *i as u64);
        }
        Value::Double(x) => {
            tag(&mut out, 4, I64);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Value::StrArray(items) => {
            // ArrayValue { values = 1 }
            let mut array = Vec::new();
            for item in items {
                message(&mut array, 1, &any_value(&Value::Str(item.clone())));
            }
            message(&mut out, 5, &array);
        }
    }
    out
}

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, n: u64) {
    if n != 0 {
        tag(out, field, VARINT);
        varint(out, n);
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, n: u64) {
    tag(out, field, I64);
    out.extend_from_slice(&n.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    if !data.is_empty() {
        tag(out, field, LEN);
        varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, encoded: &[u8]) {
    tag(out, field, LEN);
    varint(out, encoded.len() as u64);
    out.extend_from_slice(encoded);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let enc = |n: u64| {
            let mut out = Vec::new();
            varint(&mut out, n);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(1), [1]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(u64::MAX).len(), 10);
        // A negative int64 is its two's complement: ten bytes.
        assert_eq!(enc(-1i64 as u64).len(), 10);
    }

    #[test]
    fn zero_and_false_are_values_not_absences() {
        assert_eq!(any_value(&Value::Int(0)), [3 << 3, 0]);
        assert_eq!(any_value(&Value::Bool(false)), [2 << 3, 0]);
        assert_eq!(any_value(&Value::Str(String::new())), [(1 << 3) | 2, 0]);
    }

    #[test]
    fn a_tag_is_the_field_number_and_the_wire_type() {
        let mut out = Vec::new();
        fixed64(&mut out, 7, 1);
        assert_eq!(out[0], (7 << 3) | 1);
        assert_eq!(&out[1..], &1u64.to_le_bytes());
    }
}
