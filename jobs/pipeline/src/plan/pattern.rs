//! Name templates and globs of the plan (`plans/README.md` §"Templates and globs").
//!
//! A template is literal text with `{VAR}` or `{VAR:0W}` (zero-padded to width W) placeholders;
//! unit templates use the variables of their `range`, companion templates use `{name}` (the
//! whole tensor name) and `{stem}` (the name up to its last `.`). A glob matches a whole string:
//! `*` any run of characters (including `.` and `/`), `?` exactly one character; everything else
//! is literal. Matching is iterative with one backtrack point, so it is linear-ish and cannot
//! recurse on hostile input.

use std::collections::BTreeMap;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text copied as is.
    Lit(String),
    /// `{name}` or `{name:0W}`.
    Var {
        /// Variable name.
        name: String,
        /// Zero-pad width, if any.
        width: Option<usize>,
    },
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// Largest zero-pad width accepted (`{L:09}`).
const MAX_WIDTH: usize = 9;

impl Template {
    /// Parse `s`; the error says what is wrong with the placeholder.
    pub fn parse(s: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '{' => {
                    let mut inner = String::new();
                    let mut closed = false;
                    for c2 in chars.by_ref() {
                        if c2 == '}' {
                            closed = true;
                            break;
                        }
                        inner.push(c2);
                    }
                    if !closed {
                        return Err(format!("`{s}`: `{{` without a closing `}}`"));
                    }
                    if !lit.is_empty() {
                        pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    pieces.push(parse_var(s, &inner)?);
                }
                '}' => return Err(format!("`{s}`: `}}` without an opening `{{`")),
                _ => lit.push(c),
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Lit(lit));
        }
        Ok(Template { pieces })
    }

    /// Variable names used, in order of first use.
    pub fn vars(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in &self.pieces {
            if let Piece::Var { name, .. } = p {
                if !out.contains(&name.as_str()) {
                    out.push(name);
                }
            }
        }
        out
    }

    /// Substitute integer variables (unit templates).
    pub fn render_ints(&self, vals: &BTreeMap<String, i64>) -> Result<String, String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var { name, width } => {
                    let v = vals
                        .get(name)
                        .ok_or_else(|| format!("`{{{name}}}` is not a variable of `range`"))?;
                    match width {
                        Some(w) => out.push_str(&format!("{v:0w$}")),
                        None => out.push_str(&v.to_string()),
                    }
                }
            }
        }
        Ok(out)
    }

    /// Substitute string variables (companion templates: `name`, `stem`).
    pub fn render_strs(&self, vals: &[(&str, &str)]) -> Result<String, String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(l) => out.push_str(l),
                Piece::Var { name, width } => {
                    if width.is_some() {
                        return Err(format!("`{{{name}}}` takes no width"));
                    }
                    let v = vals
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| *v)
                        .ok_or_else(|| format!("`{{{name}}}` is not `{{name}}` or `{{stem}}`"))?;
                    out.push_str(v);
                }
            }
        }
        Ok(out)
    }
}

fn parse_var(whole: &str, inner: &str) -> Result<Piece, String> {
    let (name, width) = match inner.split_once(':') {
        None => (inner, None),
        Some((n, w)) => {
            let digits = w.strip_prefix('0').unwrap_or("");
            let width = digits
                .parse::<usize>()
                .ok()
                .filter(|w| (1..=MAX_WIDTH).contains(w) && w.to_string() == digits)
                .ok_or_else(|| {
                    format!("`{whole}`: `{{{inner}}}`: a width is written `:0W` with W in 1..={MAX_WIDTH}, e.g. `{{{n}:02}}`")
                })?;
            (n, Some(width))
        }
    };
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(format!(
            "`{whole}`: `{{{inner}}}` is not a placeholder; write `{{VAR}}` or `{{VAR:02}}`"
        ));
    }
    Ok(Piece::Var {
        name: name.to_owned(),
        width,
    })
}

/// Does glob `pat` match all of `text`?
pub fn glob_match(pat: &str, text: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || Some(&c) == t.get(ti) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

/// Whether `s` contains glob metacharacters.
pub fn has_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// The name up to (not including) its last `.`; the whole name when it has none.
pub fn stem(name: &str) -> &str {
    name.rsplit_once('.').map_or(name, |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("layers.1.*", "layers.1.attn.wq_a.weight"));
        assert!(!glob_match("layers.1.*", "layers.10.attn.wq_a.weight"));
        assert!(glob_match("*.weight", "a.b.weight"));
        assert!(!glob_match("*.weight", "a.b.scale"));
        assert!(glob_match("hc_head_*", "hc_head_fn"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("*", ""));
        assert!(glob_match("**a**b", "xxaxxb"));
        assert!(!glob_match("", "x"));
        assert!(glob_match(
            "*.experts.*.w1.weight",
            "ffn.experts.17.w1.weight"
        ));
    }

    #[test]
    fn templates() {
        let t = Template::parse("layers{L:02}").unwrap();
        assert_eq!(t.vars(), vec!["L"]);
        let vals = BTreeMap::from([("L".to_owned(), 7)]);
        assert_eq!(t.render_ints(&vals).unwrap(), "layers07");
        let t = Template::parse("layers.{L}.*").unwrap();
        assert_eq!(t.render_ints(&vals).unwrap(), "layers.7.*");
        let t = Template::parse("{stem}.scale").unwrap();
        assert_eq!(
            t.render_strs(&[("name", "a.weight"), ("stem", "a")])
                .unwrap(),
            "a.scale"
        );
        for bad in [
            "{", "}", "{L", "{1}", "{L:2}", "{L:00}", "{L:010}", "{}", "{a-b}",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(stem("a.b.weight"), "a.b");
        assert_eq!(stem("hc_head_fn"), "hc_head_fn");
    }
}
