//! The runner's layers, enforced (issue 48 item 1; `runner/README.md` "Layers"). Every top-level
//! module of `runner/src` is assigned a layer by [`LAYERS`]; a module may import (`crate::x`, or a
//! `super::` path that leaves its own module) only modules of its own layer or a lower one, the
//! top-level modules import each other in no cycle, and the generic layers (runtime, engine)
//! name no model family in their code: paths and identifiers, after comments and string literals
//! are set aside (a comment may still cite llama.cpp).

#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first: a module may import its own layer and those before it.
const LAYERS: &[(&str, &[&str])] = &[
    ("engine", &["engine"]),
    (
        "runtime",
        &[
            "adapter",
            "chat",
            "constrain",
            "error",
            "generate",
            "logprobs",
            "npy",
            "prompt_cache",
            "sample",
            "sequence",
            "step_stats",
            "tokenizer",
        ],
    ),
    (
        "families",
        &[
            "artifact",
            "deepseek",
            "kimi",
            "llama",
            "model",
            "reference",
        ],
    ),
    ("open", &["open", "registry"]),
    ("front-ends", &["run", "serve", "session"]),
];

/// The layers whose code must name no family.
const GENERIC: &[&str] = &["engine", "runtime"];

/// What a generic module's identifiers may not contain.
const FAMILY_NAMES: &[&str] = &[
    "deepseek", "DeepSeek", "V4", "llama", "Llama", "kimi", "Kimi",
];

/// `src` with comments, string literals and char literals blanked (lifetimes kept), so that a
/// scan sees only paths and identifiers.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            i += end;
            out.push(' ');
        } else if let Some(len) = raw_string_len(rest) {
            i += len;
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += quoted_len(rest, '"');
            out.push_str("\"\"");
        } else if b[i] == b'\'' && is_char_literal(rest) {
            i += quoted_len(rest, '\'');
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of the literal opening `s` with `quote`, escapes skipped.
fn quoted_len(s: &str, quote: char) -> usize {
    let mut chars = s.char_indices().skip(1);
    while let Some((at, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if c == quote {
            return at + 1;
        }
    }
    s.len()
}

/// `'x'` or `'\n'` rather than a lifetime `'a`.
fn is_char_literal(s: &str) -> bool {
    let mut it = s.chars().skip(1);
    matches!(
        (it.next(), it.next()),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// The length of a raw string literal opening `s` (`r"…"`, `r#"…"#`, `br"…"`), if one does.
fn raw_string_len(s: &str) -> Option<usize> {
    let body = s.strip_prefix("br").or_else(|| s.strip_prefix('r'))?;
    let hashes = body.len() - body.trim_start_matches('#').len();
    let after = body[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = after.find(&close)?;
    Some(s.len() - after.len() + end + close.len())
}

/// The module path of a source file under `src` (`run/interactive.rs` → `[run, interactive]`).
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The top-level modules `code` (of the module at `path`) imports, itself excluded. A `super::`
/// chain is resolved from the file's own module path (an inline `mod tests` adds a level the scan
/// does not see, so [`scan`] keeps only chains that land on a top-level module).
fn imports(code: &str, path: &[String]) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut via_crate, mut via_super) = (BTreeSet::new(), BTreeSet::new());
    let idents = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map(str::to_owned)
            .collect()
    };
    for token in idents(code) {
        let segs: Vec<&str> = token.split("::").filter(|s| !s.is_empty()).collect();
        let ups = segs.iter().take_while(|s| **s == "super").count();
        let (target, set) = match segs.first() {
            Some(&"crate") => (segs.get(1), &mut via_crate),
            Some(&"super") if ups >= path.len() => (segs.get(ups), &mut via_super),
            _ => continue,
        };
        if let Some(t) = target.filter(|t| t.chars().all(|c| c.is_ascii_lowercase() || c == '_')) {
            if path.first().map(String::as_str) != Some(t) {
                set.insert((*t).to_owned());
            }
        }
    }
    (via_crate, via_super)
}

/// The identifiers of `code` that contain a family name.
fn family_names(code: &str) -> BTreeSet<String> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| FAMILY_NAMES.iter().any(|f| w.contains(f)))
        .map(str::to_owned)
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module → (its imports, the family-named identifiers of each of its files).
type Scan = BTreeMap<String, (BTreeSet<String>, Vec<(PathBuf, BTreeSet<String>)>)>;

fn scan(src: &Path) -> Scan {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = Scan::new();
    let mut supers = Vec::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().to_path_buf();
        let path = module_path(&rel);
        if path[0] == "lib" || path[0] == "bin" {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(&f).unwrap());
        let (via_crate, via_super) = imports(&code, &path);
        supers.push((path[0].clone(), via_super));
        let entry = out.entry(path[0].clone()).or_default();
        entry.0.extend(via_crate);
        entry.1.push((rel, family_names(&code)));
    }
    // `crate::x` always names a top-level module; a `super::` chain from an inline module may
    // land inside its own (deepseek's tests reach `super::super::config`)
    let top: BTreeSet<String> = out.keys().cloned().collect();
    for (module, deps) in supers {
        let kept = deps.into_iter().filter(|d| top.contains(d));
        out.entry(module).or_default().0.extend(kept);
    }
    out
}

fn layer_of(module: &str) -> Option<(usize, &'static str)> {
    LAYERS
        .iter()
        .enumerate()
        .find(|(_, (_, mods))| mods.contains(&module))
        .map(|(i, (name, _))| (i, *name))
}

/// Every violation of the rules in `scan`, in words.
fn violations(scan: &Scan) -> Vec<String> {
    let mut bad = Vec::new();
    for (module, (deps, files)) in scan {
        let Some((layer, name)) = layer_of(module) else {
            bad.push(format!(
                "`{module}` has no layer in LAYERS (runner/tests/layers.rs)"
            ));
            continue;
        };
        for dep in deps {
            match layer_of(dep) {
                Some((l, dep_name)) if l > layer => bad.push(format!(
                    "`{module}` ({name}) imports `{dep}` ({dep_name}), a higher layer"
                )),
                None => bad.push(format!("`{module}` imports `{dep}`, which has no layer")),
                _ => {}
            }
        }
        if GENERIC.contains(&name) {
            for (file, names) in files.iter().filter(|(_, n)| !n.is_empty()) {
                bad.push(format!(
                    "src/{} ({name}) names a family: {names:?}",
                    file.display()
                ));
            }
        }
    }
    bad.extend(cycle(scan).map(|c| format!("import cycle: {}", c.join(" → "))));
    bad
}

/// One import cycle among the top-level modules, if there is any.
fn cycle(scan: &Scan) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        scan: &Scan,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut c = stack[at..].to_vec();
            c.push(m.to_owned());
            return Some(c);
        }
        if !done.insert(m.to_owned()) {
            return None;
        }
        stack.push(m.to_owned());
        for d in scan.get(m).map(|e| &e.0).into_iter().flatten() {
            if let Some(c) = visit(d, scan, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    scan.keys()
        .find_map(|m| visit(m, scan, &mut Vec::new(), &mut done))
}

#[test]
fn the_runner_keeps_its_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let scan = scan(&src);
    let bad = violations(&scan);
    assert!(bad.is_empty(), "layering violations:\n{}", bad.join("\n"));
    // every layer's modules exist: the table is the crate's list, not a wish
    for (_, mods) in LAYERS {
        for m in *mods {
            assert!(
                scan.contains_key(*m),
                "LAYERS names `{m}`, which runner/src lacks"
            );
        }
    }
}

#[test]
fn the_scan_sees_what_it_must_refuse() {
    let code = code_only(
        "use crate::run::RunArgs; // crate::llama in a comment\nlet s = \"crate::serve\"; let c = '\"'; fn f<'a>(x: &'a str) { super::super::deepseek::x(); }",
    );
    let path = ["generate".to_owned(), "inner".to_owned()];
    let (via_crate, via_super) = imports(&code, &path);
    assert_eq!(via_crate, ["run".to_owned()].into());
    assert_eq!(via_super, ["deepseek".to_owned()].into());
    assert_eq!(family_names(&code), ["deepseek".to_owned()].into());
    assert!(family_names(&code_only("// cites llama.cpp\nlet r = r#\"Llama\"#;")).is_empty());
    // a back edge, a cycle and an unassigned module are each reported
    let mut s = Scan::new();
    s.insert("generate".into(), (["run".to_owned()].into(), vec![]));
    s.insert("run".into(), (["generate".to_owned()].into(), vec![]));
    s.insert("newmod".into(), (BTreeSet::new(), vec![]));
    let bad = violations(&s).join("\n");
    assert!(
        bad.contains("`generate` (runtime) imports `run` (front-ends)"),
        "{bad}"
    );
    assert!(bad.contains("import cycle"), "{bad}");
    assert!(bad.contains("`newmod` has no layer"), "{bad}");
}
