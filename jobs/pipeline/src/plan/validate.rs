//! Raw plan → validated [`Plan`]: every cross-field rule of `plans/README.md` (one source table
//! kind, index shape vs sources, `-minirun` target, defaults, unit templates expanded and unique,
//! rules complete per container mode, identity files and licences present, root names unique).
//! Each refusal names the line and key of the value at fault via its `toml::Spanned` span.

use super::error::{Locator, PlanError};
use super::names::{RepoPath, RootFileName, UnitName};
use super::pattern::Template;
use super::raw::*;
use super::*;
use std::collections::{BTreeMap, BTreeSet};
use toml::Spanned;

/// Most units one template may expand to (a typo such as `[0, 4200]` is refused, not built).
const MAX_UNITS: i64 = 4096;
/// Bounds of `run.concurrency`.
const MAX_CONCURRENCY: u32 = 256;
/// Bounds of `run.chunk_mib`.
const MAX_CHUNK_MIB: u32 = 4096;
/// Bounds of `tiles.rows_per_tile` and `tiles.memory_budget_mib`.
pub(super) const MAX_ROWS_PER_TILE: u32 = 1 << 20;
const MAX_BUDGET_MIB: u32 = 1 << 20;

pub(super) type R<T> = Result<T, PlanError>;

pub(super) fn parse(text: &str, path: &Path) -> R<Plan> {
    let loc = Locator::new(path, text);
    let raw: RawPlan = toml::from_str(text).map_err(|e| loc.parse_error(text, &e))?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "plan".to_owned());
    V { loc: &loc }.plan(raw, name, path)
}

pub(super) struct V<'a> {
    pub(super) loc: &'a Locator,
}

impl V<'_> {
    pub(super) fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        key: impl Into<String>,
        reason: impl Into<String>,
    ) -> R<T> {
        Err(self.loc.invalid(span, key, reason))
    }

    fn plan(&self, raw: RawPlan, name: String, path: &Path) -> R<Plan> {
        if *raw.schema.get_ref() != SCHEMA_VERSION {
            return self.err(
                raw.schema.span(),
                "schema",
                format!(
                    "schema {} is not supported; this build reads `schema = {SCHEMA_VERSION}`",
                    raw.schema.get_ref()
                ),
            );
        }
        let (status, status_line) = self.status(&raw)?;
        let (multi_source, sources) = self.sources(&raw)?;
        if status == PlanStatus::Ready {
            if let Some(s) = sources.iter().find(|s| s.revision.as_str() == NULL_COMMIT) {
                let span = match (&raw.source, &raw.sources) {
                    (Some(x), _) => x.get_ref().revision.span(),
                    (_, Some(m)) => m
                        .get_ref()
                        .get(&s.name)
                        .map_or(m.span(), |x| x.get_ref().revision.span()),
                    _ => 0..0,
                };
                return self.err(span, format!("{}.revision", s.key), "the null commit pins nothing; pin the real commit, or mark the plan `status = \"draft\"` and say in `draft_reason` that the revision is unknown");
            }
        }
        let index_shape = self.index_shape(&raw, multi_source)?;
        let target = self.target(&raw.target, &sources)?;
        let run = self.run(raw.run.as_ref(), &name)?;
        let tiles = self.tiles(raw.tiles.as_ref())?;
        let src_names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        let units = self.units(&raw.units, multi_source, &src_names)?;
        let rules = self.rules(&raw.rules, multi_source, &src_names, &tiles)?;
        let omit = self.omit(raw.omit.as_ref(), multi_source, &src_names)?;
        let (tokenizer, config) = self.identity(raw.identity.as_ref(), multi_source, &sources)?;
        self.root_names(&raw, &sources, tokenizer.as_ref(), config.as_ref())?;
        Ok(Plan {
            path: path.to_path_buf(),
            name,
            schema: SCHEMA_VERSION,
            family: match raw.family.get_ref() {
                RawFamily::DeepseekV4 => Family::DeepseekV4,
                RawFamily::KimiK3 => Family::KimiK3,
                RawFamily::MinimaxH3 => Family::MinimaxH3,
            },
            status,
            index_shape,
            multi_source,
            sources,
            target,
            run,
            tiles,
            units,
            rules,
            omit,
            tokenizer,
            config,
            locator: self.loc.clone(),
            status_line,
            list_lines: (
                self.loc.line(raw.units.span().start),
                self.loc.line(raw.rules.span().start),
            ),
        })
    }

    fn status(&self, raw: &RawPlan) -> R<(PlanStatus, usize)> {
        let draft = raw
            .status
            .as_ref()
            .is_some_and(|s| *s.get_ref() == RawStatus::Draft);
        let line = raw
            .status
            .as_ref()
            .map_or(1, |s| self.loc.line(s.span().start));
        match (&raw.status, &raw.draft_reason, draft) {
            (Some(s), None, true) => self.err(
                s.span(),
                "status",
                "a draft needs `draft_reason = \"…\"` naming what is unknown",
            ),
            (Some(_), Some(r), true) => {
                if r.get_ref().trim().is_empty() {
                    return self.err(r.span(), "draft_reason", "say what is unknown");
                }
                Ok((PlanStatus::Draft { reason: r.get_ref().trim().to_owned() }, line))
            }
            (_, Some(r), false) => self.err(
                r.span(),
                "draft_reason",
                "`draft_reason` is only allowed with `status = \"draft\"`; remove it, or mark the plan a draft",
            ),
            _ => Ok((PlanStatus::Ready, line)),
        }
    }

    fn sources(&self, raw: &RawPlan) -> R<(bool, Vec<Source>)> {
        match (&raw.source, &raw.sources) {
            (Some(_), Some(m)) => self.err(
                m.span(),
                "sources",
                "declare either one `[source]` or several `[sources.NAME]`, not both",
            ),
            (None, None) => self.err(
                raw.schema.span(),
                "source",
                "the plan names no upstream: add a `[source]` table (or `[sources.NAME]` tables)",
            ),
            (Some(s), None) => Ok((
                false,
                vec![self.source(SINGLE_SOURCE_NAME, "source", s, false)?],
            )),
            (None, Some(m)) => {
                if m.get_ref().len() < 2 {
                    return self.err(
                        m.span(),
                        "sources",
                        "a multi-source plan needs at least two `[sources.NAME]`; for one upstream write `[source]`",
                    );
                }
                let mut out = Vec::new();
                for (n, s) in m.get_ref() {
                    let key = format!("sources.{n}");
                    if let Err(e) = UnitName::new(n) {
                        return self.err(s.span(), key, format!("bad source name: {e}"));
                    }
                    out.push(self.source(n, &key, s, true)?);
                }
                Ok((true, out))
            }
        }
    }

    fn source(&self, name: &str, key: &str, s: &Spanned<RawSource>, multi: bool) -> R<Source> {
        let r = s.get_ref();
        if r.weights.get_ref().is_empty() {
            return self.err(
                r.weights.span(),
                format!("{key}.weights"),
                "list at least one glob naming the safetensors files",
            );
        }
        for w in r.weights.get_ref() {
            if let Err(e) = RepoPath::new(&w.get_ref().replace(['*', '?'], "x")) {
                return self.err(w.span(), format!("{key}.weights"), format!("bad glob: {e}"));
            }
        }
        if multi && r.role.is_none() {
            return self.err(s.span(), key, "each `[sources.NAME]` needs `role = \"…\"` (what this upstream contributes; index.json carries it)");
        }
        if let Some(role) = &r.role {
            if role.get_ref().trim().is_empty() {
                return self.err(
                    role.span(),
                    format!("{key}.role"),
                    "say what this upstream contributes",
                );
            }
        }
        if multi && r.license.is_none() {
            return self.err(s.span(), key, "each `[sources.NAME]` needs `license = \"LICENSE\"` (its licence file; index.json carries it)");
        }
        if let (None, Some(a)) = (&r.license, &r.license_as) {
            return self.err(
                a.span(),
                format!("{key}.license_as"),
                "`license_as` needs `license`",
            );
        }
        let license = match &r.license {
            None => None,
            Some(l) => {
                let base = l.get_ref().as_str().rsplit('/').next().unwrap_or_default();
                let file = match &r.license_as {
                    Some(a) => a.get_ref().clone(),
                    None => match RootFileName::new(base) {
                        Ok(f) => f,
                        Err(e) => {
                            return self.err(
                                l.span(),
                                format!("{key}.license"),
                                format!("{e}; set `license_as`"),
                            )
                        }
                    },
                };
                Some(LicenseFile {
                    from: l.get_ref().clone(),
                    file,
                })
            }
        };
        for (k, v) in [
            ("expected_tensors", &r.expected_tensors),
            ("expected_weight_files", &r.expected_weight_files),
        ] {
            if let Some(v) = v {
                if *v.get_ref() == 0 {
                    return self.err(
                        v.span(),
                        format!("{key}.{k}"),
                        "must be positive; remove it to skip the check",
                    );
                }
            }
        }
        Ok(Source {
            name: name.to_owned(),
            repo: r.repo.get_ref().clone(),
            revision: r.revision.get_ref().clone(),
            weights: r
                .weights
                .get_ref()
                .iter()
                .map(|w| w.get_ref().clone())
                .collect(),
            role: r.role.as_ref().map(|x| x.get_ref().trim().to_owned()),
            license,
            files: r
                .files
                .as_ref()
                .map(|f| f.get_ref().iter().map(|p| p.get_ref().clone()).collect())
                .unwrap_or_default(),
            expected_tensors: r.expected_tensors.as_ref().map(|v| *v.get_ref()),
            expected_weight_files: r.expected_weight_files.as_ref().map(|v| *v.get_ref()),
            line: self.loc.line(s.span().start),
            key: key.to_owned(),
        })
    }

    fn index_shape(&self, raw: &RawPlan, multi: bool) -> R<IndexShape> {
        let shape = match raw.index_shape.get_ref() {
            RawIndexShape::SingleSourceTotals => IndexShape::SingleSourceTotals,
            RawIndexShape::SingleSourceUnits => IndexShape::SingleSourceUnits,
            RawIndexShape::MultiSourceUnits => IndexShape::MultiSourceUnits,
        };
        let wants_multi = shape == IndexShape::MultiSourceUnits;
        if wants_multi != multi {
            let reason = if multi {
                format!("`{}` describes one upstream but the plan declares `[sources.NAME]`; use `multiSourceUnits`", shape.as_str())
            } else {
                "`multiSourceUnits` needs `[sources.NAME]` tables; with one `[source]` use `singleSourceUnits` or `singleSourceTotals`".to_owned()
            };
            return self.err(raw.index_shape.span(), "index_shape", reason);
        }
        Ok(shape)
    }

    fn target(&self, t: &Spanned<RawTarget>, sources: &[Source]) -> R<Target> {
        let repo = t.get_ref().repo.get_ref();
        if !repo.as_str().ends_with(TARGET_SUFFIX) {
            return self.err(
                t.get_ref().repo.span(),
                "target.repo",
                format!("`{repo}` does not end in `{TARGET_SUFFIX}`: the suffix is the discovery contract; rename it e.g. `{repo}{TARGET_SUFFIX}`"),
            );
        }
        if sources.iter().any(|s| &s.repo == repo) {
            return self.err(
                t.get_ref().repo.span(),
                "target.repo",
                "the target may not be an upstream repository",
            );
        }
        Ok(Target {
            repo: repo.clone(),
            branch: t.get_ref().branch.get_ref().clone(),
        })
    }

    fn run(&self, r: Option<&Spanned<RawRun>>, plan_name: &str) -> R<RunSettings> {
        let r = r.map(|r| r.get_ref());
        let work_dir = match r.and_then(|r| r.work_dir.as_ref()) {
            Some(w) if w.get_ref().trim().is_empty() => {
                return self.err(
                    w.span(),
                    "run.work_dir",
                    "give a directory, or remove the key for the default",
                )
            }
            Some(w) => PathBuf::from(w.get_ref()),
            None => Path::new(DEFAULT_WORK_ROOT).join(plan_name),
        };
        let endpoint = match r.and_then(|r| r.endpoint.as_ref()) {
            None => None,
            Some(e) => {
                let s = e.get_ref();
                if let Err(why) = hub::protocol::parse_endpoint(s) {
                    return self.err(
                        e.span(),
                        "run.endpoint",
                        format!(
                            "{why} (tokens come from `HF_TOKEN` or a token file, never the plan)"
                        ),
                    );
                }
                Some(s.trim_end_matches('/').to_owned())
            }
        };
        let concurrency = self.bounded(
            r.and_then(|r| r.concurrency.as_ref()),
            "run.concurrency",
            DEFAULT_CONCURRENCY,
            MAX_CONCURRENCY,
        )?;
        let chunk = self.bounded(
            r.and_then(|r| r.chunk_mib.as_ref()),
            "run.chunk_mib",
            DEFAULT_CHUNK_MIB,
            MAX_CHUNK_MIB,
        )?;
        let disk_budget = match r.and_then(|r| r.disk_budget.as_ref()) {
            None => None,
            Some(b) => match contract::parse_size(b.get_ref()) {
                Ok(n) => Some(n),
                Err(why) => return self.err(b.span(), "run.disk_budget", why),
            },
        };
        Ok(RunSettings {
            work_dir,
            endpoint,
            concurrency,
            chunk_bytes: u64::from(chunk) << 20,
            disk_budget,
        })
    }

    fn bounded(&self, v: Option<&Spanned<u32>>, key: &str, default: u32, max: u32) -> R<u32> {
        match v {
            None => Ok(default),
            Some(v) if (1..=max).contains(v.get_ref()) => Ok(*v.get_ref()),
            Some(v) => self.err(
                v.span(),
                key,
                format!(
                    "{} is out of range; use 1..={max} (default {default})",
                    v.get_ref()
                ),
            ),
        }
    }

    fn tiles(&self, t: Option<&Spanned<RawTiles>>) -> R<TileSettings> {
        let t = t.map(|t| t.get_ref());
        let rows = self.bounded(
            t.and_then(|t| t.rows_per_tile.as_ref()),
            "tiles.rows_per_tile",
            DEFAULT_ROWS_PER_TILE,
            MAX_ROWS_PER_TILE,
        )?;
        let mib = self.bounded(
            t.and_then(|t| t.memory_budget_mib.as_ref()),
            "tiles.memory_budget_mib",
            DEFAULT_MEMORY_BUDGET_MIB,
            MAX_BUDGET_MIB,
        )?;
        Ok(TileSettings {
            rows_per_tile: rows,
            memory_budget_bytes: u64::from(mib) << 20,
        })
    }

    fn units(
        &self,
        units: &Spanned<Vec<Spanned<RawUnit>>>,
        multi: bool,
        sources: &[&str],
    ) -> R<Vec<Unit>> {
        if units.get_ref().is_empty() {
            return self.err(units.span(), "units", "declare at least one `[[units]]`");
        }
        let mut out: Vec<Unit> = Vec::new();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut total: i64 = 0;
        for (i, u) in units.get_ref().iter().enumerate() {
            let key = format!("units[{i}]");
            let r = u.get_ref();
            let source = self.source_ref(r.source.as_ref(), &key, u.span(), multi, sources)?;
            let name_t = Template::parse(r.name.get_ref())
                .or_else(|e| self.err(r.name.span(), format!("{key}.name"), e))?;
            let mut pats = Vec::new();
            if r.tensors.get_ref().is_empty() {
                return self.err(
                    r.tensors.span(),
                    format!("{key}.tensors"),
                    "list at least one tensor name or glob",
                );
            }
            for p in r.tensors.get_ref() {
                let t = Template::parse(p.get_ref())
                    .or_else(|e| self.err(p.span(), format!("{key}.tensors"), e))?;
                if p.get_ref().is_empty() {
                    return self.err(
                        p.span(),
                        format!("{key}.tensors"),
                        "an empty pattern matches nothing",
                    );
                }
                pats.push((t, p.span()));
            }
            let ranges = self.ranges(r.range.as_ref(), &key)?;
            for (var, _, _) in &ranges {
                if !name_t.vars().contains(&var.as_str()) {
                    return self.err(r.name.span(), format!("{key}.name"), format!("the name template must use `{{{var}}}` (e.g. `{{{var}:02}}`), or every expansion gets the same name"));
                }
            }
            let defined: BTreeSet<&str> = ranges.iter().map(|(v, _, _)| v.as_str()).collect();
            for var in name_t.vars() {
                if !defined.contains(var) {
                    return self.err(
                        r.name.span(),
                        format!("{key}.name"),
                        format!(
                            "`{{{var}}}` is not defined: add `range = {{ {var} = [first, last] }}`"
                        ),
                    );
                }
            }
            for (t, span) in &pats {
                if let Some(var) = t.vars().into_iter().find(|v| !defined.contains(v)) {
                    return self.err(
                        span.clone(),
                        format!("{key}.tensors"),
                        format!("`{{{var}}}` is not defined in `range`"),
                    );
                }
            }
            let combos = self.combos(&ranges, u.span(), &key, &mut total)?;
            for c in combos {
                let n = name_t
                    .render_ints(&c)
                    .or_else(|e| self.err(r.name.span(), format!("{key}.name"), e))?;
                let name = UnitName::new(&n)
                    .or_else(|e| self.err(r.name.span(), format!("{key}.name"), e))?;
                let line = self.loc.line(r.name.span().start);
                if let Some(prev) = seen.insert(n.clone(), line) {
                    return self.err(r.name.span(), format!("{key}.name"), format!("unit `{n}` is declared twice (first on line {prev}); give each unit a distinct name"));
                }
                let mut tensors = Vec::new();
                for (t, span) in &pats {
                    tensors.push(
                        t.render_ints(&c)
                            .or_else(|e| self.err(span.clone(), format!("{key}.tensors"), e))?,
                    );
                }
                out.push(Unit {
                    name,
                    source: source.clone(),
                    tensors,
                    line,
                    key: key.clone(),
                });
            }
        }
        Ok(out)
    }

    fn ranges(&self, range: Option<&RawRange>, key: &str) -> R<Vec<(String, i64, i64)>> {
        let Some(m) = range else {
            return Ok(Vec::new());
        };
        if m.get_ref().is_empty() {
            return self.err(
                m.span(),
                format!("{key}.range"),
                "an empty `range`; remove it or give `{ L = [first, last] }`",
            );
        }
        let mut v = Vec::new();
        for (var, lohi) in m.get_ref() {
            let [lo, hi] = *lohi.get_ref();
            if lo < 0 || hi < lo || hi - lo >= MAX_UNITS {
                return self.err(lohi.span(), format!("{key}.range.{var}"), format!("`[{lo}, {hi}]` must be `[first, last]` with 0 <= first <= last and at most {MAX_UNITS} values"));
            }
            v.push((var.clone(), lo, hi));
        }
        Ok(v)
    }

    /// Cartesian product of the ranges, ascending, first variable (by name) outermost.
    fn combos(
        &self,
        ranges: &[(String, i64, i64)],
        span: std::ops::Range<usize>,
        key: &str,
        total: &mut i64,
    ) -> R<Vec<BTreeMap<String, i64>>> {
        // Refuse before allocating: the product of the ranges is what would be built.
        let product = ranges
            .iter()
            .fold(1i64, |p, (_, lo, hi)| p.saturating_mul(hi - lo + 1));
        *total = total.saturating_add(product);
        if *total > MAX_UNITS {
            return self.err(
                span,
                key,
                format!("the plan expands to more than {MAX_UNITS} units or omissions"),
            );
        }
        let mut combos: Vec<BTreeMap<String, i64>> = vec![BTreeMap::new()];
        for (var, lo, hi) in ranges {
            let mut next = Vec::new();
            for c in &combos {
                for v in *lo..=*hi {
                    let mut c2 = c.clone();
                    c2.insert(var.clone(), v);
                    next.push(c2);
                }
            }
            combos = next;
        }
        Ok(combos)
    }

    fn omit(
        &self,
        omit: Option<&Spanned<Vec<Spanned<RawOmit>>>>,
        multi: bool,
        sources: &[&str],
    ) -> R<Vec<Omission>> {
        let Some(list) = omit else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut total = 0i64;
        for (i, o) in list.get_ref().iter().enumerate() {
            let key = format!("omit[{i}]");
            let r = o.get_ref();
            let source = self.source_ref(r.source.as_ref(), &key, o.span(), multi, sources)?;
            if r.reason.get_ref().trim().is_empty() {
                return self.err(
                    r.reason.span(),
                    format!("{key}.reason"),
                    "say why these tensors are left out",
                );
            }
            if r.tensors.get_ref().is_empty() {
                return self.err(
                    r.tensors.span(),
                    format!("{key}.tensors"),
                    "list at least one tensor name or glob",
                );
            }
            let ranges = self.ranges(r.range.as_ref(), &key)?;
            let defined: BTreeSet<&str> = ranges.iter().map(|(v, _, _)| v.as_str()).collect();
            let mut pats = Vec::new();
            let mut used = BTreeSet::new();
            for p in r.tensors.get_ref() {
                let t = Template::parse(p.get_ref())
                    .or_else(|e| self.err(p.span(), format!("{key}.tensors"), e))?;
                if p.get_ref().is_empty() {
                    return self.err(
                        p.span(),
                        format!("{key}.tensors"),
                        "an empty pattern matches nothing",
                    );
                }
                if let Some(var) = t.vars().into_iter().find(|v| !defined.contains(v)) {
                    return self.err(
                        p.span(),
                        format!("{key}.tensors"),
                        format!("`{{{var}}}` is not defined in `range`"),
                    );
                }
                used.extend(t.vars().into_iter().map(str::to_owned));
                pats.push((t, p.span()));
            }
            if let Some((var, _, _)) = ranges.iter().find(|(v, _, _)| !used.contains(v)) {
                return self.err(
                    o.span(),
                    format!("{key}.range"),
                    format!("`{var}` is used by no pattern in `tensors`"),
                );
            }
            let mut tensors = Vec::new();
            for c in self.combos(&ranges, o.span(), &key, &mut total)? {
                for (t, span) in &pats {
                    tensors.push(
                        t.render_ints(&c)
                            .or_else(|e| self.err(span.clone(), format!("{key}.tensors"), e))?,
                    );
                }
            }
            out.push(Omission {
                source,
                tensors,
                reason: r.reason.get_ref().trim().to_owned(),
                line: self.loc.line(o.span().start),
                key,
            });
        }
        Ok(out)
    }

    pub(super) fn source_ref(
        &self,
        s: Option<&Spanned<String>>,
        key: &str,
        span: std::ops::Range<usize>,
        multi: bool,
        sources: &[&str],
    ) -> R<String> {
        match (s, multi) {
            (None, false) => Ok(SINGLE_SOURCE_NAME.to_owned()),
            (Some(s), false) => self.err(
                s.span(),
                format!("{key}.source"),
                "`source` is only used with `[sources.NAME]`; remove it",
            ),
            (None, true) => self.err(
                span,
                key,
                format!(
                    "a multi-source plan needs `source = \"…\"` here (one of {})",
                    sources.join(", ")
                ),
            ),
            (Some(s), true) if sources.contains(&s.get_ref().as_str()) => Ok(s.get_ref().clone()),
            (Some(s), true) => self.err(
                s.span(),
                format!("{key}.source"),
                format!(
                    "no `[sources.{}]`; use one of {}",
                    s.get_ref(),
                    sources.join(", ")
                ),
            ),
        }
    }
}
