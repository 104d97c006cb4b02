//! Shared helpers for the hub integration tests: a server on a free loopback port in a temp dir.
#![allow(dead_code)]

use std::net::SocketAddr;

use hub::server::{self, ServerHandle, ServerOptions};
use hub::{HubClient, RepoId, Token};

pub struct Hub {
    pub handle: ServerHandle,
    pub dir: tempfile::TempDir,
}

pub fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

pub async fn start(opts: ServerOptions) -> Hub {
    let dir = tempfile::tempdir().expect("tempdir");
    let handle = server::spawn(&dir.path().join("store"), loopback(), opts)
        .await
        .expect("spawn hub");
    Hub { handle, dir }
}

pub fn client(h: &Hub, token: Option<&str>) -> HubClient {
    let retry = hub::client::RetryPolicy {
        max_attempts: 4,
        base_delay: std::time::Duration::from_millis(20),
        max_delay: std::time::Duration::from_secs(2),
    };
    HubClient::new(&h.handle.url(), token.map(Token::new))
        .expect("client")
        .with_retry(retry)
}

pub fn repo(id: &str) -> RepoId {
    RepoId::model(id).expect("repo id")
}

/// Deterministic pseudo-random bytes (xorshift), so uploads are not trivially compressible.
pub fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
