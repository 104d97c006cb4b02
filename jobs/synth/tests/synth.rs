//! End-to-end tests of the `synth` crate: determinism and committed golden digests, every shard
//! parsed by our codec and by the `safetensors` crate, the DeepSeek V4 tensor table spelled out
//! from models.md §1.4/§1.5, config keys, the tokenizer, and value properties of the quantized
//! tensors (FP8 blocks, e2m1 nibbles, `tid2eid`).

#![allow(clippy::unwrap_used, clippy::panic)]

use artifact::safetensors::{index::ShardIndex, parse_header, Header};
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use synth::{deepseek, kimi, quant, Family, Shape};

const GOLDEN_V4: &str = "tests/golden/synth-deepseek-v4.sha256";

fn gen(family: Family, seed: u64) -> (tempfile::TempDir, synth::Summary) {
    let dir = tempfile::tempdir().unwrap();
    let s = synth::generate(family, &dir.path().join("out"), seed, 1).unwrap();
    (dir, s)
}

fn headers(root: &Path, summary: &synth::Summary) -> Vec<(String, Header, Vec<u8>)> {
    let mut out = Vec::new();
    for f in &summary.files {
        if !f.path.ends_with(".safetensors") {
            continue;
        }
        let bytes = std::fs::read(root.join(&f.path)).unwrap();
        let h = parse_header(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.path));
        h.check_file_len(bytes.len() as u64).unwrap();
        // The reference crate agrees on every tensor and its bytes.
        let st = safetensors::SafeTensors::deserialize(&bytes)
            .unwrap_or_else(|e| panic!("{}: {e}", f.path));
        assert_eq!(st.len(), h.tensors.len(), "{}", f.path);
        for t in &h.tensors {
            let v = st.tensor(&t.name).unwrap();
            assert_eq!(v.dtype().to_string(), t.dtype.as_str(), "{}", t.name);
            assert_eq!(
                v.shape().iter().map(|d| *d as u64).collect::<Vec<_>>(),
                t.shape,
                "{}",
                t.name
            );
            let r = h.file_range(&t.name).unwrap();
            assert_eq!(
                v.data(),
                &bytes[r.start as usize..r.end as usize],
                "{}",
                t.name
            );
        }
        out.push((f.path.clone(), h, bytes));
    }
    out
}

#[test]
fn deepseek_v4_is_deterministic_and_matches_golden_digests() {
    let (_a, s1) = gen(Family::DeepseekV4, 0);
    let (_b, s2) = gen(Family::DeepseekV4, 0);
    assert_eq!(s1.sha256sum_lines(), s2.sha256sum_lines());
    let (_c, s3) = gen(Family::DeepseekV4, 1);
    assert_ne!(
        s1.files[5].sha256, s3.files[5].sha256,
        "the seed must change the values"
    );
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN_V4);
    if std::env::var_os("MINIRUN_BLESS").is_some() {
        std::fs::write(&golden, s1.sha256sum_lines()).unwrap();
    }
    let want = std::fs::read_to_string(&golden)
        .expect("golden digests missing; run with MINIRUN_BLESS=1 once");
    assert_eq!(
        s1.sha256sum_lines(),
        want,
        "generator output changed; if intended, re-bless and say why"
    );
    assert!(
        s1.total_bytes() < 100 << 20,
        "default checkpoint must stay small: {}",
        s1.total_bytes()
    );
}

/// Adds one expected tensor: (name, dtype, shape, shard).
type Add<'a> = dyn FnMut(String, &str, &[u64], usize) + 'a;

/// The V4 table of models.md §1.4 at the tiny dimensions (H 256, 4 heads × 128, q/o lora 128,
/// 2 o-groups, 4 experts of width 128, top-2, vocab 512, hc 4, 64 indexer heads × 128).
fn v4_expected() -> BTreeMap<String, (String, Vec<u64>, usize)> {
    let (h, e, i, v, k) = (256u64, 4u64, 128u64, 512u64, 2u64);
    let mut m = BTreeMap::new();
    let mut add = |n: String, dt: &str, s: &[u64], shard: usize| {
        assert!(
            m.insert(n.clone(), (dt.to_string(), s.to_vec(), shard))
                .is_none(),
            "{n}"
        );
    };
    let block = |add: &mut Add<'_>, p: &str, ratio: u64, hash: bool, shard: usize| {
        let rows: Vec<(&str, &str, Vec<u64>)> = vec![
            ("attn_norm.weight", "BF16", vec![h]),
            ("ffn_norm.weight", "BF16", vec![h]),
            ("hc_attn_fn", "F32", vec![24, 4 * h]),
            ("hc_ffn_fn", "F32", vec![24, 4 * h]),
            ("hc_attn_base", "F32", vec![24]),
            ("hc_ffn_base", "F32", vec![24]),
            ("hc_attn_scale", "F32", vec![3]),
            ("hc_ffn_scale", "F32", vec![3]),
            ("attn.attn_sink", "F32", vec![4]),
            ("attn.wq_a.weight", "F8_E4M3", vec![128, h]),
            ("attn.wq_a.scale", "F8_E8M0", vec![1, 2]),
            ("attn.q_norm.weight", "BF16", vec![128]),
            ("attn.wq_b.weight", "F8_E4M3", vec![512, 128]),
            ("attn.wq_b.scale", "F8_E8M0", vec![4, 1]),
            ("attn.wkv.weight", "F8_E4M3", vec![128, h]),
            ("attn.wkv.scale", "F8_E8M0", vec![1, 2]),
            ("attn.kv_norm.weight", "BF16", vec![128]),
            ("attn.wo_a.weight", "F8_E4M3", vec![256, 256]),
            ("attn.wo_a.scale", "F8_E8M0", vec![2, 2]),
            ("attn.wo_b.weight", "F8_E4M3", vec![h, 256]),
            ("attn.wo_b.scale", "F8_E8M0", vec![2, 2]),
            ("ffn.gate.weight", "BF16", vec![e, h]),
            ("ffn.shared_experts.w1.weight", "F8_E4M3", vec![i, h]),
            ("ffn.shared_experts.w1.scale", "F8_E8M0", vec![1, 2]),
            ("ffn.shared_experts.w3.weight", "F8_E4M3", vec![i, h]),
            ("ffn.shared_experts.w3.scale", "F8_E8M0", vec![1, 2]),
            ("ffn.shared_experts.w2.weight", "F8_E4M3", vec![h, i]),
            ("ffn.shared_experts.w2.scale", "F8_E8M0", vec![2, 1]),
        ];
        for (n, dt, s) in rows {
            add(format!("{p}{n}"), dt, &s, shard);
        }
        if hash {
            add(format!("{p}ffn.gate.tid2eid"), "I64", &[v, k], shard);
        } else {
            add(format!("{p}ffn.gate.bias"), "F32", &[e], shard);
        }
        for x in 0..e {
            for (w, rows, cols) in [("w1", i, h), ("w3", i, h), ("w2", h, i)] {
                add(
                    format!("{p}ffn.experts.{x}.{w}.weight"),
                    "I8",
                    &[rows, cols / 2],
                    shard,
                );
                add(
                    format!("{p}ffn.experts.{x}.{w}.scale"),
                    "F8_E8M0",
                    &[rows, cols / 32],
                    shard,
                );
            }
        }
        match ratio {
            4 => {
                add(format!("{p}attn.compressor.ape"), "F32", &[4, 256], shard);
                add(
                    format!("{p}attn.compressor.wkv.weight"),
                    "BF16",
                    &[256, h],
                    shard,
                );
                add(
                    format!("{p}attn.compressor.wgate.weight"),
                    "BF16",
                    &[256, h],
                    shard,
                );
                add(
                    format!("{p}attn.compressor.norm.weight"),
                    "BF16",
                    &[128],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.wq_b.weight"),
                    "F8_E4M3",
                    &[64 * 128, 128],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.wq_b.scale"),
                    "F8_E8M0",
                    &[64, 1],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.weights_proj.weight"),
                    "BF16",
                    &[64, h],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.compressor.ape"),
                    "F32",
                    &[4, 256],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.compressor.wkv.weight"),
                    "BF16",
                    &[256, h],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.compressor.wgate.weight"),
                    "BF16",
                    &[256, h],
                    shard,
                );
                add(
                    format!("{p}attn.indexer.compressor.norm.weight"),
                    "BF16",
                    &[128],
                    shard,
                );
            }
            128 => {
                add(format!("{p}attn.compressor.ape"), "F32", &[128, 128], shard);
                add(
                    format!("{p}attn.compressor.wkv.weight"),
                    "BF16",
                    &[128, h],
                    shard,
                );
                add(
                    format!("{p}attn.compressor.wgate.weight"),
                    "BF16",
                    &[128, h],
                    shard,
                );
                add(
                    format!("{p}attn.compressor.norm.weight"),
                    "BF16",
                    &[128],
                    shard,
                );
            }
            _ => {}
        }
    };
    add("embed.weight".into(), "BF16", &[v, h], 1);
    for l in 0..43u64 {
        let ratio = if l < 2 {
            0
        } else if l % 2 == 0 {
            4
        } else {
            128
        };
        block(
            &mut add,
            &format!("layers.{l}."),
            ratio,
            l < 3,
            l as usize + 2,
        );
    }
    add("head.weight".into(), "BF16", &[v, h], 45);
    add("norm.weight".into(), "BF16", &[h], 45);
    add("hc_head_fn".into(), "F32", &[4, 4 * h], 45);
    add("hc_head_base".into(), "F32", &[4], 45);
    add("hc_head_scale".into(), "F32", &[1], 45);
    block(&mut add, "mtp.0.", 0, false, 46);
    for p in ["e_proj", "h_proj"] {
        add(format!("mtp.0.{p}.weight"), "F8_E4M3", &[h, h], 46);
        add(format!("mtp.0.{p}.scale"), "F8_E8M0", &[2, 2], 46);
    }
    for n in ["enorm", "hnorm", "norm"] {
        add(format!("mtp.0.{n}.weight"), "BF16", &[h], 46);
    }
    add("mtp.0.hc_head_fn".into(), "F32", &[4, 4 * h], 46);
    add("mtp.0.hc_head_base".into(), "F32", &[4], 46);
    add("mtp.0.hc_head_scale".into(), "F32", &[1], 46);
    m
}

#[test]
fn deepseek_v4_layout_values_config_and_tokenizer() {
    let (dir, s) = gen(Family::DeepseekV4, 0);
    let root = dir.path().join("out");
    let hs = headers(&root, &s);
    assert_eq!(hs.len(), 46);
    // Names, dtypes, shapes and shard placement against the spelled-out table.
    let want = v4_expected();
    let mut got = BTreeMap::new();
    for (path, h, _) in &hs {
        let shard: usize = path[6..11].parse().unwrap();
        assert_eq!(path, &format!("model-{shard:05}-of-00046.safetensors"));
        assert_eq!(
            h.metadata.as_deref(),
            Some(&[("format".to_string(), "pt".to_string())][..])
        );
        assert_eq!(h.header_len % 8, 0);
        for t in &h.tensors {
            got.insert(
                t.name.clone(),
                (t.dtype.as_str().to_string(), t.shape.clone(), shard),
            );
        }
    }
    let missing: Vec<_> = want.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?} extra {extra:?}"
    );
    for (k, v) in &want {
        assert_eq!(&got[k], v, "{k}");
    }
    assert_eq!(s.tensors, want.len());
    // At upstream expert count the same plan has upstream's 69,187 tensors (models.md §1.4).
    let full = deepseek::V4Dims {
        experts: 256,
        top_k: 6,
        ..deepseek::V4Dims::at_scale(1)
    };
    assert_eq!(
        deepseek::shard_plan(&full)
            .iter()
            .map(|(_, t)| t.len())
            .sum::<usize>(),
        69_187
    );

    // The index maps every tensor to its shard and sums the data bytes.
    let index =
        ShardIndex::parse(&std::fs::read(root.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    assert_eq!(index.weight_map.len(), want.len());
    assert_eq!(
        index.total_size,
        hs.iter().map(|(_, h, _)| h.data_len).sum::<u64>()
    );
    for (t, f) in &index.weight_map {
        assert_eq!(
            f,
            &format!("model-{:05}-of-00046.safetensors", want[t].2),
            "{t}"
        );
    }

    // config.json: the real keys of models.md §1.2.
    let cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("config.json")).unwrap()).unwrap();
    for key in [
        "architectures",
        "model_type",
        "hidden_size",
        "num_hidden_layers",
        "vocab_size",
        "max_position_embeddings",
        "torch_dtype",
        "tie_word_embeddings",
        "bos_token_id",
        "eos_token_id",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "qk_rope_head_dim",
        "q_lora_rank",
        "o_lora_rank",
        "o_groups",
        "sliding_window",
        "attention_bias",
        "index_n_heads",
        "index_head_dim",
        "index_topk",
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "moe_intermediate_size",
        "scoring_func",
        "topk_method",
        "norm_topk_prob",
        "routed_scaling_factor",
        "swiglu_limit",
        "hidden_act",
        "num_hash_layers",
        "rms_norm_eps",
        "hc_mult",
        "hc_sinkhorn_iters",
        "hc_eps",
        "rope_theta",
        "compress_rope_theta",
        "rope_scaling",
        "num_nextn_predict_layers",
        "quantization_config",
        "compress_ratios",
    ] {
        assert!(cfg.get(key).is_some(), "config.json lacks `{key}`");
    }
    let ratios: Vec<u64> = serde_json::from_value(cfg["compress_ratios"].clone()).unwrap();
    let mut expect = vec![0, 0];
    for _ in 0..20 {
        expect.extend([4, 128]);
    }
    expect.extend([4, 0]);
    assert_eq!(ratios, expect);
    assert_eq!(
        cfg["quantization_config"]["weight_block_size"],
        serde_json::json!([128, 128])
    );
    assert_eq!(cfg["index_n_heads"], 64);
    for f in ["LICENSE", "tokenizer_config.json", "generation_config.json"] {
        assert!(root.join(f).is_file(), "{f}");
    }
    assert!(std::fs::read_to_string(root.join("LICENSE"))
        .unwrap()
        .starts_with("MIT License"));

    // tokenizer.json loads with the tokenizers crate and round-trips text.
    let tok = tokenizers::Tokenizer::from_str(
        &std::fs::read_to_string(root.join("tokenizer.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        tok.get_vocab_size(true) as u64,
        cfg["vocab_size"].as_u64().unwrap()
    );
    let text = "A journal records every chunk; 128×128 blocks — ok?";
    let ids = tok.encode(text, false).unwrap();
    assert_eq!(tok.decode(ids.get_ids(), false).unwrap(), text);

    check_values(&hs);
}

fn tensor<'a>(h: &Header, bytes: &'a [u8], name: &str) -> &'a [u8] {
    let r = h.file_range(name).unwrap_or_else(|| panic!("no `{name}`"));
    &bytes[r.start as usize..r.end as usize]
}

fn check_values(hs: &[(String, Header, Vec<u8>)]) {
    let mut nibbles = [0u64; 16];
    let mut fp8_blocks = 0;
    for (_, h, bytes) in hs {
        for t in &h.tensors {
            let data = tensor(h, bytes, &t.name);
            match t.dtype.as_str() {
                "F8_E4M3" => {
                    // Finite codes only; each 128×128 block's max reaches the top octave (the
                    // power-of-two scale is the smallest that fits the block max).
                    let base = t.name.trim_end_matches(".weight");
                    let scale = tensor(h, bytes, &format!("{base}.scale"));
                    let (rows, cols) = (t.shape[0] as usize, t.shape[1] as usize);
                    assert!(
                        data.iter().all(|b| b & 0x7F != 0x7F),
                        "{}: NaN code",
                        t.name
                    );
                    let bc = cols.div_ceil(128);
                    let mut amax = vec![0f32; scale.len()];
                    let mut sum2 = 0f64;
                    for (k, b) in data.iter().enumerate() {
                        let (r, c) = (k / cols, k % cols);
                        let blk = (r / 128) * bc + c / 128;
                        let v = quant::e4m3_to_f32(*b);
                        amax[blk] = amax[blk].max(v.abs());
                        let deq = f64::from(v * quant::e8m0_value(scale[blk]));
                        sum2 += deq * deq;
                    }
                    assert!(
                        amax.iter().all(|a| *a >= 224.0 && *a <= 448.0),
                        "{}: {amax:?}",
                        t.name
                    );
                    let std = (sum2 / (rows * cols) as f64).sqrt();
                    let want = 1.0 / (cols as f64).sqrt();
                    assert!(
                        (std / want - 1.0).abs() < 0.15,
                        "{}: std {std} want {want}",
                        t.name
                    );
                    assert!(
                        scale.iter().all(|s| (100..127).contains(s)),
                        "{}: scales {scale:?}",
                        t.name
                    );
                    fp8_blocks += scale.len();
                }
                "I8" => {
                    let scale = tensor(h, bytes, &t.name.replace(".weight", ".scale"));
                    for (g, chunk) in data.chunks(16).enumerate() {
                        let mut top = 0;
                        for b in chunk {
                            for n in [b & 0xF, b >> 4] {
                                nibbles[n as usize] += 1;
                                top = top.max(n & 7);
                            }
                        }
                        assert!(top >= 5, "{}: group {g} max code {top}", t.name);
                        assert!(
                            scale[g] > 100 && scale[g] < 127,
                            "{}: scale {}",
                            t.name,
                            scale[g]
                        );
                    }
                }
                "I64" => {
                    let k = t.shape[1] as usize;
                    let ids: Vec<i64> = data
                        .chunks(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    for row in ids.chunks(k) {
                        assert!(
                            row.iter().all(|x| (0..4).contains(x)),
                            "{}: {row:?}",
                            t.name
                        );
                        assert!(row[0] != row[1], "{}: repeated expert in {row:?}", t.name);
                    }
                }
                "BF16" | "F32" => {
                    let vals: Vec<f32> = if t.dtype.as_str() == "F32" {
                        data.chunks(4)
                            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                            .collect()
                    } else {
                        data.chunks(2)
                            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
                            .collect()
                    };
                    assert!(vals.iter().all(|v| v.is_finite()), "{}", t.name);
                    if t.name.ends_with("norm.weight") {
                        let mean = vals.iter().sum::<f32>() / vals.len() as f32;
                        assert!((mean - 1.0).abs() < 0.05, "{}: mean {mean}", t.name);
                    }
                }
                _ => {}
            }
        }
    }
    assert!(fp8_blocks > 1000);
    // e2m1 histogram of Gaussian weights at the ceil-power-of-two scale: every code occurs,
    // small magnitudes dominate, the extremes are rare but present, signs balance.
    let total: u64 = nibbles.iter().sum();
    assert!(nibbles.iter().all(|n| *n > 0), "{nibbles:?}");
    let frac = |c: usize| (nibbles[c] + nibbles[c + 8]) as f64 / total as f64;
    assert!(frac(1) + frac(2) > 0.3, "{nibbles:?}");
    assert!(frac(7) < 0.02, "{nibbles:?}");
    let pos: u64 = nibbles[..8].iter().sum();
    assert!(
        (pos as f64 / total as f64 - 0.5).abs() < 0.01,
        "{nibbles:?}"
    );
}

#[test]
fn kimi_and_minimax_parse_and_are_deterministic() {
    for family in [Family::KimiK3, Family::MinimaxH3] {
        let (d1, s1) = gen(family, 3);
        let (_d2, s2) = gen(family, 3);
        assert_eq!(s1.sha256sum_lines(), s2.sha256sum_lines(), "{family:?}");
        let hs = headers(&d1.path().join("out"), &s1);
        assert!(!hs.is_empty());
        if family == Family::KimiK3 {
            assert_eq!(hs.len(), 7);
            assert!(hs[0].0.ends_with("-of-000007.safetensors"));
            // Experts contiguous and in name order (0, 1, 10, … at larger scales).
            let (_, h, _) = &hs[1];
            let experts: Vec<&str> = h
                .tensors
                .iter()
                .filter(|t| t.name.contains(".experts."))
                .map(|t| t.name.as_str())
                .collect();
            assert_eq!(experts.len(), 8 * 6);
            assert!(experts.windows(2).all(|w| w[0] < w[1]));
            assert!(
                experts[0].ends_with("experts.0.w1.weight_packed")
                    && experts[1].ends_with("experts.0.w1.weight_scale")
            );
            let a_log = h
                .tensors
                .iter()
                .find(|t| t.name.ends_with("A_log"))
                .unwrap();
            let bytes = &hs[1].2[h.file_range(&a_log.name).unwrap().start as usize..][..32];
            assert_eq!(
                bytes[8..].iter().filter(|b| **b == 0).count(),
                24,
                "zero padding past the heads"
            );
        } else {
            let mlx: Vec<_> = hs
                .iter()
                .filter(|(p, _, _)| p.starts_with("pipenetwork--"))
                .collect();
            assert_eq!(mlx.len(), 2);
            for (_, h, _) in &mlx {
                assert_eq!(
                    h.metadata.as_deref(),
                    Some(&[("format".to_string(), "mlx".to_string())][..])
                );
                let w = h
                    .tensors
                    .iter()
                    .find(|t| t.name.ends_with("attn.to_q.weight"))
                    .unwrap();
                assert_eq!((w.dtype.as_str(), w.shape.clone()), ("U32", vec![256, 64]));
                let sc = h
                    .tensors
                    .iter()
                    .find(|t| t.name.ends_with("attn.to_q.scales"))
                    .unwrap();
                assert_eq!(
                    (sc.dtype.as_str(), sc.shape.clone()),
                    ("BF16", vec![256, 4])
                );
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        synth::generate(Family::DeepseekV4, dir.path(), 0, 0),
        Err(synth::SynthError::Scale(0))
    ));
    std::fs::write(dir.path().join("x"), b"x").unwrap();
    let e = synth::generate(Family::KimiK3, dir.path(), 0, 1).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
}

#[test]
fn wide_v4_has_real_sized_experts_and_only_v4_defines_it() {
    // The benchmark shape: routed experts as upstream lays them out at 2048×1024 / 1024×2048
    // (I8 e2m1 pairs + per-32 e8m0 scales), `scale` experts per layer, the same tensor set.
    let d = deepseek::V4Dims::wide(14);
    let plan = deepseek::shard_plan(&d);
    let layer3 = &plan.iter().find(|(n, _)| n.contains("00005-of")).unwrap().1;
    let shape = |name: &str| {
        layer3
            .iter()
            .find(|p| p.spec.name == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .spec
            .shape
            .clone()
    };
    assert_eq!(shape("layers.3.ffn.experts.13.w1.weight"), vec![2048, 512]);
    assert_eq!(shape("layers.3.ffn.experts.13.w1.scale"), vec![2048, 32]);
    assert_eq!(shape("layers.3.ffn.experts.13.w2.weight"), vec![1024, 1024]);
    assert!(layer3.iter().all(|p| !p.spec.name.contains("experts.14.")));
    let tiny = deepseek::shard_plan(&deepseek::V4Dims {
        experts: 14,
        ..deepseek::V4Dims::at_scale(1)
    });
    let names = |p: &[(String, Vec<synth::write::Planned>)]| {
        p.iter()
            .flat_map(|(_, t)| t.iter().map(|x| x.spec.name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&plan), names(&tiny));
    let dir = tempfile::tempdir().unwrap();
    let e = synth::generate_shaped(Family::KimiK3, &dir.path().join("k"), 0, 2, Shape::Wide)
        .unwrap_err();
    assert!(matches!(e, synth::SynthError::Shape { .. }), "{e}");
    assert_eq!(e.to_string(), "shape `wide` is not defined for kimi-k3");
    let e = synth::generate_shaped(Family::MinimaxH3, &dir.path().join("m"), 0, 1, Shape::Real)
        .unwrap_err();
    assert!(matches!(e, synth::SynthError::Shape { .. }), "{e}");
}

type ShardPlan = Vec<(String, Vec<synth::write::Planned>)>;

/// Data bytes of each shard of a plan (what the safetensors file holds after its header).
fn shard_bytes(plan: &ShardPlan) -> BTreeMap<String, u64> {
    plan.iter()
        .map(|(name, t)| {
            let bytes = t
                .iter()
                .map(|p| {
                    let numel = p.spec.shape.iter().product::<u64>();
                    p.spec.dtype.byte_len(numel).unwrap()
                })
                .sum();
            (name.clone(), bytes)
        })
        .collect()
}

fn shape_of(plan: &ShardPlan, name: &str) -> Vec<u64> {
    plan.iter()
        .flat_map(|(_, t)| t.iter())
        .find(|p| p.spec.name == name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .spec
        .shape
        .clone()
}

fn tensor_names(plan: &ShardPlan) -> Vec<String> {
    plan.iter()
        .flat_map(|(_, t)| t.iter().map(|x| x.spec.name.clone()))
        .collect()
}

/// Bytes of one expert's six tensors (`w1`, `w3`, `w2`, each with its two `parts`) under `prefix`.
fn expert_bytes(plan: &ShardPlan, prefix: &str, parts: [&str; 2]) -> u64 {
    ["w1", "w3", "w2"]
        .iter()
        .flat_map(|m| parts.map(|k| format!("{prefix}{m}.{k}")))
        .map(|n| shape_of(plan, &n).iter().product::<u64>())
        .sum()
}

#[test]
fn real_v4_shape_has_upstream_layer_dimensions() {
    // models.md §1.2–1.4 at upstream's 256 experts: the routed experts are I8 e2m1 pairs
    // [2048, 2048] / [4096, 1024] with per-32 E8M0 scales, 13,369,344 B per expert; attention at
    // 64 heads × 512 with LoRA ranks 1024 and 8 output groups.
    let d = deepseek::V4Dims::real(256);
    let plan = deepseek::shard_plan(&d);
    assert_eq!(plan.len(), 4, "embed, layer 0, head, MTP");
    for (name, shape) in [
        ("layers.0.ffn.experts.255.w1.weight", [2048, 2048]),
        ("layers.0.ffn.experts.255.w1.scale", [2048, 128]),
        ("layers.0.ffn.experts.0.w2.weight", [4096, 1024]),
        ("mtp.0.ffn.experts.0.w2.scale", [4096, 64]),
        ("layers.0.attn.wq_b.weight", [32768, 1024]),
        ("layers.0.attn.wo_a.weight", [8192, 4096]),
        ("layers.0.ffn.gate.tid2eid", [512, 6]),
    ] {
        assert_eq!(shape_of(&plan, name), shape, "{name}");
    }
    let expert = expert_bytes(&plan, "layers.0.ffn.experts.7.", ["weight", "scale"]);
    assert_eq!(expert, 13_369_344);
    let bytes = shard_bytes(&plan);
    let layer = bytes["model-00002-of-00004.safetensors"];
    assert!((3_400_000_000..3_700_000_000).contains(&layer), "{layer}");
    // The same tensor names as the tiny layout with one layer and as many experts.
    let tiny = deepseek::shard_plan(&deepseek::V4Dims {
        layers: 1,
        hash_layers: 1,
        experts: 256,
        top_k: 6,
        ..deepseek::V4Dims::at_scale(1)
    });
    assert_eq!(tensor_names(&plan), tensor_names(&tiny));
}

#[test]
fn real_k3_shape_has_upstream_expert_bytes_and_passes_4_gib() {
    // models.md §4: one expert's six tensors are 17,547,264 B, w1 [3072, 1792] + [3072, 112],
    // w2 [3584, 1536] + [3584, 96]; 252 of them put the MoE layer's shard past 4 GiB and just
    // past K3's largest file (5,240,799,232 B; 251 fall 1.3 MB short of it).
    let k = kimi::KimiDims::real(252);
    let plan = kimi::shard_plan(&k);
    let p = "language_model.model.layers.1.block_sparse_moe.experts.251.";
    for (part, shape) in [
        ("w1.weight_packed", [3072, 1792]),
        ("w1.weight_scale", [3072, 112]),
        ("w2.weight_packed", [3584, 1536]),
        ("w2.weight_scale", [3584, 96]),
    ] {
        assert_eq!(shape_of(&plan, &format!("{p}{part}")), shape, "{part}");
    }
    let expert = expert_bytes(&plan, p, ["weight_packed", "weight_scale"]);
    assert_eq!(expert, 17_547_264);
    let a = "language_model.model.layers.0.";
    assert_eq!(
        shape_of(&plan, &format!("{a}mlp.gate_proj.weight")),
        vec![33792, 7168]
    );
    assert!(k.is_mla(1) && !k.is_mla(0));
    let bytes = shard_bytes(&plan);
    let moe = bytes["model-00002-of-000005.safetensors"];
    assert!(moe > 1 << 32, "{moe}");
    assert!((5_240_799_232..5_400_000_000).contains(&moe), "{moe}");
    assert_eq!(plan.len(), 5, "2 layers, embedding, head, vision tower");
    // The tiny shape keeps its layout: 4 layers, the last MLA.
    let tiny = kimi::KimiDims::at_scale(1);
    assert_eq!(kimi::shard_plan(&tiny).len(), 7);
    assert!(tiny.is_mla(3) && !tiny.is_mla(1));
}
