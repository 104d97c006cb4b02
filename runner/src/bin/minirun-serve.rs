//! `minirun-serve`: see `runner::serve` and docs/runner.md "minirun-serve".

fn main() -> std::process::ExitCode {
    // First, before any thread exists (it may set an environment variable).
    runner::open::quiet_headless();
    std::process::ExitCode::from(runner::serve::main_with(std::env::args_os()))
}
