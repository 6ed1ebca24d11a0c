//! The `memfit` command-line tool: k-means and more within a memory limit.
//!
//! Exit status: 0 on success, 2 on any error (bad usage, bad input, a limit
//! too small, a failed write), with one line on stderr saying what is wrong
//! and how to fix it.

mod args;
mod generate_cmd;
mod kmeans_cmd;

mod plot;
mod predict_cmd;
mod progress;

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

fn threads(cli: &Cli) -> Option<usize> {
    match &cli.command {
        Command::Kmeans(a) => a.common.threads,
        Command::Predict(a) => a.common.threads,
        Command::Generate(_) => None,
    }
}

fn run(cli: &Cli) -> Result<()> {
    if let Some(n) = threads(cli) {
        if n == 0 {
            anyhow::bail!("invalid --threads 0: use at least 1 (omit it to use all cores)");
        }
        rayon::ThreadPoolBuilder::new().num_threads(n).build_global()?;
    }
    match &cli.command {
        Command::Kmeans(a) => {
            progress::stop_on_ctrl_c();
            kmeans_cmd::run(a)
        }
        Command::Predict(a) => {
            progress::stop_on_ctrl_c();
            predict_cmd::run(a)
        }
        Command::Generate(Generate::Blobs(a)) => generate_cmd::blobs(a),
    }
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(&cli) {
        if progress::interrupted() {
            eprintln!("memfit: interrupted (Ctrl-C); no output was written");
            std::process::exit(130);
        }
        eprintln!("memfit: error: {e:#}");
        std::process::exit(2);
    }
}
