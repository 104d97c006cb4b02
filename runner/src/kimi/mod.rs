//! Kimi (Moonshot AI): what the runner knows of the family so far — its tokenizer
//! ([`tokenizer`]). The K3 forward is issue 50's reference and issue 55's device path
//! (docs/runner-kimi-k3.md).

pub mod ops;
pub mod tokenizer;
