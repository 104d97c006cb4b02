//! `minirun-gguf quantize --type Q4_K_M` (and the other llama.cpp file types): llama-quantize's
//! per-tensor type choice without `--pure`, read off llama-cpp-python 0.3.36's vendored
//! `src/llama-quant.cpp` (`llama_tensor_get_type` → `llama_tensor_get_type_impl` →
//! `tensor_type_fallback`), so the whole output file is byte-identical to
//! `llama-quantize IN OUT TYPE` (no imatrix, no overrides).
//!
//! What it reproduces, for the file types whose component types have encoders here:
//! - the tensor categories (`tensor_get_category`: output, token embedding, attn_v / attn_qkv /
//!   attn_kv_b, attn_k, attn_q, attn_output, ffn_up / ffn_gate / ffn_down by name);
//! - the output branch (also the token embedding when the model has no `output.weight`): q8_0
//!   when the row is not a multiple of the default type's block (or the arch is falcon), else
//!   q6_K unless the default is q8_0;
//! - the `use_more_bits` bumps of `attn_v` (counted over the attn_v-like tensors in output order)
//!   and `ffn_down` (by layer), the `_S` first-layers bumps, the q2_K/q3_K branches, the
//!   8-expert and 70B rules;
//! - `tensor_type_fallback` after the mixture (q2_K/q3_K → q4_0, q4_K → q5_0, q5_K → q5_1,
//!   q6_K → q8_0, then f16 when that still does not divide the row);
//! - `general.file_type` = the llama_ftype number of the name given.
//!
//! Not reproduced: imatrix-dependent branches (no imatrix is ever used), the i-quant and
//! MXFP4/ternary file types (no encoders), `--tensor-type`/`--output-tensor-type` overrides.
//! Decisions in docs/gguf.md "Mixtures".

use super::ops::{entry, Note, PlanEntry, ToolError, PROG};
use super::pure::{fallback, kept};
pub use artifact::gguf::file_type::{FileType, ALL};
use artifact::gguf::metadata::Metadata;
use artifact::gguf::reader::TensorInfo;
use artifact::gguf::types::{GgmlType, Value};

/// The model hyper-parameters the mixture reads (`llama_hparams` and the model type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hparams {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count` (`n_layer_all`).
    pub n_layer: i64,
    /// `n_gqa()` of layer 0: head count over KV head count (0 when there are no KV heads).
    pub n_gqa: u64,
    /// `{arch}.expert_count` (0 when absent).
    pub n_expert: u64,
    /// llama.cpp's `LLM_TYPE_70B` for this arch and layer count.
    pub is_70b: bool,
}

fn first_uint(md: &Metadata, key: &str) -> Option<u64> {
    match md.get(key)? {
        Value::NumArray { .. } => md.get_u32_array(key).ok()?.first().map(|&v| u64::from(v)),
        _ => md.get_uint(key).ok(),
    }
}

impl Hparams {
    /// Read from a GGUF's metadata; refuses a file without an architecture or block count.
    pub fn from_metadata(md: &Metadata) -> Result<Hparams, ToolError> {
        let missing = |k: &str| {
            ToolError::Refused(format!(
                "{PROG} quantize: the source has no `{k}`; llama-quantize's mixtures need it (quantize with --pure, or fix the source's metadata)"
            ))
        };
        let arch = md
            .get_str("general.architecture")
            .map_err(|_| missing("general.architecture"))?
            .to_string();
        let n_layer = md
            .get_uint(&format!("{arch}.block_count"))
            .map_err(|_| missing(&format!("{arch}.block_count")))? as i64;
        let n_head = first_uint(md, &format!("{arch}.attention.head_count")).unwrap_or(0);
        let n_head_kv =
            first_uint(md, &format!("{arch}.attention.head_count_kv")).unwrap_or(n_head);
        let n_gqa = n_head.checked_div(n_head_kv).unwrap_or(0);
        let n_expert = md.get_uint(&format!("{arch}.expert_count")).unwrap_or(0);
        let is_70b = match arch.as_str() {
            "llama" => n_layer == 80 && n_head != n_head_kv,
            "deci" | "olmo" | "qwen2" => n_layer == 80,
            "jais2" => n_layer == 68,
            _ => false,
        };
        Ok(Hparams {
            arch,
            n_layer,
            n_gqa,
            n_expert,
            is_70b,
        })
    }
}

/// `tensor_category`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

/// `tensor_get_category`: first match wins, in llama.cpp's order.
fn category(name: &str) -> Category {
    use Category::*;
    if name == "output.weight" {
        return Output;
    }
    if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        return TokenEmbd;
    }
    const BY_PART: [(&str, Category); 9] = [
        ("attn_qkv.weight", AttnQkv),
        ("attn_kv_b.weight", AttnKvB),
        ("attn_v.weight", AttnV),
        ("attn_k.weight", AttnK),
        ("attn_q.weight", AttnQ),
        ("attn_output.weight", AttnOutput),
        ("ffn_up", FfnUp),
        ("ffn_gate", FfnGate),
        ("ffn_down", FfnDown),
    ];
    BY_PART
        .iter()
        .find(|(p, _)| name.contains(p))
        .map_or(Other, |(_, c)| *c)
}

fn is_attn_v(c: Category) -> bool {
    matches!(c, Category::AttnV | Category::AttnQkv | Category::AttnKvB)
}

fn use_more_bits(i: i64, n: i64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// `quantize_state_impl`'s counters.
struct State<'a> {
    hp: &'a Hparams,
    ftype: FileType,
    tied: bool,
    n_attention_wv: i64,
    i_attention_wv: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
}

impl State<'_> {
    /// `layer_info`: the running index, or (with experts) the layer parsed from the name.
    fn layer(&self, running: i64, name: &str) -> Result<i64, ToolError> {
        if self.hp.n_expert <= 1 {
            return Ok(running);
        }
        let parsed = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|d| d.parse::<i64>().ok());
        match parsed {
            Some(l) if (0..self.hp.n_layer).contains(&l) => Ok(l),
            _ => Err(ToolError::Refused(format!(
                "{PROG} quantize: cannot determine the layer of tensor '{name}' in [0, {}) (llama-quantize refuses it too)",
                self.hp.n_layer
            ))),
        }
    }

    /// `llama_tensor_get_type_impl` for a quantized default type.
    fn choose(&mut self, t: &TensorInfo, new: GgmlType) -> Result<GgmlType, ToolError> {
        use FileType as F;
        use GgmlType as G;
        let (ft, hp) = (self.ftype, self.hp);
        let falcon = hp.arch == "falcon";
        let name = t.name.as_str();
        if hp.arch == "glm5-next"
            && ["attn_q_a", "attn_q_b", "nextn.eh_proj"]
                .iter()
                .any(|p| name.contains(p))
        {
            return Ok(G::Q8_0);
        }
        let cat = category(name);
        let n = hp.n_layer;
        let mut new = new;
        if cat == Category::Output || (self.tied && cat == Category::TokenEmbd) {
            if falcon || t.row_len() % new.block_size() != 0 {
                new = G::Q8_0;
            } else if new != G::Q8_0 {
                new = G::Q6_K;
            }
        } else if cat == Category::TokenEmbd {
            // Only the i-quant / ternary file types change an untied embedding.
        } else if is_attn_v(cat) {
            let (i, nw, gqa4) = (self.i_attention_wv, self.n_attention_wv, hp.n_gqa >= 4);
            new = match ft {
                F::Q2_K if gqa4 => G::Q4_K,
                F::Q2_K => G::Q3_K,
                F::Q2_K_S if gqa4 => G::Q4_K,
                F::Q3_K_M if i < 2 => G::Q5_K,
                F::Q3_K_M => G::Q4_K,
                F::Q3_K_L => G::Q5_K,
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, nw) => G::Q6_K,
                F::Q4_K_S if i < 4 => G::Q5_K,
                _ => new,
            };
            if hp.is_70b && matches!(new, G::Q3_K | G::Q4_K) {
                new = G::Q5_K;
            }
            if hp.n_expert == 8 {
                new = G::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == Category::AttnK {
            if hp.n_expert == 8 {
                new = G::Q8_0;
            }
        } else if cat == Category::FfnDown {
            let i = self.layer(self.i_ffn_down, name)?;
            new = match ft {
                F::Q2_K => G::Q3_K,
                F::Q2_K_S if i < n / 8 => G::Q4_K,
                F::Q3_K_M if i < n / 16 => G::Q5_K,
                F::Q3_K_M if !falcon || use_more_bits(i, n) => G::Q4_K,
                F::Q3_K_M => G::Q3_K,
                F::Q3_K_L if falcon => G::Q4_K,
                F::Q3_K_L => G::Q5_K,
                F::Q4_K_M if falcon && i < n / 16 => G::Q6_K,
                F::Q4_K_M if falcon && use_more_bits(i, n) => G::Q5_K,
                F::Q4_K_M if falcon => G::Q4_K,
                F::Q4_K_M if use_more_bits(i, n) => G::Q6_K,
                F::Q5_K_M if use_more_bits(i, n) => G::Q6_K,
                F::Q4_K_S if !falcon && i < n / 8 => G::Q5_K,
                _ => new,
            };
            self.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            new = match ft {
                F::Q3_K_L if falcon => G::Q4_K,
                _ if falcon => new,
                F::Q2_K | F::Q3_K_S | F::Q3_K_M | F::Q4_K_S | F::Q4_K_M if hp.n_expert == 8 => {
                    G::Q5_K
                }
                _ if hp.n_expert == 8 => new,
                F::Q2_K => G::Q3_K,
                F::Q3_K_M => G::Q4_K,
                F::Q3_K_L => G::Q5_K,
                _ => new,
            };
        } else if cat == Category::FfnGate {
            self.layer(self.i_ffn_gate, name)?;
            self.i_ffn_gate += 1;
        } else if cat == Category::FfnUp {
            self.layer(self.i_ffn_up, name)?;
            self.i_ffn_up += 1;
        }
        Ok(new)
    }
}

/// Plan `ftype` over `tensors` (already in llama-quantize's output order) with its mixture.
/// A chosen type without an encoder here is refused by name.
pub fn plan_mixture(
    tensors: &[TensorInfo],
    ftype: FileType,
    hp: &Hparams,
) -> Result<Vec<PlanEntry>, ToolError> {
    let default = ftype.default_type();
    let quantized = !matches!(default, GgmlType::F16 | GgmlType::F32);
    let mut st = State {
        hp,
        ftype,
        tied: !tensors.iter().any(|t| t.name == "output.weight"),
        n_attention_wv: tensors
            .iter()
            .filter(|t| is_attn_v(category(&t.name)))
            .count() as i64,
        i_attention_wv: 0,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
    };
    let mut plan = Vec::with_capacity(tensors.len());
    for t in tensors {
        let (ty, note) = if let Some(why) = kept(&hp.arch, t) {
            (t.ggml_type, Some(why))
        } else if quantized {
            let chosen = st.choose(t, default)?;
            let ty = fallback(t.row_len(), chosen);
            let cat = category(&t.name);
            if ftype == FileType::Q2_K_S
                && ty == GgmlType::Q2_K
                && !matches!(cat, Category::TokenEmbd | Category::Output)
            {
                return Err(ToolError::Refused(format!(
                    "{PROG} quantize: Q2_K_S needs an importance matrix for its q2_K tensors ('{}' is one); llama-quantize refuses it without --imatrix, and {PROG} has no imatrix support — use Q2_K or a larger type",
                    t.name
                )));
            }
            let note = if ty != chosen {
                Some(Note::Fallback {
                    from: chosen,
                    to: ty,
                })
            } else if chosen != default {
                Some(Note::Mixture(chosen))
            } else {
                None
            };
            (ty, note)
        } else {
            (default, None)
        };
        plan.push(entry(t, ty, note)?);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, dims: &[u64]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type: GgmlType::F32,
            offset: 0,
            n_bytes: 0,
        }
    }

    fn hp(n_layer: i64, n_gqa: u64) -> Hparams {
        Hparams {
            arch: "llama".into(),
            n_layer,
            n_gqa,
            n_expert: 0,
            is_70b: false,
        }
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(FileType::parse("q4_k_m"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::parse("Q4_K"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::parse("Q5_K"), Some(FileType::Q5_K_M));
        assert_eq!(FileType::parse("Q4_K_X"), None);
        assert!(FileType::is_mixture_name("Q4_K_M"));
        assert!(!FileType::is_mixture_name("Q6_K"));
        assert!(!FileType::is_mixture_name("q4_K"));
        assert!(FileType::is_mixture_name("Q2_K"));
        assert!(FileType::is_mixture_name("q3_k"));
        assert_eq!(FileType::Q4_K_M.id(), 15);
        assert_eq!(FileType::Q2_K_S.id(), 21);
        assert_eq!(FileType::Q3_K_L.default_type(), GgmlType::Q3_K);
    }

    #[test]
    fn use_more_bits_matches_llama_for_30_layers() {
        // n/8 = 3, 7n/8 = 26: the first 3, the last 4, and every third from layer 5.
        let got: Vec<i64> = (0..30).filter(|&i| use_more_bits(i, 30)).collect();
        assert_eq!(got, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    }

    #[test]
    fn q4_k_m_bumps_attn_v_and_ffn_down_and_the_tied_embedding() {
        let mut ts = vec![t("token_embd.weight", &[512, 100])];
        for l in 0..8 {
            for p in ["attn_q", "attn_v", "ffn_down"] {
                ts.push(t(&format!("blk.{l}.{p}.weight"), &[512, 512]));
            }
        }
        let plan = plan_mixture(&ts, FileType::Q4_K_M, &hp(8, 3)).unwrap();
        let ty = |n: &str| plan.iter().find(|e| e.name == n).unwrap().out_type();
        assert_eq!(ty("token_embd.weight"), GgmlType::Q6_K);
        // n = 8: use_more_bits is layers 0 (i < 1), 7 (i >= 7) and 3, 6 ((i - 1) % 3 == 2).
        for l in 0..8 {
            let bumped = [0, 3, 6, 7].contains(&l);
            let want = if bumped {
                GgmlType::Q6_K
            } else {
                GgmlType::Q4_K
            };
            assert_eq!(ty(&format!("blk.{l}.attn_v.weight")), want, "attn_v {l}");
            assert_eq!(
                ty(&format!("blk.{l}.ffn_down.weight")),
                want,
                "ffn_down {l}"
            );
            assert_eq!(ty(&format!("blk.{l}.attn_q.weight")), GgmlType::Q4_K);
        }
    }

    #[test]
    fn output_row_not_a_block_multiple_is_q8_0_and_fallbacks_apply_after() {
        let ts = vec![
            t("output.weight", &[544, 10]),
            t("token_embd.weight", &[544, 10]),
            t("blk.0.attn_v.weight", &[544, 544]),
        ];
        let plan = plan_mixture(&ts, FileType::Q4_K_S, &hp(1, 1)).unwrap();
        assert_eq!(plan[0].out_type(), GgmlType::Q8_0);
        // Untied: the embedding takes the default, then q4_K's fallback.
        assert_eq!(plan[1].out_type(), GgmlType::Q5_0);
        // attn_v in the first four: q5_K, which falls back to q5_1 on a 544 row.
        assert_eq!(
            plan[2].note,
            Some(Note::Fallback {
                from: GgmlType::Q5_K,
                to: GgmlType::Q5_1
            })
        );
    }

    #[test]
    fn q2_k_s_without_an_importance_matrix_is_refused_as_llama_quantize_does() {
        let ts = vec![t("blk.0.attn_q.weight", &[256, 256])];
        let e = plan_mixture(&ts, FileType::Q2_K_S, &hp(1, 1)).unwrap_err();
        assert!(
            e.to_string().contains("Q2_K_S needs an importance matrix"),
            "{e}"
        );
        let plan = plan_mixture(&ts, FileType::Q2_K, &hp(1, 1)).unwrap();
        assert_eq!(plan[0].out_type(), GgmlType::Q2_K);
    }

    #[test]
    fn q3_k_m_attn_v_and_ffn_down_rules() {
        let mut ts = Vec::new();
        for l in 0..16 {
            for p in ["attn_v", "ffn_down", "attn_output"] {
                ts.push(t(&format!("blk.{l}.{p}.weight"), &[256, 256]));
            }
        }
        let plan = plan_mixture(&ts, FileType::Q3_K_M, &hp(16, 1)).unwrap();
        let ty = |n: &str| plan.iter().find(|e| e.name == n).unwrap().out_type();
        // attn_v: the first two at q5_K, then q4_K; ffn_down: layer 0 (< 16/16) q5_K, then q4_K
        // (not falcon); attn_output: q4_K.
        assert_eq!(ty("blk.0.attn_v.weight"), GgmlType::Q5_K);
        assert_eq!(ty("blk.1.attn_v.weight"), GgmlType::Q5_K);
        assert_eq!(ty("blk.2.attn_v.weight"), GgmlType::Q4_K);
        assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q5_K);
        assert_eq!(ty("blk.1.ffn_down.weight"), GgmlType::Q4_K);
        assert_eq!(ty("blk.5.attn_output.weight"), GgmlType::Q4_K);
    }
}
