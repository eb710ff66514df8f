//! How a blob is kept: raw, or deflated when that saves at least a tenth of it. Conversations
//! (JSON messages) and source files shrink three to five times; already-compressed content is
//! left as it is. The blob's key is always the sha256 of its raw content, so deduplication does
//! not depend on the encoding.

use std::borrow::Cow;

/// Blobs smaller than this are kept raw: deflate's header would eat the saving.
const MIN_BYTES: usize = 256;

/// The bytes to store and their encoding (`None`: raw).
pub(crate) fn encode(content: &[u8]) -> (Cow<'_, [u8]>, Option<&'static str>) {
    if content.len() < MIN_BYTES {
        return (Cow::Borrowed(content), None);
    }
    let packed = miniz_oxide::deflate::compress_to_vec(content, 6);
    if packed.len() < content.len() - content.len() / 10 {
        (Cow::Owned(packed), Some("deflate"))
    } else {
        (Cow::Borrowed(content), None)
    }
}

/// The raw content of a stored blob.
pub(crate) fn decode(stored: Vec<u8>, encoding: Option<&str>) -> Result<Vec<u8>, String> {
    match encoding {
        None => Ok(stored),
        Some("deflate") => miniz_oxide::inflate::decompress_to_vec_with_limit(&stored, 1 << 30)
            .map_err(|e| format!("cannot be inflated ({e:?}): the journal is damaged")),
        Some(other) => Err(format!("unknown encoding {other:?} (a newer pev wrote it?)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_deflated_and_comes_back_whole() {
        let text = "{\"role\":\"user\",\"content\":\"the same words again\"}".repeat(40);
        let (stored, encoding) = encode(text.as_bytes());
        assert_eq!(encoding, Some("deflate"));
        assert!(stored.len() * 4 < text.len(), "{} of {}", stored.len(), text.len());
        assert_eq!(decode(stored.into_owned(), encoding).unwrap(), text.as_bytes());
    }

    #[test]
    fn small_or_incompressible_content_is_kept_raw() {
        let (stored, encoding) = encode(b"short");
        assert_eq!((stored.as_ref(), encoding), (&b"short"[..], None));
        // Pseudo-random bytes do not deflate.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let (stored, encoding) = encode(&noise);
        assert_eq!(encoding, None);
        assert_eq!(stored.as_ref(), noise.as_slice());
    }

    #[test]
    fn damage_and_unknown_encodings_are_errors() {
        assert!(decode(vec![1, 2, 3], Some("deflate")).is_err());
        assert!(decode(vec![1, 2, 3], Some("zstd")).unwrap_err().contains("zstd"));
    }
}
