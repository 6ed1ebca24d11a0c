//! The terminal progress bar (hidden with --quiet or when stderr is not a terminal).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::LazyLock;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use memfit::cluster::{Observer, Progress};
use memfit::exec::Cancel;

/// Set by the first Ctrl-C; the engine checks it once per read block.
static INTERRUPTED: LazyLock<Cancel> = LazyLock::new(Cancel::new);

/// The first stopping signal's number (0: none yet).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Makes Ctrl-C (SIGINT), SIGTERM and SIGHUP stop a run cleanly (temporary
/// outputs are removed, exit status 128 + the signal's number: 130, 143,
/// 129, as a shell reports a process the signal killed); a second signal
/// exits at once, removing the temporary outputs first.
pub fn stop_on_ctrl_c() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // Failing to install the handler only loses the clean stop.
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let _ = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
            if INTERRUPTED.cancel() {
                memfit::io::remove_unfinished_outputs();
                std::process::exit(exit_status());
            }
        }
    });
}

/// Whether a stopping signal came.
pub fn interrupted() -> bool {
    INTERRUPTED.is_cancelled()
}

/// The exit status of a run a signal stopped: 128 + the first signal's
/// number (130 for Ctrl-C).
pub fn exit_status() -> i32 {
    128 + match SIGNAL.load(Ordering::SeqCst) {
        0 => signal_hook::consts::SIGINT,
        s => s,
    }
}

/// The token Ctrl-C cancels, for engine work that takes one.
pub fn cancel_token() -> Cancel {
    INTERRUPTED.clone()
}

/// An observer that only stops the run on Ctrl-C (for jobs without a bar).
pub struct Stop;

impl Observer for Stop {
    fn cancel(&self) -> Cancel {
        cancel_token()
    }
}

/// Shows phase, iteration, inertia and rows/s on stderr.
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    /// A bar unless `quiet` or stderr is not a terminal.
    pub fn new(quiet: bool) -> Self {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("static template"));
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Bar { bar }
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Observer for Bar {
    fn cancel(&self) -> Cancel {
        cancel_token()
    }

    fn event(&mut self, event: &Progress<'_>) {
        let Some(b) = &self.bar else { return };
        match event {
            Progress::Phase(p) => b.set_message((*p).to_string()),
            Progress::Iteration { run, n_init, iteration, max_iter, inertia, rows_per_sec, skip_share, .. } => {
                b.set_message(format!(
                    "init {}/{n_init}  iteration {iteration}/{max_iter}  inertia {inertia:.6e}  {:.1} Mrows/s  {:.0}% distances skipped",
                    run + 1,
                    rows_per_sec / 1e6,
                    100.0 * skip_share
                ))
            }
            Progress::EmIteration { run, n_init, iteration, max_iter, lower_bound, change, rows_per_sec } => b
                .set_message(format!(
                    "init {}/{n_init}  EM iteration {iteration}/{max_iter}  lower bound {lower_bound:.8}  change {change:.3e}  {:.2} Mrows/s",
                    run + 1,
                    rows_per_sec / 1e6
                )),
        }
    }
}
