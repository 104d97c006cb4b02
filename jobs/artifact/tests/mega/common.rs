//! Shared fixtures: deterministic tensors, safetensors sources built in the test, and openers that
//! record which files were opened and which byte ranges were read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use artifact::mega::metadata::{Metadata, Value};
use artifact::mega::MegaError;
use artifact::mega::{DirOpener, Opener, ReadSeek};
use safetensors::tensor::TensorView;
use safetensors::Dtype;

/// Deterministic bytes: `len` bytes of a simple LCG stream seeded by `seed`.
pub fn pattern(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect()
}

/// (name, dtype, shape) of the fixture tensors; bytes come from `pattern(i, nbytes)`.
pub const FIXTURE: &[(&str, &str, &[u64])] = &[
    ("model.embed_tokens.weight", "BF16", &[4, 6]),
    ("model.layers.0.mlp.up_proj.weight", "F32", &[3, 5]),
    ("model.layers.0.input_layernorm.weight", "F16", &[6]),
    ("model.layers.0.mlp.experts.blocks", "U8", &[2, 17]),
    ("model.layers.0.mlp.experts.fp4", "F4", &[4, 8]),
    ("model.norm.scale", "F64", &[]),
    ("model.empty", "F32", &[0, 3]),
    ("lm_head.weight", "BF16", &[6, 4]),
];

/// The fixture tensors with their bytes.
pub fn fixture_tensors() -> Vec<(String, String, Vec<u64>, Vec<u8>)> {
    FIXTURE
        .iter()
        .enumerate()
        .map(|(i, (n, d, s))| {
            let nb = artifact::mega::layout::tensor_nbytes(d, s).unwrap() as usize;
            (
                n.to_string(),
                d.to_string(),
                s.to_vec(),
                pattern(i as u32, nb),
            )
        })
        .collect()
}

fn st_dtype(d: &str) -> Dtype {
    match d {
        "BF16" => Dtype::BF16,
        "F32" => Dtype::F32,
        "F16" => Dtype::F16,
        "U8" => Dtype::U8,
        "F4" => Dtype::F4,
        "F64" => Dtype::F64,
        other => panic!("fixture dtype {other}"),
    }
}

/// Write `tensors` as one safetensors file.
pub fn write_safetensors(path: &Path, tensors: &[(String, String, Vec<u64>, Vec<u8>)]) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| {
            let shape = s.iter().map(|&x| x as usize).collect();
            (n.clone(), TensorView::new(st_dtype(d), shape, b).unwrap())
        })
        .collect();
    let mut info = HashMap::new();
    info.insert("format".to_string(), "pt".to_string());
    safetensors::serialize_to_file(views, Some(info), path).unwrap();
}

/// A sharded safetensors checkpoint (two files + `model.safetensors.index.json`) with config and
/// tokenizer files, in `dir`.
pub fn write_sharded_source(dir: &Path) {
    let t = fixture_tensors();
    let (a, b) = t.split_at(4);
    write_safetensors(&dir.join("model-00001-of-00002.safetensors"), a);
    write_safetensors(&dir.join("model-00002-of-00002.safetensors"), b);
    let mut wm = serde_json::Map::new();
    for (n, ..) in a {
        wm.insert(n.clone(), "model-00001-of-00002.safetensors".into());
    }
    for (n, ..) in b {
        wm.insert(n.clone(), "model-00002-of-00002.safetensors".into());
    }
    let idx = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": wm});
    std::fs::write(dir.join("model.safetensors.index.json"), idx.to_string()).unwrap();
    write_side_files(dir);
}

/// `config.json`, `tokenizer.json`, `tokenizer_config.json` of a tiny BPE model.
pub fn write_side_files(dir: &Path) {
    let cfg = serde_json::json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 6, "torch_dtype": "bfloat16", "vocab_size": 4
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let tok = serde_json::json!({
        "added_tokens": [{"id": 0, "content": "<s>", "special": true},
                         {"id": 3, "content": "ab", "special": false}],
        "model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1, "b": 2, "ab": 3},
                  "merges": [["a", "b"]]}
    });
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    let tc = serde_json::json!({"bos_token": {"content": "<s>"}, "eos_token": "<s>",
                                "chat_template": "{{ messages }}"});
    std::fs::write(dir.join("tokenizer_config.json"), tc.to_string()).unwrap();
}

/// Metadata exercising every value type, for the goldens.
pub fn golden_metadata() -> Metadata {
    let mut md = Metadata::new();
    md.insert("general.name".into(), Value::Str("golden-0.1M".into()));
    md.insert("general.architecture".into(), Value::Str("llama".into()));
    md.insert(
        "general.tags".into(),
        Value::Array(vec![Value::Str("test".into()), Value::Str("golden".into())]),
    );
    md.insert("acme.count".into(), Value::U64(291));
    md.insert("acme.delta".into(), Value::I64(-3));
    md.insert("acme.score".into(), Value::F64(68.2));
    md.insert("acme.ok".into(), Value::Bool(true));
    md.insert(
        "acme.blob".into(),
        Value::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
    );
    md.insert(
        "acme.matrix".into(),
        Value::Array(vec![
            Value::Array(vec![Value::U64(1), Value::U64(2)]),
            Value::Array(vec![]),
        ]),
    );
    md.insert(
        "tensorplay.release.channel".into(),
        Value::Str("stable".into()),
    );
    md
}

/// Tokenizer metadata for the first shard of the goldens.
pub fn golden_tokenizer() -> Metadata {
    let mut md = Metadata::new();
    md.insert("tokenizer.model".into(), Value::Str("bpe".into()));
    md.insert(
        "tokenizer.tokens".into(),
        Value::Array(
            ["<s>", "a", "b", "ab"]
                .iter()
                .map(|s| Value::Str(s.to_string()))
                .collect(),
        ),
    );
    md.insert(
        "tokenizer.merges".into(),
        Value::Array(vec![Value::Str("a b".into())]),
    );
    md
}

/// A log of (file, offset, length) reads and of opened files.
#[derive(Debug, Default)]
pub struct Log {
    pub opens: Vec<String>,
    pub reads: Vec<(String, u64, u64)>,
}

/// An opener over a directory that records opens and reads.
pub struct RecordingOpener {
    pub inner: DirOpener,
    pub log: Rc<RefCell<Log>>,
}

impl RecordingOpener {
    pub fn new(dir: &Path) -> Self {
        RecordingOpener {
            inner: DirOpener {
                dir: dir.to_path_buf(),
            },
            log: Rc::default(),
        }
    }
    pub fn opens(&self) -> Vec<String> {
        self.log.borrow().opens.clone()
    }
}

struct Recording {
    name: String,
    inner: Box<dyn ReadSeek>,
    log: Rc<RefCell<Log>>,
}

impl Read for Recording {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let pos = self.inner.stream_position()?;
        let n = self.inner.read(buf)?;
        self.log
            .borrow_mut()
            .reads
            .push((self.name.clone(), pos, n as u64));
        Ok(n)
    }
}

impl Seek for Recording {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(to)
    }
}

impl Opener for RecordingOpener {
    fn open(&self, name: &str) -> Result<Box<dyn ReadSeek>, MegaError> {
        self.log.borrow_mut().opens.push(name.to_string());
        Ok(Box::new(Recording {
            name: name.to_string(),
            inner: self.inner.open(name)?,
            log: self.log.clone(),
        }))
    }
}
