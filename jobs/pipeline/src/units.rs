//! What the unit stages share (fetch and repack run the same skeleton): a unit's status in
//! their reports, and the merge of the per-unit results of a parallel run, in which the first
//! error wins and units another process holds are set aside to be waited for.

use serde::Serialize;

/// Where one unit stands after a stage's run (`status` in the `--json` reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitStatus {
    /// Its journal already proved it done before this run (or another process finished it
    /// while this run waited).
    AlreadyDone,
    /// Not done: a dry run, or a run that stopped before it.
    Pending,
    /// Fetched by this run.
    Fetched,
    /// Repacked by this run.
    Repacked,
    /// Done, then its bytes reclaimed once the hub stored its objects (a disk-budgeted run):
    /// nothing to do, nothing on disk to check.
    Reclaimed,
}

impl UnitStatus {
    /// The name reports use (`already-done`, `pending`, `fetched`, `repacked`, `reclaimed`).
    pub fn as_str(self) -> &'static str {
        match self {
            UnitStatus::AlreadyDone => "already-done",
            UnitStatus::Pending => "pending",
            UnitStatus::Fetched => "fetched",
            UnitStatus::Repacked => "repacked",
            UnitStatus::Reclaimed => "reclaimed",
        }
    }
}

impl std::fmt::Display for UnitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The reason a unit with no journal of the stage is not done.
pub(crate) const NO_JOURNAL: &str = "no journal";

/// What `stage`'s journal of `unit` proves about its files under `root` (`verify`: every file
/// re-hashed, else sizes and filesystem identities): no journal, done, or every difference
/// found.
pub(crate) fn journal_done(
    ledger_dir: &std::path::Path,
    stage: &str,
    unit: &str,
    root: &std::path::Path,
    verify: bool,
) -> Result<JournalDone, ledger::LedgerError> {
    let Some(journal) = ledger::Journal::load(ledger_dir, stage, unit)? else {
        return Ok(JournalDone::NoJournal);
    };
    Ok(match journal.is_done(root, verify)? {
        ledger::DoneCheck::Done => JournalDone::Done,
        ledger::DoneCheck::Reclaimed => JournalDone::Reclaimed,
        ledger::DoneCheck::NotDone(why) => JournalDone::NotDone(why),
    })
}

/// The outcome of [`journal_done`].
pub(crate) enum JournalDone {
    NoJournal,
    Done,
    /// Done, its outputs reclaimed on purpose (`distributed::reclaim`).
    Reclaimed,
    NotDone(Vec<ledger::NotDone>),
}

/// The readable reason of a unit that is not done: at most five of the differences found.
pub(crate) fn not_done_reason(why: &[ledger::NotDone]) -> String {
    crate::cli::join_limited(why, 5)
}

/// Merges `results` (report index, that unit's result) into `reports`. The first error other
/// than "another process holds the unit" is returned; the held units come back with their lock
/// error, for the caller to wait for once every other unit is done. `held` splits an error
/// into the lock error of a held unit (`Ok`) or an error to report (`Err`).
pub fn merge<R, E>(
    results: Vec<(usize, Result<R, E>)>,
    reports: &mut [R],
    held: impl Fn(E) -> Result<ledger::LedgerError, E>,
) -> Result<Vec<(usize, ledger::LedgerError)>, E> {
    let mut first_err = None;
    let mut busy = Vec::new();
    for (i, r) in results {
        match r {
            Ok(rep) => {
                if let Some(slot) = reports.get_mut(i) {
                    *slot = rep;
                }
            }
            Err(e) => match held(e) {
                Ok(lock) => busy.push((i, lock)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            },
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(busy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_spelled_as_the_reports_have_always_spelled_them() {
        for (s, name) in [
            (UnitStatus::AlreadyDone, "already-done"),
            (UnitStatus::Pending, "pending"),
            (UnitStatus::Fetched, "fetched"),
            (UnitStatus::Repacked, "repacked"),
            (UnitStatus::Reclaimed, "reclaimed"),
        ] {
            assert_eq!(s.as_str(), name);
            assert_eq!(serde_json::to_value(s).ok(), Some(serde_json::json!(name)));
            assert_eq!(format!("{s:<14}|"), format!("{name:<14}|"));
        }
    }

    fn held_unit(name: &str) -> ledger::LedgerError {
        ledger::LedgerError::Busy {
            stage: "fetch".into(),
            unit: name.into(),
            lock_path: std::path::PathBuf::from(name),
            holder: None,
        }
    }

    #[derive(Debug)]
    enum TestError {
        Held(ledger::LedgerError),
        Other(&'static str),
    }

    fn split(e: TestError) -> Result<ledger::LedgerError, TestError> {
        match e {
            TestError::Held(l) => Ok(l),
            e => Err(e),
        }
    }

    #[test]
    fn merge_fills_reports_sets_held_units_aside_and_keeps_the_first_error() {
        let mut reports = vec!["-"; 4];
        let results = vec![
            (0, Ok("a")),
            (1, Err(TestError::Held(held_unit("b")))),
            (3, Ok("d")),
        ];
        let busy = merge(results, &mut reports, split)
            .map(|b| b.iter().map(|(i, _)| *i).collect::<Vec<_>>());
        assert!(matches!(busy.as_deref(), Ok([1])), "{busy:?}");
        assert_eq!(reports, ["a", "-", "-", "d"]);
        let results = vec![
            (0, Err(TestError::Other("first"))),
            (1, Err(TestError::Held(held_unit("b")))),
            (2, Err(TestError::Other("second"))),
        ];
        let merged = merge(results, &mut reports, split);
        assert!(
            matches!(merged, Err(TestError::Other("first"))),
            "{merged:?}"
        );
    }
}
