//! The `memfit` command-line tool: k-means, Gaussian mixtures, quadratic
//! forms, scatter matrices and synthetic data within a memory limit.
//!
//! The tool is this library's [`main_with_args`], run by the `memfit` binary
//! (`cargo install --path crates/memfit-cli`) and by the Python package's
//! `memfit` console command (`pip install .`), so both are the same program.
//!
//! Exit status: 0 on success (and when the reader of standard output went
//! away, as `| head` does), 2 on any error (bad usage, bad input, a limit
//! too small, a failed write, standard output full), with one line on
//! stderr saying what is wrong and how to fix it; 128 + the signal's number
//! when a signal stopped it (130 for Ctrl-C, 143 for SIGTERM).

/// `println!` that returns an error (in a `Result` context) instead of
/// panicking when standard output cannot be written: a closed pipe (`memfit
/// ... | head`, which ends the run quietly) or a full device.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, $($arg)*)
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::Error::new(e).context("writing to standard output"))
    }};
}

/// `eprintln!` that never panics: a line standard error cannot take is lost.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod args;
mod generate_cmd;
mod gmm_cmd;
mod gmm_predict_cmd;
mod inputs;
mod kernels_cmd;
mod kmeans_cmd;

mod plot;
mod predict_cmd;
mod progress;
mod render;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Command, Generate};

/// Parses `--memory-limit`, or returns the default limit.
pub(crate) fn memory_limit(text: Option<&str>) -> Result<u64> {
    Ok(match text {
        Some(t) => memfit::plan::parse_size(t)?,
        None => memfit::plan::default_limit_bytes(),
    })
}

/// Bytes declared for a small output whose size is not known before the
/// run (a JSON summary, `model.json`): a generous bound.
pub(crate) const SMALL_FILE_BYTES: u64 = 1 << 20;

/// The last step before a command's work: declares its output files in
/// `plan` (flag, path, bytes; `None` and `--summary -` are skipped), then
/// checks that every file system the command writes to has room for all it
/// writes there (with `dry_run` after printing the plan) and returns
/// whether to go on (`false` for a dry run). Either way a memory limit above the memory there is, when
/// the plan needs more, is warned about first.
///
/// # Errors
/// [`memfit::Error::NoDiskSpace`] when a disk lacks room (nothing is
/// written).
pub(crate) fn ready(
    plan: &mut memfit::plan::Plan,
    outputs: &[(&str, Option<&std::path::Path>, u64)],
    dry_run: bool,
) -> Result<bool> {
    for &(flag, path, bytes) in outputs {
        if let Some(p) = path.filter(|p| *p != std::path::Path::new("-")) {
            plan.add_output(flag, p, bytes);
        }
    }
    if let Some(w) = plan.memory_warning() {
        note!("warning: {}", render::warning_line(&w));
    }
    if dry_run {
        say!("{plan}")?;
    }
    plan.check_disk()?;
    Ok(!dry_run)
}

/// Writes the JSON `summary` to `path` atomically (`-`: to stdout), then
/// prints the one-line result `line` (to stderr when stdout carries the JSON).
pub(crate) fn emit_summary(path: Option<&std::path::Path>, summary: &serde_json::Value, line: &str) -> Result<()> {
    let to_stdout = path == Some(std::path::Path::new("-"));
    match path {
        Some(_) if to_stdout => say!("{}", serde_json::to_string_pretty(summary)?)?,
        Some(p) => memfit::io::write_bytes_atomic(p, serde_json::to_string_pretty(summary)?.as_bytes())?,
        None => {}
    }
    if to_stdout {
        note!("{line}");
    } else {
        say!("{line}")?;
    }
    Ok(())
}

/// Says on stderr, after a run that wrote nothing, which options save its
/// results (`flags`, e.g. "--labels, --centers, --summary or --plot").
pub(crate) fn note_nothing_saved(saved: bool, flags: &str) {
    if !saved {
        note!("note: nothing was saved; add {flags} to write the results to files");
    }
}

/// Encodes labels as little-endian int32, the labels files' dtype.
pub(crate) fn put_label(label: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&(label as i32).to_le_bytes());
}

fn threads(cli: &Cli) -> Option<usize> {
    match &cli.command {
        Command::Kmeans(a) => a.common.threads,
        Command::Predict(a) => a.common.threads,
        Command::Gmm(a) => a.common.threads,
        Command::GmmPredict(a) => a.common.threads,
        Command::QuadraticForm(a) => a.common.threads,
        Command::Scatter(a) => a.common.threads,
        Command::Generate(_) => None,
    }
}

fn run(cli: &Cli) -> Result<()> {
    let n = match threads(cli) {
        Some(n) => {
            let (cores, most) = (memfit::plan::available_cpus(), memfit::plan::most_threads());
            if n == 0 || n > most {
                anyhow::bail!(
                    "invalid --threads {n}: use 1 to {most} (this process may use {cores} CPUs; omit it to use \
                     them all, within OMP_NUM_THREADS)"
                );
            }
            n
        }
        None => memfit::plan::default_threads(),
    };
    // The command's own pool (not rayon's global one, which the process
    // that embeds the tool may have started already).
    progress::stop_on_ctrl_c();
    memfit::exec::install(n, || match &cli.command {
        Command::Kmeans(a) => kmeans_cmd::run(a),
        Command::Predict(a) => predict_cmd::run(a),
        Command::Gmm(a) => gmm_cmd::run(a),
        Command::GmmPredict(a) => gmm_predict_cmd::run(a),
        Command::QuadraticForm(a) => kernels_cmd::quadratic_form(a),
        Command::Scatter(a) => kernels_cmd::scatter(a),
        Command::Generate(Generate::Blobs(a)) => generate_cmd::blobs(a),
    })?
}

/// Runs the `memfit` tool on `args` (the program name first, as in
/// [`std::env::args_os`]) and returns its exit status: 0 on success, 2 on any
/// error (one line on stderr), 128 + the signal's number when interrupted
/// by Ctrl-C (130), SIGTERM (143) or SIGHUP (129). `--help` and `--version` print to stdout and return 0.
///
/// Arguments are operating-system strings: a path that is not UTF-8 is taken
/// as it is. It installs a signal handler for the rest of the process (the
/// first signal stops the run cleanly, a second exits at once), so call it
/// once per process.
pub fn main_with_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    memfit::memory::return_freed_buffers();
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return 0;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // `memfit` or `memfit generate` alone: the commands to choose from.
            let _ = e.print();
            return 2;
        }
        Err(e) => {
            // One line: clap's message, the values there are, its tip if
            // any, and where to look.
            let text = e.to_string();
            let lines: Vec<&str> =
                text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("Usage:")).collect();
            let mut rest = lines.iter().copied();
            let mut first = rest.next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string();
            if first.ends_with(':') {
                first = format!("{first} {}", rest.next().unwrap_or_default());
            }
            let values = lines
                .iter()
                .find_map(|l| l.strip_prefix("[possible values: "))
                .map(|v| format!("; possible values: {}", v.trim_end_matches(']')))
                .unwrap_or_default();
            let tip = lines.iter().find_map(|l| l.strip_prefix("tip: ")).map(|t| format!("; {t}")).unwrap_or_default();
            note!("memfit: error: {first}{values}{tip}; hint: see `memfit --help` or `memfit <command> --help`");
            return 2;
        }
    };
    match run(&cli) {
        Ok(()) => 0,
        // The reader of standard output is gone (`| head`): nothing to say.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(_) if progress::interrupted() => {
            note!("memfit: interrupted (Ctrl-C or a termination signal); no output was written");
            progress::exit_status()
        }
        Err(e) => {
            note!("memfit: error: {}", render::error_line(&e));
            2
        }
    }
}

/// The device plan of a job run on `target` (`None`: the CPU, no plan):
/// opens the device, then plans the job (`plan_on`) for `n_samples ×
/// n_features` rows of `compute_bytes` values within the device memory
/// limit (default 90 % of the device's memory). Refuses before any work.
///
/// # Errors
/// A device that cannot be used; a job that does not fit the device limit.
pub(crate) fn device_plan(
    target: Option<args::DeviceTarget>,
    (n_samples, n_features, compute_bytes, weighted): (usize, usize, usize, bool),
    plan_on: impl FnOnce(&memfit::device::plan::DeviceJob) -> memfit::Result<DevicePlan>,
) -> Result<Option<(memfit::device::Device, DevicePlan)>> {
    let Some((device, limit)) = target else { return Ok(None) };
    let job = memfit::device::plan::DeviceJob::open(device, limit, (n_samples, n_features, compute_bytes, weighted))?;
    Ok(Some((device, plan_on(&job)?)))
}

/// A plan for a job's device side.
pub(crate) type DevicePlan = memfit::plan::Plan<memfit::device::plan::DeviceSchedule>;

/// The backend a job runs on: its device's, as `device` planned it (set
/// before the host plan, which counts the device's pinned host buffers),
/// or the CPU.
///
/// # Errors
/// [`memfit::Error::DeviceUnavailable`] for a device this build cannot run
/// on.
pub(crate) fn backend_of(device: Option<&(memfit::device::Device, DevicePlan)>) -> Result<memfit::exec::Backend> {
    Ok(match device {
        Some((d, p)) => memfit::device::backend(*d, &p.schedule)?,
        None => memfit::exec::Backend::Cpu,
    })
}

/// After the host plan of a job (`go` from [`ready`]): on a dry run prints
/// the device plan, if any. Returns `go`.
///
/// # Errors
/// Standard output that cannot be written.
pub(crate) fn device_ready(device: Option<&(memfit::device::Device, DevicePlan)>, go: bool) -> Result<bool> {
    if let (false, Some((_, p))) = (go, device) {
        say!("{p}")?;
    }
    Ok(go)
}
