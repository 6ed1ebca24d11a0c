//! The `memfit` command-line tool: k-means and more within a memory limit.
//!
//! Exit status: 0 on success, 2 on any error (bad usage, bad input, a limit
//! too small, a failed write), with one line on stderr saying what is wrong
//! and how to fix it.

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

/// Writes the JSON `summary` to `path` atomically (`-`: to stdout), then
/// prints the one-line result `line` (to stderr when stdout carries the JSON).
pub(crate) fn emit_summary(path: Option<&std::path::Path>, summary: &serde_json::Value, line: &str) -> Result<()> {
    let to_stdout = path == Some(std::path::Path::new("-"));
    match path {
        Some(_) if to_stdout => println!("{}", serde_json::to_string_pretty(summary)?),
        Some(p) => memfit::io::write_bytes_atomic(p, serde_json::to_string_pretty(summary)?.as_bytes())?,
        None => {}
    }
    if to_stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(())
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
            let cores = memfit::plan::available_cpus();
            let most = (4 * cores).max(64);
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
    rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
    match &cli.command {
        Command::Kmeans(a) => {
            progress::stop_on_ctrl_c();
            kmeans_cmd::run(a)
        }
        Command::Predict(a) => {
            progress::stop_on_ctrl_c();
            predict_cmd::run(a)
        }
        Command::Gmm(a) => {
            progress::stop_on_ctrl_c();
            gmm_cmd::run(a)
        }
        Command::GmmPredict(a) => {
            progress::stop_on_ctrl_c();
            gmm_predict_cmd::run(a)
        }
        Command::QuadraticForm(a) => {
            progress::stop_on_ctrl_c();
            kernels_cmd::quadratic_form(a)
        }
        Command::Scatter(a) => {
            progress::stop_on_ctrl_c();
            kernels_cmd::scatter(a)
        }
        Command::Generate(Generate::Blobs(a)) => {
            progress::stop_on_ctrl_c();
            generate_cmd::blobs(a)
        }
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line: clap's message, its tip if any, and where to look.
            let text = e.to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("Usage:"));
            let mut first = lines.next().unwrap_or("invalid arguments").trim_start_matches("error: ").to_string();
            if first.ends_with(':') {
                first = format!("{first} {}", lines.next().unwrap_or_default());
            }
            let tip = lines.find_map(|l| l.strip_prefix("tip: ")).map(|t| format!("; {t}")).unwrap_or_default();
            eprintln!("memfit: error: {first}{tip}; hint: see `memfit --help` or `memfit <command> --help`");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&cli) {
        if progress::interrupted() {
            eprintln!("memfit: interrupted (Ctrl-C or a termination signal); no output was written");
            std::process::exit(130);
        }
        eprintln!("memfit: error: {}", render::error_line(&e));
        std::process::exit(2);
    }
}
