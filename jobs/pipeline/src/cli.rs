//! The command-line contract every `minirun-*` binary shares: the common stage flags, the one
//! exit-code table, and rendering of error chains (`error: …` / `  caused by: …` / `hint: …`).
//!
//! Exit codes (README.md): 0 success, 1 failure or refusal, 2 INCONCLUSIVE and 77 SKIP only under
//! the gate contract, 64 usage error. The argument parser's own exit code (clap uses 2) is mapped
//! to 64 so a typo can never read as INCONCLUSIVE.

use std::error::Error as StdError;
use std::path::PathBuf;
use std::process::ExitCode;

pub use contract::{parse_args, parse_from, parse_size, print_error, render_error, Exit, ENV_NONE};

/// Flags common to every stage binary (fetch, repack, gate, stage, candidate-upload, promote).
#[derive(Debug, Clone, clap::Args)]
pub struct StageArgs {
    /// The plan (TOML) to run.
    #[arg(long, value_name = "PLAN")]
    pub plan: PathBuf,
    /// Work directory; overrides the plan's `work_dir`.
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Validate and print what would be done (which units remain), change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print a machine-readable JSON summary on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The hub for the stages that talk to one (fetch, candidate-upload, promote); the local
/// stages (repack, gate, stage) have no such flag.
#[derive(Debug, Clone, clap::Args)]
pub struct HubArgs {
    /// Hub endpoint; else the plan's, else `HF_ENDPOINT`.
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
}

/// How long a publishing stage may wait out the hub's long rate limits (candidate-upload, promote).
#[derive(Debug, Clone, clap::Args)]
pub struct RateLimitArgs {
    /// Wait out HTTP 429 answers that ask for minutes (the Hub's hourly commit quota) up to this
    /// long in all, showing the wait; beyond it, exit 1 saying when to run again. Seconds, or
    /// `90s`, `10m`, `2h`; default `MINIRUN_RATE_LIMIT_WAIT`, else 60m.
    #[arg(long, value_name = "DURATION", value_parser = crate::patience::parse_wait)]
    pub rate_limit_wait: Option<std::time::Duration>,
}

impl RateLimitArgs {
    /// The flag, else `MINIRUN_RATE_LIMIT_WAIT`, else [`crate::patience::DEFAULT_WAIT`]; a
    /// malformed variable is a usage error naming it.
    pub fn wait(&self) -> Result<std::time::Duration, String> {
        match (
            self.rate_limit_wait,
            std::env::var(crate::patience::WAIT_VAR),
        ) {
            (Some(w), _) => Ok(w),
            (None, Ok(v)) => crate::patience::parse_wait(&v)
                .map_err(|e| format!("{}: {e}", crate::patience::WAIT_VAR)),
            (None, Err(_)) => Ok(crate::patience::DEFAULT_WAIT),
        }
    }
}

/// A usage error found after parsing (a malformed environment variable): said on stderr, exit 64.
pub fn usage_error(what: &str) -> ExitCode {
    eprintln!("error: {what}");
    Exit::Usage.into()
}

/// `--help`'s environment section of candidate-upload and promote.
pub const ENV_PUBLISH: &str = "Environment:
  HF_ENDPOINT     the hub when neither --endpoint nor the plan names one (default https://huggingface.co)
  HF_TOKEN        the access token; else the file HF_TOKEN_PATH names; else $HF_HOME/token
  HF_TOKEN_PATH   a token file
  HF_HOME         defaults to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (where `hf auth login` saves the token)
  MINIRUN_RATE_LIMIT_WAIT  --rate-limit-wait when the flag is absent (default 60m)";

/// Unit selection for the stages that work per unit (fetch, repack, gate).
#[derive(Debug, Clone, clap::Args)]
pub struct UnitArgs {
    /// Units to work on: comma-separated names or ranges (`layers00..layers09`); default all.
    #[arg(long, value_name = "SEL")]
    pub units: Option<String>,
}

/// How a long stage reports progress: nothing with `--json`, bars on a terminal, plain timed
/// lines in a log.
pub fn progress_mode(json: bool) -> crate::progress::ProgressMode {
    use crate::progress::ProgressMode;
    use std::io::IsTerminal as _;
    match (json, std::io::stderr().is_terminal()) {
        (true, _) => ProgressMode::Off,
        (false, true) => ProgressMode::Bars,
        (false, false) => ProgressMode::Lines,
    }
}

/// Write `text` to stdout; a closed pipe (`| head`) is not an error worth a panic.
pub fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// End a stage binary: print its outcome (`--json`: the summary as JSON, else its readable
/// form) and return the exit code `exit` maps it to; or print the error chain with its hint and
/// return 1.
pub fn finish<T: serde::Serialize, E: StdError + Hint + 'static>(
    stage: &str,
    version: u32,
    result: Result<T, E>,
    json: bool,
    render: impl Fn(&T) -> String,
    exit: impl Fn(&T) -> Exit,
) -> ExitCode {
    match result {
        Ok(out) => {
            if json {
                emit(
                    &(serde_json::to_string_pretty(&with_schema(stage, version, &out))
                        .unwrap_or_default()
                        + "\n"),
                );
            } else {
                emit(&render(&out));
            }
            exit(&out).into()
        }
        Err(e) => {
            let hint = match crate::space::is_full(&e) {
                true => Some(crate::space::full_hint()),
                false => e.hint(),
            };
            print_error(&e, hint);
            Exit::Failure.into()
        }
    }
}

/// A stage's outcome as its binary prints it: the `--json` summary (`Serialize`), the readable
/// text, and the exit code it maps to (0 unless the stage has an exit contract of its own, as
/// the gate's 0/1/2/77).
pub trait Report: serde::Serialize {
    /// The number in its `--json` schema name `minirun.<stage>/<VERSION>`: raised when a field
    /// changes meaning or disappears (docs/cli.md).
    const VERSION: u32 = 1;
    /// The readable form (without `--json`).
    fn text(&self) -> String;
    /// The exit code.
    fn exit_code(&self) -> Exit {
        Exit::Ok
    }
}

/// [`finish`] for a [`Report`].
pub fn finish_report<T: Report, E: StdError + Hint + 'static>(
    stage: &str,
    result: Result<T, E>,
    json: bool,
) -> ExitCode {
    finish(stage, T::VERSION, result, json, T::text, T::exit_code)
}

/// `--help`'s environment section of a binary that talks to a hub (docs/cli.md).
pub const ENV_HUB: &str = "Environment:
  HF_ENDPOINT     the hub when neither --endpoint nor the plan names one (default https://huggingface.co)
  HF_TOKEN        the access token; else the file HF_TOKEN_PATH names; else $HF_HOME/token
  HF_TOKEN_PATH   a token file
  HF_HOME         defaults to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (where `hf auth login` saves the token)";

/// `--help`'s environment section of the demo (its hub is its own, on loopback).
pub const ENV_DEMO: &str = "Environment: HF_TOKEN, HF_TOKEN_PATH, HF_HOME (as huggingface_hub: a token found there is sent to the demo's own loopback hub, which ignores it); WGPU_BACKEND (the run step's backends when --backend is not given; default Vulkan, Metal, DX12) and wgpu's other WGPU_* variables; XDG_RUNTIME_DIR (when unset, NODEVICE_SELECT=1 is set to keep Mesa's device-select layer quiet); nothing else.";

/// The report as JSON with its versioned schema name first-class:
/// `"schema": "minirun.<stage>/<version>"` (docs/cli.md). A report that is not a JSON object is
/// wrapped as `{"schema", "report"}`.
pub fn with_schema<T: serde::Serialize>(stage: &str, version: u32, out: &T) -> serde_json::Value {
    let schema = serde_json::Value::String(format!("minirun.{stage}/{version}"));
    match serde_json::to_value(out) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.insert("schema".into(), schema);
            serde_json::Value::Object(m)
        }
        Ok(other) => serde_json::json!({"schema": schema, "report": other}),
        Err(e) => serde_json::json!({"schema": schema, "error": e.to_string()}),
    }
}

/// Join reasons for one line: the first `max`, then how many more.
pub fn join_limited<T: std::fmt::Display>(items: &[T], max: usize) -> String {
    let mut s = items
        .iter()
        .take(max)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > max {
        s.push_str(&format!("; … and {} more", items.len() - max));
    }
    s
}

/// A hint a user can act on, attached to an error type (uv's `Hint` idea).
pub trait Hint {
    /// The fix, if this error has one the user can apply.
    fn hint(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Demo {
        #[command(flatten)]
        stage: StageArgs,
        #[command(flatten)]
        hub: HubArgs,
        #[command(flatten)]
        units: UnitArgs,
    }

    #[derive(Debug, Parser)]
    struct Local {
        #[command(flatten)]
        stage: StageArgs,
    }

    #[test]
    fn unknown_flag_is_usage_64_not_inconclusive() {
        let r = parse_from::<Demo, _, _>(["x", "--plan", "p.toml", "--bogus"]);
        assert_eq!(r.unwrap_err(), ExitCode::from(64));
    }

    #[test]
    fn missing_plan_is_usage_64() {
        let r = parse_from::<Demo, _, _>(["x", "--dry-run"]);
        assert_eq!(r.unwrap_err(), ExitCode::from(64));
    }

    #[test]
    fn common_flags_parse() {
        let d = parse_from::<Demo, _, _>([
            "x",
            "--plan",
            "p.toml",
            "--work-dir",
            "w",
            "--endpoint",
            "http://127.0.0.1:1",
            "--dry-run",
            "--json",
            "--units",
            "layers00..layers02",
        ])
        .unwrap();
        assert!(d.stage.dry_run && d.stage.json);
        assert_eq!(d.units.units.as_deref(), Some("layers00..layers02"));
        assert_eq!(d.stage.work_dir, Some(PathBuf::from("w")));
        assert_eq!(d.hub.endpoint.as_deref(), Some("http://127.0.0.1:1"));
    }

    #[test]
    fn local_stages_refuse_an_endpoint() {
        let r = parse_from::<Local, _, _>(["x", "--plan", "p.toml", "--endpoint", "http://h"]);
        assert_eq!(r.unwrap_err(), ExitCode::from(64));
    }

    #[test]
    fn error_chain_renders_causes_and_hint() {
        let inner = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        #[derive(Debug, thiserror::Error)]
        #[error("failed to read `plans/x.toml`")]
        struct Outer(#[source] std::io::Error);
        let text = render_error(&Outer(inner), Some("check the path".into()));
        assert_eq!(
            text,
            "error: failed to read `plans/x.toml`\n  caused by: no such file\nhint: check the path"
        );
    }
}
