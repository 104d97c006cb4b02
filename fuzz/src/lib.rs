//! Shared pieces of the fuzz targets (docs/fuzz.md): input splitting and a reusable file for the
//! readers that take a file rather than bytes.

use std::io::{Seek, SeekFrom, Write};

/// The first byte chooses which reader an input drives (`selector % n`), the rest is its bytes.
pub fn split(data: &[u8], n: u8) -> Option<(u8, &[u8])> {
    let (first, rest) = data.split_first()?;
    Some((first % n, rest))
}

/// One temporary file, rewritten for every input (creating a file per input would make the file
/// system, not the parser, the cost of an execution).
pub struct ScratchFile {
    file: std::fs::File,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl ScratchFile {
    /// A scratch file named `name` in a fresh temporary directory.
    pub fn new(name: &str) -> std::io::Result<ScratchFile> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        Ok(ScratchFile {
            file,
            path,
            _dir: dir,
        })
    }

    /// Replace the file's contents with `bytes`; the returned descriptor reads from the start.
    pub fn holding(&mut self, bytes: &[u8]) -> std::io::Result<std::fs::File> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(bytes)?;
        let f = self.file.try_clone()?;
        self.file.seek(SeekFrom::Start(0))?;
        Ok(f)
    }

    /// The file's path (readers name it in errors).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}
