//! The canonical names of the artifact formats (root file names, repository ids, revisions,
//! SHA-256 strings) are the `names` crate's: one validator per identifier, shared with the plan,
//! the hub and the ledger. Re-exported here so the formats' errors keep naming
//! `artifact::names::NameError`.

pub use names::{
    check_repo_id, check_revision, check_root_file_name, check_sha256, check_sha256_lower,
    NameError, MAX_FILE_NAME,
};
