//! Validation of `[identity.*]` and of the artifact root (`plans/README.md` §"Identity"): where
//! the tokenizer and config identity files come from, that the tokenizer's licence is a licence
//! file some source copies (seed 000: license only on the tokenizer object), and that every file
//! the artifact root receives has one distinct canonical name.

use super::names::{RepoPath, RootFileName};
use super::raw::{RawIdentity, RawPlan};
use super::validate::{R, V};
use super::{IdentitySource, Source};
use std::collections::BTreeMap;
use toml::Spanned;

/// Root names the artifact itself writes; an upstream file may not take them.
const RESERVED_ROOT: &[&str] = &["index.json", ".gitattributes", "README.md"];

impl V<'_> {
    pub(super) fn identity(
        &self,
        id: Option<&Spanned<RawIdentity>>,
        multi: bool,
        sources: &[Source],
    ) -> R<(Option<IdentitySource>, Option<IdentitySource>)> {
        let Some(id) = id else {
            return Ok((None, None));
        };
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        let tokenizer = match &id.get_ref().tokenizer {
            None => None,
            Some(t) => {
                let r = t.get_ref();
                let source = self.source_ref(
                    r.source.as_ref(),
                    "identity.tokenizer",
                    t.span(),
                    multi,
                    &names,
                )?;
                let lic = r.license.get_ref();
                let declared = sources
                    .iter()
                    .find(|s| s.name == source)
                    .and_then(|s| s.license.as_ref());
                if declared.is_none_or(|l| &l.file != lic) {
                    return self.err(r.license.span(), "identity.tokenizer.license", format!("`{lic}` is not the licence file of source `{source}`: declare `license = \"{lic}\"` in that source table (the licence must be copied to the artifact root)"));
                }
                Some(IdentitySource {
                    source,
                    file: r.file.get_ref().clone(),
                    from: self.from(r.from.as_ref(), r.file.get_ref())?,
                    license: Some(lic.clone()),
                })
            }
        };
        let config = match &id.get_ref().config {
            None => None,
            Some(c) => {
                let r = c.get_ref();
                let source = self.source_ref(
                    r.source.as_ref(),
                    "identity.config",
                    c.span(),
                    multi,
                    &names,
                )?;
                Some(IdentitySource {
                    source,
                    file: r.file.get_ref().clone(),
                    from: self.from(r.from.as_ref(), r.file.get_ref())?,
                    license: None,
                })
            }
        };
        Ok((tokenizer, config))
    }

    fn from(&self, from: Option<&Spanned<RepoPath>>, file: &RootFileName) -> R<RepoPath> {
        match from {
            Some(f) => Ok(f.get_ref().clone()),
            None => RepoPath::new(file.as_str()).map_err(|e| self.loc.invalid(0..0, "identity", e)),
        }
    }

    /// Every file the artifact root receives has one distinct name.
    pub(super) fn root_names(
        &self,
        raw: &RawPlan,
        sources: &[Source],
        tok: Option<&IdentitySource>,
        cfg: Option<&IdentitySource>,
    ) -> R<()> {
        let mut seen: BTreeMap<String, String> = RESERVED_ROOT
            .iter()
            .map(|r| (r.to_string(), "the artifact itself".to_owned()))
            .collect();
        let span = |k: &str| -> std::ops::Range<usize> {
            let whole = raw.identity.as_ref().map(|i| i.span());
            match (k, raw.identity.as_ref()) {
                ("tokenizer", Some(i)) => i
                    .get_ref()
                    .tokenizer
                    .as_ref()
                    .map(|t| t.get_ref().file.span()),
                ("config", Some(i)) => i.get_ref().config.as_ref().map(|t| t.get_ref().file.span()),
                _ => whole,
            }
            .unwrap_or(0..0)
        };
        let mut add = |name: &str,
                       what: String,
                       span: std::ops::Range<usize>,
                       key: &str|
         -> R<()> {
            if let Some(prev) = seen.insert(name.to_owned(), what.clone()) {
                // The same upstream file named twice (e.g. LICENSE as licence and as tokenizer licence) is fine.
                if prev != what {
                    return self.err(span, key, format!("root file `{name}` would be written by {what} and by {prev}; give one of them another root name"));
                }
            }
            Ok(())
        };
        let src_span = |n: &str| -> std::ops::Range<usize> {
            match (&raw.source, &raw.sources) {
                (Some(s), _) => s.span(),
                (_, Some(m)) => m.get_ref().get(n).map_or(m.span(), |s| s.span()),
                _ => 0..0,
            }
        };
        for s in sources {
            let key = if raw.sources.is_some() {
                format!("sources.{}", s.name)
            } else {
                "source".to_owned()
            };
            if let Some(l) = &s.license {
                add(
                    l.file.as_str(),
                    format!("licence `{}` of `{}@{}`", l.from, s.repo, s.revision),
                    src_span(&s.name),
                    &format!("{key}.license"),
                )?;
            }
            for f in &s.files {
                let base = f.as_str().rsplit('/').next().unwrap_or_default();
                if RootFileName::new(base).is_err() {
                    return self.err(
                        src_span(&s.name),
                        format!("{key}.files"),
                        format!("`{f}` has no canonical root file name"),
                    );
                }
                add(
                    base,
                    format!("`{f}` of source `{}`", s.name),
                    src_span(&s.name),
                    &format!("{key}.files"),
                )?;
            }
        }
        for (k, id) in [("tokenizer", tok), ("config", cfg)] {
            if let Some(id) = id {
                add(
                    id.file.as_str(),
                    format!("`{}` of source `{}`", id.from, id.source),
                    span(k),
                    &format!("identity.{k}.file"),
                )?;
            }
        }
        Ok(())
    }
}
