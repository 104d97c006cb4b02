//! Filesystem identities and the remount rule (`docs/verify.md` §3–§4). The code lives in
//! `artifact::fsid` so the runner's verified loads use it without depending on the pipeline;
//! re-exported here so `pipeline::verify::fsid` keeps its paths.

pub use artifact::fsid::*;
