//! `minirun-run`: see `runner::run` and docs/runner.md.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(runner::run::main_with(std::env::args_os()))
}
