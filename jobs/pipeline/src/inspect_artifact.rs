//! `minirun-inspect` for artifact files: a tile container (header and every tile), a unit
//! manifest, an `index.json` (shape, units, tokenizer and configuration identities, or why they
//! are absent), or a directory holding one of those. Plans are rendered by [`crate::inspect`].
//! Inspection reads headers and metadata only: a container's tile bytes are never read.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use artifact::container::{ContainerReader, MAGIC};
use artifact::index_json::{IndexDocument, Shape, INDEX_FILE_NAME};
use artifact::manifest::{Manifest, MANIFEST_FILE_NAME};
use serde_json::{json, Value};

/// Why a path could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// A plan was refused.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    /// A container was refused by the reader.
    #[error("container `{path}`")]
    Container {
        /// The file.
        path: PathBuf,
        /// The reader's refusal.
        #[source]
        source: artifact::container::ContainerError,
    },
    /// A manifest was refused by the reader.
    #[error("manifest `{path}`")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// The reader's refusal.
        #[source]
        source: artifact::manifest::ManifestError,
    },
    /// The path could not be read.
    #[error("failed to read `{path}`")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An `index.json` whose shape is not one the consumer can read; what was found is printed
    /// first (`Inspection::text`), then this refusal.
    #[error(
        "`{path}` is an index.json of shape `{shape}`, which no Minirun consumer reads: {reason}"
    )]
    IndexShape {
        /// The file.
        path: PathBuf,
        /// `unrecognized` or `unreadable`.
        shape: &'static str,
        /// Why.
        reason: String,
    },
    /// Not a kind of file this tool knows.
    #[error("`{path}` is not a plan (.toml), tile container, manifest.json, index.json or a unit/artifact directory")]
    Unknown {
        /// The file.
        path: PathBuf,
    },
}

impl crate::cli::Hint for InspectError {
    fn hint(&self) -> Option<String> {
        match self {
            InspectError::Plan(e) => e.hint(),
            InspectError::Unknown { path } => Some(match artifact::sniff::sniff(path) {
                Some(kind) => kind.hint(path),
                None => "minirun-inspect reads a plan, a tile container, a manifest.json, an index.json or a unit or artifact directory; a GGUF file is read by `minirun-gguf info`, a MEGA release by `minirun-mega inspect`".into(),
            }),
            _ => None,
        }
    }
}

/// What `inspect` found: the text to print, and a refusal to report after it when the file was
/// read but is not usable (an index.json of no known shape).
#[derive(Debug)]
pub struct Inspection {
    /// The table or JSON.
    pub text: String,
    /// Set when the file is refused although something could be shown.
    pub refusal: Option<InspectError>,
}

/// Inspect `path`, whatever it is, as a table or JSON.
pub fn inspect_path(path: &Path, json_out: bool) -> Result<Inspection, InspectError> {
    let ok = |text| Inspection {
        text,
        refusal: None,
    };
    if path.is_dir() {
        for name in [INDEX_FILE_NAME, MANIFEST_FILE_NAME] {
            let p = path.join(name);
            if p.is_file() {
                return inspect_path(&p, json_out);
            }
        }
        return Err(InspectError::Unknown {
            path: path.to_owned(),
        });
    }
    if path.extension().is_some_and(|e| e == "toml") {
        return Ok(ok(crate::inspect::inspect_plan(path, json_out)?));
    }
    let io = |source| InspectError::Io {
        path: path.to_owned(),
        source,
    };
    let mut head = [0u8; 8];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(io)?;
    if n == 8 && head == MAGIC {
        return container(path, json_out).map(ok);
    }
    if path.file_name().is_some_and(|n| n == MANIFEST_FILE_NAME) {
        return manifest(path, json_out).map(ok);
    }
    if path.extension().is_some_and(|e| e == "json") {
        return Ok(index(path, json_out));
    }
    Err(InspectError::Unknown {
        path: path.to_owned(),
    })
}

fn container(path: &Path, json_out: bool) -> Result<String, InspectError> {
    let r = ContainerReader::open(path).map_err(|source| InspectError::Container {
        path: path.to_owned(),
        source,
    })?;
    let l = r.layout();
    let tiles: Vec<Value> = (0..l.tile_count)
        .filter_map(|i| l.tile(i))
        .map(|t| {
            json!({
                "index": t.index, "offset": t.offset, "first_row": t.first_row, "rows": t.shape.rows,
                "packed": t.shape.packed_payload, "scale": t.shape.scale_payload, "bias": t.shape.bias_payload,
                "bytes": t.shape.len(),
                "sha256": r.header().digests.get(t.index as usize).map(hex::encode),
            })
        })
        .collect();
    let v = json!({"kind": "container", "path": path.display().to_string(), "header": r.header().describe(), "tiles": tiles});
    if json_out {
        return Ok(pretty(&v));
    }
    let mut s = format!("container `{}`\n", path.display());
    if let Some(obj) = v["header"].as_object() {
        for (k, val) in obj {
            let _ = writeln!(s, "  {k:<24} {val}");
        }
    }
    let _ = writeln!(
        s,
        "  {:>5} {:>12} {:>9} {:>6} {:>10} {:>8}  sha256",
        "tile", "offset", "first_row", "rows", "packed", "scale"
    );
    for t in &tiles {
        let _ = writeln!(
            s,
            "  {:>5} {:>12} {:>9} {:>6} {:>10} {:>8}  {}",
            t["index"],
            t["offset"],
            t["first_row"],
            t["rows"],
            t["packed"],
            t["scale"],
            t["sha256"].as_str().unwrap_or("-")
        );
    }
    Ok(s)
}

fn manifest(path: &Path, json_out: bool) -> Result<String, InspectError> {
    let bytes = std::fs::read(path).map_err(|source| InspectError::Io {
        path: path.to_owned(),
        source,
    })?;
    let m = Manifest::parse(&bytes).map_err(|source| InspectError::Manifest {
        path: path.to_owned(),
        source,
    })?;
    if json_out {
        return Ok(pretty(&serde_json::to_value(&m).unwrap_or(Value::Null)));
    }
    let mut s = format!(
        "manifest of unit `{}`: {} files, {} bytes\n",
        m.unit,
        m.files.len(),
        m.total_bytes()
    );
    for e in &m.files {
        let _ = writeln!(
            s,
            "  {:<10} {:>12}  {}  {}",
            format!("{:?}", e.kind).to_lowercase(),
            e.size,
            e.sha256,
            e.path
        );
    }
    Ok(s)
}

fn index(path: &Path, json_out: bool) -> Inspection {
    let doc = IndexDocument::read_file(path);
    let refusal = match &doc.shape {
        Shape::Unrecognized { reason, .. } | Shape::Unreadable { reason } => {
            Some(InspectError::IndexShape {
                path: path.to_owned(),
                shape: doc.shape.name(),
                reason: reason.to_string(),
            })
        }
        _ => None,
    };
    Inspection {
        text: index_text(path, json_out, &doc),
        refusal,
    }
}

fn index_text(path: &Path, json_out: bool, doc: &IndexDocument) -> String {
    let identity = |p: Option<(String, u64, String, String, String)>, absent: Option<String>| {
        match p {
            Some((file, bytes, sha, repo, rev)) => {
                json!({"present": true, "file": file, "bytes": bytes, "sha256": sha, "source_repo": repo, "source_revision": rev})
            }
            None => json!({"present": false, "why": absent}),
        }
    };
    let tok = identity(
        doc.tokenizer.present().map(|t| {
            (
                t.root.file.clone(),
                t.root.bytes,
                t.root.sha256.clone(),
                t.root.source_repo.clone(),
                t.root.source_revision.clone(),
            )
        }),
        doc.tokenizer.absent().map(ToString::to_string),
    );
    let cfg = identity(
        doc.configuration.present().map(|c| {
            (
                c.root.file.clone(),
                c.root.bytes,
                c.root.sha256.clone(),
                c.root.source_repo.clone(),
                c.root.source_revision.clone(),
            )
        }),
        doc.configuration.absent().map(ToString::to_string),
    );
    let detail = match &doc.shape {
        Shape::SingleSourceUnits(s) => {
            json!({"source_repo": s.source_repo, "source_revision": s.source_revision, "units": s.units.len(), "total_bytes": s.total_bytes})
        }
        Shape::SingleSourceTotals(s) => {
            json!({"source_repo": s.source_repo, "source_revision": s.source_revision, "files": s.files, "bytes": s.bytes})
        }
        Shape::MultiSourceUnits(s) => {
            json!({"sources": s.sources.keys().collect::<Vec<_>>(), "units": s.units.len(), "total_bytes": s.total_bytes})
        }
        Shape::Unrecognized { keys, reason } => json!({"keys": keys, "reason": reason}),
        Shape::Unreadable { reason } => json!({"reason": reason}),
    };
    let v = json!({"kind": "index", "path": path.display().to_string(), "shape": doc.shape.name(), "detail": detail,
        "tokenizer": tok, "configuration": cfg, "notes": doc.notes});
    if json_out {
        return pretty(&v);
    }
    let mut s = format!(
        "index `{}`: shape {}\n  {}\n",
        path.display(),
        doc.shape.name(),
        v["detail"]
    );
    let _ = writeln!(s, "  tokenizer      {}", v["tokenizer"]);
    let _ = writeln!(s, "  configuration  {}", v["configuration"]);
    for n in &doc.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}
