//! `minirun-serve`: see `runner::serve` and docs/runner.md "minirun-serve".

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(runner::serve::main_with(std::env::args_os()))
}
