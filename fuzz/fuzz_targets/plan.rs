//! A plan's TOML (docs/plan.md): never panics; whatever parses also resolves against a small
//! upstream listing, selects units and says whether it is runnable without panicking.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pipeline::plan::{Plan, UpstreamTensor};

fn tensors() -> Vec<UpstreamTensor> {
    let f = "model-00002-of-00046.safetensors";
    vec![
        UpstreamTensor::new("layers.0.attn.wq_a.weight", "F8_E4M3", &[256, 256], f),
        UpstreamTensor::new("layers.0.attn.wq_a.scale", "F8_E8M0", &[2, 2], f),
        UpstreamTensor::new("layers.0.ffn.experts.0.w1.weight", "I8", &[64, 64], f),
        UpstreamTensor::new("layers.0.ffn.experts.0.w1.scale", "F8_E8M0", &[64, 4], f),
        UpstreamTensor::new("embed.weight", "BF16", &[8, 8], f),
    ]
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(plan) = Plan::parse(text, Path::new("fuzz.toml")) {
        let _ = plan.resolve(&tensors());
        let _ = plan.select_units(Some("layers00..layers02,global00"));
        let _ = plan.ensure_runnable();
    }
});
