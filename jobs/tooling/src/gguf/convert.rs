//! `minirun-gguf convert`: a Qwen2 or Qwen3 HuggingFace safetensors checkpoint → GGUF, one
//! tensor in memory at a time (the safetensors files are memory-mapped; each payload is
//! converted when the writer asks for it).
//!
//! Spec: seed 003 §2.1 (tensor mapping, metadata and tokenizer keys, the "except 1-D tensors"
//! rule, bf16 by round-to-nearest-even) extended to Qwen3 (`attn_q_norm` / `attn_k_norm`,
//! `key_length` / `value_length`) as issue 8 asks; decisions in docs/gguf.md.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::{Dtype, SafeTensors};
use serde_json::Value as Json;

use super::ops::{parse_size, ToolError, PROG};
use super::special_vocab;
use artifact::gguf::quant::f32_to_bf16_bits;
use artifact::gguf::split::write_split;
use artifact::gguf::types::{GgmlType, Value};
use artifact::gguf::writer::{write_file, TensorSpec, DEFAULT_ALIGNMENT};
use artifact::gguf::{GgufError, Metadata};

/// Options of `convert`.
#[derive(Debug, Clone)]
pub struct ConvertOpts {
    /// The HuggingFace model directory.
    pub hf_dir: PathBuf,
    /// Output path.
    pub output: PathBuf,
    /// `--outtype` (default f16).
    pub outtype: Option<String>,
    /// `--split-max-size`.
    pub split_max_size: Option<String>,
}

/// Result of `convert`.
#[derive(Debug)]
pub struct ConvertReport {
    /// Printed lines.
    pub lines: Vec<String>,
    /// Files written.
    pub outputs: Vec<PathBuf>,
}

fn refuse(s: String) -> ToolError {
    ToolError::Refused(format!("{PROG} convert: {s}"))
}

fn read_json(path: &Path) -> Result<Json, ToolError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| refuse(format!("cannot read `{}`: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| refuse(format!("`{}` is not valid JSON: {e}", path.display())))
}

/// HF tensor name → GGUF name, or `None` (refused) for anything not in the mapping. Returns
/// `Some("")` for tensors llama.cpp skips on purpose (rotary `inv_freq`).
pub fn map_name(hf: &str, qwen3: bool) -> Option<String> {
    match hf {
        "model.embed_tokens.weight" => return Some("token_embd.weight".into()),
        "model.norm.weight" => return Some("output_norm.weight".into()),
        "lm_head.weight" => return Some("output.weight".into()),
        _ => {}
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (n, tail) = rest.split_once('.')?;
    let n: u32 = n.parse().ok()?;
    if tail == "self_attn.rotary_emb.inv_freq" {
        return Some(String::new());
    }
    let (stem, suffix) = tail.rsplit_once('.')?;
    let g = match stem {
        "input_layernorm" => "attn_norm",
        "post_attention_layernorm" => "ffn_norm",
        "self_attn.q_proj" => "attn_q",
        "self_attn.k_proj" => "attn_k",
        "self_attn.v_proj" => "attn_v",
        "self_attn.o_proj" => "attn_output",
        "self_attn.q_norm" if qwen3 => "attn_q_norm",
        "self_attn.k_norm" if qwen3 => "attn_k_norm",
        "mlp.gate_proj" => "ffn_gate",
        "mlp.up_proj" => "ffn_up",
        "mlp.down_proj" => "ffn_down",
        _ => return None,
    };
    if suffix != "weight" && suffix != "bias" {
        return None;
    }
    Some(format!("blk.{n}.{g}.{suffix}"))
}

struct Source {
    gguf_name: String,
    hf_name: String,
    shard: usize,
    dims: Vec<u64>,
    out: GgmlType,
}

fn decode(dtype: Dtype, data: &[u8]) -> Vec<f32> {
    match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
    }
}

fn encode(out: GgmlType, x: &[f32]) -> Vec<u8> {
    match out {
        GgmlType::F16 => x
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect(),
        GgmlType::BF16 => x
            .iter()
            .flat_map(|v| f32_to_bf16_bits(*v).to_le_bytes())
            .collect(),
        _ => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// Tokenizer keys (seed 003 §2.1), appended to `md`.
fn tokenizer_metadata(dir: &Path, config: &Json, md: &mut Metadata) -> Result<(), ToolError> {
    let tj = read_json(&dir.join("tokenizer.json"))?;
    let tc = read_json(&dir.join("tokenizer_config.json"))?;
    let template = match tc.get("chat_template").and_then(Json::as_str) {
        Some(t) => t.to_string(),
        None => std::fs::read_to_string(dir.join("chat_template.jinja")).map_err(|_| {
            refuse(format!(
                "{}/tokenizer_config.json has no 'chat_template'; {PROG}'s strict loader renders the model's own template, so a converted GGUF without one is not accepted",
                dir.display()
            ))
        })?,
    };
    let model = tj.get("model").cloned().unwrap_or(Json::Null);
    if model.get("type").and_then(Json::as_str) != Some("BPE") {
        return Err(refuse(format!(
            "{}/tokenizer.json is not a BPE tokenizer; the Qwen converter writes tokenizer.ggml.model = \"gpt2\" only",
            dir.display()
        )));
    }
    let mut vocab: std::collections::HashMap<String, usize> = model
        .get("vocab")
        .and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()? as usize)))
                .collect()
        })
        .unwrap_or_default();
    let mut added: std::collections::HashMap<usize, (String, bool)> = Default::default();
    for t in tj
        .get("added_tokens")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(id), Some(c)) = (
            t.get("id").and_then(Json::as_u64),
            t.get("content").and_then(Json::as_str),
        ) {
            let special = t.get("special").and_then(Json::as_bool).unwrap_or(false);
            added.insert(id as usize, (c.to_string(), special));
            vocab.insert(c.to_string(), id as usize);
        }
    }
    let n_vocab = config
        .get("vocab_size")
        .and_then(Json::as_u64)
        .map(|v| v as usize)
        .unwrap_or_else(|| vocab.values().max().map_or(0, |m| m + 1));
    let mut rev: Vec<Option<&str>> = vec![None; n_vocab];
    for (k, &v) in &vocab {
        match rev.get_mut(v) {
            Some(slot) => *slot = Some(k.as_str()),
            None => {
                return Err(refuse(format!(
                    "{}/tokenizer.json has token id {v} ({k:?}), outside config.json's vocab_size {n_vocab}",
                    dir.display()
                )))
            }
        }
    }
    let mut tokens = Vec::with_capacity(n_vocab);
    let mut types = Vec::with_capacity(n_vocab);
    for (i, r) in rev.iter().enumerate() {
        match (r, added.get(&i)) {
            (_, Some((c, special))) => {
                let looks = c.starts_with("<|") && c.ends_with("|>");
                tokens.push(c.clone());
                types.push(if *special || looks { 3 } else { 4 });
            }
            (Some(t), None) => {
                tokens.push(t.to_string());
                types.push(1);
            }
            (None, None) => {
                tokens.push(format!("[PAD{i}]"));
                types.push(5);
            }
        }
    }
    let merges = special_vocab::merges(&model);
    md.set("tokenizer.ggml.model", Value::str("gpt2"));
    md.set(
        "tokenizer.ggml.pre",
        Value::str(special_vocab::pre_tokenizer(&tj)),
    );
    md.set("tokenizer.ggml.tokens", Value::str_array(&tokens));
    md.set("tokenizer.ggml.token_type", Value::i32_array(&types));
    md.set("tokenizer.ggml.merges", Value::str_array(&merges));
    special_vocab::special_tokens(&tj, &tc, config, n_vocab, md);
    md.set("tokenizer.chat_template", Value::str(&template));
    Ok(())
}

/// `minirun-gguf convert` (seed 003 §2.1).
pub fn run_convert(o: &ConvertOpts) -> Result<ConvertReport, ToolError> {
    let (out2d, file_type) = parse_outtype(o.outtype.as_deref())?;
    let max = o.split_max_size.as_deref().map(parse_size).transpose()?;
    let dir = &o.hf_dir;
    let config = read_json(&dir.join("config.json"))?;
    let arch = detect_arch(&config)?;
    let qwen3 = arch == "qwen3";
    let maps = map_shards(dir, &shard_names(dir)?)?;
    let parsed = parse_shards(&maps)?;
    let sources = collect_sources(&maps, &parsed, qwen3, out2d)?;

    let mut md = Metadata::default();
    general_metadata(dir, arch, &sources, &mut md);
    model_metadata(dir, &config, arch, qwen3, &mut md)?;
    md.set("general.file_type", Value::U32(file_type));
    md.set("general.quantization_version", Value::U32(2));
    tokenizer_metadata(dir, &config, &mut md)?;

    let specs: Vec<TensorSpec> = sources
        .iter()
        .map(|s| TensorSpec {
            name: s.gguf_name.clone(),
            dims: s.dims.clone(),
            ggml_type: s.out,
        })
        .collect();
    let outputs = write_outputs(o, max, &md, &specs, &sources, &parsed)?;
    let lines = report_lines(arch, out2d, &specs, &outputs);
    Ok(ConvertReport { lines, outputs })
}

/// Step: `--outtype` → the 2-D tensor type and `general.file_type`.
fn parse_outtype(outtype: Option<&str>) -> Result<(GgmlType, u32), ToolError> {
    match outtype.unwrap_or("f16") {
        "f16" => Ok((GgmlType::F16, 1u32)),
        "bf16" => Ok((GgmlType::BF16, 32)),
        "f32" => Ok((GgmlType::F32, 0)),
        other => Err(refuse(format!(
            "unknown --outtype {other:?}; supported: f16, bf16, f32"
        ))),
    }
}

/// Step: config.json's `model_type` and `architectures` → the GGUF architecture (Qwen2/Qwen3 only).
fn detect_arch(config: &Json) -> Result<&'static str, ToolError> {
    let model_type = config
        .get("model_type")
        .and_then(Json::as_str)
        .unwrap_or("");
    let archs: Vec<&str> = config
        .get("architectures")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    match (model_type, archs.as_slice()) {
        ("qwen2", ["Qwen2ForCausalLM"]) => Ok("qwen2"),
        ("qwen3", ["Qwen3ForCausalLM"]) => Ok("qwen3"),
        _ => Err(refuse(format!(
            "unsupported architecture (model_type = {model_type:?}, architectures = {archs:?}); {PROG}'s converter supports 'Qwen2ForCausalLM' (model_type \"qwen2\") and 'Qwen3ForCausalLM' (model_type \"qwen3\") only"
        ))),
    }
}

/// Step: the shard file names, in the order the conversion script reads them.
fn shard_names(dir: &Path) -> Result<Vec<String>, ToolError> {
    // Shards: model.safetensors, or the index's files in first-appearance order.
    let shard_names: Vec<String> = if dir.join("model.safetensors").exists() {
        vec!["model.safetensors".into()]
    } else {
        let idx = read_json(&dir.join("model.safetensors.index.json"))?;
        let mut v: Vec<String> = Vec::new();
        for f in idx
            .get("weight_map")
            .and_then(Json::as_object)
            .into_iter()
            .flat_map(|m| m.values())
            .filter_map(Json::as_str)
        {
            if !v.iter().any(|x| x == f) {
                v.push(f.to_string());
            }
        }
        v
    };
    // convert_hf_to_gguf.py reads the parts in sorted file-name order.
    let mut shard_names = shard_names;
    shard_names.sort();
    Ok(shard_names)
}

/// Step: open and memory-map every shard.
fn map_shards(dir: &Path, shard_names: &[String]) -> Result<Vec<(PathBuf, Mmap)>, ToolError> {
    let mut maps = Vec::new();
    for s in shard_names {
        let p = dir.join(s);
        let f =
            File::open(&p).map_err(|e| refuse(format!("cannot open `{}`: {e}", p.display())))?;
        // SAFETY: read-only map of an input file (see docs/gguf.md on mmap).
        let m = unsafe { Mmap::map(&f) }
            .map_err(|e| refuse(format!("cannot map `{}`: {e}", p.display())))?;
        maps.push((p, m));
    }
    Ok(maps)
}

/// Step: parse each mapped shard as a safetensors file.
fn parse_shards(maps: &[(PathBuf, Mmap)]) -> Result<Vec<SafeTensors<'_>>, ToolError> {
    maps.iter()
        .map(|(p, m)| {
            SafeTensors::deserialize(m).map_err(|e| {
                refuse(format!(
                    "`{}` is not a valid safetensors file: {e}",
                    p.display()
                ))
            })
        })
        .collect::<Result<_, _>>()
}

/// Step: map every tensor to its GGUF name, shape and output type, in the script's order.
fn collect_sources(
    maps: &[(PathBuf, Mmap)],
    parsed: &[SafeTensors<'_>],
    qwen3: bool,
    out2d: GgmlType,
) -> Result<Vec<Source>, ToolError> {
    let mut sources: Vec<Source> = Vec::new();
    for (si, st) in parsed.iter().enumerate() {
        // The script's order: each part's header order, which for a file written by the
        // safetensors library is its data-offset order (the header is serialised in that order).
        let names = SafeTensors::read_metadata(&maps[si].1)
            .map(|(_, m)| m.offset_keys())
            .map_err(|e| {
                refuse(format!(
                    "`{}` is not a valid safetensors file: {e}",
                    maps[si].0.display()
                ))
            })?;
        for name in names {
            let view = st
                .tensor(&name)
                .map_err(|e| refuse(format!("tensor '{name}': {e}")))?;
            let gname = map_name(&name, qwen3).ok_or_else(|| refuse(format!(
                "HuggingFace tensor '{name}' has no GGUF mapping in {PROG}'s Qwen2/Qwen3 converter; supported tensors are model.embed_tokens, model.norm, lm_head, and model.layers.N.{{input_layernorm,post_attention_layernorm,self_attn.{{q,k,v,o}}_proj,mlp.{{gate,up,down}}_proj}} (plus self_attn.{{q,k}}_norm for Qwen3) — {PROG} refuses to drop a weight it does not recognise"
            )))?;
            if gname.is_empty() {
                continue;
            }
            if !matches!(view.dtype(), Dtype::BF16 | Dtype::F16 | Dtype::F32) {
                return Err(refuse(format!(
                    "tensor '{name}' has safetensors dtype '{}'; {PROG} converts bf16, f16 and f32 only",
                    view.dtype()
                )));
            }
            let mut dims: Vec<u64> = view.shape().iter().rev().map(|&d| d as u64).collect();
            while dims.len() > 1 && dims.last() == Some(&1) {
                dims.pop();
            }
            let out = if dims.len() <= 1 {
                GgmlType::F32
            } else {
                out2d
            };
            sources.push(Source {
                gguf_name: gname,
                hf_name: name,
                shard: si,
                dims,
                out,
            });
        }
    }
    Ok(sources)
}

/// Step: the `general.*` keys (architecture, type, sampling, name, size label), appended to `md`.
fn general_metadata(dir: &Path, arch: &str, sources: &[Source], md: &mut Metadata) {
    md.set("general.architecture", Value::str(arch));
    md.set("general.type", Value::str("model"));
    // convert_hf_to_gguf.py's key order: the sampling keys follow general.type.
    if let Ok(gen) = read_json(&dir.join("generation_config.json")) {
        if let Some(k) = gen.get("top_k").and_then(Json::as_i64) {
            md.set("general.sampling.top_k", Value::I32(k as i32));
        }
        for (key, g) in [
            ("general.sampling.top_p", "top_p"),
            ("general.sampling.temp", "temperature"),
            ("general.sampling.penalty_repeat", "repetition_penalty"),
        ] {
            if let Some(v) = gen.get(g).and_then(Json::as_f64) {
                md.set(key, Value::F32(v as f32));
            }
        }
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("model")
        .to_string();
    md.set("general.name", Value::str(&name));
    let total: u64 = sources.iter().map(|s| s.dims.iter().product::<u64>()).sum();
    if total > 0 {
        md.set(
            "general.size_label",
            Value::str(&special_vocab::size_label(total)),
        );
    }
}

/// Step: the `{arch}.*` hyperparameter keys from config.json, appended to `md`.
fn model_metadata(
    dir: &Path,
    config: &Json,
    arch: &str,
    qwen3: bool,
    md: &mut Metadata,
) -> Result<(), ToolError> {
    let u = |k: &str| config.get(k).and_then(Json::as_u64);
    let f = |k: &str| config.get(k).and_then(Json::as_f64);
    let need = |k: &str| {
        u(k).ok_or_else(|| {
            refuse(format!(
                "{}/config.json has no integer '{k}'",
                dir.display()
            ))
        })
    };
    md.set(
        &format!("{arch}.block_count"),
        Value::U32(need("num_hidden_layers")? as u32),
    );
    md.set(
        &format!("{arch}.context_length"),
        Value::U32(need("max_position_embeddings")? as u32),
    );
    md.set(
        &format!("{arch}.embedding_length"),
        Value::U32(need("hidden_size")? as u32),
    );
    md.set(
        &format!("{arch}.feed_forward_length"),
        Value::U32(need("intermediate_size")? as u32),
    );
    let heads = need("num_attention_heads")?;
    md.set(
        &format!("{arch}.attention.head_count"),
        Value::U32(heads as u32),
    );
    md.set(
        &format!("{arch}.attention.head_count_kv"),
        Value::U32(u("num_key_value_heads").unwrap_or(heads) as u32),
    );
    md.set(
        &format!("{arch}.rope.freq_base"),
        Value::F32(f("rope_theta").unwrap_or(10000.0) as f32),
    );
    md.set(
        &format!("{arch}.attention.layer_norm_rms_epsilon"),
        Value::F32(f("rms_norm_eps").unwrap_or(1e-6) as f32),
    );
    if qwen3 {
        if let Some(hd) = u("head_dim") {
            md.set(
                &format!("{arch}.attention.key_length"),
                Value::U32(hd as u32),
            );
            md.set(
                &format!("{arch}.attention.value_length"),
                Value::U32(hd as u32),
            );
        }
    }
    Ok(())
}

/// Step: write the GGUF (one file, or split at `--split-max-size`), converting each payload on demand.
fn write_outputs(
    o: &ConvertOpts,
    max: Option<u64>,
    md: &Metadata,
    specs: &[TensorSpec],
    sources: &[Source],
    parsed: &[SafeTensors<'_>],
) -> Result<Vec<PathBuf>, ToolError> {
    let payload = |i: usize| -> Result<Cow<'_, [u8]>, GgufError> {
        let s = &sources[i];
        let view = parsed[s.shard]
            .tensor(&s.hf_name)
            .map_err(|e| GgufError::Write(format!("tensor `{}`: {e}", s.hf_name)))?;
        let x = decode(view.dtype(), view.data());
        Ok(Cow::Owned(encode(s.out, &x)))
    };
    let outputs = match max {
        None => {
            write_file(&o.output, md, specs, DEFAULT_ALIGNMENT, payload).map_err(|err| {
                ToolError::Gguf {
                    cmd: "convert",
                    err,
                }
            })?;
            vec![o.output.clone()]
        }
        Some(m) => {
            let odir = o.output.parent().unwrap_or_else(|| Path::new(""));
            let stem = o
                .output
                .file_name()
                .and_then(|n| n.to_str())
                .map(|n| n.strip_suffix(".gguf").unwrap_or(n).to_string())
                .unwrap_or_else(|| "model".into());
            write_split(
                odir,
                &stem,
                md,
                specs,
                DEFAULT_ALIGNMENT,
                m,
                "--split-max-size",
                payload,
            )
            .map_err(|err| ToolError::Gguf {
                cmd: "convert",
                err,
            })?
        }
    };
    Ok(outputs)
}

/// Step: the two summary lines `convert` prints.
fn report_lines(
    arch: &str,
    out2d: GgmlType,
    specs: &[TensorSpec],
    outputs: &[PathBuf],
) -> Vec<String> {
    let n2 = specs.iter().filter(|s| s.dims.len() > 1).count();
    vec![
        format!(
            "convert: {arch}: {} tensors ({n2} 2-D at {out2d}, {} 1-D at f32; llama.cpp's \"except 1d tensors\" rule)",
            specs.len(),
            specs.len() - n2
        ),
        format!(
            "convert: wrote {}",
            outputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ]
}
