//! Server-sent events, parsed incrementally: bytes arrive in chunks that may split a line, a
//! UTF-8 character or an event anywhere, and complete events come out.
//!
//! The format (WHATWG HTML, "server-sent events"): lines end in LF, CR or CRLF; `event:` sets the
//! type, `data:` lines are joined with LF, a blank line dispatches, lines starting with `:` are
//! comments, one space after the colon is dropped.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; empty when the server sent none (the spec's "message").
    pub event: String,
    pub data: String,
}

/// Feeds bytes in, takes events out.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The last byte seen was CR (so a following LF is part of the same line end).
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `chunk` and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(&mut out);
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    /// Whether bytes of an unfinished event are pending (a stream that ends here was cut).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                });
            } else {
                self.event.clear();
            }
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks.iter().flat_map(|c| p.feed(c)).collect()
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into() }
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let text = b"event: ping\ndata: {}\n\nevent: delta\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: comment\ndata: x\n\n";
        let want = vec![ev("ping", "{}"), ev("delta", "{\"a\":\n1}"), ev("", "x")];
        assert_eq!(all(&[text]), want);
        // Every split point, including inside CRLF.
        for i in 0..text.len() {
            let (a, b) = text.split_at(i);
            assert_eq!(all(&[a, b]), want, "split at {i}");
        }
        // One byte at a time.
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(all(&bytes), want);
    }

    #[test]
    fn a_cut_stream_leaves_a_partial_event() {
        let mut p = SseParser::new();
        assert!(p.feed(b"event: delta\ndata: {\"par").is_empty());
        assert!(p.has_partial());
        let mut q = SseParser::new();
        assert_eq!(q.feed(b"data: 1\n\n").len(), 1);
        assert!(!q.has_partial());
    }

    #[test]
    fn a_multibyte_character_split_across_chunks_survives() {
        let text = "data: é…\n\n".as_bytes();
        let (a, b) = text.split_at(7); // inside "é"
        assert_eq!(all(&[a, b]), vec![ev("", "é…")]);
    }
}
