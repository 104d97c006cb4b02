//! The V4 hyper-parameters read from the release's `config.json` (models.md §1.2; the keys
//! transformers' `DeepseekV4Config` folds: `compress_ratios`, `num_hash_layers`,
//! `qk_rope_head_dim`, `rope_scaling`), and the two RoPE tables: `main` (plain, `rope_theta`) for
//! sliding-window layers and `compress` (YaRN over `compress_rope_theta`, attention factor 1) for
//! compressed layers, their compressors and the indexer.

use serde_json::Value;

use super::error::V4Error;

/// What kind of attention a layer runs (its `compress_ratios` entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerKind {
    /// Ratio 0: sliding window only, `main` RoPE.
    Sliding,
    /// Ratio 4: window + compressed entries picked by the indexer (CSA).
    Csa,
    /// Ratio 128: window + every causal compressed entry (HCA).
    Hca,
}

impl LayerKind {
    pub fn ratio(self) -> usize {
        match self {
            LayerKind::Sliding => 0,
            LayerKind::Csa => 4,
            LayerKind::Hca => 128,
        }
    }
}

/// The configuration the forward pass needs.
#[derive(Debug, Clone, PartialEq)]
pub struct V4Config {
    pub hidden: usize,
    pub layers: usize,
    pub vocab: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub rope_dim: usize,
    pub q_lora: usize,
    pub o_lora: usize,
    pub o_groups: usize,
    pub window: usize,
    pub index_heads: usize,
    pub index_head_dim: usize,
    pub index_topk: usize,
    pub experts: usize,
    pub top_k: usize,
    pub moe_inter: usize,
    pub routed_scale: f64,
    pub swiglu_limit: f64,
    pub hash_layers: usize,
    pub eps: f64,
    pub hc: usize,
    pub sinkhorn_iters: usize,
    pub hc_eps: f64,
    pub kinds: Vec<LayerKind>,
    /// `main` inverse frequencies (`rope_dim / 2`).
    pub main_inv_freq: Vec<f32>,
    /// `compress` inverse frequencies (`rope_dim / 2`).
    pub compress_inv_freq: Vec<f32>,
}

fn get<'a>(v: &'a Value, key: &str) -> Result<&'a Value, V4Error> {
    v.get(key).ok_or_else(|| V4Error::Config {
        key: key.into(),
        detail: "missing from `config.json`".into(),
    })
}

fn uint(v: &Value, key: &str) -> Result<usize, V4Error> {
    let n = get(v, key)?.as_u64().ok_or_else(|| V4Error::Config {
        key: key.into(),
        detail: "must be a non-negative integer".into(),
    })?;
    if n > (1 << 24) {
        return Err(V4Error::Config {
            key: key.into(),
            detail: format!("{n} is beyond what this adapter accepts (2^24)"),
        });
    }
    Ok(n as usize)
}

fn float(v: &Value, key: &str) -> Result<f64, V4Error> {
    get(v, key)?.as_f64().ok_or_else(|| V4Error::Config {
        key: key.into(),
        detail: "must be a number".into(),
    })
}

fn bad(key: &str, detail: String) -> V4Error {
    V4Error::Config {
        key: key.into(),
        detail,
    }
}

/// Plain RoPE inverse frequencies `1 / base^(2i/dim)`, rounded to f32 as torch computes them.
pub fn default_inv_freq(base: f64, dim: usize) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| (1.0 / base.powf((2 * i) as f64 / dim as f64)) as f32)
        .collect()
}

/// YaRN inverse frequencies (transformers `_compute_yarn_parameters`, `truncate` on): a linear
/// ramp between the extrapolated (`1/base^(2i/dim)`) and interpolated (÷ `factor`) frequencies
/// over the correction range found from `beta_fast` / `beta_slow` rotations.
pub fn yarn_inv_freq(
    base: f64,
    dim: usize,
    factor: f64,
    original_max: f64,
    beta_fast: f64,
    beta_slow: f64,
) -> Vec<f32> {
    let corr = |rot: f64| {
        (dim as f64 * (original_max / (rot * 2.0 * std::f64::consts::PI)).ln()) / (2.0 * base.ln())
    };
    let low = corr(beta_fast).floor().max(0.0);
    let high = corr(beta_slow).ceil().min(dim as f64 - 1.0);
    let span = if low == high { 0.001 } else { high - low };
    (0..dim / 2)
        .map(|i| {
            let pos = base.powf((2 * i) as f64 / dim as f64);
            let extra = 1.0 / pos;
            let inter = 1.0 / (factor * pos);
            let ramp = ((i as f64 - low) / span).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            (inter * (1.0 - keep) + extra * keep) as f32
        })
        .collect()
}

impl V4Config {
    /// Parses `config.json` bytes; `what` names the file in errors.
    pub fn parse(bytes: &[u8], what: &str) -> Result<Self, V4Error> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| V4Error::Json {
            what: "the model configuration",
            path: what.into(),
            detail: e.to_string(),
        })?;
        let model_type = get(&v, "model_type")?.as_str().unwrap_or("");
        if model_type != "deepseek_v4" {
            return Err(bad(
                "model_type",
                format!("`{model_type}` is not `deepseek_v4`"),
            ));
        }
        for (key, want) in [("num_key_value_heads", 1), ("n_shared_experts", 1)] {
            if uint(&v, key)? != want {
                return Err(bad(key, format!("only {want} is supported")));
            }
        }
        let scoring = get(&v, "scoring_func")?.as_str().unwrap_or("");
        if scoring != "sqrtsoftplus" {
            return Err(bad(
                "scoring_func",
                format!("`{scoring}` is not supported (only `sqrtsoftplus`)"),
            ));
        }
        let layers = uint(&v, "num_hidden_layers")?;
        let ratios = get(&v, "compress_ratios")?
            .as_array()
            .ok_or_else(|| bad("compress_ratios", "must be an array".into()))?;
        if ratios.len() < layers {
            return Err(bad(
                "compress_ratios",
                format!("{} entries for {layers} layers", ratios.len()),
            ));
        }
        let kinds = ratios
            .iter()
            .take(layers)
            .map(|r| match r.as_u64() {
                Some(0) => Ok(LayerKind::Sliding),
                Some(4) => Ok(LayerKind::Csa),
                Some(128) => Ok(LayerKind::Hca),
                _ => Err(bad(
                    "compress_ratios",
                    format!("entry {r} is not 0, 4 or 128"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let head_dim = uint(&v, "head_dim")?;
        let rope_dim = uint(&v, "qk_rope_head_dim")?;
        let index_head_dim = uint(&v, "index_head_dim")?;
        if rope_dim % 2 != 0 || rope_dim > head_dim || rope_dim > index_head_dim {
            return Err(bad(
                "qk_rope_head_dim",
                format!("{rope_dim} must be even and fit head_dim {head_dim} and index_head_dim {index_head_dim}"),
            ));
        }
        let scaling = get(&v, "rope_scaling")?;
        let kind = scaling
            .get("type")
            .or_else(|| scaling.get("rope_type"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if kind != "yarn" {
            return Err(bad(
                "rope_scaling.type",
                format!("`{kind}` is not supported (only `yarn`)"),
            ));
        }
        let opt =
            |key: &str, default: f64| scaling.get(key).and_then(Value::as_f64).unwrap_or(default);
        let c = Self {
            hidden: uint(&v, "hidden_size")?,
            layers,
            vocab: uint(&v, "vocab_size")?,
            heads: uint(&v, "num_attention_heads")?,
            head_dim,
            rope_dim,
            q_lora: uint(&v, "q_lora_rank")?,
            o_lora: uint(&v, "o_lora_rank")?,
            o_groups: uint(&v, "o_groups")?,
            window: uint(&v, "sliding_window")?,
            index_heads: uint(&v, "index_n_heads")?,
            index_head_dim,
            index_topk: uint(&v, "index_topk")?,
            experts: uint(&v, "n_routed_experts")?,
            top_k: uint(&v, "num_experts_per_tok")?,
            moe_inter: uint(&v, "moe_intermediate_size")?,
            routed_scale: float(&v, "routed_scaling_factor")?,
            swiglu_limit: float(&v, "swiglu_limit")?,
            hash_layers: uint(&v, "num_hash_layers")?,
            eps: float(&v, "rms_norm_eps")?,
            hc: uint(&v, "hc_mult")?,
            sinkhorn_iters: uint(&v, "hc_sinkhorn_iters")?,
            hc_eps: float(&v, "hc_eps")?,
            kinds,
            main_inv_freq: default_inv_freq(float(&v, "rope_theta")?, rope_dim),
            compress_inv_freq: yarn_inv_freq(
                float(&v, "compress_rope_theta")?,
                rope_dim,
                opt("factor", 1.0),
                opt("original_max_position_embeddings", 4096.0),
                opt("beta_fast", 32.0),
                opt("beta_slow", 1.0),
            ),
        };
        for (key, n) in [
            ("hidden_size", c.hidden),
            ("num_attention_heads", c.heads),
            ("o_groups", c.o_groups),
            ("sliding_window", c.window),
            ("num_experts_per_tok", c.top_k),
            ("hc_mult", c.hc),
            ("index_n_heads", c.index_heads),
        ] {
            if n == 0 {
                return Err(bad(key, "must be positive".into()));
            }
        }
        if c.heads % c.o_groups != 0 || c.top_k > c.experts || c.sinkhorn_iters == 0 {
            return Err(bad(
                "o_groups",
                "heads must split into o_groups, num_experts_per_tok ≤ n_routed_experts, hc_sinkhorn_iters ≥ 1".into(),
            ));
        }
        Ok(c)
    }

    /// The inverse frequencies of a layer kind (`main` for sliding layers, `compress` otherwise).
    pub fn inv_freq(&self, kind: LayerKind) -> &[f32] {
        match kind {
            LayerKind::Sliding => &self.main_inv_freq,
            _ => &self.compress_inv_freq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by transformers 5.24 `DeepseekV4RotaryEmbedding` for the tiny config
    /// (`compress`: yarn, θ 160000, factor 16, original 65536, β 32/1; `main`: θ 10000), dim 64.
    #[test]
    fn rope_tables_match_transformers() {
        let main = default_inv_freq(10000.0, 64);
        assert_eq!(main[1], 0.749_894_2_f32);
        assert_eq!(main[31], 0.000_133_352_15_f32);
        let y = yarn_inv_freq(160000.0, 64, 16.0, 65536.0, 32.0, 1.0);
        let want = [
            (0, 1.0f32),
            (1, 0.687_656_04),
            (15, 0.003_635_538_5),
            (16, 0.002_265_625),
            (20, 0.000_296_977_8),
            (24, 1.953_125_3e-5),
            (31, 5.680_529_4e-7),
        ];
        for (i, w) in want {
            let got = y[i];
            assert!(
                ((got - w) / w).abs() < 2e-7,
                "compress inv_freq[{i}] = {got}, transformers {w}"
            );
        }
    }
}

#[cfg(test)]
pub(super) mod parse_tests {
    use super::*;

    /// The tiny test configuration (the generator's dimensions, three layers).
    pub(in crate::deepseek) fn base() -> serde_json::Value {
        serde_json::json!({
            "model_type": "deepseek_v4", "num_key_value_heads": 1, "n_shared_experts": 1,
            "scoring_func": "sqrtsoftplus", "num_hidden_layers": 3,
            "compress_ratios": [0, 4, 128, 0], "head_dim": 128, "qk_rope_head_dim": 64,
            "index_head_dim": 128,
            "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                             "beta_fast": 32, "beta_slow": 1},
            "hidden_size": 256, "vocab_size": 512, "num_attention_heads": 4, "q_lora_rank": 128,
            "o_lora_rank": 128, "o_groups": 2, "sliding_window": 8, "index_n_heads": 64,
            "index_topk": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
            "moe_intermediate_size": 128, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
            "num_hash_layers": 1, "rms_norm_eps": 1e-6, "hc_mult": 4, "hc_sinkhorn_iters": 20,
            "hc_eps": 1e-6, "rope_theta": 10000, "compress_rope_theta": 160000
        })
    }

    #[test]
    fn parses_the_tiny_config_and_refuses_what_it_cannot_run() {
        let c = V4Config::parse(base().to_string().as_bytes(), "config.json").expect("parses");
        assert_eq!(
            c.kinds,
            vec![LayerKind::Sliding, LayerKind::Csa, LayerKind::Hca]
        );
        for (key, value) in [
            ("compress_ratios", serde_json::json!([0, 8, 0])),
            ("scoring_func", serde_json::json!("softmax")),
            ("num_key_value_heads", serde_json::json!(2)),
            ("hidden_size", serde_json::json!(-1)),
            ("o_groups", serde_json::json!(3)),
        ] {
            let mut v = base();
            v[key] = value;
            let e = V4Config::parse(v.to_string().as_bytes(), "config.json")
                .err()
                .unwrap_or_else(|| panic!("{key} accepted"));
            assert!(matches!(e, V4Error::Config { .. }), "{key}: {e}");
        }
        assert!(V4Config::parse(b"{", "config.json").is_err());
    }
}
