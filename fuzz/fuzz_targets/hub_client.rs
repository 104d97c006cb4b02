//! The hub client's reading of answers (`hub::client::answers`, docs/hub.md): every JSON answer
//! it decodes (repo info, tree pages, refs, model listings, commit, repo create, preupload, LFS
//! batch), error bodies, `Link` and `Retry-After`/`RateLimit` headers. Never panics, whatever the
//! server sends.
#![no_main]

use axum::http::{HeaderMap, HeaderValue};
use hub::client::{answers, retry};
use hub::protocol::{ModelSummary, Refs, RepoInfo, TreeEntry};
use libfuzzer_sys::fuzz_target;

const URL: &str = "http://127.0.0.1:9/api/models/o/r";
const OIDS: [&str; 2] = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
];

fn headers(name: &'static str, bytes: &[u8]) {
    if let Ok(v) = HeaderValue::from_bytes(bytes) {
        let mut h = HeaderMap::new();
        h.insert(name, v);
        let _ = retry::server_wait(&h);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((which, bytes)) = minirun_fuzz::split(data, 12) else {
        return;
    };
    match which {
        0 => drop(answers::decode::<RepoInfo>(URL, bytes)),
        1 => drop(answers::decode::<Vec<TreeEntry>>(URL, bytes)),
        2 => drop(answers::decode::<Refs>(URL, bytes)),
        3 => drop(answers::decode::<Vec<ModelSummary>>(URL, bytes)),
        4 => drop(answers::commit_answer(URL, bytes)),
        5 => drop(answers::created_repo_url(URL, bytes)),
        6 => drop(answers::preupload_results(URL, bytes)),
        7 => drop(answers::lfs_batch_actions(URL, bytes, &OIDS)),
        8 => {
            let header =
                std::str::from_utf8(bytes.get(..bytes.len().min(64)).unwrap_or_default()).ok();
            let m = answers::error_message(bytes, header);
            assert!(!m.chars().any(char::is_control));
        }
        9 => {
            if let Ok(s) = std::str::from_utf8(bytes) {
                let _ = answers::next_link(s);
            }
        }
        10 => headers("retry-after", bytes),
        _ => headers("ratelimit", bytes),
    }
});
