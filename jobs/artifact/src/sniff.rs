//! What a file is, from its first bytes, and the `minirun-*` command that reads it: for the
//! refusal of a file given to the wrong tool (docs/cli.md "First mistakes": `minirun-gguf info`
//! on a MEGA shard, `minirun-inspect` on a GGUF file, …), so its hint names the right command.
//! Each magic is the one its format's reader checks (one home each); this only compares.

use std::io::Read;
use std::path::Path;

/// A kind of file some `minirun-*` tool reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `GGUF` (crate::gguf).
    Gguf,
    /// A MEGA shard (crate::mega).
    Mega,
    /// A Minirun tile container (crate::container).
    TileContainer,
    /// A safetensors file: an 8-byte little-endian header length, then a JSON object.
    Safetensors,
}

impl Kind {
    /// The format's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Gguf => "a GGUF file",
            Kind::Mega => "a MEGA shard",
            Kind::TileContainer => "a Minirun tile container",
            Kind::Safetensors => "a safetensors file",
        }
    }

    /// What to run on `path` instead: the command that reads it (for a safetensors file, the ones
    /// that take it as input).
    pub fn command(self, path: &Path) -> String {
        let p = path.display();
        match self {
            Kind::Gguf => format!("read it with `minirun-gguf info {p}`"),
            Kind::Mega => format!("read it with `minirun-mega inspect {p}`"),
            Kind::TileContainer => format!("read it with `minirun-inspect {p}`"),
            Kind::Safetensors => format!(
                "convert it with `minirun-mega convert {p} --output-dir DIR`, or publish it with a plan (`minirun-plan check PLAN`)"
            ),
        }
    }

    /// `PATH is KIND: read it with COMMAND` — the hint of a refusal by the wrong tool.
    pub fn hint(self, path: &Path) -> String {
        format!(
            "`{}` is {}: {}",
            path.display(),
            self.name(),
            self.command(path)
        )
    }
}

/// The kind of the file at `path`, when its first bytes say; `None` for anything else, a
/// directory, or a file that cannot be read.
pub fn sniff(path: &Path) -> Option<Kind> {
    let mut head = [0u8; 9];
    let mut f = std::fs::File::open(path).ok()?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    of_bytes(&head[..n])
}

/// [`sniff`] over the first bytes of a file.
pub fn of_bytes(head: &[u8]) -> Option<Kind> {
    if head.starts_with(crate::gguf::reader::MAGIC) {
        return Some(Kind::Gguf);
    }
    if head.starts_with(&crate::mega::layout::MAGIC) {
        return Some(Kind::Mega);
    }
    if head.starts_with(&crate::container::MAGIC) {
        return Some(Kind::TileContainer);
    }
    let len = u64::from_le_bytes(head.get(..8)?.try_into().ok()?);
    // A header is a JSON object of at most 100 MB (the safetensors crate's own limit).
    (head.get(8) == Some(&b'{') && (2..=100_000_000).contains(&len)).then_some(Kind::Safetensors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_magic_names_its_tool() {
        assert_eq!(of_bytes(b"GGUF\x03\0\0\0\0"), Some(Kind::Gguf));
        assert_eq!(of_bytes(b"MEGA\0\r\n\x1a\x01"), Some(Kind::Mega));
        assert_eq!(of_bytes(b"MNRNTIL1\0"), Some(Kind::TileContainer));
        let mut st = 40u64.to_le_bytes().to_vec();
        st.push(b'{');
        assert_eq!(of_bytes(&st), Some(Kind::Safetensors));
        st[8] = b'[';
        assert_eq!(of_bytes(&st), None, "a header is a JSON object");
        assert_eq!(of_bytes(b"hello\n"), None);
        assert_eq!(of_bytes(b""), None);
        let hint = Kind::Gguf.hint(Path::new("m.gguf"));
        assert_eq!(
            hint,
            "`m.gguf` is a GGUF file: read it with `minirun-gguf info m.gguf`"
        );
    }

    #[test]
    fn a_file_is_read_from_disk_and_a_directory_is_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.mega");
        std::fs::write(&p, b"MEGA\0\r\n\x1a rest").unwrap();
        assert_eq!(sniff(&p), Some(Kind::Mega));
        assert_eq!(sniff(d.path()), None);
        assert_eq!(sniff(&d.path().join("missing")), None);
    }
}
