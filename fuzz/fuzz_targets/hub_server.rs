//! The local hub server's request bodies (docs/hub.md): the NDJSON commit, the LFS batch, the
//! preupload call and repo creation, each sent in-process to the real handlers
//! (`hub::server::in_process`). Never panics, never hangs or exhausts memory on any body, and
//! always answers with a status code. The store is recreated every few thousand inputs so that
//! accepted commits do not grow it without bound.
#![no_main]

use std::sync::Mutex;

use axum::body::Body;
use axum::http::Request;
use hub::server::{in_process, ServerOptions};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt as _;

/// Inputs served by one store before it is thrown away.
const STORE_LIFETIME: u32 = 4096;

struct Hub {
    router: axum::Router,
    runtime: tokio::runtime::Runtime,
    served: u32,
    _dir: tempfile::TempDir,
}

impl Hub {
    fn new() -> Hub {
        let dir = tempfile::Builder::new()
            .prefix("minirun-fuzz-hub")
            .tempdir_in(if std::path::Path::new("/dev/shm").is_dir() {
                "/dev/shm"
            } else {
                "/tmp"
            })
            .expect("tempdir");
        let opts = ServerOptions {
            // small enough that the fuzzer meets the multipart path with small sizes
            lfs_chunk_size: 1024,
            max_body: 1 << 20,
            max_line: 1 << 16,
            ..ServerOptions::default()
        };
        let router = in_process(dir.path(), opts).expect("store");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut hub = Hub {
            router,
            runtime,
            served: 0,
            _dir: dir,
        };
        let status = hub.send(
            "/api/repos/create",
            "application/json",
            br#"{"name":"repo","organization":"fuzz"}"#,
        );
        assert_eq!(status, 200, "creating the fuzz repo");
        hub
    }

    fn send(&mut self, path: &str, content_type: &str, body: &[u8]) -> u16 {
        let req = Request::post(path)
            .header("content-type", content_type)
            .body(Body::from(body.to_vec()))
            .expect("request");
        let router = self.router.clone();
        self.runtime.block_on(async move {
            let r = router.oneshot(req).await.expect("infallible service");
            let status = r.status().as_u16();
            let _ = axum::body::to_bytes(r.into_body(), 64 << 20).await;
            status
        })
    }
}

static HUB: Mutex<Option<Hub>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let Some((which, bytes)) = minirun_fuzz::split(data, 4) else {
        return;
    };
    let mut guard = HUB.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_some_and(|h| h.served >= STORE_LIFETIME) {
        *guard = None;
    }
    let hub = guard.get_or_insert_with(Hub::new);
    hub.served += 1;
    let (path, content_type) = match which {
        0 => ("/api/models/fuzz/repo/commit/main", "application/x-ndjson"),
        1 => (
            "/fuzz/repo.git/info/lfs/objects/batch",
            "application/vnd.git-lfs+json",
        ),
        2 => ("/api/models/fuzz/repo/preupload/main", "application/json"),
        _ => ("/api/repos/create", "application/json"),
    };
    let status = hub.send(path, content_type, bytes);
    assert!((200..600).contains(&status));
});
