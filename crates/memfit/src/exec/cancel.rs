//! The one cancellation token of a run ([`Cancel`]), and the one place a
//! run's worker threads come from ([`install`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// A run's cancellation token: clones share one flag, so whoever holds a
/// clone (a signal handler, the thread watching for Ctrl-C, a progress
/// callback) stops every pass and array stage that checks it. Row passes
/// check it once per read block ([`super::run_pass`]), array stages once per
/// tile or batch of work units ([`super::run_grid`]).
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Cancel::default()
    }

    /// Cancels the run; returns whether it was cancelled already (a second
    /// Ctrl-C, say).
    pub fn cancel(&self) -> bool {
        self.0.swap(true, Ordering::SeqCst)
    }

    /// Whether the run is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Ok(())` while the run goes on.
    ///
    /// # Errors
    /// [`Error::Cancelled`] once it is cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Runs `f` on `threads` worker threads (at least one): in the rayon pool
/// the caller runs in when it has that many, else in the calling thread's
/// pool of that many ([`thread_pool`]; never rayon's global pool, which a
/// process embedding the engine may use for its own work). The CLI, the Python
/// binding and the array stages all obtain their threads here.
///
/// # Errors
/// [`Error::InvalidParameter`] (`threads`) when the operating system cannot
/// start the threads.
pub fn install<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R> {
    let threads = threads.max(1);
    if rayon::current_thread_index().is_some() && threads == rayon::current_num_threads() {
        return Ok(f());
    }
    Ok(thread_pool(threads)?.install(f))
}

/// A kept pool and the process that started it.
struct Kept {
    pid: u32,
    pool: Arc<rayon::ThreadPool>,
}

thread_local! {
    /// The calling thread's pool, kept between runs (see [`thread_pool`]).
    static POOL: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// The calling thread's pool of `threads` worker threads (at least one):
/// started on first use and kept for the thread's next runs until one asks
/// for another count (it then replaces it) or the thread ends. Many short
/// runs from one thread (mini-batch steps from Python, tasks on a Dask
/// worker) so start their threads once, and their buffers are reused by the
/// same threads' allocator; runs from different threads never share a pool,
/// so they never wait on each other's work. A process forked after the
/// pool started (Python's `multiprocessing`, say) has none of its threads:
/// it starts its own, leaving the copy it inherited untouched.
///
/// # Errors
/// [`Error::InvalidParameter`] (`threads`) when the operating system cannot
/// start the threads.
pub fn thread_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    let threads = threads.max(1);
    let pid = std::process::id();
    POOL.with(|cell| {
        let mut held = cell.borrow_mut();
        match held.take() {
            Some(k) if k.pid == pid && k.pool.current_num_threads() == threads => {
                let pool = Arc::clone(&k.pool);
                *held = Some(k);
                return Ok(pool);
            }
            // Another process's threads: never signalled, never joined.
            Some(k) if k.pid != pid => std::mem::forget(k),
            _ => {}
        }
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| Error::param("threads", format!("cannot start {threads} threads: {e}")))?,
        );
        *held = Some(Kept { pid, pool: Arc::clone(&pool) });
        Ok(pool)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let c = Cancel::new();
        let d = c.clone();
        assert!(c.check().is_ok());
        assert!(!d.cancel());
        assert!(c.is_cancelled());
        assert!(matches!(c.check(), Err(Error::Cancelled)));
        assert!(c.cancel(), "a second cancel reports the first");
    }

    #[test]
    fn install_gives_the_threads_asked_for() {
        assert_eq!(install(3, rayon::current_num_threads).unwrap(), 3);
        assert_eq!(install(0, rayon::current_num_threads).unwrap(), 1);
        // Inside a pool of that many threads: that pool.
        let outer = install(2, || install(2, || rayon::current_thread_index().is_some())).unwrap();
        assert!(outer.unwrap());
    }

    #[test]
    fn a_thread_keeps_its_pool_and_threads_do_not_share_one() {
        let a = thread_pool(2).unwrap();
        assert!(Arc::ptr_eq(&a, &thread_pool(2).unwrap()));
        let other = std::thread::spawn(|| thread_pool(2).unwrap()).join().unwrap();
        assert!(!Arc::ptr_eq(&a, &other));
        let three = thread_pool(3).unwrap();
        assert_eq!(three.current_num_threads(), 3);
        assert!(!Arc::ptr_eq(&a, &thread_pool(2).unwrap()), "another count replaces the kept pool");
    }
}
