//! Runs engine work off the interpreter: on a worker thread (in a pool of
//! `n_jobs` threads when given), with the GIL released, while the calling
//! thread prints progress lines and checks for Ctrl-C every 50 ms. On
//! Ctrl-C the engine is told to stop (it checks once per block) and the
//! `KeyboardInterrupt` is raised once it has.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::Duration;

use memfit::cluster::{Observer, Progress};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::to_py;

/// The engine's observer: reads the stop flag, forwards progress lines.
pub struct Watch<'a> {
    stop: &'a AtomicBool,
    /// Progress lines go here when printing; dropping it when the work ends
    /// tells the waiting thread so.
    lines: Sender<String>,
    verbose: bool,
}

impl Observer for Watch<'_> {
    fn event(&mut self, event: &Progress<'_>) {
        if !self.verbose {
            return;
        }
        let line = match event {
            Progress::Phase(p) => format!("memfit: {p}"),
            Progress::Iteration { run, n_init, iteration, inertia, center_shift, .. } => format!(
                "memfit: init {}/{n_init} iteration {iteration}, inertia {inertia:.10e}, centre shift {center_shift:.3e}",
                run + 1
            ),
            Progress::EmIteration { run, n_init, iteration, lower_bound, change, .. } => format!(
                "memfit: init {}/{n_init} EM iteration {iteration}, lower bound {lower_bound:.10}, change {change:.3e}",
                run + 1
            ),
        };
        let _ = self.lines.send(line);
    }

    fn cancelled(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs `work` with the GIL released on a worker thread, in a rayon pool of
/// `n_jobs` threads (the global pool, all cores, when `None`); prints
/// progress when `verbose`.
///
/// # Errors
/// The engine's error mapped by [`to_py`]; `KeyboardInterrupt` (or whatever
/// a signal handler raised) when interrupted; `ValueError` for a thread
/// pool that cannot be built; `RuntimeError` if the engine panicked (a bug).
pub fn run<R: Send>(
    py: Python<'_>,
    n_jobs: Option<usize>,
    verbose: bool,
    work: impl FnOnce(&mut Watch<'_>) -> memfit::Result<R> + Send,
) -> PyResult<R> {
    let pool = match n_jobs {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| PyValueError::new_err(format!("memfit: cannot start {n} threads: {e}")))?,
        ),
        None => None,
    };
    let stop = AtomicBool::new(false);
    let (tx, rx) = channel::<String>();
    // A receiver is not `Sync`; the lock lets the GIL-free wait borrow it.
    let rx = Mutex::new(rx);
    let print = py.import("builtins")?.getattr("print")?;
    std::thread::scope(|s| {
        let stop = &stop;
        let pool = pool.as_ref();
        let handle = s.spawn(move || {
            let mut watch = Watch { stop, lines: tx, verbose };
            match pool {
                Some(p) => p.install(|| work(&mut watch)),
                None => work(&mut watch),
            }
        });
        let mut interrupt: Option<PyErr> = None;
        loop {
            // The worker drops its end of the channel when it finishes.
            match py.detach(|| {
                rx.lock().map_or(Err(RecvTimeoutError::Disconnected), |r| r.recv_timeout(Duration::from_millis(50)))
            }) {
                Ok(line) => {
                    print.call1((line,))?;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if interrupt.is_none() {
                if let Err(e) = py.check_signals() {
                    stop.store(true, Ordering::Relaxed);
                    interrupt = Some(e);
                }
            }
        }
        let result = py.detach(|| handle.join());
        match (result, interrupt) {
            (_, Some(e)) => Err(e),
            (Ok(r), None) => r.map_err(to_py),
            (Err(_), None) => {
                Err(PyRuntimeError::new_err("memfit internal error: the engine panicked; please report it"))
            }
        }
    })
}
