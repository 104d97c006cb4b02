//! Canonical names shared by every artifact format: repository-root file names, Hugging Face
//! repository ids, immutable revisions and SHA-256 strings.
//!
//! The rules are the seed's (`../shared/seeds/000_…txt`, "Tokenizer and configuration identity"):
//! a root file name "may not contain a path separator, may not be `.` or `..`, and is restricted
//! to letters, digits, hyphen, period and underscore"; a repository id is "checked as such rather
//! than accepted as any string"; a revision is "exactly 40 lowercase hexadecimal characters". The
//! repository-id rules follow the Hub's own validator (huggingface_hub `validate_repo_id`), made
//! stricter by requiring the `owner/` part. Every decision is written down in
//! `docs/index-json.md` ("Canonical names").

/// Longest root file name, in bytes (`NAME_MAX` on Linux and macOS).
pub const MAX_FILE_NAME: usize = 255;
/// Longest repository id the Hub accepts, in bytes (owner, `/` and name together).
pub const MAX_REPO_ID: usize = 96;

/// Why a name is not canonical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("it is empty")]
    Empty,
    /// The name is longer than its limit.
    #[error("it is longer than {max} bytes")]
    TooLong {
        /// The limit in bytes.
        max: usize,
    },
    /// The name is `.` or `..`.
    #[error("`.` and `..` are not file names")]
    DotName,
    /// The name contains `/` or `\`.
    #[error("it contains a path separator")]
    Separator,
    /// The name contains a character outside its alphabet.
    #[error("it contains a character other than ASCII letters, digits, `-`, `.` and `_`")]
    BadCharacter,
    /// A repository id is not `owner/name`.
    #[error("a repository id is `owner/name` with exactly one `/`")]
    NotOwnerSlashName,
    /// A repository id part starts or ends with `-` or `.`.
    #[error("a repository id part may not start or end with `-` or `.`")]
    BadEdge,
    /// A repository id contains `--` or `..`.
    #[error("a repository id may not contain `--` or `..`")]
    DoubledPunctuation,
    /// A repository id ends with `.git`.
    #[error("a repository id may not end with `.git`")]
    GitSuffix,
    /// A revision is not 40 characters.
    #[error("a revision is exactly 40 characters (an immutable commit), found {found}")]
    RevisionLength {
        /// The length found.
        found: usize,
    },
    /// A revision contains a character other than `0-9a-f`.
    #[error("a revision is lower-case hex (an immutable commit, never a branch name)")]
    RevisionNotLowerHex,
    /// A digest is not 64 characters.
    #[error("a sha256 is exactly 64 hex characters, found {found}")]
    Sha256Length {
        /// The length found.
        found: usize,
    },
    /// A digest contains a non-hex character.
    #[error("a sha256 is hexadecimal")]
    Sha256NotHex,
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')
}

/// Checks a canonical repository-root file name: 1–255 bytes of ASCII letters, digits, `-`, `.`
/// and `_`; no `/` or `\`; not `.` or `..`. (`tokenizer.json`, `LICENSE`, `config.json`.)
pub fn check_root_file_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.len() > MAX_FILE_NAME {
        return Err(NameError::TooLong { max: MAX_FILE_NAME });
    }
    if name.contains(['/', '\\']) {
        return Err(NameError::Separator);
    }
    if name == "." || name == ".." {
        return Err(NameError::DotName);
    }
    if !name.bytes().all(is_name_byte) {
        return Err(NameError::BadCharacter);
    }
    Ok(())
}

/// Checks a canonical Hugging Face repository id: `owner/name`, at most 96 bytes, each part made
/// of ASCII letters, digits, `-`, `.` and `_`, not starting or ending with `-` or `.`, no `--` or
/// `..` anywhere, not ending with `.git`.
pub fn check_repo_id(id: &str) -> Result<(), NameError> {
    if id.is_empty() {
        return Err(NameError::Empty);
    }
    if id.len() > MAX_REPO_ID {
        return Err(NameError::TooLong { max: MAX_REPO_ID });
    }
    let mut parts = id.split('/');
    let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(NameError::NotOwnerSlashName);
    };
    for part in [owner, name] {
        if part.is_empty() {
            return Err(NameError::NotOwnerSlashName);
        }
        if !part.bytes().all(is_name_byte) {
            return Err(NameError::BadCharacter);
        }
        if part.starts_with(['-', '.']) || part.ends_with(['-', '.']) {
            return Err(NameError::BadEdge);
        }
    }
    if id.contains("--") || id.contains("..") {
        return Err(NameError::DoubledPunctuation);
    }
    if id.ends_with(".git") {
        return Err(NameError::GitSuffix);
    }
    Ok(())
}

/// Checks an immutable revision: exactly 40 lower-case hex characters.
pub fn check_revision(rev: &str) -> Result<(), NameError> {
    if rev.len() != 40 {
        return Err(NameError::RevisionLength { found: rev.len() });
    }
    if !rev.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(NameError::RevisionNotLowerHex);
    }
    Ok(())
}

/// Checks a SHA-256 string: exactly 64 hex characters (either case, as the seed says
/// "hexadecimal"; writers emit lower case).
pub fn check_sha256(s: &str) -> Result<(), NameError> {
    if s.len() != 64 {
        return Err(NameError::Sha256Length { found: s.len() });
    }
    if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(NameError::Sha256NotHex);
    }
    Ok(())
}

/// Checks a SHA-256 string in the lower-case form Minirun writes (manifests).
pub fn check_sha256_lower(s: &str) -> Result<(), NameError> {
    check_sha256(s)?;
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(NameError::Sha256NotHex);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_file_names() {
        for ok in [
            "tokenizer.json",
            "LICENSE",
            "config.json",
            "a",
            ".gitattributes",
            "x_y-z.1",
        ] {
            assert_eq!(check_root_file_name(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_root_file_name(""), Err(NameError::Empty));
        assert_eq!(check_root_file_name("."), Err(NameError::DotName));
        assert_eq!(check_root_file_name(".."), Err(NameError::DotName));
        assert_eq!(check_root_file_name("a/b"), Err(NameError::Separator));
        assert_eq!(check_root_file_name("a\\b"), Err(NameError::Separator));
        assert_eq!(check_root_file_name("/etc"), Err(NameError::Separator));
        for bad in ["a b", "tök.json", "a:b", "a\0b", "a\nb", "x+y"] {
            assert_eq!(
                check_root_file_name(bad),
                Err(NameError::BadCharacter),
                "{bad:?}"
            );
        }
        assert!(check_root_file_name(&"a".repeat(255)).is_ok());
        assert_eq!(
            check_root_file_name(&"a".repeat(256)),
            Err(NameError::TooLong { max: 255 })
        );
    }

    #[test]
    fn repo_ids() {
        for ok in [
            "deepseek-ai/DeepSeek-V4-Flash",
            "moonshotai/Kimi-K3",
            "nanguoyu/MiniMax-H3-minirun",
            "a/b",
            "org_1/model.v2",
        ] {
            assert_eq!(check_repo_id(ok), Ok(()), "{ok}");
        }
        let cases = [
            ("", NameError::Empty),
            ("gpt2", NameError::NotOwnerSlashName),
            ("a/b/c", NameError::NotOwnerSlashName),
            ("/b", NameError::NotOwnerSlashName),
            ("a/", NameError::NotOwnerSlashName),
            ("a/b c", NameError::BadCharacter),
            ("a/-b", NameError::BadEdge),
            ("a./b", NameError::BadEdge),
            ("a/b--c", NameError::DoubledPunctuation),
            ("a/b..c", NameError::DoubledPunctuation),
            ("a/b.git", NameError::GitSuffix),
            ("https://hf.co/a/b", NameError::NotOwnerSlashName),
        ];
        for (bad, want) in cases {
            assert_eq!(check_repo_id(bad), Err(want), "{bad:?}");
        }
        assert_eq!(
            check_repo_id(&format!("o/{}", "n".repeat(95))),
            Err(NameError::TooLong { max: 96 })
        );
    }

    #[test]
    fn revisions() {
        assert!(check_revision("60d8d70770c6776ff598c94bb586a859a38244f1").is_ok());
        assert_eq!(
            check_revision("main"),
            Err(NameError::RevisionLength { found: 4 })
        );
        assert_eq!(
            check_revision("60D8D70770C6776FF598C94BB586A859A38244F1"),
            Err(NameError::RevisionNotLowerHex)
        );
        assert_eq!(
            check_revision("60d8d70770c6776ff598c94bb586a859a38244fg"),
            Err(NameError::RevisionNotLowerHex)
        );
    }

    #[test]
    fn digests() {
        let d = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert!(check_sha256(d).is_ok());
        assert!(check_sha256(&d.to_uppercase()).is_ok());
        assert!(check_sha256_lower(&d.to_uppercase()).is_err());
        assert_eq!(
            check_sha256(&d[1..]),
            Err(NameError::Sha256Length { found: 63 })
        );
        assert_eq!(
            check_sha256(&format!("{}g", &d[1..])),
            Err(NameError::Sha256NotHex)
        );
    }
}
