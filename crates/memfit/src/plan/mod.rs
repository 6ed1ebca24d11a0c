//! Memory planning: every buffer a run allocates is declared here, with its
//! bytes, before it is allocated; block sizes are chosen so that the sum fits
//! the memory limit, or the run is refused before any data is read.
//!
//! Not counted: the program's code, thread stacks, the allocator's own
//! overhead and small per-call bookkeeping (a few MiB in all); peak resident
//! memory stays under the limit plus a fixed 64 MiB allowance for these.

mod budget;
mod job;

pub use budget::{available_memory_bytes, default_limit_bytes, DEFAULT_LIMIT_FRACTION};
pub use job::{Job, INPUT_HELD};
mod sample;
mod schedule;
mod size;
mod threads;
pub use crate::units::{format_bytes, format_bytes_down, format_bytes_up};
pub use sample::SampleLayout;
pub use schedule::{ComponentGroups, RowSchedule};
pub use threads::{available_cpus, default_threads, most_threads};

use crate::error::{Error, Remedy, Result};
pub use crate::io::PlannedWrite;
pub use size::{parse_size, parse_size_as};

use std::fmt;

/// Rows per compute tile. Fixed (not derived from the limit or the thread
/// count) so that every row meets the same kernel shapes whatever the limit;
/// read blocks hold whole tiles.
pub const TILE_ROWS: usize = 256;

/// Rows per accumulation chunk: statistics are added row by row within a
/// chunk and chunks are folded in order (see [`crate::exec`]), so results do
/// not depend on the block size. A multiple of [`TILE_ROWS`]; row ranges run
/// separately start on multiples of it.
pub const CHUNK_ROWS: usize = 1 << 16;

/// Largest read block, in bytes of converted values: bigger blocks gain nothing.
pub const MAX_BLOCK_BYTES: u64 = 32 << 20;

/// Rows per read block: as many as fit `room` bytes at `per_row` bytes
/// each, at most [`MAX_BLOCK_BYTES`] of values (`row_value_bytes` per row), a
/// multiple of [`TILE_ROWS`] (so tiles line up whatever the limit), at least
/// one tile per thread when that fits, or all `n` rows when they fit.
pub fn pick_block_rows(room: u64, per_row: u64, n: u64, row_value_bytes: u64, threads: u64) -> u64 {
    let tile = TILE_ROWS as u64;
    // Rows of no bytes (no features, nothing else per row) cost nothing.
    let rows = (room / per_row.max(1)).min((MAX_BLOCK_BYTES / row_value_bytes.max(1)).max(tile * threads));
    if rows >= n {
        n
    } else {
        (rows / tile * tile).max(tile.min(n))
    }
}

/// One buffer of a plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedBuffer {
    /// What the buffer holds.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// How the size was computed (e.g. `65536 rows × 3 × 8 B`).
    pub detail: String,
    /// The phase of the run the buffer lives in, or `None` when it is held
    /// throughout. Buffers of different phases never coexist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// How a job's work is cut, as its plan shows it: the part of a [`Plan`]
/// that depends on the kind of job (read blocks and passes for a job over
/// rows, [`RowSchedule`]; stages of tiles for an array expression,
/// [`crate::array::Stages`]).
pub trait Schedule: fmt::Debug + Clone + serde::Serialize {
    /// What the plan's total says about its phases (how the total is made
    /// up from the buffers).
    const PHASES: &'static str;

    /// Writes the schedule's lines of the explanation (each ending with a
    /// newline); the job runs on `threads` threads.
    ///
    /// # Errors
    /// The formatter's.
    fn explain(&self, threads: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// The explanation's last line: the passes over the data (no newline).
    ///
    /// # Errors
    /// The formatter's.
    fn passes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A memory plan, the same for every job: the limit, every buffer the run
/// allocates (a [`Ledger`]: held buffers plus the largest phase), the
/// threads, how the work is cut (the job's [`Schedule`]) and the files it
/// writes. Its `Display` is the explanation `--dry-run` and `explain`
/// print; as data (serde) the schedule's fields sit beside the others.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan<S = RowSchedule> {
    /// The job this plan is for (e.g. `kmeans`).
    pub job: String,
    /// The memory limit in bytes.
    pub limit_bytes: u64,
    /// Worker threads.
    pub threads: usize,
    /// Every buffer the run allocates.
    pub buffers: Vec<PlannedBuffer>,
    /// Bytes the run needs: the held buffers plus the largest phase
    /// ([`Ledger::total`]).
    pub total_bytes: u64,
    /// How the work is cut.
    #[serde(flatten)]
    pub schedule: S,
    /// Files and folders the job writes (scratch files, outputs), checked
    /// against each file system's free space by [`Plan::check_disk`]
    /// before any work.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<PlannedWrite>,
}

impl<S> Plan<S> {
    /// The plan of `job` within `limit_bytes` on `threads` threads: the
    /// buffers `led` declares, the work cut as `schedule` says.
    pub fn new(job: &str, limit_bytes: u64, threads: usize, led: Ledger, schedule: S) -> Self {
        Plan {
            job: job.into(),
            limit_bytes,
            threads,
            total_bytes: led.total(),
            buffers: led.into_buffers(),
            schedule,
            disk: Vec::new(),
        }
    }

    /// Declares an output the caller writes: a file or folder created at
    /// `path` holding `bytes` (`name` says what it is, in the caller's
    /// words).
    pub fn add_output(&mut self, name: impl Into<String>, path: impl Into<std::path::PathBuf>, bytes: u64) {
        self.disk.push(PlannedWrite::at(name, path, bytes));
    }

    /// Checks that every file system the job writes to has room for all it
    /// writes there (see [`crate::io::check_disk_space`]). Run it before
    /// any work: nothing has been written when it fails.
    ///
    /// # Errors
    /// [`Error::NoDiskSpace`].
    pub fn check_disk(&self) -> Result<()> {
        crate::io::check_disk_space(&self.disk)
    }

    /// Checks that every folder the plan puts scratch files in can hold
    /// them (see [`crate::io::ScratchFile::check_dir`]): planning calls it,
    /// so that a dry run finds out too, before any work.
    ///
    /// # Errors
    /// As [`crate::io::ScratchFile::check_dir`].
    pub fn check_scratch_dirs(&self) -> Result<()> {
        let mut seen: Vec<&std::path::Path> = Vec::new();
        for w in self.disk.iter().filter(|w| w.inside && w.bytes > 0) {
            if !seen.contains(&w.path.as_path()) {
                crate::io::ScratchFile::check_dir(&w.path)?;
                seen.push(&w.path);
            }
        }
        Ok(())
    }

    /// A warning when the memory limit is above the memory available to
    /// the process ([`available_memory_bytes`]) and the plan needs more
    /// than that; `None` otherwise (and when that memory cannot be read).
    pub fn memory_warning(&self) -> Option<crate::Warning> {
        self.memory_warning_with(available_memory_bytes())
    }

    /// [`Plan::memory_warning`] given the memory available.
    pub fn memory_warning_with(&self, available: Option<u64>) -> Option<crate::Warning> {
        let available = available?;
        (self.limit_bytes > available && self.total_bytes > available).then_some(crate::Warning::LimitAboveMemory {
            limit_bytes: self.limit_bytes,
            needed_bytes: self.total_bytes,
            available_bytes: available,
        })
    }

    /// Bytes of the buffer named `name`, or 0.
    pub fn bytes_of(&self, name: &str) -> u64 {
        self.buffers.iter().filter(|b| b.name == name).map(|b| b.bytes).sum()
    }
}

impl Plan {
    /// A plan for a one-pass blocked kernel: `led` holds every buffer,
    /// `block_rows` rows per block over `n_samples` rows.
    pub fn blocked(
        job: &str,
        limit_bytes: u64,
        led: Ledger,
        block_rows: usize,
        n_samples: usize,
        threads: usize,
    ) -> Self {
        Plan::new(job, limit_bytes, threads, led, RowSchedule::one_pass(block_rows, n_samples))
    }
}

impl<S: Schedule> fmt::Display for Plan<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "memory plan for {} (limit {} = {} bytes)",
            self.job,
            format_bytes(self.limit_bytes),
            self.limit_bytes
        )?;
        let w = self.buffers.iter().map(|b| b.name.len()).max().unwrap_or(0);
        for b in &self.buffers {
            writeln!(f, "  {:<w$}  {:>12} B  {:>10}  {}", b.name, b.bytes, format_bytes(b.bytes), b.detail)?;
        }
        writeln!(
            f,
            "  {:<w$}  {:>12} B  {:>10}  ({:.1}% of the limit; {})",
            "total",
            self.total_bytes,
            format_bytes(self.total_bytes),
            100.0 * self.total_bytes as f64 / self.limit_bytes.max(1) as f64,
            S::PHASES
        )?;
        self.schedule.explain(self.threads, f)?;
        for w in &self.disk {
            let place = if w.inside { "in" } else { "at" };
            writeln!(f, "disk: {} {place} {}: {} B ({})", w.name, w.path.display(), w.bytes, format_bytes(w.bytes))?;
        }
        self.schedule.passes(f)
    }
}

/// Fails with [`Error::DoesNotFit`] when `count` matrices of `d × d`
/// float64 values (a job's covariances, factors, scatter or work matrices)
/// reach 8 EiB (2^63 bytes), beyond any limit and beyond what the planner's
/// 64-bit byte counts hold: checked before a plan multiplies such sizes, so
/// that they never wrap. `what` names the job; `instead` are the remedies
/// that avoid the matrices (no limit can hold them), if any.
///
/// # Errors
/// As described, with the required bytes saturated at `u64::MAX`.
pub fn check_square_matrices(
    d: usize,
    count: u64,
    limit: u64,
    what: impl FnOnce() -> String,
    instead: Vec<Remedy>,
) -> Result<()> {
    let bytes = (d as u128).pow(2).checked_mul(8 * u128::from(count.max(1)));
    if bytes.is_some_and(|b| b < 1 << 63) {
        return Ok(());
    }
    let what = format!("{}; {count} matrices of {d} × {d} float64 values exceed 8 EiB", what());
    Err(match instead.is_empty() {
        true => Error::does_not_fit(u64::MAX, limit, what, Vec::new()),
        false => Error::DoesNotFit { required_bytes: u64::MAX, limit_bytes: limit, what, remedies: instead },
    })
}

/// Fails with [`Error::DoesNotFit`] unless `required` bytes (the job's
/// smallest configuration: `led`'s buffers with its smallest blocks and
/// tiles) fit `limit`. The error says the smallest limit that works, what the
/// job is (`what`) and its largest buffer, and suggests raising the limit,
/// then the remedies of `also`.
///
/// # Errors
/// As described.
pub fn check_fits(
    required: u64,
    limit: u64,
    led: &Ledger,
    what: impl FnOnce() -> String,
    also: impl FnOnce() -> Vec<Remedy>,
) -> Result<()> {
    if required <= limit {
        return Ok(());
    }
    // What `required` holds beyond the declared buffers: the smallest
    // blocks and tiles, which can be the largest need (wide or dense rows).
    let blocks = required.saturating_sub(led.total());
    let largest = if led.buffers.iter().all(|b| b.bytes < blocks) {
        format!("; largest buffer: the smallest read blocks and tiles = {}", format_bytes(blocks))
    } else {
        led.largest()
    };
    Err(Error::does_not_fit(required, limit, format!("{}{largest}", what()), also()))
}

/// Accumulates buffers while a plan is being built: buffers held throughout
/// the run, and buffers of phases that never coexist (the validation pass's
/// sample, the iterations' blocks). The run needs the held buffers plus its
/// largest phase.
#[derive(Debug, Default, Clone)]
pub struct Ledger {
    buffers: Vec<PlannedBuffer>,
}

impl Ledger {
    /// Declares a buffer held throughout the run: `count` elements of
    /// `elem_bytes` bytes each.
    pub fn add(&mut self, name: &str, count: u64, elem_bytes: u64, detail: String) {
        self.push(None, name, count.saturating_mul(elem_bytes), detail);
    }

    /// Declares a buffer of phase `phase`: `count` elements of `elem_bytes`
    /// bytes each. Its name is shown as `"phase: name"`.
    pub fn add_in(&mut self, phase: &str, name: &str, count: u64, elem_bytes: u64, detail: String) {
        self.push(Some(phase), &format!("{phase}: {name}"), count.saturating_mul(elem_bytes), detail);
    }

    fn push(&mut self, phase: Option<&str>, name: &str, bytes: u64, detail: String) {
        if bytes > 0 {
            self.buffers.push(PlannedBuffer {
                name: name.to_string(),
                bytes,
                detail,
                phase: phase.map(str::to_string),
            });
        }
    }

    /// Bytes the run needs: the held buffers plus the largest phase
    /// (saturating at `u64::MAX` for absurd shapes, which no limit holds).
    pub fn total(&self) -> u64 {
        let mut phases: Vec<(&str, u64)> = Vec::new();
        let mut held = 0;
        for b in &self.buffers {
            match &b.phase {
                None => held = b.bytes.saturating_add(held),
                Some(p) => match phases.iter_mut().find(|(q, _)| q == p) {
                    Some((_, sum)) => *sum = sum.saturating_add(b.bytes),
                    None => phases.push((p, b.bytes)),
                },
            }
        }
        held.saturating_add(phases.iter().map(|&(_, b)| b).max().unwrap_or(0))
    }

    /// `"; largest buffer: NAME = SIZE"` for error messages, or empty.
    pub fn largest(&self) -> String {
        self.buffers
            .iter()
            .max_by_key(|b| b.bytes)
            .map(|b| format!("; largest buffer: {} = {}", b.name, format_bytes(b.bytes)))
            .unwrap_or_default()
    }

    /// The declared buffers so far.
    pub fn buffers(&self) -> &[PlannedBuffer] {
        &self.buffers
    }

    /// The declared buffers.
    pub fn into_buffers(self) -> Vec<PlannedBuffer> {
        self.buffers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_beyond_memory_warns_only_when_the_plan_needs_more_than_there_is() {
        let mut led = Ledger::default();
        led.add("blocks", 24 << 30, 1, String::new());
        let plan = Plan::blocked("job", 1 << 40, led, 256, 1000, 1);
        let w = plan.memory_warning_with(Some(23 << 30)).unwrap();
        assert_eq!(w.kind(), "limit_above_memory");
        let text = w.to_string();
        assert!(
            text.contains("memory limit (1.00 TiB) is above the memory available (23.00 GiB")
                && text.contains("plans 24.00 GiB")
                && text
                    .ends_with("hint: lower the memory limit to at most 23.00 GiB (24696061952 bytes) or free memory"),
            "{text}"
        );
        assert_eq!(plan.memory_warning_with(Some(25 << 30)), None);
        assert_eq!(plan.memory_warning_with(None), None);
        let small = Plan::blocked("job", 1 << 40, Ledger::default(), 256, 1000, 1);
        assert_eq!(small.memory_warning_with(Some(23 << 30)), None);
    }

    #[test]
    fn phases_never_coexist() {
        let mut led = Ledger::default();
        led.add("centres", 10, 8, String::new());
        led.add_in("validation", "sample", 100, 1, String::new());
        led.add_in("iterations", "blocks", 60, 1, String::new());
        led.add_in("iterations", "tiles", 50, 1, String::new());
        led.add("empty", 0, 8, String::new());
        assert_eq!(led.total(), 80 + 110);
        assert_eq!(led.buffers().len(), 4);
        assert_eq!(led.buffers()[1].name, "validation: sample");
    }
}
