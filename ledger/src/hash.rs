//! SHA-256 helpers: streaming file hashes with a bounded buffer, and the lower-case hex form
//! every ledger document uses.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::{LedgerError, Result};

/// A SHA-256 digest as 64 lower-case hex characters.
pub type Sha256Hex = String;

/// Read buffer for hashing: large enough to keep the disk busy, small enough to never matter.
const HASH_BUF: usize = 1 << 20;

/// Hex-encodes a SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> Sha256Hex {
    hex::encode(Sha256::digest(bytes))
}

/// Hashes a whole file in bounded memory; returns `(size, sha256)`.
pub fn sha256_file(path: &Path) -> Result<(u64, Sha256Hex)> {
    let mut f = File::open(path).map_err(LedgerError::io("open for hashing", path))?;
    hash_reader(&mut f, path)
}

pub(crate) fn hash_reader(r: &mut impl Read, path: &Path) -> Result<(u64, Sha256Hex)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; HASH_BUF];
    let mut total: u64 = 0;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LedgerError::io("read for hashing", path)(e)),
        };
        let chunk = buf.get(..n).unwrap_or(&[]);
        hasher.update(chunk);
        total = total.saturating_add(n as u64);
    }
    Ok((total, hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(names::is_sha256_lower(&sha256_hex(b"")));
        assert!(!names::is_sha256_lower(&sha256_hex(b"").to_uppercase()));
    }
}
