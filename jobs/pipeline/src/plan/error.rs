//! `PlanError`: every way a plan is refused, each naming the plan file, the line and the key (or
//! the tensor / unit) and saying how to fix it (`plans/README.md` §"Errors").
//!
//! toml's own errors (syntax, unknown keys, wrong types, newtype refusals such as a branch name
//! where a commit is required) carry a byte span; [`Locator`] maps it to `line:column` and, by
//! re-parsing the document with spans (`toml::de::DeTable`), to the dotted key path the span lies
//! under (`source.revision`, `rules[3].container.mode`). Cross-field errors carry the span of a
//! `toml::Spanned` value kept in the raw structs.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Every refusal of a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The plan file could not be read.
    #[error("failed to read plan `{}`", path.display())]
    Read {
        /// The plan path.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file is far larger than any plan.
    #[error("`{}` is {len} bytes, more than the {max} a plan may have; is it a plan?", path.display())]
    TooLarge {
        /// The plan path.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// toml refused the document (syntax, unknown key, wrong type, invalid value).
    #[error("`{}`:{line}:{column}: {}{message}", path.display(), KeyPrefix(key))]
    Parse {
        /// The plan path.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Dotted key path; empty when the error is not under a key (a syntax error).
        key: String,
        /// toml's message, with a fix where one is known.
        message: String,
    },
    /// A value is well-typed but breaks a rule of the schema.
    #[error("`{}`:{line}: key `{key}`: {reason}", path.display())]
    Invalid {
        /// The plan path.
        path: PathBuf,
        /// 1-based line of the offending value.
        line: usize,
        /// Dotted key path.
        key: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The plan is a draft: it validates, but no stage may run it.
    #[error(
        "`{}`:{line}: key `status`: plan `{plan}` is a draft and no stage may run it: {reason}",
        path.display()
    )]
    Draft {
        /// The plan path.
        path: PathBuf,
        /// Line of `status = "draft"`.
        line: usize,
        /// The plan's name.
        plan: String,
        /// `draft_reason`: what is unknown.
        reason: String,
    },
    /// Upstream tensors and the plan's units/rules disagree.
    #[error("`{}`{}: tensor `{tensor}`: {reason}", path.display(), LinePrefix(*line, key))]
    Tensor {
        /// The plan path.
        path: PathBuf,
        /// The upstream tensor (qualified `source:name` in multi-source plans).
        tensor: String,
        /// Line of the unit or rule involved, when one is.
        line: Option<usize>,
        /// Key path of the unit or rule involved (may be empty).
        key: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A unit of the plan claims no upstream tensor.
    #[error("`{}`:{line}: key `{key}`: unit `{unit}` matches no upstream tensor; fix its `tensors` patterns or remove the unit", path.display())]
    EmptyUnit {
        /// The plan path.
        path: PathBuf,
        /// Line of the unit's `tensors`.
        line: usize,
        /// Key path of the unit.
        key: String,
        /// The unit.
        unit: String,
    },
    /// `--units SEL` could not be applied to this plan.
    #[error("`{}`: unit selection `{selection}`: {reason}", path.display())]
    Selection {
        /// The plan path.
        path: PathBuf,
        /// The selection as given.
        selection: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
}

impl crate::cli::Hint for PlanError {
    fn hint(&self) -> Option<String> {
        match self {
            PlanError::Draft { .. } => Some(
                "confirm what `draft_reason` lists, pin it in the plan, then remove `status = \"draft\"` and `draft_reason`".into(),
            ),
            PlanError::Read { .. } => Some("check the `--plan` path".into()),
            PlanError::Selection { .. } => {
                Some("list the plan's units with `minirun-inspect PLAN`".into())
            }
            _ => Some("the schema is documented in `plans/README.md`".into()),
        }
    }
}

struct KeyPrefix<'a>(&'a str);
impl fmt::Display for KeyPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, "key `{}`: ", self.0)
        }
    }
}

struct LinePrefix<'a>(Option<usize>, &'a str);
impl fmt::Display for LinePrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.0 {
            write!(f, ":{l}")?;
        }
        if !self.1.is_empty() {
            write!(f, ": key `{}`", self.1)?;
        }
        Ok(())
    }
}

/// Maps byte offsets of one plan text to lines, columns and key paths.
#[derive(Debug, Clone)]
pub struct Locator {
    path: PathBuf,
    line_starts: Vec<usize>,
}

impl Locator {
    /// Index `text` (the plan as read from `path`).
    pub fn new(path: &Path, text: &str) -> Locator {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Locator {
            path: path.to_path_buf(),
            line_starts,
        }
    }

    /// The plan path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1-based line of byte `offset`.
    pub fn line(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&s| s <= offset).max(1)
    }

    /// 1-based (line, column in bytes) of `offset`.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let line = self.line(offset);
        let start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        (line, offset.saturating_sub(start) + 1)
    }

    /// An `Invalid` error at `span` under `key`.
    pub fn invalid(
        &self,
        span: Range<usize>,
        key: impl Into<String>,
        reason: impl Into<String>,
    ) -> PlanError {
        PlanError::Invalid {
            path: self.path.clone(),
            line: self.line(span.start),
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// Turn toml's error on `text` into a `Parse` error with line, column and key path.
    pub fn parse_error(&self, text: &str, err: &toml::de::Error) -> PlanError {
        let span = err.span().unwrap_or(0..0);
        let (line, column) = self.line_col(span.start);
        let key = key_path_at(text, span.start).unwrap_or_default();
        let mut message = err.message().trim_end().replace('\n', " ");
        if message.starts_with("unknown field") {
            message
                .push_str("; remove it or fix its spelling (the schema is in `plans/README.md`)");
        }
        PlanError::Parse {
            path: self.path.clone(),
            line,
            column,
            key,
            message,
        }
    }
}

/// The dotted key path (`rules[2].container.mode`) whose key or value contains byte `offset`,
/// or `None` when `text` is not even syntactically TOML.
pub fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut path = String::new();
    walk_table(doc.get_ref(), offset, &mut path);
    Some(path)
}

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && offset < span.end.max(span.start + 1)
}

fn walk_table(table: &toml::de::DeTable<'_>, offset: usize, path: &mut String) {
    // A key whose key or value span holds the offset wins; otherwise the nearest entry that
    // starts before it (a table opened by a `[header]` may have a span covering the header only).
    let mut best: Option<(usize, &str, &toml::Spanned<toml::de::DeValue<'_>>)> = None;
    for (k, v) in table.iter() {
        let (ks, vs) = (k.span(), v.span());
        if contains(&ks, offset) || contains(&vs, offset) {
            best = Some((usize::MAX, k.get_ref(), v));
            break;
        }
        let start = ks.start.min(vs.start);
        if start <= offset && best.as_ref().is_none_or(|(s, _, _)| start > *s) {
            best = Some((start, k.get_ref(), v));
        }
    }
    if let Some((_, k, v)) = best {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k);
        walk_value(v, offset, path);
    }
}

fn walk_value(v: &toml::Spanned<toml::de::DeValue<'_>>, offset: usize, path: &mut String) {
    match v.get_ref() {
        toml::de::DeValue::Table(t) => walk_table(t, offset, path),
        toml::de::DeValue::Array(a) => {
            let mut best: Option<(usize, usize)> = None;
            for (i, item) in a.iter().enumerate() {
                let s = item.span();
                if contains(&s, offset) {
                    best = Some((i, usize::MAX));
                    break;
                }
                if s.start <= offset && best.is_none_or(|(_, bs)| s.start > bs) {
                    best = Some((i, s.start));
                }
            }
            if let Some((i, _)) = best {
                if let Some(item) = a.get(i) {
                    // Arrays of scalars are named by their key alone; arrays of tables by index.
                    if matches!(item.get_ref(), toml::de::DeValue::Table(_)) {
                        path.push_str(&format!("[{i}]"));
                        walk_value(item, offset, path);
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns() {
        let l = Locator::new(Path::new("p.toml"), "a = 1\nbb = 2\n\nc = 3");
        assert_eq!(l.line_col(0), (1, 1));
        assert_eq!(l.line_col(6), (2, 1));
        assert_eq!(l.line_col(11), (2, 6));
        assert_eq!(l.line(13), 3);
        assert_eq!(l.line(14), 4);
    }

    #[test]
    fn key_paths() {
        let text = "schema = 1\n[source]\nrepo = \"a/b\"\nrevision = \"main\"\n\n[[rules]]\nmatch = \"*\"\n\n[[rules]]\nmatch = \"x\"\ncontainer = { mode = \"m\" }\n";
        let at = |needle: &str| key_path_at(text, text.find(needle).unwrap()).unwrap();
        assert_eq!(at("\"main\""), "source.revision");
        assert_eq!(at("\"a/b\""), "source.repo");
        assert_eq!(at("\"x\""), "rules[1].match");
        assert_eq!(at("\"m\""), "rules[1].container.mode");
        assert_eq!(at("1\n"), "schema");
    }
}
