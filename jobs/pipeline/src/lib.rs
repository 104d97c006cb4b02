//! The Minirun stages as library code: the plan model, the shared CLI contract, and one module
//! per stage. Binaries in `jobs/bin` are thin wrappers over this crate.

pub mod candidate;
pub mod cli;
pub mod direct;
pub mod distributed;
pub mod fetch;
pub mod gate;
pub mod inspect;
pub mod inspect_artifact;
pub mod patience;
pub mod plan;
pub mod plan_tool;
pub mod progress;
pub mod promote;
pub mod repack;
pub mod space;
pub mod stage;
pub mod units;
pub mod verify;
pub mod work;

/// The one async runtime of the process (two worker threads: the stages' hub traffic and hashing
/// hand-offs), made on first use. Every stage that talks to a hub blocks on it; none builds its
/// own.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime, std::io::Error> {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // two threads racing here each built one; the loser's is dropped unused
    Ok(RUNTIME.get_or_init(|| rt))
}
