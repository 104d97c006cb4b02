//! `mega::convert`: safetensors checkpoint (one file, or sharded with `model.safetensors.index.json`,
//! formats.md §1) → MEGA release. Byte-preserving: each tensor's bytes are copied verbatim from the
//! memory-mapped source into the payload. `general.*`, `model.*` and `tokenizer.*` come from
//! `config.json`, `tokenizer.json` and `tokenizer_config.json` next to the source when present,
//! written as strings (JSON strings for structured values) as the seed prefers (docs/mega.md §4).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use safetensors::SafeTensors;

use artifact::mega::inspect::size_token;
use artifact::mega::metadata::{check_key_syntax, Metadata, Value};
use artifact::mega::writer::{
    write_release, ReleaseOptions, ReleaseSummary, TensorData, TensorOrder,
};
use artifact::mega::MegaError;

/// JSON side files (config, tokenizer) larger than this are refused.
const MAX_SIDE_FILE: u64 = 128 << 20;

/// Options of [`convert`].
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// Payload alignment.
    pub alignment: u64,
    /// Largest payload per shard (`None`: one shard).
    pub max_shard_size: Option<u64>,
    /// `general.name`; default: the source directory name.
    pub name: Option<String>,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            alignment: artifact::mega::DEFAULT_ALIGNMENT,
            max_shard_size: None,
            name: None,
        }
    }
}

fn src_err(file: &Path, reason: impl Into<String>) -> MegaError {
    MegaError::Source {
        file: file.display().to_string(),
        reason: reason.into(),
    }
}

/// A resolved conversion source.
#[derive(Debug, Clone)]
pub struct Source {
    /// Directory holding the side files (`config.json`, tokenizer files).
    pub dir: PathBuf,
    /// safetensors files in conversion order (lexical for a sharded source).
    pub files: Vec<PathBuf>,
    /// The `weight_map` of a sharded source: tensor → file name.
    pub weight_map: Option<BTreeMap<String, String>>,
}

/// Resolve a source path: a `.safetensors` file, a `*.index.json`, or a checkpoint directory.
pub fn source_files(src: &Path) -> Result<Source, MegaError> {
    let (dir, entry) = if src.is_dir() {
        let idx = src.join("model.safetensors.index.json");
        let single = src.join("model.safetensors");
        if idx.is_file() {
            (src.to_path_buf(), idx)
        } else if single.is_file() {
            (src.to_path_buf(), single)
        } else {
            return Err(src_err(
                src,
                "no `model.safetensors.index.json` or `model.safetensors` in the directory",
            ));
        }
    } else {
        let dir = src
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (dir, src.to_path_buf())
    };
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.ends_with(".index.json") {
        let v = read_json(&entry)?;
        let map = v
            .get("weight_map")
            .and_then(serde_json::Value::as_object)
            .ok_or_else(|| src_err(&entry, "no `weight_map` object"))?;
        let mut files: Vec<String> = Vec::new();
        let mut weight_map = BTreeMap::new();
        for (t, f) in map {
            let f = f
                .as_str()
                .ok_or_else(|| src_err(&entry, format!("tensor `{t}` maps to a non-string")))?;
            if f.contains(['/', '\\']) || f.starts_with('.') {
                return Err(src_err(
                    &entry,
                    format!("shard name `{f}` is not a plain file name"),
                ));
            }
            if !files.iter().any(|x| x == f) {
                files.push(f.to_string());
            }
            weight_map.insert(t.clone(), f.to_string());
        }
        files.sort();
        Ok(Source {
            files: files.iter().map(|f| dir.join(f)).collect(),
            dir,
            weight_map: Some(weight_map),
        })
    } else if name.ends_with(".safetensors") {
        Ok(Source {
            dir,
            files: vec![entry],
            weight_map: None,
        })
    } else {
        Err(src_err(
            &entry,
            "expected a `.safetensors` file or a `*.index.json`",
        ))
    }
}

fn read_json(path: &Path) -> Result<serde_json::Value, MegaError> {
    let label = path.display().to_string();
    let len = std::fs::metadata(path)
        .map_err(|e| MegaError::io("stat", &label, e))?
        .len();
    if len > MAX_SIDE_FILE {
        return Err(src_err(
            path,
            format!("{len} bytes exceed the {MAX_SIDE_FILE}-byte limit"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| MegaError::io("read", &label, e))?;
    serde_json::from_slice(&bytes).map_err(|e| src_err(path, format!("invalid JSON: {e}")))
}

fn put(md: &mut Metadata, key: &str, v: impl Into<String>) {
    md.insert(key.into(), Value::Str(v.into()));
}

/// `general.*` and `model.*` from `config.json` (shared by every shard and the index).
pub fn config_metadata(dir: &Path, name: &str) -> Result<Metadata, MegaError> {
    let mut md = Metadata::new();
    put(&mut md, "general.name", name);
    if let Some(t) = size_token(name) {
        put(&mut md, "general.size_label", t.clone());
        let base = name
            .rsplit('/')
            .next()
            .unwrap_or(name)
            .replace(&format!("-{t}"), "");
        put(&mut md, "general.basename", base);
    }
    put(&mut md, "mega.source.format", "safetensors");
    put(&mut md, "mega.tensor.name_mapping", "identity");
    let cfg_path = dir.join("config.json");
    if cfg_path.is_file() {
        let cfg = read_json(&cfg_path)?;
        if let Some(t) = cfg.get("model_type").and_then(|v| v.as_str()) {
            put(&mut md, "general.architecture", t);
        }
        if let Some(c) = cfg
            .get("architectures")
            .and_then(|v| v.get(0))
            .and_then(|v| v.as_str())
        {
            put(&mut md, "model.class", c);
        }
        if let Some(d) = cfg
            .get("torch_dtype")
            .or_else(|| cfg.get("dtype"))
            .and_then(|v| v.as_str())
        {
            put(&mut md, "model.dtype", d);
        }
        put(&mut md, "model.init_args", cfg.to_string());
    }
    Ok(md)
}

fn token_text(v: &serde_json::Value) -> Option<String> {
    v.as_str().map(str::to_string).or_else(|| {
        v.get("content")
            .and_then(|c| c.as_str())
            .map(str::to_string)
    })
}

/// `tokenizer.*` from `tokenizer.json` and `tokenizer_config.json` (first shard only).
pub fn tokenizer_metadata(dir: &Path) -> Result<Metadata, MegaError> {
    let mut md = Metadata::new();
    let tok_path = dir.join("tokenizer.json");
    if tok_path.is_file() {
        let tok = read_json(&tok_path)?;
        let model = tok.get("model");
        if let Some(t) = model.and_then(|m| m.get("type")).and_then(|v| v.as_str()) {
            put(&mut md, "tokenizer.model", t.to_ascii_lowercase());
        }
        if let Some(vocab) = model
            .and_then(|m| m.get("vocab"))
            .and_then(|v| v.as_object())
        {
            // Tokens ordered by id; written only when the ids are exactly 0..n.
            let mut by_id: Vec<Option<String>> = vec![None; vocab.len()];
            let mut dense = true;
            for (tok, id) in vocab {
                match id.as_u64().and_then(|i| by_id.get_mut(i as usize)) {
                    Some(slot @ None) => *slot = Some(tok.clone()),
                    _ => dense = false,
                }
            }
            if dense {
                let tokens = by_id.into_iter().flatten().map(Value::Str).collect();
                md.insert("tokenizer.tokens".into(), Value::Array(tokens));
            }
        }
        if let Some(merges) = model
            .and_then(|m| m.get("merges"))
            .and_then(|v| v.as_array())
        {
            let list: Vec<Value> = merges
                .iter()
                .filter_map(|m| match m {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Array(p) => {
                        let parts: Vec<&str> = p.iter().filter_map(|x| x.as_str()).collect();
                        (parts.len() == 2).then(|| parts.join(" "))
                    }
                    _ => None,
                })
                .map(Value::Str)
                .collect();
            md.insert("tokenizer.merges".into(), Value::Array(list));
        }
        if let Some(added) = tok.get("added_tokens").and_then(|v| v.as_array()) {
            let special: Vec<serde_json::Value> = added
                .iter()
                .filter(|t| t.get("special").and_then(|s| s.as_bool()) == Some(true))
                .map(|t| {
                    serde_json::json!({
                        "id": t.get("id").cloned().unwrap_or(serde_json::Value::Null),
                        "content": t.get("content").cloned().unwrap_or(serde_json::Value::Null),
                    })
                })
                .collect();
            put(
                &mut md,
                "tokenizer.special_tokens",
                serde_json::Value::Array(special).to_string(),
            );
        }
    }
    let cfg_path = dir.join("tokenizer_config.json");
    if cfg_path.is_file() {
        let cfg = read_json(&cfg_path)?;
        for (field, key) in [
            ("bos_token", "tokenizer.bos_token"),
            ("eos_token", "tokenizer.eos_token"),
            ("pad_token", "tokenizer.pad_token"),
            ("unk_token", "tokenizer.unk_token"),
        ] {
            if let Some(t) = cfg.get(field).and_then(token_text) {
                put(&mut md, key, t);
            }
        }
        if let Some(t) = cfg.get("chat_template").and_then(|v| v.as_str()) {
            put(&mut md, "tokenizer.chat_template", t);
        }
    }
    Ok(md)
}

/// Refuse an output directory that already holds MEGA files: stale shards or a stale index next to
/// a new release would change which entry point inspection picks (docs/mega.md §9.1).
fn refuse_existing_release(out_dir: &Path) -> Result<(), MegaError> {
    let Ok(rd) = std::fs::read_dir(out_dir) else {
        return Ok(());
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.ends_with(".mega") || n.ends_with(".mega.index.json") {
            return Err(MegaError::Source {
                file: out_dir.display().to_string(),
                reason: format!(
                    "the output directory already holds `{n}`; convert into an empty directory"
                ),
            });
        }
    }
    Ok(())
}

/// Convert the safetensors checkpoint at `src` into a MEGA release in `out_dir`.
pub fn convert(
    src: &Path,
    out_dir: &Path,
    opts: &ConvertOptions,
) -> Result<ReleaseSummary, MegaError> {
    refuse_existing_release(out_dir)?;
    let Source {
        dir,
        files,
        weight_map,
    } = source_files(src)?;
    let mut maps = Vec::with_capacity(files.len());
    for f in &files {
        let label = f.display().to_string();
        let file = File::open(f).map_err(|e| MegaError::io("open", &label, e))?;
        // SAFETY: the source is opened read-only and must not be modified while converting (the
        // same contract as candle's `MmapedSafetensors`); the bytes are only copied out.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| MegaError::io("map", &label, e))?;
        maps.push(map);
    }
    let mut tensors: Vec<TensorData<'_>> = Vec::new();
    let mut custom = Metadata::new();
    for (f, map) in files.iter().zip(&maps) {
        let st = SafeTensors::deserialize(map)
            .map_err(|e| src_err(f, format!("invalid safetensors: {e}")))?;
        let (_, meta) = SafeTensors::read_metadata(map)
            .map_err(|e| src_err(f, format!("invalid safetensors: {e}")))?;
        if let Some(kv) = meta.metadata() {
            for (k, v) in kv {
                let key = format!("safetensors.{k}");
                if check_key_syntax(&key).is_ok() {
                    custom.insert(key, Value::Str(v.clone()));
                }
            }
        }
        let fname = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for name in meta.offset_keys() {
            if let Some(wm) = &weight_map {
                if wm.get(&name) != Some(&fname) {
                    return Err(src_err(
                        f,
                        format!("tensor `{name}` is not mapped to this file by the index"),
                    ));
                }
            }
            let view = st
                .tensor(&name)
                .map_err(|e| src_err(f, format!("tensor `{name}`: {e}")))?;
            tensors.push(TensorData {
                name,
                dtype: view.dtype().to_string(),
                shape: view.shape().iter().map(|&d| d as u64).collect(),
                bytes: view.data(),
            });
        }
    }
    if let Some(wm) = &weight_map {
        if wm.len() != tensors.len() {
            return Err(src_err(
                src,
                format!(
                    "the index maps {} tensors, the shard files hold {}",
                    wm.len(),
                    tensors.len()
                ),
            ));
        }
    }
    let name = opts.name.clone().unwrap_or_else(|| {
        std::fs::canonicalize(&dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".into())
    });
    let mut metadata = config_metadata(&dir, &name)?;
    metadata.extend(custom);
    let ropts = ReleaseOptions {
        alignment: opts.alignment,
        max_shard_size: opts.max_shard_size,
        order: TensorOrder::Source,
        metadata,
        first_shard_metadata: tokenizer_metadata(&dir)?,
        base_name: "model".into(),
    };
    write_release(out_dir, &tensors, &ropts)
}

/// Tensor name → (dtype, shape, bytes), as read back from a source for round-trip checks.
pub type TensorMap = BTreeMap<String, (String, Vec<u64>, Vec<u8>)>;

/// Every tensor of a safetensors source, for round-trip checks.
pub fn source_tensors(src: &Path) -> Result<TensorMap, MegaError> {
    let mut out = BTreeMap::new();
    for f in source_files(src)?.files {
        let bytes =
            std::fs::read(&f).map_err(|e| MegaError::io("read", f.display().to_string(), e))?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| src_err(&f, format!("invalid safetensors: {e}")))?;
        for (name, view) in st.tensors() {
            out.insert(
                name,
                (
                    view.dtype().to_string(),
                    view.shape().iter().map(|&d| d as u64).collect(),
                    view.data().to_vec(),
                ),
            );
        }
    }
    Ok(out)
}

/// A short text summary of a written release (one line per shard).
pub fn render_summary(s: &ReleaseSummary) -> String {
    let mut out = String::new();
    for sh in &s.shards {
        out.push_str(&format!(
            "wrote {} ({} tensors, {} payload bytes, sha256 {})\n",
            sh.file,
            sh.tensors.len(),
            sh.payload_nbytes,
            sh.sha256
        ));
    }
    if let Some(i) = &s.index_file {
        out.push_str(&format!("wrote {i}\n"));
    }
    out
}
