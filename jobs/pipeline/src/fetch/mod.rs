//! The fetch stage: HTTP Range reads of exactly the bytes each selected unit needs from the plan's
//! pinned upstream revision, journaled chunk by chunk (see `docs/fetch.md`).

pub mod plausible;
pub mod ranges;
