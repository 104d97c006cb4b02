//! `minirun-hub serve | import`: the embedded file-backed hub server (docs/hub.md). Thin: the
//! command line is `hub::server::tool`, the server `hub::server`.
use std::process::ExitCode;

use hub::server::tool::{self, Cli};
use pipeline::cli::{parse_args, print_error, Exit};

#[tokio::main]
async fn main() -> ExitCode {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let cli: Cli = match parse_args() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match tool::run(cli).await {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            print_error(&e, None);
            Exit::Failure.into()
        }
    }
}
