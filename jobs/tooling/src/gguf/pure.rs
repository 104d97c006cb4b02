//! `minirun-gguf quantize --pure`: the whole-file rules of llama.cpp's `llama-quantize --pure`
//! (llama-cpp-python 0.3.36's vendored llama.cpp, `src/llama-quant.cpp`), so the output file is
//! byte-identical to it, not only its tensor payloads:
//!
//! - which tensors are quantized: `tensor_allows_quantization` (at least 2 dims, the name ends in
//!   `weight`, plus its name exclusions: norms, expert gates, positional embeddings, …); every
//!   other tensor keeps its source type;
//! - no mixture and no tied-embedding rule (`--pure` skips `llama_tensor_get_type_impl`), only
//!   `tensor_type_fallback` for a row that is not a multiple of the block size (q4_K→q5_0,
//!   q5_K→q5_1, q6_K→q8_0, and F16 when that still does not divide the row, also for the 32-block
//!   targets);
//! - tensor order: the loader's `weights_map` (`weight_name_comparer`: layer number parsed by
//!   `sscanf("blk.%d.")`, -1 when absent, then the name byte-wise);
//! - index dims: `ggml_n_dims` (trailing 1s dropped, `gguf_add_tensor`);
//! - metadata: the source's keys in order, minus `split.{no,count,tensors.count}`, then
//!   `general.quantization_version` (= 2) and `general.file_type` removed and re-appended
//!   (`gguf_set_val_u32` removes a key and appends it);
//! - padding at `GGUF_DEFAULT_ALIGNMENT` (32) whatever `general.alignment` says, so a source with
//!   another alignment is refused rather than written as a file llama.cpp itself mis-pads.
//!
//! Spec: seed 003 §2.2 and §4.2.1 ("the uniform encoder this project implements is what --pure
//! selects"); decisions in docs/gguf.md "quantize --pure".

use std::cmp::Ordering;

use super::ops::{entry, Note, PlanEntry, ToolError, PROG};
use artifact::gguf::reader::TensorInfo;
use artifact::gguf::types::{GgmlType, Value};
use artifact::gguf::{Metadata, DEFAULT_ALIGNMENT};

/// llama.cpp's `tensor_allows_quantization` for `llama-quantize` defaults (`only_copy` false,
/// `quantize_output_tensor` true).
pub fn allows_quantization(arch: &str, name: &str, n_dims: usize) -> bool {
    if n_dims < 2 || !name.ends_with("weight") {
        return false;
    }
    const CONTAINS: &[&str] = &[
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        "attn_rel_b.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    const GLM5_NEXT: &[&str] = &[
        "hc_",
        "indexer.attn_q_b",
        "indexer.attn_k",
        "indexer.proj",
        "indexer_compressor_gate",
        "indexer_compressor_ape",
        "ssm_f_a.weight",
        "ssm_f_b.weight",
        "ssm_g_a.weight",
        "ssm_g_b.weight",
        "ssm_beta.weight",
        "attn_kv_a_mqa.weight",
        "attn_k_b.weight",
        "attn_v_b.weight",
    ];
    if CONTAINS.iter().any(|p| name.contains(p)) {
        return false;
    }
    if name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    !(arch == "glm5-next" && GLM5_NEXT.iter().any(|p| name.contains(p)))
}

/// Why llama-quantize keeps `t` at its source type whatever the target (`None`: it may be
/// quantized): 1-D, or excluded by [`allows_quantization`]'s name rules.
pub(crate) fn kept(arch: &str, t: &TensorInfo) -> Option<Note> {
    match allows_quantization(arch, &t.name, t.n_dims()) {
        true => None,
        false if t.n_dims() < 2 => Some(Note::OneD),
        false => Some(Note::Excluded),
    }
}

/// `sscanf(name, "blk.%d.", &layer)`: the layer number, or -1 when the name does not start with
/// `blk.` followed by an integer.
fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let rest = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
    match n.parse::<i64>() {
        Ok(v) if neg => -v,
        Ok(v) => v,
        Err(_) => -1,
    }
}

/// `weight_name_comparer`: layer first, then the name byte-wise.
pub fn llama_order(a: &str, b: &str) -> Ordering {
    layer_of(a).cmp(&layer_of(b)).then_with(|| a.cmp(b))
}

/// `tensor_type_fallback` for a row of `ncols` elements and a quantized `target`.
pub(crate) fn fallback(ncols: u64, target: GgmlType) -> GgmlType {
    if ncols % target.block_size() == 0 {
        return target;
    }
    let ret = match target {
        GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        t => t,
    };
    if ncols % ret.block_size() != 0 {
        GgmlType::F16
    } else {
        ret
    }
}

/// The tensors in llama-quantize's output order, with `ggml_n_dims` dims.
pub fn reorder(tensors: &[TensorInfo]) -> Vec<TensorInfo> {
    let mut v: Vec<TensorInfo> = tensors
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t.dims.truncate(t.n_dims());
            t
        })
        .collect();
    v.sort_by(|a, b| llama_order(&a.name, &b.name));
    v
}

/// Plan `want` over `tensors` (already in output order) with llama-quantize --pure's rules.
pub fn plan_pure(
    tensors: &[TensorInfo],
    want: GgmlType,
    arch: &str,
) -> Result<Vec<PlanEntry>, ToolError> {
    let quantized = !matches!(want, GgmlType::F16 | GgmlType::F32);
    let mut plan = Vec::with_capacity(tensors.len());
    for t in tensors {
        let (ty, note) = if let Some(why) = kept(arch, t) {
            (t.ggml_type, Some(why))
        } else if quantized {
            let ty = fallback(t.row_len(), want);
            (ty, (ty != want).then_some(Note::Demoted(ty)))
        } else {
            (want, None)
        };
        plan.push(entry(t, ty, note)?);
    }
    Ok(plan)
}

/// The output metadata of llama-quantize (with or without `--pure`): split keys removed, the two quantization keys
/// re-appended. Refuses a source whose `general.alignment` is not 32 (llama-quantize pads at 32).
pub fn pure_metadata(
    src: &Metadata,
    alignment: u64,
    file_type: u32,
    shown: &str,
) -> Result<Metadata, ToolError> {
    if alignment != DEFAULT_ALIGNMENT {
        return Err(ToolError::Refused(format!(
            "{PROG} quantize: {shown} has general.alignment = {alignment}; --pure and the llama-quantize mixtures reproduce llama-quantize, which pads tensor data at {DEFAULT_ALIGNMENT} whatever the key says — rewrite the source at alignment {DEFAULT_ALIGNMENT} or quantize to a seed target (q4_0 … f32 without --pure)"
        )));
    }
    let mut md = src.clone();
    for k in [
        "general.quantization_version",
        "general.file_type",
        "split.no",
        "split.count",
        "split.tensors.count",
    ] {
        md.remove(k);
    }
    md.kv
        .push(("general.quantization_version".into(), Value::U32(2)));
    md.kv
        .push(("general.file_type".into(), Value::U32(file_type)));
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_layer_then_name() {
        let mut v = vec![
            "blk.10.attn_q.weight",
            "output.weight",
            "blk.2.ffn_up.weight",
            "blk.2.attn_k.weight",
            "token_embd.weight",
            "output_norm.weight",
        ];
        v.sort_by(|a, b| llama_order(a, b));
        assert_eq!(
            v,
            [
                "output.weight",
                "output_norm.weight",
                "token_embd.weight",
                "blk.2.attn_k.weight",
                "blk.2.ffn_up.weight",
                "blk.10.attn_q.weight",
            ]
        );
        assert_eq!(layer_of("blk.x.y"), -1);
        assert_eq!(layer_of("blk.7"), 7);
    }

    #[test]
    fn name_rules_and_fallbacks() {
        assert!(allows_quantization("qwen2", "blk.0.attn_q.weight", 2));
        assert!(!allows_quantization("qwen2", "blk.0.attn_q.bias", 2));
        assert!(!allows_quantization("qwen2", "blk.0.attn_q_norm.weight", 2));
        assert!(!allows_quantization("qwen2", "blk.0.attn_q.weight", 1));
        assert!(!allows_quantization(
            "qwen2",
            "blk.0.ffn_gate_inp.weight",
            2
        ));
        assert!(!allows_quantization("glm5-next", "blk.0.hc_x.weight", 2));
        assert!(allows_quantization("qwen2", "blk.0.hc_x.weight", 2));
        assert_eq!(fallback(544, GgmlType::Q4_K), GgmlType::Q5_0);
        assert_eq!(fallback(544, GgmlType::Q6_K), GgmlType::Q8_0);
        assert_eq!(fallback(48, GgmlType::Q5_K), GgmlType::F16);
        assert_eq!(fallback(48, GgmlType::Q4_0), GgmlType::F16);
        assert_eq!(fallback(64, GgmlType::Q4_0), GgmlType::Q4_0);
        assert_eq!(fallback(512, GgmlType::Q4_K), GgmlType::Q4_K);
        assert_eq!(fallback(544, GgmlType::Q3_K), GgmlType::Q4_0);
        assert_eq!(fallback(48, GgmlType::Q2_K), GgmlType::F16);
    }
}
