//! Read endpoints of the client (hub-protocol.md §4–§6, §9): revision info with `blobs=true`, the
//! recursive tree following absolute `Link` pages, paths-info, refs, and model listing by author and
//! search with paging.

use reqwest::header::HeaderMap;
use reqwest::Method;
use url::Url;

use super::{enc, json_body, HubClient, HubError, Idempotence};
use crate::protocol::{CommitInfo, ModelSummary, Refs, RepoId, RepoInfo, RepoType, TreeEntry};

/// Most pages followed before giving up (a hostile server could page forever).
const MAX_PAGES: usize = 100_000;

/// The `rel="next"` URL of a `Link` header.
pub(crate) fn next_link(h: &HeaderMap) -> Option<String> {
    super::answers::next_link(h.get("link")?.to_str().ok()?)
}

impl HubClient {
    /// Repo info at `rev` (`GET /api/models/{id}/revision/{rev}[?blobs=true]`).
    pub async fn revision_info(
        &self,
        repo: &RepoId,
        rev: &str,
        blobs: bool,
    ) -> Result<RepoInfo, HubError> {
        let u = self.api_url(
            repo,
            &format!(
                "/revision/{}{}",
                enc(rev),
                if blobs { "?blobs=true" } else { "" }
            ),
        )?;
        Ok(self.get_json(&u).await?.0)
    }

    async fn paged<T: serde::de::DeserializeOwned>(&self, first: Url) -> Result<Vec<T>, HubError> {
        let mut out = Vec::new();
        let mut next = Some(first);
        let mut pages = 0;
        while let Some(u) = next.take() {
            pages += 1;
            if pages > MAX_PAGES {
                return Err(HubError::Protocol {
                    url: u.to_string(),
                    detail: format!("more than {MAX_PAGES} pages"),
                });
            }
            let (items, h): (Vec<T>, _) = self.get_json(&u).await?;
            out.extend(items);
            if let Some(l) = next_link(&h) {
                let n = self.url(&l).map_err(|_| HubError::Protocol {
                    url: u.to_string(),
                    detail: format!("`Link` next is not an absolute URL: `{l}`"),
                })?;
                next = Some(n);
            }
        }
        Ok(out)
    }

    /// Every entry under `path` (root when `None`) at `rev`, following `Link` pages.
    pub async fn list_tree(
        &self,
        repo: &RepoId,
        rev: &str,
        path: Option<&str>,
        recursive: bool,
    ) -> Result<Vec<TreeEntry>, HubError> {
        let p = path
            .filter(|p| !p.is_empty())
            .map(|p| format!("/{}", enc(p)))
            .unwrap_or_default();
        let u = self.api_url(
            repo,
            &format!("/tree/{}{p}?recursive={recursive}&expand=false", enc(rev)),
        )?;
        self.paged(u).await
    }

    /// Tree entries of the named paths (missing ones are omitted), in batches of 500.
    pub async fn paths_info(
        &self,
        repo: &RepoId,
        rev: &str,
        paths: &[String],
    ) -> Result<Vec<TreeEntry>, HubError> {
        let u = self.api_url(repo, &format!("/paths-info/{}", enc(rev)))?;
        let mut out = Vec::new();
        for batch in paths.chunks(500) {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            for p in batch {
                form.append_pair("paths", p);
            }
            form.append_pair("expand", "false");
            let body = form.finish();
            let r = self
                .send(&Method::POST, &u, Idempotence::Idempotent, || {
                    Ok(self
                        .request(Method::POST, &u)
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(body.clone()))
                })
                .await?;
            let items: Vec<TreeEntry> = json_body(&u, r).await?;
            out.extend(items);
        }
        Ok(out)
    }

    /// The history of `rev`, newest first, every page.
    pub async fn list_commits(
        &self,
        repo: &RepoId,
        rev: &str,
    ) -> Result<Vec<CommitInfo>, HubError> {
        let u = self.api_url(repo, &format!("/commits/{}", enc(rev)))?;
        self.paged(u).await
    }

    /// Branches, tags (and pull requests when `include_prs`).
    pub async fn list_refs(&self, repo: &RepoId, include_prs: bool) -> Result<Refs, HubError> {
        let u = self.api_url(
            repo,
            if include_prs {
                "/refs?include_prs=1"
            } else {
                "/refs"
            },
        )?;
        Ok(self.get_json(&u).await?.0)
    }

    /// Repos of `kind` filtered by `author` and/or a `search` substring, all pages.
    pub async fn list_repos(
        &self,
        kind: RepoType,
        author: Option<&str>,
        search: Option<&str>,
    ) -> Result<Vec<ModelSummary>, HubError> {
        let mut u = self.url(&format!("{}/api/{}", self.endpoint(), kind.api_plural()))?;
        {
            let mut q = u.query_pairs_mut();
            if let Some(a) = author {
                q.append_pair("author", a);
            }
            if let Some(s) = search {
                q.append_pair("search", s);
            }
        }
        self.paged(u).await
    }

    /// Models filtered by `author` and/or `search`, all pages.
    pub async fn list_models(
        &self,
        author: Option<&str>,
        search: Option<&str>,
    ) -> Result<Vec<ModelSummary>, HubError> {
        self.list_repos(RepoType::Model, author, search).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_header() {
        let mut h = HeaderMap::new();
        h.insert(
            "link",
            "<http://h/api/models?cursor=2>; rel=\"next\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("http://h/api/models?cursor=2")
        );
        h.insert("link", "<http://h/x>; rel=\"prev\"".parse().unwrap());
        assert_eq!(next_link(&h), None);
    }
}
