//! The tokenizer keys of `convert` that llama.cpp's converter takes from gguf-py's `SpecialVocab`
//! (special token ids, `add_*_token` flags, merges) and from its pre-tokenizer detection, ported
//! so the converted file carries the same values for every key llama.cpp's loader reads.
//!
//! - ids: `tokenizer_config.json`'s `{bos,eos,unk,sep,pad,cls,mask}_token` looked up among
//!   `tokenizer.json`'s `added_tokens` (first match), then `config.json`'s `*_token_id` for types
//!   still unset; ids ≥ vocab size are skipped; written in that discovery order;
//! - `add_bos_token` / `add_eos_token`: a `ByteLevel` post-processor sets both false (unless
//!   already set), `RobertaProcessing` sets bos/eos/sep true, then `tokenizer_config.json`'s
//!   `add_*_token` booleans fill types still unset (`TemplateProcessing` is not parsed: refused
//!   keys are left unwritten, see docs/gguf.md);
//! - merges: the `[a, b]` pair form is joined with a space, a space inside a part becomes U+0120;
//! - `tokenizer.ggml.pre`: llama.cpp hashes the tokenization of a probe text; we match the
//!   `tokenizer.json` pre-tokenizer structurally — Qwen2's split regex → `qwen2`,
//!   `Digits(individual) + ByteLevel(use_regex)` (SmolLM / StarCoder) → `smollm`, anything else
//!   → `qwen2` (the seed's value).
//!
//! - `general.size_label`: gguf-py's `model_weight_count_rounded_notation` of the parameter count
//!   (dense models: every tensor's element count).
//!
//! Spec: seed 003 §2.1; gguf-py 0.19 `gguf/vocab.py` (`SpecialVocab`); docs/gguf.md "Convert".

use serde_json::Value as Json;

use artifact::gguf::types::Value;
use artifact::gguf::Metadata;

const TYPES: [(&str, &str); 7] = [
    ("bos", "tokenizer.ggml.bos_token_id"),
    ("eos", "tokenizer.ggml.eos_token_id"),
    ("unk", "tokenizer.ggml.unknown_token_id"),
    ("sep", "tokenizer.ggml.seperator_token_id"),
    ("pad", "tokenizer.ggml.padding_token_id"),
    ("cls", "tokenizer.ggml.cls_token_id"),
    ("mask", "tokenizer.ggml.mask_token_id"),
];

/// The merges in llama.cpp's string form.
pub fn merges(model: &Json) -> Vec<String> {
    model
        .get("merges")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| match m {
            Json::String(s) => Some(s.clone()),
            Json::Array(p) => Some(
                p.iter()
                    .filter_map(Json::as_str)
                    .map(|s| s.replace(' ', "\u{120}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
        .collect()
}

/// `tokenizer.ggml.pre` for a `tokenizer.json`.
pub fn pre_tokenizer(tj: &Json) -> &'static str {
    let pre = tj.get("pre_tokenizer").cloned().unwrap_or(Json::Null);
    let list: Vec<Json> = match pre.get("type").and_then(Json::as_str) {
        Some("Sequence") => pre
            .get("pretokenizers")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default(),
        Some(_) => vec![pre.clone()],
        None => Vec::new(),
    };
    let ty = |j: &Json| {
        j.get("type")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_string()
    };
    let smollm = list.len() == 2
        && ty(&list[0]) == "Digits"
        && list[0].get("individual_digits") == Some(&Json::Bool(true))
        && ty(&list[1]) == "ByteLevel"
        && list[1].get("use_regex") == Some(&Json::Bool(true));
    if smollm {
        "smollm"
    } else {
        "qwen2"
    }
}

/// Append the special token ids and `add_*_token` flags, in gguf-py's order.
pub fn special_tokens(tj: &Json, tc: &Json, config: &Json, n_vocab: usize, md: &mut Metadata) {
    let added: Vec<(&str, u64)> = tj
        .get("added_tokens")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.get("content")?.as_str()?, t.get("id")?.as_u64()?)))
        .collect();
    let mut ids: Vec<(&str, u64)> = Vec::new();
    let set = |typ: &'static str, id: Option<u64>, ids: &mut Vec<(&str, u64)>| {
        if let Some(id) = id {
            if (id as usize) < n_vocab && !ids.iter().any(|(t, _)| *t == typ) {
                ids.push((typ, id));
            }
        }
    };
    for (typ, _) in TYPES {
        let content = match tc.get(format!("{typ}_token")) {
            Some(Json::String(s)) => Some(s.as_str()),
            Some(Json::Object(o)) => o.get("content").and_then(Json::as_str),
            _ => None,
        };
        if let Some(c) = content {
            let id = added.iter().find(|(a, _)| *a == c).map(|(_, id)| *id);
            set(typ, id, &mut ids);
        }
    }
    for (typ, _) in TYPES {
        let id = config.get(format!("{typ}_token_id")).and_then(Json::as_u64);
        set(typ, id, &mut ids);
    }
    let mut add: Vec<(&str, bool)> = Vec::new();
    let put = |add: &mut Vec<(&str, bool)>, typ: &'static str, v: bool, force: bool| match add
        .iter_mut()
        .find(|(t, _)| *t == typ)
    {
        Some(slot) if force => slot.1 = v,
        Some(_) => {}
        None => add.push((typ, v)),
    };
    if let Some(pp) = tj.get("post_processor").filter(|p| !p.is_null()) {
        let procs: Vec<Json> = pp
            .get("processors")
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_else(|| vec![pp.clone()]);
        for p in procs {
            match p.get("type").and_then(Json::as_str) {
                Some("ByteLevel") => {
                    put(&mut add, "bos", false, false);
                    put(&mut add, "eos", false, false);
                }
                Some("RobertaProcessing") => {
                    for t in ["bos", "eos", "sep"] {
                        put(&mut add, t, true, true);
                    }
                }
                _ => {}
            }
        }
    }
    for (typ, _) in TYPES {
        if let Some(b) = tc.get(format!("add_{typ}_token")).and_then(Json::as_bool) {
            put(&mut add, typ, b, false);
        }
    }
    for (typ, id) in ids {
        if let Some((_, key)) = TYPES.iter().find(|(t, _)| *t == typ) {
            md.set(key, Value::U32(id as u32));
        }
    }
    for (typ, v) in add {
        if matches!(typ, "bos" | "eos" | "sep") {
            md.set(&format!("tokenizer.ggml.add_{typ}_token"), Value::Bool(v));
        }
    }
}

/// gguf-py's `model_weight_count_rounded_notation(n, min_digits=2)`, e.g. 6 390 912 → `6.4M`.
pub fn size_label(n: u64) -> String {
    let x = n as f64;
    let (scaled, suffix) = if x > 1e12 {
        (x * 1e-12, "T")
    } else if x > 1e9 {
        (x * 1e-9, "B")
    } else if x > 1e6 {
        (x * 1e-6, "M")
    } else {
        (x * 1e-3, "K")
    };
    // len(str(round(scaled)).lstrip('0')): Python rounds half to even; 0 has no digits left.
    let r = scaled.round_ties_even() as u64;
    let digits = if r == 0 { 0 } else { r.to_string().len() };
    let fix = 2usize.saturating_sub(digits);
    format!("{scaled:.fix$}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels_follow_gguf_py() {
        assert_eq!(size_label(6_390_912), "6.4M");
        assert_eq!(size_label(3_196_032), "3.2M");
        assert_eq!(size_label(494_032_768), "494M");
        assert_eq!(size_label(135_000_000), "135M");
        assert_eq!(size_label(7_615_616_512), "7.6B");
        assert_eq!(size_label(999), "1.0K");
        assert_eq!(size_label(400), "0.40K");
    }
}
