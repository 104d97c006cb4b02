//! `POST /tokenize` and `POST /detokenize` (docs/runner.md "minirun-serve"), as llama-server
//! answers them: the served model's own tokenizer, shared with the model thread, so neither
//! waits behind a generation. `/tokenize` takes `content`, `add_special` (the model's BOS rule;
//! default false, as llama-server) and `with_pieces` (each id with its text); `/detokenize` takes
//! `tokens` and refuses an id past the vocabulary.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::api::{self, ApiError};
use super::http::{body_of, AppState};
use crate::tokenizer::Tokenizer;

/// The served model's tokenizer and the ids its embedding holds.
pub struct Text {
    pub tokenizer: Tokenizer,
    pub vocab: u64,
}

#[derive(Debug, Deserialize)]
struct TokenizeRequest {
    content: String,
    #[serde(default)]
    add_special: bool,
    #[serde(default)]
    with_pieces: bool,
}

#[derive(Debug, Deserialize)]
struct DetokenizeRequest {
    tokens: Vec<u32>,
}

fn text_of(state: &AppState) -> Result<&Arc<Text>, ApiError> {
    state.text.as_ref().ok_or_else(|| {
        ApiError::invalid(
            format!(
                "`{}` is verified, not chat-capable here: its tokenizer is not loaded",
                state.info.id
            ),
            None,
        )
        .with_code("model_not_runnable")
    })
}

fn tokenizer_failed(e: crate::error::RunError) -> ApiError {
    ApiError::invalid(e.to_string(), Some("content"))
}

pub async fn tokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req: TokenizeRequest = api::parse(&body_of(body)?)?;
    let text = text_of(&state)?;
    let tok = &text.tokenizer;
    let ids = tok
        .encode_with(&req.content, req.add_special && tok.add_bos)
        .map_err(tokenizer_failed)?;
    if !req.with_pieces {
        return Ok(Json(json!({ "tokens": ids })));
    }
    let pieces = ids
        .iter()
        .map(|&id| {
            let piece = tok.decode(&[id]).map_err(tokenizer_failed)?;
            Ok(json!({ "id": id, "piece": piece }))
        })
        .collect::<Result<Vec<Value>, ApiError>>()?;
    Ok(Json(json!({ "tokens": pieces })))
}

pub async fn detokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let req: DetokenizeRequest = api::parse(&body_of(body)?)?;
    let text = text_of(&state)?;
    if let Some(bad) = req.tokens.iter().find(|&&id| u64::from(id) >= text.vocab) {
        return Err(ApiError::invalid(
            format!("token {bad} is past the vocabulary of {} ids", text.vocab),
            Some("tokens"),
        ));
    }
    let content = text
        .tokenizer
        .decode(&req.tokens)
        .map_err(|e| ApiError::invalid(e.to_string(), Some("tokens")))?;
    Ok(Json(json!({ "content": content })))
}
