//! One validator per identifier, used by every crate that meets one: the plan, the hub client
//! and server, the artifact formats, the ledger and verify. Hugging Face repository ids, commit
//! ids, SHA-256 strings, repository-root file names and repository-relative paths.
//!
//! The rules are the seed's (`../shared/seeds/000_…txt`, "Tokenizer and configuration identity"):
//! a root file name "may not contain a path separator, may not be `.` or `..`, and is restricted
//! to letters, digits, hyphen, period and underscore"; a repository id is "checked as such rather
//! than accepted as any string"; a revision is "exactly 40 lowercase hexadecimal characters". A
//! repository id follows the Hub's own rules, with `huggingface_hub`'s `validate_repo_id` as the
//! oracle, stricter in one way only: the `owner/` part is required (`tests/repo_ids.tsv` runs one
//! table of edge cases through both, `ci/checks.d/41-repo-id-oracle.sh`). Decisions:
//! `docs/names.md`.

/// Longest root file name, in bytes (`NAME_MAX` on Linux and macOS).
pub const MAX_FILE_NAME: usize = 255;
/// Longest owner or name part of a repository id, in bytes (`validate_repo_id`: `{1,96}` each).
pub const MAX_REPO_PART: usize = 96;
/// Longest repository-relative path, in bytes.
pub const MAX_REPO_PATH: usize = 1024;

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
    #[error("each part of a repository id starts and ends with a letter, digit or `_`")]
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
    /// A repository path has an empty, `.` or `..` component (or a leading or trailing `/`).
    #[error("a repository path is `/`-separated components, none empty, `.` or `..`")]
    BadPathComponent,
    /// A branch or tag name breaks a git ref rule.
    #[error("not a branch name: {reason}")]
    BadRefName {
        /// The rule broken.
        reason: &'static str,
    },
    /// A repository path contains `\` or a control character.
    #[error("a repository path may not contain `\\` or control characters")]
    BadPathCharacter,
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

/// Checks a canonical Hugging Face repository id: `owner/name` with exactly one `/`; each part
/// 1–96 bytes of ASCII letters, digits, `-`, `.` and `_`, starting and ending with a letter,
/// digit or `_`; no `--` or `..` anywhere; not ending with `.git`. These are `validate_repo_id`'s
/// rules with the owner required.
pub fn check_repo_id(id: &str) -> Result<(), NameError> {
    if id.is_empty() {
        return Err(NameError::Empty);
    }
    let mut parts = id.split('/');
    let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(NameError::NotOwnerSlashName);
    };
    for part in [owner, name] {
        check_repo_part(part)?;
    }
    if id.contains("--") || id.contains("..") {
        return Err(NameError::DoubledPunctuation);
    }
    if id.ends_with(".git") {
        return Err(NameError::GitSuffix);
    }
    Ok(())
}

fn check_repo_part(part: &str) -> Result<(), NameError> {
    if part.is_empty() {
        return Err(NameError::NotOwnerSlashName);
    }
    if part.len() > MAX_REPO_PART {
        return Err(NameError::TooLong { max: MAX_REPO_PART });
    }
    if !part.bytes().all(is_name_byte) {
        return Err(NameError::BadCharacter);
    }
    let word = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    if !word(part.as_bytes().first()) || !word(part.as_bytes().last()) {
        return Err(NameError::BadEdge);
    }
    Ok(())
}

/// Checks an immutable revision (a commit id): exactly 40 lower-case hex characters.
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

/// True for an immutable commit id ([`check_revision`]).
pub fn is_commit_id(s: &str) -> bool {
    check_revision(s).is_ok()
}

/// True for a lower-case SHA-256 string ([`check_sha256_lower`]).
pub fn is_sha256_lower(s: &str) -> bool {
    check_sha256_lower(s).is_ok()
}

/// Checks a repository-relative file path (`tokenizer/tokenizer.json`): 1–1024 bytes of
/// `/`-separated components, none empty, `.` or `..` (so no leading or trailing `/`); no `\`
/// and no control characters. Other Unicode is allowed, as on the Hub.
pub fn check_repo_path(p: &str) -> Result<(), NameError> {
    if p.is_empty() {
        return Err(NameError::Empty);
    }
    if p.len() > MAX_REPO_PATH {
        return Err(NameError::TooLong { max: MAX_REPO_PATH });
    }
    if p.chars().any(|c| c.is_control() || c == '\\') {
        return Err(NameError::BadPathCharacter);
    }
    if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(NameError::BadPathComponent);
    }
    Ok(())
}

/// Longest branch or tag name, in bytes.
pub const MAX_REF_NAME: usize = 255;

/// Checks a branch or tag name (the `<name>` of `refs/heads/<name>`), git's
/// `check-ref-format` rules as the Hub applies them: a repository path ([`check_repo_path`], so
/// no empty, `.` or `..` component) of at most 255 bytes; not starting with `-` or `refs/`; no
/// whitespace, `~^:?*[`, `@{` or `..`; not ending in `.` or `.lock`; and not 40 lower-case hex
/// digits, which would shadow a commit id.
pub fn check_ref_name(n: &str) -> Result<(), NameError> {
    if n.len() > MAX_REF_NAME {
        return Err(NameError::TooLong { max: MAX_REF_NAME });
    }
    check_repo_path(n)?;
    let reason = if n.starts_with('-') {
        Some("it starts with `-`")
    } else if n.starts_with("refs/") {
        Some("it starts with `refs/` (name the branch, not the ref)")
    } else if n.chars().any(|c| c.is_whitespace() || "~^:?*[".contains(c)) {
        Some("it contains whitespace or one of `~^:?*[`")
    } else if n.contains("@{") || n.contains("..") {
        Some("it contains `@{` or `..`")
    } else if n.ends_with('.') || n.ends_with(".lock") {
        Some("it ends with `.` or `.lock`")
    } else if is_commit_id(n) {
        Some("40 hex digits would shadow a commit id")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(NameError::BadRefName { reason }),
        None => Ok(()),
    }
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
        assert!(check_repo_id(&format!("{}/{}", "o".repeat(96), "n".repeat(96))).is_ok());
        assert_eq!(
            check_repo_id(&format!("o/{}", "n".repeat(97))),
            Err(NameError::TooLong { max: 96 })
        );
        assert_eq!(
            check_repo_id(&format!("{}/n", "o".repeat(97))),
            Err(NameError::TooLong { max: 96 })
        );
        for ok in ["_org/x-minirun", "a/_", "o/n_"] {
            assert_eq!(check_repo_id(ok), Ok(()), "{ok}");
        }
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

    #[test]
    fn repo_paths() {
        for ok in [
            "a",
            "a/b.bin",
            "tokenizer/tokenizer.json",
            "café/x",
            ".gitattributes",
        ] {
            assert_eq!(check_repo_path(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_repo_path(""), Err(NameError::Empty));
        for bad in ["/a", "a/", "a//b", "./a", "a/../b", ".."] {
            assert_eq!(
                check_repo_path(bad),
                Err(NameError::BadPathComponent),
                "{bad:?}"
            );
        }
        for bad in ["a\\b", "a\nb", "a\u{7f}b"] {
            assert_eq!(
                check_repo_path(bad),
                Err(NameError::BadPathCharacter),
                "{bad:?}"
            );
        }
        assert!(check_repo_path(&"a".repeat(1024)).is_ok());
        assert_eq!(
            check_repo_path(&"a".repeat(1025)),
            Err(NameError::TooLong { max: 1024 })
        );
    }

    #[test]
    fn ref_names() {
        for ok in ["main", "candidate-abc", "feature/x", "release/v1", "v1.0"] {
            assert_eq!(check_ref_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "refs/pr/5",
            "a b",
            "a\tb",
            "a..b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a@{1}",
            "x.lock",
            "x.",
            "/x",
            "x/",
            "a//b",
            "a/./b",
            "a\\b",
        ] {
            assert!(check_ref_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_ref_name(&"a".repeat(40)).is_err());
        assert!(check_ref_name(&"g".repeat(40)).is_ok());
        assert_eq!(
            check_ref_name(&"b".repeat(256)),
            Err(NameError::TooLong { max: 255 })
        );
    }
}
