//! The live exporter's queue against a real HTTP receiver on 127.0.0.1: a full queue turns a
//! batch away at once (its spans wait for a later look) instead of holding the looker up, and
//! closing sends everything queued, each span once, without waiting for a timer.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::*;
use crate::span::{Kind, Status};

fn span(n: u8) -> Span {
    Span {
        trace_id: [7; 16],
        span_id: [n; 8],
        parent: Some([0; 8]),
        name: format!("step s{n}"),
        kind: Kind::Internal,
        start_ms: 1_000,
        end_ms: 2_000,
        attributes: vec![("pev.step.id".into(), format!("s{n}").into())],
        events: Vec::new(),
        status: Status::Unset,
        open: false,
    }
}

fn config(url: &str, timeout_ms: u64) -> OtlpConfig {
    let mut config = OtlpConfig::for_url(url).unwrap();
    config.timeout = Duration::from_millis(timeout_ms);
    config
}

/// A varint at the start of `b`, consumed.
fn varint(b: &mut &[u8]) -> u64 {
    let mut value = 0;
    for shift in (0..64).step_by(7) {
        let byte = b[0];
        *b = &b[1..];
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

/// The length-delimited fields of a protobuf message with field number `tag`.
fn fields(mut b: &[u8], tag: u64) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        match key & 7 {
            0 => {
                varint(&mut b);
            }
            1 => b = &b[8..],
            5 => b = &b[4..],
            2 => {
                let n = usize::try_from(varint(&mut b)).unwrap();
                if key >> 3 == tag {
                    out.push(&b[..n]);
                }
                b = &b[n..];
            }
            wire => panic!("wire type {wire}"),
        }
    }
    out
}

/// The span ids of an `ExportTraceServiceRequest` (resource_spans 1 → scope_spans 2 → spans 2
/// → span_id 2).
fn span_ids(body: &[u8]) -> Vec<Vec<u8>> {
    let mut ids = Vec::new();
    for rs in fields(body, 1) {
        for ss in fields(rs, 2) {
            for span in fields(ss, 2) {
                ids.extend(fields(span, 2).into_iter().map(<[u8]>::to_vec));
            }
        }
    }
    ids
}

/// The span ids of each request a receiver took.
type Requests = Arc<Mutex<Vec<Vec<Vec<u8>>>>>;

/// Answers every POST 200 and keeps the span ids of each request.
fn receiver() -> (String, Requests) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = Arc::clone(&kept);
            std::thread::spawn(move || serve(stream, &kept));
        }
    });
    (url, requests)
}

fn serve(stream: TcpStream, kept: &Requests) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end().to_ascii_lowercase();
            if header.is_empty() {
                break;
            }
            if let Some(n) = header.strip_prefix("content-length:") {
                len = n.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        kept.lock().unwrap().push(span_ids(&body));
        let _ = writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
    }
}

#[test]
fn closing_sends_everything_queued_once() {
    let (url, requests) = receiver();
    let mut queue = Queue::new(config(&url, 5_000));
    let mut offered = 0;
    for batch in 0..3u8 {
        let spans: Vec<Span> = (1..=5).map(|n| span(batch * 10 + n)).collect();
        if queue.offer(spans) {
            offered += 5;
        }
    }
    assert_eq!(offered, 15, "three batches fit in a queue of {QUEUE}");
    let started = Instant::now();
    assert_eq!(queue.close(vec![span(99)]), None);
    assert!(started.elapsed() < Duration::from_secs(2), "no timer is waited on");
    let mut ids: Vec<Vec<u8>> = requests.lock().unwrap().concat();
    assert_eq!(ids.len(), 16, "every span queued, and the last one");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 16, "each span once");
}

#[test]
fn a_queue_that_was_never_used_connects_to_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    assert_eq!(Queue::new(config(&url, 5_000)).close(Vec::new()), None);
    assert!(listener.accept().is_err(), "no connection was made");
}

#[test]
fn a_full_queue_turns_a_batch_away_at_once() {
    // A receiver that takes the connection and never answers: the sender waits on its first
    // batch until the timeout, and the queue fills.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mut queue = Queue::new(config(&url, 1_000));
    let started = Instant::now();
    let taken = (0..10u8).filter(|n| queue.offer(vec![span(n + 1)])).count();
    assert!(started.elapsed() < Duration::from_millis(500), "offering never waits");
    // The queue, and at most the one batch the sender took out of it.
    assert!(taken <= QUEUE + 1, "{taken} taken");
    assert_eq!(queue.deferred, 10 - taken as u64);
    let warning = queue.close(Vec::new()).expect("nothing was answered");
    assert!(warning.contains("no answer within 1000 ms"), "{warning}");
    drop(listener);
}
