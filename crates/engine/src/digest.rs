//! The hex SHA-256 the engine names file states and blobs by.

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    pev_verify::oracle::sha256_of(bytes)
}
