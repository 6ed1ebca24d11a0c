//! Runs engine work off the interpreter: on a worker thread (in a pool of
//! `n_jobs` threads when given), with the GIL released, while the calling
//! thread hands progress events to a Python callback and checks for Ctrl-C
//! every 50 ms. On Ctrl-C the engine is told to stop (it checks once per
//! block) and the `KeyboardInterrupt` is raised once it has. Work of
//! milliseconds (a mini-batch step) runs on the calling thread instead
//! ([`run_brief`]): a thread started per call would cost a large share of it.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use memfit::cluster::{Observer, Progress};
use memfit::exec::Cancel;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::to_py_for;

/// A progress event as the Python callback receives it (a tuple whose first
/// item names the kind; `t` is seconds since the work started):
/// `("phase", name, t)`,
/// `("iteration", run, iteration, max_iter, inertia, center_shift, tol, t,
/// skip_share)` for a Lloyd iteration (`tol` absolute; `skip_share` the
/// share of distances bounds skipped), and
/// `("em_iteration", run, iteration, max_iter, lower_bound, change, t)` for
/// an EM iteration; `run` counts from 0, `iteration` from 1.
enum Event {
    Phase(String, f64),
    Iteration(usize, usize, usize, f64, f64, f64, f64, f64),
    EmIteration(usize, usize, usize, f64, f64, f64),
}

impl Event {
    fn to_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match self {
            Event::Phase(name, t) => ("phase", name, t).into_pyobject(py),
            Event::Iteration(run, it, max, inertia, shift, tol, t, skip) => {
                ("iteration", run, it, max, inertia, shift, tol, t, skip).into_pyobject(py)
            }
            Event::EmIteration(run, it, max, lb, change, t) => {
                ("em_iteration", run, it, max, lb, change, t).into_pyobject(py)
            }
        }
    }
}

thread_local! {
    /// The cancellation token of the run this thread works for (see
    /// [`running`]).
    static RUNNING: std::cell::RefCell<Option<Cancel>> = const { std::cell::RefCell::new(None) };
}

/// The cancellation token of the run the calling thread works for (set on
/// the thread that runs [`run`]'s work), for Python code the engine calls
/// back (a Dask runner waiting for its tasks) to stop waiting on Ctrl-C.
pub fn running() -> Option<Cancel> {
    RUNNING.with(|r| r.borrow().clone())
}

/// The engine's observer: hands the engine the run's cancellation token
/// (cancelled on Ctrl-C), forwards progress events.
pub struct Watch {
    stop: Cancel,
    /// Events go here when someone listens; dropping it when the work ends
    /// tells the waiting thread so.
    events: Sender<Event>,
    listening: bool,
    started: Instant,
}

impl Observer for Watch {
    fn event(&mut self, event: &Progress<'_>) {
        if !self.listening {
            return;
        }
        let t = self.started.elapsed().as_secs_f64();
        let event = match *event {
            Progress::Phase(p) => Event::Phase(p.to_string(), t),
            Progress::Iteration { run, iteration, max_iter, inertia, center_shift, tol, skip_share, .. } => {
                Event::Iteration(run, iteration, max_iter, inertia, center_shift, tol, t, skip_share)
            }
            Progress::EmIteration { run, iteration, max_iter, lower_bound, change, .. } => {
                Event::EmIteration(run, iteration, max_iter, lower_bound, change, t)
            }
        };
        let _ = self.events.send(event);
    }

    fn cancel(&self) -> Cancel {
        self.stop.clone()
    }
}

/// The error for work that panicked (a bug in the engine).
fn panicked() -> PyErr {
    PyRuntimeError::new_err("memfit internal error: the engine panicked; please report it")
}

/// Runs `work` as [`run`] does, for work of milliseconds called in a loop
/// (a mini-batch step, the rows it draws): on the calling thread with the
/// GIL released, in its rayon pool of `n_jobs` threads, without a thread
/// that watches it. Python raises a Ctrl-C that comes during the call once
/// it returns; no progress events.
///
/// # Errors
/// As [`run`], but for `KeyboardInterrupt` and `progress`.
pub fn run_brief<R: Send>(
    py: Python<'_>,
    n_jobs: Option<usize>,
    float32: bool,
    work: impl FnOnce() -> memfit::Result<R> + Send,
) -> PyResult<R> {
    let n = n_jobs.unwrap_or_else(memfit::plan::default_threads);
    let pool = memfit::exec::thread_pool(n).map_err(|e| to_py_for(e, float32))?;
    crate::remote::take_read_error();
    match py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.install(work)))) {
        Ok(r) => r.map_err(|e| crate::remote::take_read_error().unwrap_or_else(|| to_py_for(e, float32))),
        Err(_) => Err(panicked()),
    }
}

/// Runs `work` with the GIL released on a worker thread, in the calling
/// thread's rayon pool of `n_jobs` threads ([`memfit::exec::thread_pool`];
/// `None`: [`memfit::plan::default_threads`]); calls
/// `progress` with each event (see [`Event`]) when given. `float32` says
/// whether the work computes in float32, for error messages.
///
/// # Errors
/// The engine's error mapped by [`to_py_for`], or the exception a Python
/// reader of the input raised ([`crate::remote::take_read_error`]); `KeyboardInterrupt` (or
/// whatever a signal handler raised) when interrupted; whatever `progress`
/// raised (the work is stopped); `ValueError` for threads that cannot be
/// started; `RuntimeError` if the engine panicked (a bug).
pub fn run<R: Send>(
    py: Python<'_>,
    n_jobs: Option<usize>,
    float32: bool,
    progress: Option<&Bound<'_, PyAny>>,
    work: impl FnOnce(&mut Watch) -> memfit::Result<R> + Send,
) -> PyResult<R> {
    let n = n_jobs.unwrap_or_else(memfit::plan::default_threads);
    crate::remote::take_read_error();
    let stop = Cancel::new();
    let (tx, rx) = channel::<Event>();
    // A receiver is not `Sync`; the lock lets the GIL-free wait borrow it.
    let rx = Mutex::new(rx);
    let listening = progress.is_some();
    // The calling thread's pool: kept between its calls, so a loop of short
    // calls (mini-batch steps) starts no threads.
    let pool = memfit::exec::thread_pool(n).map_err(|e| to_py_for(e, float32))?;
    std::thread::scope(|s| {
        let token = stop.clone();
        let handle = s.spawn(move || {
            let mut watch = Watch { stop: token.clone(), events: tx, listening, started: Instant::now() };
            pool.install(|| {
                RUNNING.with(|r| *r.borrow_mut() = Some(token));
                let out = work(&mut watch);
                RUNNING.with(|r| *r.borrow_mut() = None);
                out
            })
        });
        let mut interrupt: Option<PyErr> = None;
        loop {
            // The worker drops its end of the channel when it finishes.
            match py.detach(|| {
                rx.lock().map_or(Err(RecvTimeoutError::Disconnected), |r| r.recv_timeout(Duration::from_millis(50)))
            }) {
                Ok(event) => {
                    if let (Some(f), None) = (progress, &interrupt) {
                        if let Err(e) = event.to_tuple(py).and_then(|t| f.call1((t,))) {
                            stop.cancel();
                            interrupt = Some(e);
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if interrupt.is_none() {
                if let Err(e) = py.check_signals() {
                    stop.cancel();
                    interrupt = Some(e);
                }
            }
        }
        let result = py.detach(|| handle.join());
        match (result, interrupt) {
            (_, Some(e)) => Err(e),
            // A Python reader's own exception (a Dask chunk's task failed)
            // rather than the engine's account of it.
            (Ok(r), None) => r.map_err(|e| crate::remote::take_read_error().unwrap_or_else(|| to_py_for(e, float32))),
            (Err(_), None) => Err(panicked()),
        }
    })
}
