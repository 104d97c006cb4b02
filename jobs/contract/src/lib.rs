//! The command-line contract every `minirun-*` binary shares (docs/cli.md), in one place that both
//! the pipeline's binaries and the runner's (`minirun-run`, `minirun-serve`) use: the exit-code
//! table and the one rendering of a failure — `error: …`, then each cause on its own
//! `  caused by: …` line, then an optional `hint: …`.
//!
//! Exit codes (README.md): 0 success, 1 failure or refusal, 2 INCONCLUSIVE and 77 SKIP only under
//! the gate contract, 64 usage error.

use std::error::Error as StdError;
use std::process::ExitCode;

/// The exit-code table, one for every binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success (gate: PASS).
    Ok,
    /// 1: failure or refusal (gate: FAIL).
    Failure,
    /// 2: INCONCLUSIVE — only under the gate contract.
    Inconclusive,
    /// 77: SKIP — only under the gate contract.
    Skip,
    /// 64: usage error (EX_USAGE).
    Usage,
}

impl Exit {
    /// The numeric process exit status.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Inconclusive => 2,
            Exit::Skip => 77,
            Exit::Usage => 64,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The text [`print_error`] prints: `error: {err}`, each source as `  caused by: {source}`, and
/// `hint: {hint}` when there is one. A source whose text the lines so far already hold (an error
/// that names its cause in its own message, as the runner's do) is not repeated.
pub fn render_error(err: &dyn StdError, hint: Option<String>) -> String {
    let mut out = format!("error: {err}");
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(&format!("\n  caused by: {text}"));
        }
        source = s.source();
    }
    if let Some(h) = hint {
        out.push_str(&format!("\nhint: {h}"));
    }
    out
}

/// Print [`render_error`] on stderr.
pub fn print_error(err: &dyn StdError, hint: Option<String>) {
    eprintln!("{}", render_error(err, hint));
}

pub mod generate;

/// Parse `T` from the process arguments, mapping clap's failures to exit 64 (help and version
/// requests print and exit 0; `--man` and `--completions SHELL` print the man page or a completion script).
pub fn parse_args<T: clap::Parser>() -> Result<T, ExitCode> {
    parse_from(std::env::args_os())
}

/// [`parse_args`] over explicit arguments (tests).
pub fn parse_from<T, I, S>(args: I) -> Result<T, ExitCode>
where
    T: clap::Parser,
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    parse_exit(args).map_err(ExitCode::from)
}

/// [`parse_from`] with the exit as the table's [`Exit`] (for a `main` that returns a number).
/// `Err` means the request is answered: help, the version, `--man` or `--completions` printed (`Exit::Ok`),
/// or a usage error shown (`Exit::Usage`).
pub fn parse_exit<T, I, S>(args: I) -> Result<T, Exit>
where
    T: clap::Parser,
    I: IntoIterator<Item = S>,
    S: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    if let Some(req) = generate::request(&args) {
        return Err(generate::write::<T>(&req, &mut std::io::stdout().lock()));
    }
    match T::try_parse_from(args) {
        Ok(t) => Ok(t),
        Err(e) => {
            use clap::error::ErrorKind;
            // Help and version asked for are a success; help shown because a required command
            // or argument is missing is a usage error (64), like any other (docs/cli.md).
            let code = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Exit::Ok,
                _ => Exit::Usage,
            };
            // Printing can only fail on a closed stdout/stderr; nothing useful to do then.
            let _ = e.print();
            Err(code)
        }
    }
}

/// Parse a size argument (`--disk-budget`, `--split-max-size`): plain bytes or a binary suffix
/// `K`, `M`, `G`, `T` (optionally followed by `B` or `iB`): `1K` = 1024, `512M`, `100G` = 100 GiB.
/// Zero is refused. The error says what was expected; fit for clap's `value_parser`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let upper = s.trim().to_ascii_uppercase();
    let body = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B'))
        .unwrap_or(&upper);
    let (num, shift) = match body.chars().last() {
        Some('K') => (&body[..body.len() - 1], 10),
        Some('M') => (&body[..body.len() - 1], 20),
        Some('G') => (&body[..body.len() - 1], 30),
        Some('T') => (&body[..body.len() - 1], 40),
        _ => (body, 0),
    };
    let n: u64 = num.parse().map_err(|_| {
        format!("size {s:?} is not a number of bytes or a number with a K/M/G/T suffix (e.g. 1K, 512M, 2G)")
    })?;
    let v = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} overflows 64 bits"))?;
    if v == 0 {
        return Err(format!("size {s:?} must be at least 1 byte"));
    }
    Ok(v)
}

/// `--help`'s environment section of a binary that reads no environment variable.
pub const ENV_NONE: &str = "Environment: none read.";

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl StdError for E {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn StdError + 'static))
        }
    }

    #[test]
    fn the_chain_then_the_hint() {
        let e = E(
            "top",
            Some(Box::new(E("middle", Some(Box::new(E("root", None)))))),
        );
        assert_eq!(
            render_error(&e, Some("do this".into())),
            "error: top\n  caused by: middle\n  caused by: root\nhint: do this"
        );
        assert_eq!(render_error(&E("alone", None), None), "error: alone");
        // a cause the message already names is not repeated; its own causes still are
        let e = E(
            "open `m.gguf`: gone",
            Some(Box::new(E("gone", Some(Box::new(E("deeper", None)))))),
        );
        assert_eq!(
            render_error(&e, None),
            "error: open `m.gguf`: gone\n  caused by: deeper"
        );
    }

    #[test]
    fn sizes_take_binary_suffixes_and_refuse_zero_and_overflow() {
        for (s, v) in [
            ("4096", 4096),
            ("1K", 1024),
            ("512m", 512 << 20),
            ("100G", 100 << 30),
            ("100GB", 100 << 30),
            ("2TiB", 2 << 40),
            (" 3k ", 3072),
        ] {
            assert_eq!(parse_size(s), Ok(v), "{s}");
        }
        for bad in ["", "G", "1.5G", "-1", "0", "0G", "x1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999T")
            .unwrap_err()
            .contains("overflows"));
    }

    #[test]
    fn the_table() {
        let codes: Vec<u8> = [
            Exit::Ok,
            Exit::Failure,
            Exit::Inconclusive,
            Exit::Skip,
            Exit::Usage,
        ]
        .iter()
        .map(|e| e.code())
        .collect();
        assert_eq!(codes, [0, 1, 2, 77, 64]);
    }
}
