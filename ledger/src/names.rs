//! Canonical names inside the ledger: stage names, unit names and unit-relative paths.
//!
//! A journal is found by `(stage, unit)` and names files relative to a root; a name that could
//! escape the ledger directory or the root (`..`, an absolute path, a separator in a unit name)
//! is refused before it touches the filesystem. Rules: `docs/ledger.md` ("Names").

use crate::{LedgerError, Result};

/// Longest stage or unit name, in bytes: a file name must fit `NAME_MAX` (255) with the
/// `.json`/`.lock` suffix and the temp-file decoration.
const MAX_NAME: usize = 128;
/// Longest relative path, in bytes (`PATH_MAX` is 4096; a journal names files under a root).
const MAX_REL_PATH: usize = 1024;

fn component_error(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name == "." || name == ".." {
        return Some("`.` and `..` are not names");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Some("only ASCII letters, digits, `-`, `.` and `_` are allowed");
    }
    None
}

/// Checks a stage name: lower-case ASCII letters, digits and `-`, 1 to 128 bytes
/// (`fetch`, `repack`, `candidate-upload`).
pub fn check_stage_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME {
        Some("it is longer than 128 bytes")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("only lower-case ASCII letters, digits and `-` are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LedgerError::BadName {
            what: "stage name",
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a unit name: one path component of ASCII letters, digits, `-`, `.` and `_`, not `.`
/// or `..`, not starting with `.` (the ledger's temp files do), 1 to 128 bytes.
pub fn check_unit_name(name: &str) -> Result<()> {
    let reason = component_error(name)
        .or_else(|| (name.len() > MAX_NAME).then_some("it is longer than 128 bytes"))
        .or_else(|| {
            name.starts_with('.')
                .then_some("it starts with `.`, which the ledger reserves for temp files")
        });
    match reason {
        Some(reason) => Err(LedgerError::BadName {
            what: "unit name",
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks a path relative to a root: components separated by `/`, each a canonical name
/// (ASCII letters, digits, `-`, `.`, `_`; not `.` or `..`); no leading or trailing `/`, no empty
/// component; at most 1024 bytes.
pub fn check_rel_path(path: &str) -> Result<()> {
    let reason = if path.is_empty() {
        Some("it is empty")
    } else if path.len() > MAX_REL_PATH {
        Some("it is longer than 1024 bytes")
    } else if path.starts_with('/') {
        Some("it is absolute")
    } else {
        path.split('/').find_map(component_error)
    };
    match reason {
        Some(reason) => Err(LedgerError::BadName {
            what: "relative path",
            name: path.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names() {
        assert!(check_stage_name("fetch").is_ok());
        assert!(check_stage_name("candidate-upload").is_ok());
        for bad in ["", "Fetch", "fe/tch", "..", "a b", &"x".repeat(129)] {
            assert!(check_stage_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unit_names() {
        for good in ["layers00", "global00", "dit-block-07", "te_layer.1"] {
            assert!(check_unit_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a\\b", "läyer", "a b"] {
            assert!(check_unit_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rel_paths() {
        for good in ["a", "layers00/attn.wq.mnt", "x/y/z.bin", ".gitattributes"] {
            assert!(check_rel_path(good).is_ok(), "{good}");
        }
        for bad in [
            "", "/abs", "a/../b", "a//b", "a/", "./a", "..", "a/./b", "a\\b",
        ] {
            assert!(check_rel_path(bad).is_err(), "{bad:?}");
        }
    }
}
