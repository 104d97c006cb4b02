//! A guarded commit that finishes on a lossy link (docs/hub.md §7, docs/publish.md §5).
//!
//! A commit POST is not idempotent, so [`HubClient::commit`] never resends it blindly. When its
//! outcome is unknown — the response was lost, the connection broke after sending, or the hub
//! answered 5xx/429/408 — [`HubClient::commit_guarded`] asks the hub instead of guessing: it
//! re-reads the branch head and, when the head moved, the tree at the new head.
//! - head still the `parent_commit` the request names (or still absent): the commit did not happen;
//!   it is sent again after a backoff;
//! - head moved and its tree holds every operation (each file with the requested oid, each deleted
//!   path gone): the commit happened; the new head is the answer;
//! - head moved to anything else: [`HubError::HeadMoved`], never overwritten.
//!
//! Only commits guarded by the head they were built on are resolved: a commit with no
//! `parent_commit` on a branch that exists cannot be told apart from someone else's, so its
//! unknown outcome is returned as it is.

use std::collections::BTreeMap;

use super::{CommitOperation, CommitRequest, HubClient, HubError};
use crate::protocol::{self, CommitResponse, RepoId, TreeEntry};

/// Whether a failed commit may or may not have been applied (and is worth resolving).
fn outcome_unsure(e: &HubError) -> bool {
    match e {
        HubError::CommitOutcomeUnknown { .. } | HubError::Transport { .. } => true,
        HubError::Http { status, .. } => super::retry::retryable_status(*status),
        _ => false,
    }
}

/// True when the tree `at` holds every operation of `ops`.
fn holds(at: &BTreeMap<&str, &TreeEntry>, ops: &[CommitOperation]) -> bool {
    ops.iter().all(|op| match op {
        CommitOperation::Regular { path, content } => at
            .get(path.as_str())
            .is_some_and(|e| e.lfs.is_none() && e.oid == protocol::git_blob_sha1(content)),
        CommitOperation::Lfs { path, sha256, .. } => at
            .get(path.as_str())
            .and_then(|e| e.lfs.as_ref())
            .is_some_and(|l| &l.oid == sha256),
        CommitOperation::DeleteFile { path } => !at.contains_key(path.as_str()),
        CommitOperation::DeleteFolder { path } => {
            let dir = format!("{}/", path.trim_end_matches('/'));
            !at.keys().any(|p| p.starts_with(&dir))
        }
    })
}

impl HubClient {
    /// The commit id `branch` points at now, `None` when it does not exist.
    pub async fn branch_head(
        &self,
        repo: &RepoId,
        branch: &str,
    ) -> Result<Option<String>, HubError> {
        let refs = self.list_refs(repo, false).await?;
        Ok(refs
            .branches
            .into_iter()
            .find(|r| r.name == branch)
            .map(|r| r.target_commit))
    }

    /// [`HubClient::commit`], resolving an unknown outcome by asking the hub (module docs). At
    /// most `max_attempts` sends (the client's [`super::RetryPolicy`]), with its backoff between
    /// them; a 412 is returned at once.
    pub async fn commit_guarded(
        &self,
        repo: &RepoId,
        branch: &str,
        req: &CommitRequest,
    ) -> Result<CommitResponse, HubError> {
        let mut attempt = 0u32;
        loop {
            let err = match self.commit(repo, branch, req).await {
                Ok(r) => return Ok(r),
                // A long rate limit refused the commit before applying it: the caller's to wait.
                Err(e) if e.long_rate_limit(self.retry.max_delay).is_some() => return Err(e),
                // A resend refused because the head moved: the earlier send may have landed
                // after the branch was asked (the Hub applies a commit it timed out on).
                Err(e @ HubError::HeadMoved { .. }) if attempt > 0 => {
                    return match self.applied(repo, branch, req).await? {
                        Some(r) => Ok(r),
                        None => Err(e),
                    }
                }
                Err(e) if outcome_unsure(&e) => e,
                Err(e) => return Err(e),
            };
            attempt += 1;
            let wait = self.retry.delay(attempt - 1, err.retry_after());
            tracing::warn!(branch, error = %err, wait_ms = wait.as_millis() as u64, "commit outcome unknown; asking the hub");
            tokio::time::sleep(wait).await;
            let head = self.branch_head(repo, branch).await?;
            if head == req.parent_commit {
                if attempt >= self.retry.max_attempts.max(1) {
                    return Err(err);
                }
                continue; // not applied: send it again
            }
            let (Some(head), Some(parent)) = (head, req.parent_commit.as_ref()) else {
                return Err(err);
            };
            if let Some(r) = self.applied_at(repo, branch, &head, req).await? {
                return Ok(r);
            }
            return Err(HubError::HeadMoved {
                url: format!("{}/{}", self.endpoint(), repo.id()),
                revision: branch.to_owned(),
                parent: parent.clone(),
                request_id: None,
                message: format!(
                    "after an unknown commit outcome ({err}) the head is {head}, which is neither the parent nor this commit"
                ),
            });
        }
    }

    /// The branch's head, when its tree holds every operation of `req` (the commit was applied).
    async fn applied(
        &self,
        repo: &RepoId,
        branch: &str,
        req: &CommitRequest,
    ) -> Result<Option<CommitResponse>, HubError> {
        match self.branch_head(repo, branch).await? {
            Some(head) => self.applied_at(repo, branch, &head, req).await,
            None => Ok(None),
        }
    }

    /// `head`, when its tree holds every operation of `req`.
    async fn applied_at(
        &self,
        repo: &RepoId,
        branch: &str,
        head: &str,
        req: &CommitRequest,
    ) -> Result<Option<CommitResponse>, HubError> {
        let tree = self.list_tree(repo, head, None, true).await?;
        let at: BTreeMap<&str, &TreeEntry> = tree
            .iter()
            .filter(|e| e.is_file())
            .map(|e| (e.path.as_str(), e))
            .collect();
        if !holds(&at, &req.operations) {
            return Ok(None);
        }
        tracing::info!(branch, commit = %head, "the commit was applied; its answer was lost");
        Ok(Some(CommitResponse {
            success: true,
            commit_url: format!("{}/{}/commit/{head}", self.endpoint(), repo.id()),
            commit_oid: head.to_owned(),
            pull_request_url: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TreeLfs;

    fn entry(path: &str, oid: &str, lfs: Option<&str>) -> TreeEntry {
        TreeEntry {
            kind: "file".into(),
            oid: oid.into(),
            size: 1,
            path: path.into(),
            lfs: lfs.map(|o| TreeLfs {
                oid: o.into(),
                size: 1,
                pointer_size: 0,
            }),
        }
    }

    #[test]
    fn holds_checks_every_operation() {
        let a = protocol::git_blob_sha1(b"a");
        let t = [
            entry("a.txt", &a, None),
            entry("w.bin", "x", Some("f00d")),
            entry("d/x.txt", "y", None),
        ];
        let at: BTreeMap<&str, &TreeEntry> = t.iter().map(|e| (e.path.as_str(), e)).collect();
        let reg = |c: &'static [u8]| CommitOperation::Regular {
            path: "a.txt".into(),
            content: bytes::Bytes::from_static(c),
        };
        let lfs = |o: &str| CommitOperation::Lfs {
            path: "w.bin".into(),
            sha256: o.into(),
            size: None,
        };
        let del = |p: &str| CommitOperation::DeleteFile { path: p.into() };
        assert!(holds(&at, &[reg(b"a"), lfs("f00d"), del("gone")]));
        assert!(!holds(&at, &[reg(b"b")]));
        assert!(!holds(&at, &[lfs("beef")]));
        assert!(!holds(&at, &[del("a.txt")]));
        let folder = |p: &str| CommitOperation::DeleteFolder { path: p.into() };
        assert!(!holds(&at, &[folder("d")]));
        assert!(holds(&at, &[folder("e/")]));
    }
}
