//! `minirun-* --man` and `minirun-* --completions SHELL`: the man page and the shell completions of
//! a binary, generated from its clap definition (`clap_mangen`, `clap_complete`), so they cannot
//! drift from `--help`. Asked for as the only arguments (`minirun-fetch --completions bash`), before
//! clap parses anything, so every binary has them whatever its own flags (the demo's `--generate N`
//! stays its own); the wheel and `ci/dist/build.sh` install what they write (docs/install.md).

use std::ffi::OsString;
use std::io::Write;
use std::str::FromStr;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::Exit;

/// The shells `--completions` writes a script for.
pub const SHELLS: &[&str] = &["bash", "zsh", "fish", "powershell", "elvish"];

/// The flag that writes the roff man page.
pub const MAN: &str = "--man";

/// The flag that writes a completion script.
pub const COMPLETIONS: &str = "--completions";

/// What the arguments ask to be generated, when the first one is `--man` or `--completions`.
#[derive(Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// `prog --man`.
    Man,
    /// `prog --completions SHELL` (the shell not yet checked).
    Completions(&'a OsString),
    /// One of the two flags with a missing operand or extra arguments: a usage error.
    Malformed,
}

/// The request the arguments make, if any.
pub fn request(args: &[OsString]) -> Option<Request<'_>> {
    let first = args.get(1)?;
    Some(match (args.len(), args.get(2)) {
        (2, _) if first == MAN => Request::Man,
        (3, Some(shell)) if first == COMPLETIONS => Request::Completions(shell),
        _ if first == MAN || first == COMPLETIONS => Request::Malformed,
        _ => return None,
    })
}

/// Write what `req` asks for `T` to `out`. An unknown shell is a usage error naming the known
/// ones; a write that fails (a closed pipe) is a failure.
pub fn write<T: CommandFactory>(req: &Request<'_>, out: &mut dyn Write) -> Exit {
    let mut cmd = T::command();
    let written = match req {
        Request::Man => clap_mangen::Man::new(cmd).render(out),
        Request::Completions(shell) => {
            let known = shell.to_str().filter(|s| SHELLS.contains(s));
            let Some(shell) = known.and_then(|s| Shell::from_str(s).ok()) else {
                let asked = shell.to_string_lossy();
                eprintln!(
                    "error: {COMPLETIONS}: unknown shell `{asked}`; one of: {}",
                    SHELLS.join(", ")
                );
                return Exit::Usage;
            };
            let name = cmd.get_name().to_owned();
            clap_complete::generate(shell, &mut cmd, name, out);
            Ok(())
        }
        Request::Malformed => {
            eprintln!(
                "error: usage: {MAN} | {COMPLETIONS} <{}>, alone",
                SHELLS.join("|")
            );
            return Exit::Usage;
        }
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("error: writing the generated text: {e}");
            Exit::Failure
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool with a flag, an option and a subcommand, like the pipeline's binaries.
    #[derive(Debug, clap::Parser)]
    #[command(
        name = "minirun-example",
        version,
        after_help = "Environment: HF_TOKEN."
    )]
    struct Example {
        /// Print what would happen.
        #[arg(long)]
        dry_run: bool,
        /// Where the plan is.
        #[arg(long, value_name = "FILE")]
        plan: Option<String>,
        #[command(subcommand)]
        cmd: Option<Sub>,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Sub {
        /// Pin a plan.
        Pin,
    }

    fn gen(req: &Request<'_>) -> (Exit, String) {
        let mut out = Vec::new();
        let exit = write::<Example>(req, &mut out);
        (exit, String::from_utf8(out).unwrap_or_default())
    }

    fn shell(name: &str) -> (Exit, String) {
        gen(&Request::Completions(&OsString::from(name)))
    }

    #[test]
    fn only_the_flags_alone_are_requests() {
        let a = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let bash = OsString::from("bash");
        assert_eq!(request(&a(&["x", "--man"])), Some(Request::Man));
        let args = a(&["x", "--completions", "bash"]);
        assert_eq!(request(&args), Some(Request::Completions(&bash)));
        assert_eq!(
            request(&a(&["x", "--completions"])),
            Some(Request::Malformed)
        );
        assert_eq!(
            request(&a(&["x", "--man", "--json"])),
            Some(Request::Malformed)
        );
        assert_eq!(request(&a(&["x", "--plan", "--man"])), None);
        assert_eq!(request(&a(&["x", "--generate", "0"])), None);
        assert_eq!(request(&a(&["x"])), None);
    }

    #[test]
    fn the_man_page_is_the_help() {
        let (exit, man) = gen(&Request::Man);
        assert_eq!(exit, Exit::Ok);
        assert!(man.contains(".TH minirun-example 1"), "{man}");
        for needle in ["dry\\-run", "plan", "Pin a plan", "HF_TOKEN", "0.1.0"] {
            assert!(man.contains(needle), "`{needle}` missing from:\n{man}");
        }
    }

    #[test]
    fn every_shell_names_the_flags() {
        for kind in SHELLS {
            let (exit, script) = shell(kind);
            assert_eq!(exit, Exit::Ok, "{kind}");
            assert!(script.contains("minirun-example"), "{kind}: {script}");
            assert!(script.contains("dry-run"), "{kind}: {script}");
        }
        let bash = shell("bash").1;
        assert!(
            bash.contains("complete -F _minirun__example")
                && bash.ends_with("minirun-example\nfi\n"),
            "{bash}"
        );
    }

    #[test]
    fn unknown_shells_are_usage_errors() {
        assert_eq!(shell("tcsh").0, Exit::Usage);
        assert_eq!(shell("Bash").0, Exit::Usage);
        assert_eq!(gen(&Request::Malformed).0, Exit::Usage);
    }
}
