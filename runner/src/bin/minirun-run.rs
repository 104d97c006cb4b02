//! `minirun-run`: see `runner::run` and docs/runner.md.

fn main() -> std::process::ExitCode {
    // First, before any thread exists (it may set an environment variable).
    runner::open::quiet_headless();
    std::process::ExitCode::from(runner::run::main_with(std::env::args_os()))
}
