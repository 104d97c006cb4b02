//! The token never appears in log output at debug level, in error messages, or in `Debug`.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::*;
use hub::client::{CommitOperation, CommitRequest};
use hub::server::ServerOptions;

const SECRET: &str = "hf_TOKEN_MUST_NOT_LEAK_1234567890";

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn token_absent_from_logs_errors_and_debug() {
    let buf = Buf::default();
    let sink = buf.clone();
    let sub = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .finish();
    let _g = tracing::subscriber::set_default(sub);

    let h = start(ServerOptions {
        token: Some(SECRET.into()),
        ..ServerOptions::default()
    })
    .await;
    let c = client(&h, Some(SECRET));
    let r = repo("o/t");
    c.create_repo(&r, true, false).await.unwrap();
    h.handle
        .set_faults("5xx:x1,ratelimit:x1@0".parse().unwrap());
    let data = bytes(100_000, 4);
    c.upload_files(
        &r,
        "main",
        &[hub::client::UploadFile {
            path: "w.bin".into(),
            source: hub::client::UploadSource::Bytes(Bytes::from(data.clone())),
        }],
        "w",
        None,
    )
    .await
    .unwrap();
    let (_, got) = c.download_bytes(&r, "main", "w.bin").await.unwrap();
    assert_eq!(got, data);
    let mut texts = Vec::new();
    // errors of every kind that carry request context
    let stale = CommitRequest {
        summary: "x".into(),
        parent_commit: Some("0".repeat(40)),
        operations: vec![CommitOperation::Regular {
            path: "a".into(),
            content: Bytes::from_static(b"a"),
        }],
        ..Default::default()
    };
    let e = c.commit(&r, "main", &stale).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    let e = c.file_metadata(&r, "main", "missing").await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    let wrong =
        hub::HubClient::new(&h.handle.url(), Some(hub::Token::new("hf_wrong_token"))).unwrap();
    let e = wrong
        .create_repo(&repo("o/u"), false, false)
        .await
        .unwrap_err();
    texts.push(format!("{e} {e:?}"));
    // 401/403 name the token's source (never its value), or say that none was sent and how to
    // set one.
    assert!(matches!(e.status(), Some(401 | 403)), "{e}");
    assert!(
        e.to_string().contains("carried the token from the caller"),
        "{e}"
    );
    let anon = hub::HubClient::new(&h.handle.url(), None).unwrap();
    let e = anon
        .create_repo(&repo("o/v"), false, false)
        .await
        .unwrap_err();
    let m = e.to_string();
    assert!(m.contains("no token was sent; set one: HF_TOKEN"), "{m}");
    assert!(m.contains("hf auth login"), "{m}");
    let from_file = tempfile::tempdir().unwrap();
    let tf = from_file.path().join("token");
    std::fs::write(&tf, "hf_wrong_token_in_a_file\n").unwrap();
    let filed =
        hub::HubClient::new(&h.handle.url(), Some(hub::Token::from_file(&tf).unwrap())).unwrap();
    let e = filed
        .create_repo(&repo("o/w"), false, false)
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("the token file `{}`", tf.display())),
        "{e}"
    );
    assert!(!e.to_string().contains("hf_wrong_token_in_a_file"), "{e}");
    texts.push(format!("{e} {e:?}"));
    let dead = hub::HubClient::new("http://127.0.0.1:9", Some(hub::Token::new(SECRET)))
        .unwrap()
        .with_retry(hub::client::RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        });
    let e = dead.list_models(None, None).await.unwrap_err();
    texts.push(format!("{e} {e:?}"));
    texts.push(format!("{c:?} {:?}", hub::Token::new(SECRET)));
    drop(_g);
    let log = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("hub request"), "debug logging was captured");
    assert!(log.contains("retrying"), "the injected faults were logged");
    assert!(!log.contains(SECRET), "token in the log");
    for t in texts {
        assert!(!t.contains(SECRET), "token in {t}");
    }
}
