//! `minirun-hub`: the embedded file-backed hub server (docs/hub.md). `serve` runs it until
//! interrupted (printing `listening on http://ADDR` first); `import` mirrors a local directory as a
//! repo at an exact upstream commit id.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hub::server::{self, FaultSpec, ServerOptions};
use pipeline::cli::{parse_args, print_error, Exit};

#[derive(Parser)]
#[command(
    name = "minirun-hub",
    about = "The embedded Hugging Face Hub-compatible server"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the store at --root.
    Serve {
        #[arg(long)]
        root: PathBuf,
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// Require this file's bearer token for writes and private reads.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Redirect LFS downloads (302) to a CDN-like origin on this address.
        #[arg(long)]
        cdn_addr: Option<SocketAddr>,
        /// Fault injection, e.g. `5xx:0.2,reset:x1,delay:1@500` (docs/hub.md §5).
        #[arg(long, default_value = "")]
        faults: String,
        /// Multipart part size for LFS uploads, in bytes.
        #[arg(long, default_value_t = 16 * 1024 * 1024)]
        lfs_chunk_size: u64,
        /// Repos per `/api/models` page.
        #[arg(long, default_value_t = 1000)]
        list_page_size: usize,
        /// Allow binding a non-loopback address.
        #[arg(long)]
        allow_remote: bool,
    },
    /// Mirror DIR as OWNER/NAME with `main` at commit REV.
    Import {
        #[arg(long)]
        root: PathBuf,
        #[arg(long)]
        repo: String,
        #[arg(long)]
        revision: String,
        #[arg(long)]
        private: bool,
        dir: PathBuf,
    },
}

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
    match run(cli).await {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            print_error(e.as_ref(), None);
            Exit::Failure.into()
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::Serve {
            root,
            addr,
            token_file,
            cdn_addr,
            faults,
            lfs_chunk_size,
            list_page_size,
            allow_remote,
        } => {
            for a in std::iter::once(addr).chain(cdn_addr) {
                anyhow::ensure!(
                    allow_remote || a.ip().is_loopback(),
                    "refusing to bind non-loopback `{a}` without --allow-remote"
                );
            }
            let token = match token_file {
                Some(p) => Some(hub::Token::from_file(&p)?.expose().to_string()),
                None => None,
            };
            let faults: FaultSpec = faults.parse().map_err(anyhow::Error::msg)?;
            let opts = ServerOptions {
                token,
                cdn_addr,
                faults,
                lfs_chunk_size,
                list_page_size,
                ..ServerOptions::default()
            };
            let h = server::spawn(&root, addr, opts).await?;
            println!("listening on {}", h.url());
            if let Some(c) = h.cdn_addr {
                println!("cdn on http://{c}");
            }
            tokio::signal::ctrl_c().await?;
            h.shutdown().await;
            Ok(())
        }
        Cmd::Import {
            root,
            repo,
            revision,
            private,
            dir,
        } => {
            let id = hub::RepoId::model(&repo).map_err(anyhow::Error::msg)?;
            let s = server::import_dir(&root, &id, &revision, &dir, private)?;
            println!(
                "imported {} files ({} LFS) as {id}@{revision}{}",
                s.files,
                s.lfs_files,
                if s.changed { "" } else { " (unchanged)" }
            );
            Ok(())
        }
    }
}
