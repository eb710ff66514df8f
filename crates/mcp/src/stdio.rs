//! The stdio transport: one JSON-RPC message per line on stdin, one answer per line on stdout,
//! nothing else on stdout (diagnostics go to the caller's stderr). Messages are answered in
//! order, one at a time; the server ends when stdin closes.

use std::io::{BufRead, Write};

use crate::McpError;
use crate::rpc::Server;

/// The longest line read (a plan of 50 steps with assertions is far smaller).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// Serves `input` until it ends. Errors are the transport's (a closed stdout).
pub fn serve(
    server: &Server,
    input: impl BufRead,
    mut output: impl Write,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), McpError> {
    let mut input = input;
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX).saturating_add(1);
        let read = std::io::Read::take(&mut input, limit)
            .read_until(b'\n', &mut line)
            .map_err(|e| McpError(format!("cannot read stdin: {e}")))?;
        if read == 0 {
            return Ok(());
        }
        let answer = if line.len() > MAX_LINE && !line.ends_with(b"\n") {
            // Skip the rest of the oversized message, a buffer at a time, then say why it was
            // dropped.
            skip_line(&mut input);
            Some(oversized())
        } else {
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            runtime.block_on(server.handle_text(text))
        };
        if let Some(answer) = answer {
            output
                .write_all(answer.as_bytes())
                .and_then(|()| output.write_all(b"\n"))
                .and_then(|()| output.flush())
                .map_err(|e| McpError(format!("cannot write stdout: {e}")))?;
        }
    }
}

fn skip_line(input: &mut impl BufRead) {
    loop {
        let (consumed, done) = match input.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(buf) => match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            },
        };
        input.consume(consumed);
        if done {
            return;
        }
    }
}

fn oversized() -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": crate::rpc::INVALID_REQUEST, "message": format!("message longer than {MAX_LINE} bytes")},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_oversized_line_is_skipped_without_holding_it() {
        let mut input = std::io::BufReader::with_capacity(
            16,
            &b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nnext\n"[..],
        );
        super::skip_line(&mut input);
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut input, &mut rest).unwrap();
        assert_eq!(rest, "next\n");
    }
}
