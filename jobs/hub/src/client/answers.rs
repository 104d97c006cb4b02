//! What the client reads out of the Hub's answers, as plain functions of the answer's bytes (and
//! headers' text): the one place each answer body is decoded and checked, used by the request
//! code in this module's siblings and driven directly by the fuzz targets (`fuzz/`,
//! docs/fuzz.md) with arbitrary bytes. A malformed answer is a [`HubError::Protocol`] naming the
//! URL; nothing here panics on any input.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::HubError;
use crate::protocol::{self, PreuploadResult};

fn protocol_error(url: &str, detail: String) -> HubError {
    HubError::Protocol {
        url: url.to_string(),
        detail,
    }
}

/// A JSON answer decoded as `T` (repo info, tree pages, refs, model listings, commit answers).
pub fn decode<T: DeserializeOwned>(url: &str, bytes: &[u8]) -> Result<T, HubError> {
    serde_json::from_slice(bytes).map_err(|e| protocol_error(url, format!("invalid JSON: {e}")))
}

/// The commit endpoint's answer (`commitOid`, `commitUrl`, …).
pub fn commit_answer(url: &str, bytes: &[u8]) -> Result<protocol::CommitResponse, HubError> {
    serde_json::from_slice(bytes).map_err(|e| protocol_error(url, format!("commit answer: {e}")))
}

/// The repo-create answer's `url`.
pub fn created_repo_url(url: &str, bytes: &[u8]) -> Result<String, HubError> {
    let v: Value = decode(url, bytes)?;
    v.get("url")
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| protocol_error(url, "repo create answer lacks `url`".into()))
}

/// The preupload answer's `files`.
pub fn preupload_results(url: &str, bytes: &[u8]) -> Result<Vec<PreuploadResult>, HubError> {
    let v: Value = decode(url, bytes)?;
    serde_json::from_value(v.get("files").cloned().unwrap_or(Value::Null))
        .map_err(|e| protocol_error(url, format!("preupload answer: {e}")))
}

/// The LFS batch answer, object by object in the order of `oids`: each one's `actions` (`None`:
/// the hub already holds it). An object missing from the answer or refused by it is an error.
pub fn lfs_batch_actions(
    url: &str,
    bytes: &[u8],
    oids: &[&str],
) -> Result<Vec<Option<Value>>, HubError> {
    let answer: Value = decode(url, bytes)?;
    let items = answer
        .get("objects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    oids.iter()
        .map(|oid| {
            let item = items
                .iter()
                .find(|i| i.get("oid").and_then(Value::as_str) == Some(oid))
                .ok_or_else(|| {
                    protocol_error(url, format!("LFS batch answer lacks object {oid}"))
                })?;
            if let Some(err) = item.get("error") {
                return Err(protocol_error(
                    url,
                    format!("LFS batch refused object {oid}: {err}"),
                ));
            }
            Ok(item.get("actions").cloned())
        })
        .collect()
}

/// The message of an error answer: `{"error": "…"}`, the `message`s of `{"errors": […]}`, else
/// the `X-Error-Message` header, else the body's first 300 bytes; printable either way.
pub fn error_message(body: &[u8], x_error_message: Option<&str>) -> String {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let message = json
        .as_ref()
        .and_then(|j| {
            j.get("error")
                .and_then(|e| e.as_str().map(String::from))
                .or_else(|| {
                    j.get("errors").and_then(|e| e.as_array()).map(|a| {
                        a.iter()
                            .filter_map(|x| x.get("message").and_then(|m| m.as_str()))
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
        })
        .or_else(|| x_error_message.map(String::from))
        .unwrap_or_else(|| {
            String::from_utf8_lossy(body.get(..body.len().min(300)).unwrap_or_default()).into()
        });
    protocol::printable(&message)
}

/// The `rel="next"` URL of a `Link` header's value.
pub fn next_link(value: &str) -> Option<String> {
    value.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}
