//! Turning captured bytes into text for JSON outputs, without lying about what was there.
//!
//! A capped capture can end in the middle of a UTF-8 sequence; that cut is ours, so the partial
//! character is dropped rather than reported as invalid text. Anything else that is not UTF-8 is
//! decoded lossily and flagged.

/// Decoded text and whether any bytes had to be replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub text: String,
    pub lossy: bool,
}

/// Decode `bytes`; `cut` says the capture was truncated at its end.
pub(crate) fn decode(bytes: Vec<u8>, cut: bool) -> Decoded {
    match String::from_utf8(bytes) {
        Ok(text) => Decoded { text, lossy: false },
        Err(err) => {
            let utf8 = err.utf8_error();
            let mut bytes = err.into_bytes();
            // `error_len() == None` means "valid up to here, then an incomplete sequence at the
            // very end": exactly what a cut through a character looks like.
            if cut && utf8.error_len().is_none() {
                bytes.truncate(utf8.valid_up_to());
                match String::from_utf8(bytes) {
                    Ok(text) => Decoded { text, lossy: false },
                    Err(err) => lossy(&err.into_bytes()),
                }
            } else {
                lossy(&bytes)
            }
        }
    }
}

fn lossy(bytes: &[u8]) -> Decoded {
    Decoded { text: String::from_utf8_lossy(bytes).into_owned(), lossy: true }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
