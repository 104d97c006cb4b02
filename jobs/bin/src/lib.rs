//! Shared helpers of the thin `minirun-*` binaries.
