//! Progress of a long stage on stderr (docs/publish.md "Progress of every stage"). Byte transfers
//! (fetch, candidate-upload, pull) use [`Progress`]: on a terminal, indicatif bars — the total
//! (bytes, rate, ETA) and, for stages with units, one bar per unit in flight; otherwise plain
//! lines, one per finished unit and a total line at most every few seconds, each prefixed by the
//! stage's name. Stages that count items (repack, gate, stage, promote) use [`Counter`]. Nothing
//! with `--json` or from library callers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How a stage reports progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ProgressMode {
    /// Nothing (library callers, `--json`).
    #[default]
    Off,
    /// indicatif bars (stderr is a terminal).
    Bars,
    /// Plain lines on stderr (a log file, CI).
    Lines,
}

/// The most often a plain total line is printed.
const LINE_EVERY: Duration = Duration::from_secs(5);

/// The progress of one run of a stage.
pub struct Progress {
    label: &'static str,
    items: &'static str,
    mode: ProgressMode,
    multi: MultiProgress,
    total: ProgressBar,
    planned: AtomicU64,
    done: AtomicU64,
    units_done: AtomicU64,
    started: Instant,
    last_line: Mutex<Instant>,
}

/// The bar of the total and of each unit: bytes, rate and ETA.
const BAR: &str = "{msg:>24} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}";

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Progress {
    /// Progress of the stage `label` (`fetch`, `pull`) counting `items` (`units`, `files`),
    /// reported as `mode` says.
    pub fn new(label: &'static str, items: &'static str, mode: ProgressMode) -> Self {
        let multi = MultiProgress::with_draw_target(if mode == ProgressMode::Bars {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        });
        let total = multi.add(ProgressBar::new(0));
        total.set_style(style(BAR));
        total.set_message("total");
        let now = Instant::now();
        Progress {
            label,
            items,
            mode,
            multi,
            total,
            planned: AtomicU64::new(0),
            done: AtomicU64::new(0),
            units_done: AtomicU64::new(0),
            started: now,
            last_line: Mutex::new(now),
        }
    }

    /// A unit starts.
    pub fn unit(&self, unit: &str) -> UnitProgress<'_> {
        let bar = if self.mode == ProgressMode::Bars {
            let b = self.multi.add(ProgressBar::new(0));
            b.set_style(style(BAR));
            b.set_message(unit.to_owned());
            b
        } else {
            ProgressBar::hidden()
        };
        UnitProgress {
            run: self,
            unit: unit.to_owned(),
            bar,
            bytes: AtomicU64::new(0),
        }
    }

    fn line(&self, force: bool) {
        if self.mode != ProgressMode::Lines {
            return;
        }
        let mut last = self.last_line.lock().unwrap_or_else(|p| p.into_inner());
        if !force && last.elapsed() < LINE_EVERY {
            return;
        }
        *last = Instant::now();
        let (done, planned) = (
            self.done.load(Ordering::Relaxed),
            self.planned.load(Ordering::Relaxed),
        );
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let eta = if rate > 0.0 {
            format!("{:.0} s", planned.saturating_sub(done) as f64 / rate)
        } else {
            "?".into()
        };
        eprintln!(
            "{}: {done} of {planned} B planned so far ({:.0}%), {:.1} MB/s, eta {eta}, {} {} done",
            self.label,
            100.0 * done as f64 / planned.max(1) as f64,
            rate / 1e6,
            self.units_done.load(Ordering::Relaxed),
            self.items
        );
    }

    /// `n` more bytes are to be transferred (stages without units).
    pub fn plan(&self, n: u64) {
        self.total.inc_length(n);
        self.planned.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` bytes arrived and were stored (stages without units).
    pub fn advance(&self, n: u64) {
        self.total.inc(n);
        self.done.fetch_add(n, Ordering::Relaxed);
        self.line(false);
    }

    /// One item (a file) is done, with no line of its own.
    pub fn item_done(&self) {
        self.units_done.fetch_add(1, Ordering::Relaxed);
        self.line(false);
    }

    /// The run ends: bars are cleared (the summary follows), a last plain line is printed.
    pub fn finish(&self) {
        self.total.finish_and_clear();
        self.line(true);
    }
}

/// The progress of one unit.
pub struct UnitProgress<'a> {
    run: &'a Progress,
    unit: String,
    bar: ProgressBar,
    bytes: AtomicU64,
}

impl UnitProgress<'_> {
    /// `n` more bytes are to be fetched for this unit.
    pub fn plan(&self, n: u64) {
        self.bar.inc_length(n);
        self.run.total.inc_length(n);
        self.run.planned.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` bytes arrived and were stored.
    pub fn advance(&self, n: u64) {
        self.bar.inc(n);
        self.run.total.inc(n);
        self.bytes.fetch_add(n, Ordering::Relaxed);
        self.run.done.fetch_add(n, Ordering::Relaxed);
        self.run.line(false);
    }

    /// The unit is done (journaled); its bar goes, a plain line says so.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
        self.run.multi.remove(&self.bar);
        self.run.units_done.fetch_add(1, Ordering::Relaxed);
        if self.run.mode == ProgressMode::Lines {
            eprintln!(
                "{}: {} done, {} B fetched",
                self.run.label,
                self.unit,
                self.bytes.load(Ordering::Relaxed)
            );
        }
    }
}

/// Progress counted in items (units, files) for stages whose work is not one byte transfer
/// (repack, gate, stage, promote): on a terminal one bar of items done; in a log one plain line
/// per finished item — at most one every [`LINE_EVERY`] when there are more than
/// [`EVERY_LINE_UP_TO`] items, the last one always — each with the count and the seconds so far.
pub struct Counter {
    label: &'static str,
    noun: &'static str,
    mode: ProgressMode,
    bar: ProgressBar,
    total: u64,
    done: AtomicU64,
    started: Instant,
    last_line: Mutex<Option<Instant>>,
}

/// Up to this many items, a log gets one line per item.
const EVERY_LINE_UP_TO: u64 = 100;

/// The bar of a [`Counter`]: items, rate and ETA.
const COUNT_BAR: &str = "{msg:>24} [{bar:30}] {pos}/{len} {per_sec} eta {eta}";

impl Counter {
    /// Progress of the stage `label` over `total` items called `noun` (`units`, `files`).
    pub fn new(label: &'static str, noun: &'static str, total: u64, mode: ProgressMode) -> Self {
        let bar = if mode == ProgressMode::Bars {
            let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            b.set_style(style(COUNT_BAR));
            b.set_message(label);
            b
        } else {
            ProgressBar::hidden()
        };
        Counter {
            label,
            noun,
            mode,
            bar,
            total,
            done: AtomicU64::new(0),
            started: Instant::now(),
            last_line: Mutex::new(None),
        }
    }

    /// `item` is done; `detail` (called only when a line is printed) says what it took.
    pub fn done(&self, item: &str, detail: impl FnOnce() -> String) {
        let k = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.inc(1);
        if self.mode != ProgressMode::Lines {
            return;
        }
        let mut last = self.last_line.lock().unwrap_or_else(|p| p.into_inner());
        let due = self.total <= EVERY_LINE_UP_TO
            || k >= self.total
            || last.is_none_or(|t| t.elapsed() >= LINE_EVERY);
        if !due {
            return;
        }
        *last = Some(Instant::now());
        let detail = detail();
        let sep = if detail.is_empty() { "" } else { " " };
        eprintln!(
            "{}: {item}{sep}{detail} ({k} of {} {}, {:.1} s)",
            self.label,
            self.total,
            self.noun,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// A step of the stage that is not one of its items begins or ends (`inventory verified`):
    /// a plain line in a log, the bar's message on a terminal.
    pub fn note(&self, what: &str) {
        match self.mode {
            ProgressMode::Off => {}
            ProgressMode::Bars => self.bar.set_message(what.to_owned()),
            ProgressMode::Lines => eprintln!(
                "{}: {what} ({:.1} s)",
                self.label,
                self.started.elapsed().as_secs_f64()
            ),
        }
    }

    /// The stage ends: the bar goes (the summary follows).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
