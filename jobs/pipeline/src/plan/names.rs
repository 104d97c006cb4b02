//! Validated string newtypes of the plan (`plans/README.md` §"Names"): `RepoId`, `CommitSha`,
//! `UnitName`, `BranchName`, `Dtype`, `RootFileName`, `RepoPath`.
//!
//! Each has a `new` that returns the reason for a refusal (which the plan loader turns into a
//! `file:line: key` error), and a `Deserialize` that calls `new` through
//! `serde::de::Error::custom`, so toml keeps the span of the offending value (cargo's
//! `str_newtype!` idea). Rules for repository ids and revisions follow seed 000 ("Tokenizer and
//! configuration identity": canonical repo id, exactly 40 lowercase hex).

use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

macro_rules! str_newtype {
    ($(#[$m:meta])* $name:ident, $check:path) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validate `s`; the error is a lower-case sentence naming the value and the fix.
            pub fn new(s: &str) -> Result<Self, String> {
                $check(s).map(|()| Self(s.to_owned()))
            }
            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}

str_newtype!(
    /// A canonical Hugging Face repository id `owner/name`.
    RepoId,
    check_repo_id
);
str_newtype!(
    /// An immutable commit: exactly 40 lowercase hexadecimal characters, never a branch name.
    CommitSha,
    check_commit
);
str_newtype!(
    /// A unit (artifact directory) name: `[a-z0-9][a-z0-9_-]*`, at most 64 characters.
    UnitName,
    check_unit_name
);
str_newtype!(
    /// A git branch name for the public branch of the target repository.
    BranchName,
    check_branch
);
str_newtype!(
    /// A safetensors dtype string as written in a header (`F8_E4M3`, `BF16`, …).
    Dtype,
    check_dtype
);
str_newtype!(
    /// A canonical repository-root file name (seed 000: letters, digits, `-`, `.`, `_`).
    RootFileName,
    check_root_file
);
str_newtype!(
    /// A relative path inside an upstream repository (`tokenizer/tokenizer.json`).
    RepoPath,
    check_repo_path
);

/// Longest unit name: unit names become directory names and journal file names.
const UNIT_NAME_MAX: usize = 64;

fn check_repo_id(s: &str) -> Result<(), String> {
    names::check_repo_id(s).map_err(|e| {
        format!(
            "`{s}` is not a canonical repository id: {e}; write the hub id `owner/name` (letters, \
             digits, `-`, `_`, `.`)"
        )
    })
}

fn check_commit(s: &str) -> Result<(), String> {
    let pin =
        "pin the full commit sha (40 lowercase hex digits) it points at, e.g. with `minirun-plan \
         pin` or from the hub's `/api/models/<repo>/revision/<branch>`";
    if names::check_revision(s).is_ok() {
        return Ok(());
    }
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "`{s}` is a branch or tag name, not a commit; a plan must be replayable: {pin}"
        ));
    }
    if s.len() != 40 {
        return Err(format!(
            "`{s}` has {} hex digits; a commit sha has exactly 40 (abbreviated shas are refused): {pin}",
            s.len()
        ));
    }
    Err(format!(
        "`{s}` has uppercase hex digits; write it as `{}`",
        s.to_ascii_lowercase()
    ))
}

fn check_unit_name(s: &str) -> Result<(), String> {
    let ok_first = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok_rest = s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok_first || !ok_rest || s.len() > UNIT_NAME_MAX {
        return Err(format!(
            "`{s}` is not a unit name: use lowercase letters, digits, `-` and `_`, starting with a \
             letter or digit, at most {UNIT_NAME_MAX} characters (e.g. `layers07`, `dit-block-00`)"
        ));
    }
    Ok(())
}

fn check_branch(s: &str) -> Result<(), String> {
    if let Err(e) = names::check_ref_name(s) {
        return Err(format!(
            "`{s}` is not a valid git branch name: {e}; use e.g. `main` (no spaces, `..`, `~^:?*[\\`)"
        ));
    }
    if s.starts_with("candidate-") {
        return Err(format!(
            "`{s}`: branches named `candidate-*` are reserved for candidate uploads; publish to \
             another branch (e.g. `main`)"
        ));
    }
    Ok(())
}

fn check_dtype(s: &str) -> Result<(), String> {
    use artifact::dtype::{Dtype, ALL};
    s.parse::<Dtype>().map(|_| ()).map_err(|_| {
        let known: Vec<&str> = ALL.iter().map(|d| d.as_str()).collect();
        format!(
            "`{s}` is not a safetensors dtype; use one of {}",
            known.join(", ")
        )
    })
}

fn check_root_file(s: &str) -> Result<(), String> {
    names::check_root_file_name(s).map_err(|e| {
        format!(
            "`{s}` is not a canonical root file name: {e} (no `/`, not `.` or `..`, only \
             letters, digits, `-`, `.` and `_`)"
        )
    })
}

fn check_repo_path(s: &str) -> Result<(), String> {
    names::check_repo_path(s).map_err(|e| {
        format!(
            "`{s}` is not a relative repository path: {e} (`/`-separated, no empty, `.` or `..` \
             components, no `\\`)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids() {
        for ok in [
            "deepseek-ai/DeepSeek-V4-Flash",
            "a/b",
            "x_1/y.z",
            "minirun/K-minirun",
            "_org/x-minirun",
        ] {
            assert!(RepoId::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "noslash", "a/b/c", "/b", "a/", "-a/b", "a/b-", "a--b/c", "a/b..c", "a/b.git",
            "a b/c", "a/ü", "a/_b-",
        ] {
            assert!(RepoId::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commits() {
        let good = "60d8d70770c6776ff598c94bb586a859a38244f1";
        assert!(CommitSha::new(good).is_ok());
        let e = CommitSha::new("main").unwrap_err();
        assert!(e.contains("branch") && e.contains("pin"), "{e}");
        let e = CommitSha::new(&good.to_uppercase()).unwrap_err();
        assert!(e.contains("uppercase") && e.contains(good), "{e}");
        let e = CommitSha::new(&good[..39]).unwrap_err();
        assert!(e.contains("39 hex digits"), "{e}");
        assert!(CommitSha::new("").is_err());
    }

    #[test]
    fn unit_names_branches_files() {
        assert!(UnitName::new("layers00").is_ok());
        assert!(UnitName::new("dit-block-00").is_ok());
        for bad in ["", "Layers", "-x", "a/b", "a.b", &"x".repeat(65)] {
            assert!(UnitName::new(bad).is_err(), "{bad}");
        }
        assert!(BranchName::new("main").is_ok());
        assert!(BranchName::new("release/v1").is_ok());
        for bad in ["", "a..b", "-x", "x.lock", "a b", "candidate-123", "a:b"] {
            assert!(BranchName::new(bad).is_err(), "{bad}");
        }
        assert!(RootFileName::new("tokenizer.json").is_ok());
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(RootFileName::new(bad).is_err(), "{bad}");
        }
        assert!(RepoPath::new("tokenizer/tokenizer.json").is_ok());
        for bad in ["", "/a", "a//b", "a/../b", "a\\b", "./a"] {
            assert!(RepoPath::new(bad).is_err(), "{bad}");
        }
        assert!(Dtype::new("F8_E4M3").is_ok());
        assert!(Dtype::new("f8_e4m3").is_err());
    }
}
