//! `minirun-hub`'s command line (docs/hub.md): `serve` runs the embedded file-backed hub until
//! interrupted (printing `listening on http://ADDR` first); `import` mirrors a local directory as
//! a repo at an exact upstream commit id. The binary only sets up logging and the runtime.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crate::server::{self, FaultSpec, ImportError, ServerOptions};
use clap::{Parser, Subcommand};

/// The environment `minirun-hub` reads (its `--help` lists it, as every binary's does).
pub const ENV: &str = "Environment:
  RUST_LOG        filter of the request log on stderr (default info)";

/// The embedded Hugging Face Hub-compatible server.
#[derive(Debug, Parser)]
#[command(
    name = "minirun-hub",
    version,
    about = "The embedded Hugging Face Hub-compatible server",
    after_help = ENV
)]
pub struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
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
        /// Fault injection, `mode[:P|xN][@param][=path-text]`, e.g. `5xx:0.2,reset:x1,delay:1@500`
        /// or `flip-header:x1@9003=model-00003` (bit flips per request kind; docs/hub.md §5).
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
        /// Create --root as an empty store when it does not exist (without it a missing root is
        /// refused, so a mistyped path never serves an empty hub).
        #[arg(long)]
        init: bool,
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

/// Why `minirun-hub` stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum HubToolError {
    /// A non-loopback address without `--allow-remote`.
    #[error("refusing to bind non-loopback `{0}` without --allow-remote")]
    Remote(SocketAddr),
    /// `--faults` does not parse.
    #[error("`--faults`: {0}")]
    Faults(String),
    /// `--repo` is not `OWNER/NAME`.
    #[error("`--repo`: {0}")]
    Repo(String),
    /// The token file could not be read.
    #[error(transparent)]
    Token(#[from] crate::HubError),
    /// The store could not be opened or the address bound.
    #[error("failed to serve `{}` on `{addr}`", root.display())]
    Serve {
        root: PathBuf,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// `serve --root` names no directory and `--init` was not given.
    #[error("hub store `{0}` does not exist; pass --init to start an empty hub there, or check the path")]
    NoRoot(PathBuf),
    /// `serve --root` names something that is not a directory.
    #[error("hub store `{0}` is not a directory")]
    RootNotDir(PathBuf),
    /// `--init` could not create the store.
    #[error("cannot create the hub store `{root}`")]
    Init {
        /// The store.
        root: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the interrupt failed.
    #[error("failed to wait for the interrupt signal")]
    Signal(#[source] std::io::Error),
    /// The import was refused or failed.
    #[error(transparent)]
    Import(#[from] ImportError),
}

/// A missing store is created only under `--init`; anything else at the path is refused.
fn ensure_root(root: &Path, init: bool) -> Result<(), HubToolError> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(HubToolError::RootNotDir(root.to_owned())),
        Err(_) if init => std::fs::create_dir_all(root).map_err(|source| HubToolError::Init {
            root: root.to_owned(),
            source,
        }),
        Err(_) => Err(HubToolError::NoRoot(root.to_owned())),
    }
}

/// Run one `minirun-hub` command; what it prints goes to stdout.
pub async fn run(cli: Cli) -> Result<(), HubToolError> {
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
            init,
        } => {
            ensure_root(&root, init)?;
            if let Some(a) = std::iter::once(addr)
                .chain(cdn_addr)
                .find(|a| !allow_remote && !a.ip().is_loopback())
            {
                return Err(HubToolError::Remote(a));
            }
            let token = match token_file {
                Some(p) => Some(crate::Token::from_file(&p)?.expose().to_string()),
                None => None,
            };
            let faults: FaultSpec = faults.parse().map_err(HubToolError::Faults)?;
            let opts = ServerOptions {
                token,
                cdn_addr,
                faults,
                lfs_chunk_size,
                list_page_size,
                ..ServerOptions::default()
            };
            let h =
                server::spawn(&root, addr, opts)
                    .await
                    .map_err(|source| HubToolError::Serve {
                        root: root.clone(),
                        addr,
                        source,
                    })?;
            println!("listening on {}", h.url());
            if let Some(c) = h.cdn_addr {
                println!("cdn on http://{c}");
            }
            tokio::signal::ctrl_c()
                .await
                .map_err(HubToolError::Signal)?;
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
            let id = crate::RepoId::model(&repo).map_err(HubToolError::Repo)?;
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
