//! `UnitLock`: an advisory lock (fs2, `flock(2)`) so two processes never work the same unit of
//! the same stage at once.
//!
//! The lock file is `<ledger dir>/<stage>/<unit>.lock`. It is never deleted: deleting a lock
//! file another process is about to lock would let two holders lock two different inodes. The
//! holder writes `pid <n>` into it so a refused process can say who holds the unit. The kernel
//! drops the lock when the holder's descriptor closes, including when it is killed, so a crashed
//! run never leaves a stale lock behind.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use fs2::FileExt;

use crate::names::{check_stage_name, check_unit_name};
use crate::{LedgerError, Result};

/// A held unit lock; dropping it releases the lock.
#[derive(Debug)]
pub struct UnitLock {
    file: File,
    path: PathBuf,
}

impl UnitLock {
    /// Takes the lock of `(stage, unit)` under `ledger_dir` without waiting; if another process
    /// (or another open handle in this process) holds it, returns [`LedgerError::Busy`] naming the
    /// lock file and what the holder wrote into it.
    pub fn acquire(ledger_dir: &Path, stage: &str, unit: &str) -> Result<Self> {
        let (mut file, path) = open_lock_file(ledger_dir, stage, unit)?;
        if let Err(e) = file.try_lock_exclusive() {
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.raw_os_error() == fs2::lock_contended_error().raw_os_error()
            {
                return Err(LedgerError::Busy {
                    stage: stage.to_owned(),
                    unit: unit.to_owned(),
                    holder: holder(&mut file),
                    lock_path: path,
                });
            }
            return Err(LedgerError::io("lock", &path)(e));
        }
        Ok(Self::held(file, path))
    }

    /// Takes the lock of `(stage, unit)`, waiting for as long as another process holds it (a
    /// process that found the unit busy does its other units first, then waits here and
    /// re-checks the unit's journal: the holder may have finished it).
    pub fn wait(ledger_dir: &Path, stage: &str, unit: &str) -> Result<Self> {
        let (file, path) = open_lock_file(ledger_dir, stage, unit)?;
        file.lock_exclusive()
            .map_err(LedgerError::io("lock", &path))?;
        Ok(Self::held(file, path))
    }

    fn held(mut file: File, path: PathBuf) -> Self {
        // Diagnostics only: a failure here does not weaken the lock itself.
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "pid {}", std::process::id()));
        UnitLock { file, path }
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Opens (creating) the lock file of `(stage, unit)`; never truncates it, so a holder's `pid`
/// line stays readable.
fn open_lock_file(ledger_dir: &Path, stage: &str, unit: &str) -> Result<(File, PathBuf)> {
    check_stage_name(stage)?;
    check_unit_name(unit)?;
    let dir = ledger_dir.join(stage);
    std::fs::create_dir_all(&dir).map_err(LedgerError::io("create ledger directory", &dir))?;
    let path = dir.join(format!("{unit}.lock"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(LedgerError::io("open lock file", &path))?;
    Ok((file, path))
}

/// What the holder wrote into the lock file (`pid <n>`), if readable.
fn holder(file: &mut File) -> Option<String> {
    let mut text = String::new();
    Read::by_ref(file)
        .take(256)
        .read_to_string(&mut text)
        .ok()
        .map(|_| text.trim().to_owned())
        .filter(|h| !h.is_empty())
}

impl Drop for UnitLock {
    fn drop(&mut self) {
        // Closing the descriptor releases the lock anyway; unlocking first makes it immediate.
        let _ = FileExt::unlock(&self.file);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_with_the_lock_path_and_pid() {
        let dir = tempfile::tempdir().unwrap();
        let held = UnitLock::acquire(dir.path(), "fetch", "layers00").unwrap();
        let err = UnitLock::acquire(dir.path(), "fetch", "layers00").unwrap_err();
        match &err {
            LedgerError::Busy {
                lock_path, holder, ..
            } => {
                assert_eq!(lock_path, held.path());
                assert_eq!(
                    holder.as_deref(),
                    Some(format!("pid {}", std::process::id()).as_str())
                );
            }
            other => panic!("expected busy, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("layers00.lock"), "{msg}");
        // Other units and other stages are independent.
        let _other_unit = UnitLock::acquire(dir.path(), "fetch", "layers01").unwrap();
        let _other_stage = UnitLock::acquire(dir.path(), "repack", "layers00").unwrap();
        drop(held);
        let _again = UnitLock::acquire(dir.path(), "fetch", "layers00").unwrap();
    }

    #[test]
    fn wait_blocks_until_the_holder_lets_go() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let held = UnitLock::acquire(dir.path(), "fetch", "layers00").unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (root, released) = (dir.path().to_owned(), Arc::clone(&released));
            std::thread::spawn(move || {
                let lock = UnitLock::wait(&root, "fetch", "layers00").unwrap();
                (released.load(Ordering::SeqCst), lock)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !waiter.is_finished(),
            "wait returned while the unit was held"
        );
        released.store(true, Ordering::SeqCst);
        drop(held);
        let (after_release, lock) = waiter.join().unwrap();
        assert!(after_release);
        assert!(UnitLock::acquire(dir.path(), "fetch", "layers00").is_err());
        drop(lock);
        assert!(UnitLock::acquire(dir.path(), "fetch", "layers00").is_ok());
    }

    #[test]
    fn bad_names_never_touch_the_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        assert!(UnitLock::acquire(dir.path(), "fetch", "../x").is_err());
        assert!(UnitLock::acquire(dir.path(), "../x", "u").is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
